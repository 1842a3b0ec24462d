#!/usr/bin/env python3
"""UNet parity: the C UNet (driven through sdt-unet-cli) against a PyTorch
reference written to the published LDM architecture (openaimodel.py UNetModel,
attention.py SpatialTransformer; SDXL as sgm's openaimodel configures it: a
transformer depth per level and for the middle, label_emb on the vector y),
loading the same LDM-keyed safetensors.

For each size: a random checkpoint is made from the reference model (every
weight, norm scale and bias random, so all of them matter), fresh random
inputs are drawn (seed printed; --seed replays), the C side computes the
output and d(context) (and with a label_emb d(y)) for a random upstream
gradient, and the reference computes them in float64 (and float32, shown for
scale). Errors are max|c - ref| / max|ref|. Thresholds: forward <= 1e-4,
d(context) and d(y) <= 1e-3.

    python3 tests/parity/unet_parity.py --cli build/tests/parity/sdt-unet-cli \
        --sizes tiny,tiny-linear,tiny-sdxl,sd15 [--device cuda] [--notes tests/parity/NOTES.md]

Exit status: 0 all passed, 1 a threshold failed, 77 torch is not installed.
Needs only torch (and numpy, which torch uses for byte conversion); the
safetensors files are read and written by the small codec below.
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("unet_parity: torch is not installed; skipping")
    sys.exit(77)

from st_codec import st_read, st_write  # noqa: E402 (after the skip check: it imports torch)

PREFIX = "model.diffusion_model."
FWD_TOL = 1e-4
GRAD_TOL = 1e-3

# ---------------------------------------------------------------- configs

def config(name):
    sd1 = dict(in_channels=4, out_channels=4, model_channels=320, channel_mult=[1, 2, 4, 4],
               attention=[True, True, True, False], num_res_blocks=2, depth=[1, 1, 1, 1], middle_depth=1,
               num_heads=8, head_dim=0, context_dim=768, linear_proj=False, groups=32, adm_in=0)
    if name == "sd15":
        return sd1
    if name == "sd2":
        return dict(sd1, num_heads=0, head_dim=64, context_dim=1024, linear_proj=True)
    # sd_xl_base.yaml: transformer_depth [1, 2, 10] (level 0 has no attention), middle 10, adm_in_channels 2816
    sdxl = dict(sd1, channel_mult=[1, 2, 4], attention=[False, True, True], depth=[1, 2, 10], middle_depth=10,
                num_heads=0, head_dim=64, context_dim=2048, linear_proj=True, adm_in=2816)
    if name == "sdxl":
        return sdxl
    tiny = dict(sd1, model_channels=32, channel_mult=[1, 2], attention=[True, False], depth=[1, 1], num_res_blocks=1,
                num_heads=2, context_dim=32)
    if name == "tiny":
        return tiny
    if name == "tiny-linear":
        return dict(tiny, linear_proj=True, depth=[2, 2], middle_depth=2)
    if name == "tiny-sdxl":  # sdt_unet_config_tiny_sdxl(): context 32 + 48, y = pooled 48 + 6 x 8
        return dict(sdxl, model_channels=32, channel_mult=[1, 2, 2], num_res_blocks=1, depth=[1, 1, 2],
                    middle_depth=2, num_heads=2, head_dim=0, context_dim=80, adm_in=96)
    raise SystemExit(f"unknown size {name}: use tiny, tiny-linear, tiny-sdxl, sd15, sd2 or sdxl")

# ---------------------------------------------------------------- reference model (LDM layout)

def timestep_embedding(t, dim, max_period=10000):
    """LDM's: [cos, sin] of t * exp(-ln(max_period) * i / half)."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=t.dtype, device=t.device) / half)
    args = t[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class ResBlock(nn.Module):
    def __init__(self, ch, emb_ch, out_ch, groups):
        super().__init__()
        self.in_layers = nn.Sequential(nn.GroupNorm(groups, ch, eps=1e-5), nn.SiLU(), nn.Conv2d(ch, out_ch, 3, padding=1))
        self.emb_layers = nn.Sequential(nn.SiLU(), nn.Linear(emb_ch, out_ch))
        self.out_layers = nn.Sequential(nn.GroupNorm(groups, out_ch, eps=1e-5), nn.SiLU(), nn.Dropout(0.0),
                                        nn.Conv2d(out_ch, out_ch, 3, padding=1))
        self.skip_connection = nn.Identity() if ch == out_ch else nn.Conv2d(ch, out_ch, 1)

    def forward(self, x, emb):
        h = self.in_layers(x)
        h = h + self.emb_layers(emb)[:, :, None, None]
        return self.skip_connection(x) + self.out_layers(h)


class CrossAttention(nn.Module):
    def __init__(self, dim, context_dim, heads):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(context_dim, dim, bias=False)
        self.to_v = nn.Linear(context_dim, dim, bias=False)
        self.to_out = nn.Sequential(nn.Linear(dim, dim), nn.Dropout(0.0))

    def forward(self, x, context=None):
        context = x if context is None else context
        q, k, v = self.to_q(x), self.to_k(context), self.to_v(context)
        b, n, _ = q.shape
        h = self.heads
        split = lambda t: t.reshape(b, t.shape[1], h, -1).permute(0, 2, 1, 3)
        q, k, v = split(q), split(k), split(v)
        attn = (torch.einsum("bhid,bhjd->bhij", q, k) * self.scale).softmax(dim=-1)
        out = torch.einsum("bhij,bhjd->bhid", attn, v).permute(0, 2, 1, 3).reshape(b, n, -1)
        return self.to_out(out)


class GEGLU(nn.Module):
    def __init__(self, dim, inner):
        super().__init__()
        self.proj = nn.Linear(dim, inner * 2)

    def forward(self, x):
        x, gate = self.proj(x).chunk(2, dim=-1)
        return x * F.gelu(gate)


class FeedForward(nn.Module):
    def __init__(self, dim, mult=4):
        super().__init__()
        self.net = nn.Sequential(GEGLU(dim, dim * mult), nn.Dropout(0.0), nn.Linear(dim * mult, dim))

    def forward(self, x):
        return self.net(x)


class BasicTransformerBlock(nn.Module):
    def __init__(self, dim, context_dim, heads):
        super().__init__()
        self.attn1 = CrossAttention(dim, dim, heads)
        self.ff = FeedForward(dim)
        self.attn2 = CrossAttention(dim, context_dim, heads)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)

    def forward(self, x, context):
        x = self.attn1(self.norm1(x)) + x
        x = self.attn2(self.norm2(x), context) + x
        return self.ff(self.norm3(x)) + x


