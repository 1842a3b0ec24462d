#!/usr/bin/env python3
"""Writes an encoder file holding only its token embedding, all create-embedding reads of an encoder:
write_token_table.py OUT KEY ROWS COLS SEED  (KEY: text_model.embeddings.token_embedding.weight for CLIP,
shared.weight for T5), float32 values drawn from N(0, 0.02) with the seed. The tests use it for encoders whose
widths meet the tiny Flux transformer (context 24, pooled 12), which sdt-make-checkpoint has no config for."""
import json
import random
import struct
import sys

out, key, rows, cols, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rng = random.Random(seed)
values = [rng.gauss(0, 0.02) for _ in range(rows * cols)]
data = struct.pack("<%df" % len(values), *values)
header = json.dumps({key: {"dtype": "F32", "shape": [rows, cols], "data_offsets": [0, len(data)]}}).encode()
header += b" " * (-len(header) % 8)
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header + data)
