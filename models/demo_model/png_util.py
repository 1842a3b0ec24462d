"""png_util.py - an 8-bit RGB PNG writer and a plain line plot, with numpy and zlib
only (no PIL or matplotlib on every machine the demo model is trained on)."""
import struct
import zlib

import numpy as np


def write_png(path, rgb):
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def line_plot_png(path, xs, ys, title_rows=(), width=640, height=360, smooth=25):
    """ys against xs on a log-scaled y axis: the raw points in light gray, a running mean in blue,
    horizontal grid lines at each power of ten and its halves. (Axis labels live in the model card.)"""
    img = np.full((height, width, 3), 255, dtype=np.uint8)
    ys = np.asarray(ys, dtype=np.float64)
    xs = np.asarray(xs, dtype=np.float64)
    if len(ys) < 2:
        write_png(path, img)
        return
    ly = np.log10(np.maximum(ys, 1e-8))
    lo, hi = np.floor(ly.min() * 2) / 2, np.ceil(ly.max() * 2) / 2
    hi = hi if hi > lo else lo + 0.5
    m = 20
    px = lambda x: (m + (x - xs.min()) / max(xs.max() - xs.min(), 1e-9) * (width - 2 * m)).astype(int)
    py = lambda v: (height - m - (v - lo) / (hi - lo) * (height - 2 * m)).astype(int)
    for g in np.arange(lo, hi + 1e-9, 0.5):
        img[int(py(np.array(g))), m:width - m] = (210, 210, 210)
    kernel = np.ones(min(smooth, len(ly))) / min(smooth, len(ly))
    mean = np.convolve(ly, kernel, mode="valid")
    for series, colour, x in ((ly, (180, 180, 180), xs), (mean, (30, 80, 200), xs[len(xs) - len(mean):])):
        X, Y = px(x), py(series)
        for i in range(len(X) - 1):
            n = max(abs(X[i + 1] - X[i]), abs(Y[i + 1] - Y[i]), 1)
            for t in np.linspace(0, 1, n + 1):
                xx, yy = int(round(X[i] + t * (X[i + 1] - X[i]))), int(round(Y[i] + t * (Y[i + 1] - Y[i])))
                img[max(0, min(height - 1, yy)), max(0, min(width - 1, xx))] = colour
    write_png(path, img)
