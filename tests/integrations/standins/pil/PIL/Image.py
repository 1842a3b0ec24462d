"""Stand-in for PIL.Image.frombytes: an object with mode, size and the bytes."""


class Image:
    def __init__(self, mode, size, data):
        self.mode, self.size, self.data = mode, size, bytes(data)


def frombytes(mode, size, data):
    if len(data) != size[0] * size[1] * len(mode):
        raise ValueError("not enough image data")
    return Image(mode, size, data)
