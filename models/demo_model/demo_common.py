"""demo_common.py - what the demo models' training scripts share (models/demo_model/train.py, the SD 1.x demo;
models/demo_flux/train.py, the Flux.1 demo): the demo world's scenes and captions drawn by sdt-world-dump, the
CLIP token rule, the sample prompts, batching, the picture helpers and the EMA training step. Needs numpy and
torch (the scripts import it after their own torch import)."""
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from clip_simple_tokenizer import SimpleTokenizer

IMAGE = 64   # the scenes' side in pixels
TOKENS = 77  # CLIP's sequence
SAMPLE_PROMPTS = [
    "a large red circle on a gray background, center",
    "a small blue square on a black background, top left",
    "a large green triangle on a brown background, right",
    "a large white star on a navy background, center",
    "a large purple ring on a teal background, bottom",
    "a large yellow cross on a black background, center",
    "a large object on a gray background, center",
    "a large yellow star on a gray background, center",
]


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------- data

def draw_world(dump, seed, count, workdir, workers):
    """Scenes 0..count-1 of the base world for `seed`: uint8 [N, 64, 64, 3] and caption lines."""
    chunk = (count + workers - 1) // workers
    jobs = [(i * chunk, min(chunk, count - i * chunk)) for i in range(workers) if i * chunk < count]

    def run(job):
        start, n = job
        img, cap = os.path.join(workdir, f"world-{start}.raw"), os.path.join(workdir, f"world-{start}.txt")
        subprocess.run([dump, "--images", img, "--captions", cap, "--seed", str(seed), "--start", str(start),
                        "--count", str(n), "--size", str(IMAGE), "--pick", "base"], check=True)
        pixels = np.fromfile(img, dtype=np.uint8).reshape(n, IMAGE, IMAGE, 3)
        with open(cap, encoding="utf-8") as f:
            lines = [line.rstrip("\n").split("\t") for line in f]
        os.remove(img)
        os.remove(cap)
        return pixels, lines

    with ThreadPoolExecutor(len(jobs)) as pool:
        parts = list(pool.map(run, jobs))
    return np.concatenate([p for p, _ in parts]), [line for _, lines in parts for line in lines]


class Tokens:
    """Caption -> 77 ids: start, text, end, then end tokens as padding (sdtrain's SD 1.x rule)."""

    def __init__(self, tokenizer_dir):
        self.tok = SimpleTokenizer(os.path.join(tokenizer_dir, "vocab.json"), os.path.join(tokenizer_dir, "merges.txt"))
        self.cache = {}

    def __call__(self, text):
        if text not in self.cache:
            ids = [self.tok.sot] + self.tok.encode(text)[:TOKENS - 2] + [self.tok.eot]
            self.cache[text] = ids + [self.tok.eot] * (TOKENS - len(ids))
        return self.cache[text]


# ---------------------------------------------------------------- pictures

def to_uint8(images):
    return ((images.float().clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8).permute(0, 2, 3, 1).cpu().numpy()


def grid(images, cols):
    n, h, w, c = images.shape
    rows = (n + cols - 1) // cols
    out = np.zeros((rows * h, cols * w, c), dtype=np.uint8)
    for i, im in enumerate(images):
        out[(i // cols) * h:(i // cols + 1) * h, (i % cols) * w:(i % cols + 1) * w] = im
    return out


# ---------------------------------------------------------------- training

def batches(n, batch, gen, device):
    while True:
        for idx in torch.randperm(n, generator=gen).split(batch):
            if len(idx) == batch:
                yield idx.to(device)


def as_float_images(pixels_u8):
    return pixels_u8.permute(0, 3, 1, 2).float() / 127.5 - 1.0


def step_with_ema(opt, params, ema_params, loss, step):
    """One optimizer step on loss (the gradient's norm clipped to 1), then the EMA weights follow with decay
    min(0.999, (1 + step) / (10 + step))."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    decay = min(0.999, (1 + step) / (10 + step))
    with torch.no_grad():
        torch._foreach_mul_(ema_params, decay)
        torch._foreach_add_(ema_params, params, alpha=1 - decay)
