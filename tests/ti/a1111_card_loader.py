"""a1111_card_loader.py - loads PNG embedding cards as A1111 1.10 and Forge do (run by Debian's /usr/bin/python3
with python3-torch and numpy; test_embedding_file.c drives it).

  a1111_card_loader.py CARD...   one JSON line per card: {"name", "step", "vectors", "shape", "tensors":
                                 {key: {"shape", "values"}}} (an SDXL embedding's vec is a dict of tensors,
                                 any other's one tensor under "vec"), or {"error": "..."} when the host's
                                 loader raises, or {"skipped": true} when it finds no embedding.

The steps follow the hosts' code (modules/textual_inversion/textual_inversion.py: load_from_file and
create_embedding_from_data; image_embedding.py: embedding_from_b64, EmbeddingDecoder, extract_image_data_embed,
xor_block, crop_black), written again here: PIL is not installed, so the PNG's text chunks and pixels are read
with the standard library (PIL's .text holds every tEXt, zTXt and iTXt chunk, wherever it is in the file).
"""
import base64
import json
import os
import struct
import sys
import zlib

import numpy as np
import torch


def png_chunks(raw):
    assert raw[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos = 8
    while pos + 12 <= len(raw):
        n, kind = struct.unpack(">I4s", raw[pos:pos + 8])
        yield kind, raw[pos + 8:pos + 8 + n]
        pos += n + 12
        if kind == b"IEND":
            break


def png_text(raw):
    text = {}
    for kind, data in png_chunks(raw):
        if kind == b"tEXt":
            k, v = data.split(b"\0", 1)
            text[k.decode("latin-1")] = v.decode("latin-1")
        elif kind == b"zTXt":
            k, v = data.split(b"\0", 1)
            text[k.decode("latin-1")] = zlib.decompress(v[1:]).decode("latin-1")
        elif kind == b"iTXt":
            k, rest = data.split(b"\0", 1)
            compressed, rest = rest[0], rest[2:]
            _lang, _translated, v = rest.split(b"\0", 2)
            text[k.decode("latin-1")] = (zlib.decompress(v) if compressed else v).decode("utf-8")
    return text


def png_rgb(raw):
    """8-bit RGB or RGBA, not interlaced (what sdtrain writes): the pixels as an [h, w, 3] uint8 array."""
    idat = b""
    for kind, data in png_chunks(raw):
        if kind == b"IHDR":
            w, h, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", data)
            assert depth == 8 and color in (2, 6) and interlace == 0, "a PNG layout this reader does not take"
        elif kind == b"IDAT":
            idat += data
    bpp = 3 if color == 2 else 4
    rows = zlib.decompress(idat)
    stride = w * bpp
    out = np.zeros((h, stride), dtype=np.int64)
    prev = np.zeros(stride, dtype=np.int64)
    for y in range(h):
        f = rows[y * (stride + 1)]
        cur = np.frombuffer(rows[y * (stride + 1) + 1:(y + 1) * (stride + 1)], dtype=np.uint8).astype(np.int64)
        line = np.zeros(stride, dtype=np.int64)
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 0:
                pred = 0
            elif f == 1:
                pred = a
            elif f == 2:
                pred = b
            elif f == 3:
                pred = (a + b) // 2
            else:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            line[x] = (cur[x] + pred) & 0xFF
        out[y] = line
        prev = line
    return out.reshape(h, w, bpp)[:, :, :3].astype(np.uint8)


class EmbeddingDecoder(json.JSONDecoder):
    def __init__(self, *args, **kwargs):
        json.JSONDecoder.__init__(self, *args, object_hook=self.object_hook, **kwargs)

    def object_hook(self, d):
        if "TORCHTENSOR" in d:
            return torch.from_numpy(np.array(d["TORCHTENSOR"]))
        return d


def embedding_from_b64(data):
    return json.loads(base64.b64decode(data), cls=EmbeddingDecoder)


def lcg(m=2 ** 32, a=1664525, c=1013904223, seed=0):
    while True:
        seed = (a * seed + c) % m
        yield seed % 255


def xor_block(block):
    g = lcg()
    randblock = np.array([next(g) for _ in range(np.prod(block.shape))]).astype(np.uint8).reshape(block.shape)
    return np.bitwise_xor(block.astype(np.uint8), randblock & 0x0F)


def crop_black(img, tol=0):
    mask = (img > tol).all(2)
    mask0, mask1 = mask.any(0), mask.any(1)
    col_start, col_end = mask0.argmax(), mask.shape[1] - mask0[::-1].argmax()
    row_start, row_end = mask1.argmax(), mask.shape[0] - mask1[::-1].argmax()
    return img[row_start:row_end, col_start:col_end]


def extract_image_data_embed(rgb):
    outarr = crop_black(rgb) & 0x0F
    black_cols = np.where(np.sum(outarr, axis=(0, 2)) == 0)
    if black_cols[0].shape[0] < 2:
        return None
    lower = xor_block(outarr[:, :black_cols[0].min(), :].astype(np.uint8))
    upper = xor_block(outarr[:, black_cols[0].max() + 1:, :].astype(np.uint8))
    data = zlib.decompress(((upper << 4) | lower).flatten().tobytes())
    return json.loads(data, cls=EmbeddingDecoder)


class Embedding:
    def __init__(self, vec, name, step=None):
        self.vec, self.name, self.step = vec, name, step


def create_embedding_from_data(data, name, filename="unknown embedding file"):
    if "string_to_param" in data:  # textual inversion embeddings
        param_dict = data["string_to_param"]
        param_dict = getattr(param_dict, "_parameters", param_dict)
        assert len(param_dict) == 1, "embedding file has multiple terms in it"
        emb = next(iter(param_dict.items()))[1]
        vec = emb.detach().to(dtype=torch.float32)
        shape = vec.shape[-1]
        vectors = vec.shape[0]
    elif type(data) == dict and "clip_g" in data and "clip_l" in data:  # SDXL embedding
        vec = {k: v.detach().to(dtype=torch.float32) for k, v in data.items()}
        shape = data["clip_g"].shape[-1] + data["clip_l"].shape[-1]
        vectors = data["clip_g"].shape[0]
    elif type(data) == dict and type(next(iter(data.values()))) == torch.Tensor:  # diffuser concepts
        assert len(data.keys()) == 1, "embedding file has multiple terms in it"
        emb = next(iter(data.values()))
        if len(emb.shape) == 1:
            emb = emb.unsqueeze(0)
        vec = emb.detach().to(dtype=torch.float32)
        shape = vec.shape[-1]
        vectors = vec.shape[0]
    else:
        raise Exception(f"Couldn't identify {filename} as neither textual inversion embedding nor diffuser concept.")
    embedding = Embedding(vec, name)
    embedding.step = data.get("step", None)
    embedding.vectors = vectors
    embedding.shape = shape
    return embedding


def load_from_file(path):
    filename = os.path.basename(path)
    name = os.path.splitext(filename)[0]
    raw = open(path, "rb").read()
    text = png_text(raw)
    if "sd-ti-embedding" in text:
        data = embedding_from_b64(text["sd-ti-embedding"])
        name = data.get("name", name)
    else:
        data = extract_image_data_embed(png_rgb(raw))
        if not data:
            return {"skipped": True}
        name = data.get("name", name)
    e = create_embedding_from_data(data, name, filename=filename)
    tensors = e.vec if isinstance(e.vec, dict) else {"vec": e.vec}
    return {"name": e.name, "step": e.step, "vectors": int(e.vectors), "shape": int(e.shape),
            "tensors": {k: {"shape": list(v.shape), "values": v.reshape(-1).tolist()} for k, v in tensors.items()}}


def main():
    for path in sys.argv[1:]:
        try:
            out = load_from_file(path)
        except Exception as ex:  # the host reports it and skips the file
            out = {"error": "%s: %s" % (type(ex).__name__, ex)}
        print(json.dumps(out))


if __name__ == "__main__":
    main()
