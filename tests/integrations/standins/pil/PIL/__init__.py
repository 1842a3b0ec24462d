"""Only where the test interpreter has no Pillow (it is appended to sys.path, so a real PIL wins):
Image.frombytes(mode, size, data), the one call the node pack makes for the progress preview."""