class SpatialTransformer(nn.Module):
    def __init__(self, ch, heads, depth, context_dim, groups, linear):
        super().__init__()
        self.linear = linear
        self.norm = nn.GroupNorm(groups, ch, eps=1e-6)
        self.proj_in = nn.Linear(ch, ch) if linear else nn.Conv2d(ch, ch, 1)
        self.transformer_blocks = nn.ModuleList([BasicTransformerBlock(ch, context_dim, heads) for _ in range(depth)])
        self.proj_out = nn.Linear(ch, ch) if linear else nn.Conv2d(ch, ch, 1)

    def forward(self, x, context):
        b, c, h, w = x.shape
        x_in = x
        x = self.norm(x)
        if not self.linear:
            x = self.proj_in(x)
        x = x.permute(0, 2, 3, 1).reshape(b, h * w, c)
        if self.linear:
            x = self.proj_in(x)
        for block in self.transformer_blocks:
            x = block(x, context)
        if self.linear:
            x = self.proj_out(x)
        x = x.reshape(b, h, w, c).permute(0, 3, 1, 2)
        if not self.linear:
            x = self.proj_out(x)
        return x + x_in


class Downsample(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.op = nn.Conv2d(ch, ch, 3, stride=2, padding=1)

    def forward(self, x):
        return self.op(x)


class Upsample(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.conv = nn.Conv2d(ch, ch, 3, padding=1)

    def forward(self, x):
        return self.conv(F.interpolate(x, scale_factor=2, mode="nearest"))


class TimestepEmbedSequential(nn.Sequential):
    def forward(self, x, emb, context):
        for layer in self:
            if isinstance(layer, ResBlock):
                x = layer(x, emb)
            elif isinstance(layer, SpatialTransformer):
                x = layer(x, context)
            else:
                x = layer(x)
        return x


class UNetModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        mc, groups = cfg["model_channels"], cfg["groups"]
        ted = 4 * mc
        self.mc = mc
        heads = lambda ch: ch // cfg["head_dim"] if cfg["head_dim"] else cfg["num_heads"]
        st = lambda ch, depth: SpatialTransformer(ch, heads(ch), depth, cfg["context_dim"], groups, cfg["linear_proj"])
        self.time_embed = nn.Sequential(nn.Linear(mc, ted), nn.SiLU(), nn.Linear(ted, ted))
        if cfg["adm_in"]:  # num_classes == "sequential"
            self.label_emb = nn.Sequential(nn.Sequential(nn.Linear(cfg["adm_in"], ted), nn.SiLU(), nn.Linear(ted, ted)))
        self.input_blocks = nn.ModuleList([TimestepEmbedSequential(nn.Conv2d(cfg["in_channels"], mc, 3, padding=1))])
        chans, ch = [mc], mc
        levels = len(cfg["channel_mult"])
        for level, mult in enumerate(cfg["channel_mult"]):
            for _ in range(cfg["num_res_blocks"]):
                layers = [ResBlock(ch, ted, mult * mc, groups)]
                ch = mult * mc
                if cfg["attention"][level]:
                    layers.append(st(ch, cfg["depth"][level]))
                self.input_blocks.append(TimestepEmbedSequential(*layers))
                chans.append(ch)
            if level != levels - 1:
                self.input_blocks.append(TimestepEmbedSequential(Downsample(ch)))
                chans.append(ch)
        self.middle_block = TimestepEmbedSequential(ResBlock(ch, ted, ch, groups), st(ch, cfg["middle_depth"]),
                                                    ResBlock(ch, ted, ch, groups))
        self.output_blocks = nn.ModuleList()
        for level, mult in list(enumerate(cfg["channel_mult"]))[::-1]:
            for i in range(cfg["num_res_blocks"] + 1):
                layers = [ResBlock(ch + chans.pop(), ted, mc * mult, groups)]
                ch = mc * mult
                if cfg["attention"][level]:
                    layers.append(st(ch, cfg["depth"][level]))
                if level and i == cfg["num_res_blocks"]:
                    layers.append(Upsample(ch))
                self.output_blocks.append(TimestepEmbedSequential(*layers))
        self.out = nn.Sequential(nn.GroupNorm(groups, ch, eps=1e-5), nn.SiLU(), nn.Conv2d(mc, cfg["out_channels"], 3, padding=1))

    def forward(self, x, timesteps, context, y=None):
        emb = self.time_embed(timestep_embedding(timesteps.to(x.dtype), self.mc))
        if y is not None:
            emb = emb + self.label_emb(y)
        hs, h = [], x
        for block in self.input_blocks:
            h = block(h, emb, context)
            hs.append(h)
        h = self.middle_block(h, emb, context)
        for block in self.output_blocks:
            h = block(torch.cat([h, hs.pop()], dim=1), emb, context)
        return self.out(h)

# ---------------------------------------------------------------- the comparison

def rel_err(a, ref):
    a, ref = a.double().cpu(), ref.double().cpu()
    return ((a - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()


def randomize(model, gen):
    """Every parameter random: weights N(0, 1/fan_in), norm scales 1 + N(0, 0.2^2), biases N(0, 0.1^2)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            z = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            if p.ndim >= 2:
                p.copy_(z / math.sqrt(p[0].numel()))
            elif name.endswith(".weight"):  # only norms have 1-D weights
                p.copy_(1 + 0.2 * z)
            else:
                p.copy_(0.1 * z)


def reference(model, inputs, dtype, device):
    m = model.to(device=device, dtype=dtype)
    lat = inputs["latents"].to(device, dtype)
    ts = inputs["timesteps"].to(device, dtype)
    ctx = inputs["context"].to(device, dtype).requires_grad_(True)
    y = inputs["y"].to(device, dtype).requires_grad_(True) if "y" in inputs else None
    out = m(lat, ts, ctx, y)
    (out * inputs["d_out"].to(device, dtype)).sum().backward()
    return out.detach().cpu(), ctx.grad.detach().cpu(), y.grad.detach().cpu() if y is not None else None


def run_size(name, args, seed, tmp):
    cfg = config(name)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = UNetModel(cfg).to(torch.float64)
    randomize(model, gen)
    ckpt = os.path.join(tmp, f"{name}.safetensors")
    st_write(ckpt, {PREFIX + k: v for k, v in model.state_dict().items()})
    small = name.startswith("tiny")
    B = args.batch
    H = W = 8 if small else args.sd_latent
    T = 5 if small else 77
    inputs = {
        "latents": torch.randn(B, cfg["in_channels"], H, W, generator=gen),
        "timesteps": torch.rand(B, generator=gen) * 999.0,
        "context": torch.randn(B, T, cfg["context_dim"], generator=gen),
        "d_out": torch.randn(B, cfg["out_channels"], H, W, generator=gen),
    }
    if cfg["adm_in"]:
        inputs["y"] = torch.randn(B, cfg["adm_in"], generator=gen)
    inp, outp = os.path.join(tmp, f"{name}-in.safetensors"), os.path.join(tmp, f"{name}-out.safetensors")
    st_write(inp, inputs)
    cmd = [args.cli, ckpt, inp, outp] + (["--checkpointing"] if args.checkpointing else [])
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    c_time = time.time() - t0
    if proc.returncode != 0:
        print(proc.stdout + proc.stderr)
        raise SystemExit(f"{name}: sdt-unet-cli failed with status {proc.returncode}")
    c = st_read(outp)
    device = args.device
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    out64, grad64, gy64 = reference(model, inputs, torch.float64, device)
    out32, grad32, gy32 = reference(model, inputs, torch.float32, device)
    row = dict(size=name, shape=f"{B}x{cfg['in_channels']}x{H}x{W}, T={T}",
               fwd=rel_err(c["out"], out64), grad=rel_err(c["d_context"], grad64),
               fwd_torch32=rel_err(out32, out64), grad_torch32=rel_err(grad32, grad64), c_time=c_time)
    row["grad_y"] = rel_err(c["d_y"], gy64) if gy64 is not None else None
    row["grad_y_torch32"] = rel_err(gy32, gy64) if gy64 is not None else None
    row["ok"] = row["fwd"] <= FWD_TOL and row["grad"] <= GRAD_TOL and (row["grad_y"] is None or row["grad_y"] <= GRAD_TOL)
    row["seed"] = seed
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True, help="path of the sdt-unet-cli binary")
    ap.add_argument("--sizes", default="tiny,tiny-linear,tiny-sdxl,sd15",
                    help="comma list of tiny, tiny-linear, tiny-sdxl, sd15, sd2, sdxl")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--sd-latent", type=int, default=32, help="latent side for SD sizes (64 = 512 px)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--checkpointing", action="store_true", help="run the C side with gradient checkpointing")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--notes", default=None, help="append the results as markdown rows to this file")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    print(f"unet_parity: seed {seed} (--seed replays), reference on {args.device}, torch {torch.__version__}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="sdt-unet-parity-") as tmp:
        for i, name in enumerate(s for s in args.sizes.split(",") if s):
            rows.append(run_size(name, args, seed + i, tmp))
    head = (f"{'size':<12} {'input':<22} {'fwd err':>10} {'grad err':>10} {'d(y) err':>10} {'torch f32 fwd':>14} "
            f"{'torch f32 grad':>15} {'torch f32 d(y)':>15} {'C s':>7}  result")
    print(head)
    print("-" * len(head))
    opt = lambda v, w: f"{v:>{w}.2e}" if v is not None else f"{'-':>{w}}"
    for r in rows:
        print(f"{r['size']:<12} {r['shape']:<22} {r['fwd']:>10.2e} {r['grad']:>10.2e} {opt(r['grad_y'], 10)} "
              f"{r['fwd_torch32']:>14.2e} {r['grad_torch32']:>15.2e} {opt(r['grad_y_torch32'], 15)} {r['c_time']:>7.1f}  "
              f"{'PASS' if r['ok'] else 'FAIL'}")
    print(f"thresholds: forward <= {FWD_TOL:g}, d(context) and d(y) <= {GRAD_TOL:g} (C f32 vs torch float64)")
    if args.notes:
        card = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
        with open(args.notes, "a") as f:
            for r in rows:
                grad_y = "" if r["grad_y"] is None else f" (d(y) {r['grad_y']:.2e})"
                f.write(f"| {time.strftime('%Y-%m-%d')} | unet | {card} (torch {torch.__version__}) | {r['size']} "
                        f"{r['shape']} | {r['seed']} | {r['fwd']:.2e} | {r['grad']:.2e}{grad_y} | "
                        f"{'pass' if r['ok'] else 'FAIL'} |\n")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
