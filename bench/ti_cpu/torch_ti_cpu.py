#!/usr/bin/env python3
"""torch_ti_cpu.py - PyTorch's textual-inversion step on the CPU at the demo model's size, the
yardstick for sdtrain's CPU backend (issue 32: "the demo-sized step at least 1.5x PyTorch on the CPU").

The step is the one sdtrain's embedding training runs with cached latents (latent sampling "once"):
the CLIP text encoder (last layer, final layer norm) on 77 tokens where one position is the trainable
vector, the UNet's epsilon prediction on noised 16x16x4 latents at random timesteps, the MSE loss,
backward through both frozen networks into the vector, and AdamW on it. The networks are the parity
references (tests/parity/unet_parity.py, tests/parity/clip_reference.py), the modules the C code is
tested against, loaded from the demo model's safetensors (f16 weights, computed in f32 as sdtrain's
CPU backend does).

    /usr/bin/python3 bench/ti_cpu/torch_ti_cpu.py --model models/demo_model/sdtrain-demo.safetensors \
        --batch 1 --threads 1 --steps 200 [--warmup 5] [--seed 0]

Prints the median, min and max milliseconds of the timed steps (time.perf_counter around each
step) and the whole run's wall time. --threads sets torch's intra-op threads (inter-op: 1) and, unless
OPENBLAS_NUM_THREADS is set, OpenBLAS's: Debian's torch 1.13 calls OpenBLAS (BLAS_INFO=generic) for its
matmuls, whose own pthread pool otherwise takes every core and spin-waits against torch's OpenMP threads
(a matmul at this size ran ~10x slower with torch at 1 thread and OpenBLAS at 2 on 2 cores).
"""
import argparse
import json
import os
import struct
import statistics
import sys
import time


def threads_arg():
    for i, a in enumerate(sys.argv):
        if a == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return "1"


os.environ.setdefault("OPENBLAS_NUM_THREADS", threads_arg())  # before torch loads OpenBLAS
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "parity"))
from clip_reference import ClipTextModel  # noqa: E402
from unet_parity import UNetModel, config  # noqa: E402

TOKENS = 77
# the demo model (models/demo_model/README.md): CLIP 3 layers, width 128, 2 heads, MLP 512, vocab 1000;
# UNet 64 channels, mult (1, 1, 2), 1 res block, attention at levels 0 and 1, 2 heads, context 128
CLIP = dict(vocab=1000, width=128, layers=3, heads=2, mlp=512)
UNET = dict(config("sd15"), model_channels=64, channel_mult=[1, 1, 2], attention=[True, True, False], depth=[1, 1, 1],
            num_res_blocks=1, num_heads=2, context_dim=CLIP["width"])


def st_read_f16_f32(path):
    """The safetensors file's F16/F32 tensors as f32 (tests/parity/st_codec.py reads F32 only)."""
    dtypes = {"F16": torch.float16, "F32": torch.float32}
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        if e["dtype"] not in dtypes:
            raise SystemExit(f"{path}: {name} is {e['dtype']}; this bench reads F16 and F32")
        b, end = e["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[b:end]), dtype=dtypes[e["dtype"]]).reshape(e["shape"]).float()
    return out


def load(model_path):
    tensors = st_read_f16_f32(model_path)
    clip = ClipTextModel(CLIP["vocab"], CLIP["width"], CLIP["layers"], CLIP["heads"], TOKENS, CLIP["mlp"], "quick_gelu")
    unet = UNetModel(UNET)
    for module, prefix in ((clip, "cond_stage_model.transformer."), (unet, "model.diffusion_model.")):
        state = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
        module.load_state_dict(state, strict=True)
        module.requires_grad_(False)
        module.eval()
    return clip, unet


def encode(clip, ids, vector, slot):
    """CLIP's last hidden state through the final layer norm, the vector at position `slot`."""
    tm = clip.text_model
    tok = tm.embeddings.token_embedding(ids)
    tok = torch.cat([tok[:, :slot], vector.expand(ids.shape[0], 1, -1), tok[:, slot + 1:]], dim=1)
    h = tok + tm.embeddings.position_embedding.weight[None, :TOKENS]
    for layer in tm.encoder.layers:
        h = layer(h)
    return tm.final_layer_norm(h)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "demo_model", "sdtrain-demo.safetensors"))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=200, help="steps in all, --warmup included")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t_start = time.perf_counter()
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(args.seed)
    clip, unet = load(args.model)

    gen = torch.Generator().manual_seed(args.seed)
    b = args.batch
    slot = 2  # "a <vector> ..." : start token, "a", the vector
    ids = torch.randint(0, CLIP["vocab"], (b, TOKENS), generator=gen)
    vector = clip.text_model.embeddings.token_embedding.weight[ids[0, slot]].clone()[None].requires_grad_(True)
    opt = torch.optim.AdamW([vector], lr=5e-3, weight_decay=0.0)
    betas = torch.linspace(0.00085 ** 0.5, 0.012 ** 0.5, 1000, dtype=torch.float64) ** 2
    ac = torch.cumprod(1.0 - betas, 0).float()
    latents = torch.randn(b, 4, 16, 16, generator=gen)

    times = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        t = torch.randint(0, 1000, (b,), generator=gen)
        noise = torch.randn(latents.shape, generator=gen)
        a = ac[t].view(-1, 1, 1, 1)
        xt = a.sqrt() * latents + (1 - a).sqrt() * noise
        ctx = encode(clip, ids, vector, slot)
        eps = unet(xt, t.float(), ctx)
        loss = F.mse_loss(eps, noise)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss_value = loss.item()
        if step >= args.warmup:
            times.append(1000.0 * (time.perf_counter() - t0))
    med = statistics.median(times)
    print(f"torch {torch.__version__} cpu threads {args.threads} batch {b}: {len(times)} steps, "
          f"ms/step median {med:.2f} min {min(times):.2f} max {max(times):.2f}, {1000.0 * b / med:.1f} img/s, "
          f"last loss {loss_value:.4f}, wall {time.perf_counter() - t_start:.2f} s")


if __name__ == "__main__":
    main()
