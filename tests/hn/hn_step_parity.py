#!/usr/bin/env python3
"""A whole hypernetwork training step against PyTorch: loss, every module gradient, the AdamW update.

The reference is the parity UNet (tests/parity/unet_parity.py: LDM's UNetModel) with A1111's
hypernetwork in every attention (modules/hypernetworks/hypernetwork.py: for the K/V input
`context` (the hidden states for attn1), the module pair of width context.shape[-1] gives
K = to_k(context + f_K(context) * 1) and V = to_v(context + f_V(context) * 1) in training; no
module for that width: unchanged), each module rebuilt as A1111's HypernetworkModule does
(tests/hn/hn_torch_parity.py: build_module) and loaded by A1111's state-dict keys from the
.safetensors the C side wrote. The step is the trainer's: MSE (mean) between the UNet's output
on x_t and the target, backward into the hypernetwork only (UNet and text encoder frozen),
torch.optim.AdamW(lr, weight_decay) one step (from the C side's gradients: AdamW's first update
is lr * g / (|g| + eps), whose sign flips for a gradient at float32 noise, e.g. the K module's
last bias, whose true gradient is zero because it shifts every key alike). C (f32) is compared with float64 torch:
max|c - ref| / max|ref| (a gradient: over its module); thresholds: loss 1e-4, gradients 1e-3,
updated values 1e-5. A ReLU's derivative jumps at 0, so a draw that puts a module input within float32's
reach of 0 is no float32-vs-float64 comparison: such a draw that fails is drawn again (seed + 1000), and
the output says so. The reference also checks that every attention's K/V width has a module and every
module is used (a width list that misses one would leave that module unchecked).

    /usr/bin/python3 tests/hn/hn_step_parity.py --cli build/tests/hn/hn_step_cli --sizes tiny
    # SD 1.5 size (UNet 320/640/1280, context 768; modules 768, 320, 640, 1280), on a GPU host
    # for the reference (the C side runs on the CPU):
    python3 tests/hn/hn_step_parity.py --cli build/tests/hn/hn_step_cli --sizes sd15 --sd-latent 32 --device cuda
    # SDXL: the UNet also takes y (label_emb: pooled text embedding + size embeddings, random here).
    # tiny-sdxl (context 80, modules 80 and 64) runs in ctest; the full size (channels 320/640/1280,
    # context 2048; modules 2048, 640, 1280) on a GPU host like sd15:
    python3 tests/hn/hn_step_parity.py --cli build/tests/hn/hn_step_cli --sizes tiny-sdxl,sdxl --sd-latent 32 --device cuda

Exit status: 0 all passed, 1 a threshold failed, 77 torch is not installed.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "parity"))
sys.path.insert(0, HERE)

try:
    import torch
except ImportError:
    print("hn_step_parity: torch is not installed; skipping")
    sys.exit(77)

import unet_parity  # noqa: E402 (after the skip check)
from st_codec import st_read, st_write  # noqa: E402
from hn_torch_parity import build_module, read_safetensors  # noqa: E402

LOSS_TOL, GRAD_TOL, AFTER_TOL = 1e-4, 1e-3, 1e-5
F32_FACTOR = 4.0  # the C side's gradients may be this many times further from float64 than torch's float32
# A ReLU's derivative jumps at 0: a module input this close to 0 (relative to that input's largest) can fall on the
# other side in float32, and every gradient behind it then differs by ~1e-3 (seen: tiny-sdxl, seed 20261128, a V
# module pre-activation of 7e-7 where its largest is 3.8). Such a draw is no comparison of float32 with float64.
KINK_REL = 1e-6
KINKED = (torch.nn.ReLU, torch.nn.LeakyReLU, torch.nn.PReLU)
REDRAWS = 2  # a failed draw with such a kink is redrawn (seed + 1000 per redraw) at most this often
# The hypernetwork's module widths for each size: the UNet's K/V input widths, the text context's first
# (A1111's order; sdt_unet_config_kv_widths), so every attention has its module.
WIDTHS = {"tiny": "32, 64", "tiny-linear": "32, 64", "sd15": "768, 320, 640, 1280",
          # SDXL: cross-attention context 2048 (CLIP-L 768 + bigG 1280); self-attention at levels 1 and 2
          # (level 0 has none). The tiny one: context 80 (32 + 48), both attention levels 64 wide.
          "tiny-sdxl": "80, 64", "sdxl": "2048, 640, 1280"}


class HypernetworkAttention(torch.nn.Module):
    """unet_parity.CrossAttention with A1111's apply_hypernetworks on the K/V input."""

    def __init__(self, inner, modules, widths_seen):
        super().__init__()
        self.inner = inner
        self.modules_by_width = modules
        self.widths_seen = widths_seen

    def forward(self, x, context=None):
        a = self.inner
        context = x if context is None else context
        pair = self.modules_by_width.get(context.shape[-1])
        self.widths_seen.append(context.shape[-1])
        ck = context + pair[0].linear(context) if pair else context
        cv = context + pair[1].linear(context) if pair else context
        q, k, v = a.to_q(x), a.to_k(ck), a.to_v(cv)
        b, n, _ = q.shape
        h = a.heads
        split = lambda t: t.reshape(b, t.shape[1], h, -1).permute(0, 2, 1, 3)
        q, k, v = split(q), split(k), split(v)
        attn = (torch.einsum("bhid,bhjd->bhij", q, k) * a.scale).softmax(dim=-1)
        out = torch.einsum("bhij,bhjd->bhid", attn, v).permute(0, 2, 1, 3).reshape(b, n, -1)
        return a.to_out(out)


def hypernetwork(tmp, kinks=None):
    """A1111's modules from the C side's file: {width: (module_k, module_v)} and the named parameters.
    kinks: a list that gets (|x| / max|x| nearest a ReLU's kink, "width K|V") per activation call."""
    weights, meta = read_safetensors(os.path.join(tmp, "hn.safetensors"))
    widths = [int(w) for w in meta["modules"].strip("[]").split(",")]
    modules, params = {}, {}
    for w in widths:
        pair = []
        for kind in (0, 1):
            m = build_module(meta, w, {})
            prefix = f"{w}.{kind}."
            m.load_state_dict({k[len(prefix):]: t for k, t in weights.items() if k.startswith(prefix)})
            for act in m.modules():
                if kinks is not None and isinstance(act, KINKED):
                    act.register_forward_hook(lambda _m, inp, _o, where=f"{w} {'KV'[kind]}": kinks.append(
                        ((inp[0].abs().min() / inp[0].abs().max().clamp_min(1e-30)).item(), where)))
            for name, p in m.named_parameters():
                params[prefix + name] = p
            pair.append(m)
        modules[w] = tuple(pair)
    return modules, params


def reference(unet, tmp, inputs, args, dtype, device, kinks=None):
    modules, params = hypernetwork(tmp, kinks)
    for pair in modules.values():
        for m in pair:
            m.to(device=device, dtype=dtype)
    unet = unet.to(device=device, dtype=dtype)
    for p in unet.parameters():
        p.requires_grad_(False)  # the UNet is frozen (A1111 computes its gradients for nothing)
    widths_seen = []  # the K/V input width of every attention the forward runs
    for block in unet.modules():
        if isinstance(block, unet_parity.BasicTransformerBlock):
            for attr in ("attn1", "attn2"):
                inner = getattr(block, attr)
                inner = inner.inner if isinstance(inner, HypernetworkAttention) else inner
                setattr(block, attr, HypernetworkAttention(inner, modules, widths_seen))
    get = lambda k: inputs[k].to(device, dtype)
    pred = unet(get("noisy"), get("timesteps"), get("context"), get("y") if "y" in inputs else None)
    loss = torch.nn.functional.mse_loss(pred, get("target"))
    # The step checks every module only if every attention has one and every module is used: a width
    # list that misses one of the UNet's attention widths (or names one it lacks) is the test's error.
    if set(widths_seen) != set(modules):
        raise SystemExit(f"hn_step_parity: the UNet's K/V widths {sorted(set(widths_seen))} are not the "
                         f"hypernetwork's module widths {sorted(modules)}: fix WIDTHS")
    loss.backward()
    grads = {k: p.grad.detach().cpu().clone() for k, p in params.items()}
    return loss.detach().cpu(), grads, params


def adamw_after(params, grads, args, dtype, device):
    """torch.optim.AdamW's first step from these gradients (the C side's: AdamW's first update is
    lr * g / (|g| + eps), so a gradient at float32 noise level flips its sign; comparing the update
    from the same gradients checks the optimizer, the gradients are checked above)."""
    with torch.no_grad():
        for k, p in params.items():
            p.grad = grads[k].to(device=device, dtype=dtype).clone()
    opt = torch.optim.AdamW(list(params.values()), lr=args.lr, weight_decay=args.weight_decay)
    opt.step()
    return {k: p.detach().cpu().clone() for k, p in params.items()}


def rel_err(a, ref):
    a, ref = a.double().cpu(), ref.double().cpu()
    return ((a - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()


def run_size(name, args, seed, tmp):
    cfg = unet_parity.config(name)
    gen = torch.Generator().manual_seed(seed)
    unet = unet_parity.UNetModel(cfg).to(torch.float64)
    unet_parity.randomize(unet, gen)
    ckpt = os.path.join(tmp, f"{name}.safetensors")
    st_write(ckpt, {unet_parity.PREFIX + k: v for k, v in unet.state_dict().items()})
    small = name.startswith("tiny")
    B, H = args.batch, 8 if small else args.sd_latent
    T = 5 if small else 77
    inputs = {"noisy": torch.randn(B, cfg["in_channels"], H, H, generator=gen),
              "timesteps": torch.rand(B, generator=gen) * 999.0,
              "context": torch.randn(B, T, cfg["context_dim"], generator=gen),
              "target": torch.randn(B, cfg["out_channels"], H, H, generator=gen)}
    if cfg["adm_in"]:  # SDXL's vector conditioning y: pooled text embedding and the six size numbers' embeddings
        inputs["y"] = torch.randn(B, cfg["adm_in"], generator=gen)
    inp = os.path.join(tmp, f"{name}-in.safetensors")
    st_write(inp, inputs)
    cmd = [args.cli, ckpt, inp, tmp, "--widths", WIDTHS[name], "--activation", args.activation,
           "--seed", str(seed), "--lr", repr(args.lr), "--weight-decay", repr(args.weight_decay)]
    if args.layer_norm:
        cmd.append("--layer-norm")
    if args.checkpointing:
        cmd.append("--checkpointing")
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stdout + proc.stderr)
        raise SystemExit(f"{name}: hn_step_cli failed with status {proc.returncode}")
    c_time = time.time() - t0
    c = st_read(os.path.join(tmp, "step.safetensors"))
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    kinks = []
    loss64, grads64, params64 = reference(unet, tmp, inputs, args, torch.float64, args.device, kinks)
    nearest_kink = min(kinks, default=(1.0, "none"))
    after64 = adamw_after(params64, {k: c["grad." + k].double() for k in grads64}, args, torch.float64, args.device)
    errs = {"loss": rel_err(c["loss"].reshape(()), loss64)}
    # A gradient is measured against its module's largest (some are zero by symmetry: the K
    # module's last bias shifts every key alike, which the softmax ignores).
    module_max = {}
    for k, g in grads64.items():
        m = k.split(".linear.")[0]
        module_max[m] = max(module_max.get(m, 0.0), g.abs().max().item())
    grad_err = {k: (c["grad." + k].double() - g).abs().max().item() / max(module_max[k.split(".linear.")[0]], 1e-30)
                for k, g in grads64.items()}
    worst_grad = max(grad_err, key=grad_err.get)
    # How well float32 can do here at all: the same step in torch float32 against float64, by the same
    # measure. A K module's gradient comes through the softmax backward, P * (dP - rowsum(P * dP)), which
    # cancels where the attention is nearly one-hot (random SD 1.5-sized weights at 64+ tokens), so there
    # float32 itself is ~1e-2 off; the C side must be as good as torch's float32, not better.
    loss32, grads32, _ = reference(unet, tmp, inputs, args, torch.float32, args.device)
    f32_err = {k: (grads32[k].double() - g).abs().max().item() / max(module_max[k.split(".linear.")[0]], 1e-30)
               for k, g in grads64.items()}
    grad_tol = max(GRAD_TOL, F32_FACTOR * max(f32_err.values()))
    worst_after = max(after64, key=lambda k: rel_err(c["after." + k], after64[k]))
    errs["grad"] = grad_err[worst_grad]
    errs["after"] = rel_err(c["after." + worst_after], after64[worst_after])
    ok = errs["loss"] <= LOSS_TOL and errs["grad"] <= grad_tol and errs["after"] <= AFTER_TOL
    print(f"{name:<9} B={B} latent {H}x{H} T={T}: loss {float(loss64):.6g} (err {errs['loss']:.2e}), "
          f"{len(grads64)} parameters, worst gradient {worst_grad} err {errs['grad']:.2e}, "
          f"worst update {worst_after} err {errs['after']:.2e}, C {c_time:.1f} s  {'PASS' if ok else 'FAIL'}")
    print(f"          torch float32 vs float64: worst gradient {max(f32_err, key=f32_err.get)} err {max(f32_err.values()):.2e}"
          f" (gradient tolerance here {grad_tol:.2e}); nearest ReLU kink: |x|/max|x| {nearest_kink[0]:.1e}"
          f" (module {nearest_kink[1]})")
    return ok, nearest_kink[0] < KINK_REL


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True, help="path of the hn_step_cli binary")
    ap.add_argument("--sizes", default="tiny", help="comma list of " + ", ".join(WIDTHS))
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--sd-latent", type=int, default=16, help="latent side for sd15 and sdxl (64 = 512 px)")
    ap.add_argument("--activation", default="relu")
    ap.add_argument("--no-layer-norm", dest="layer_norm", action="store_false", help="modules without LayerNorm")
    ap.add_argument("--checkpointing", action="store_true", help="the C side recomputes UNet blocks in backward")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=20261126)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"hn_step_parity: seed {args.seed} (--seed replays), reference on {args.device}, torch {torch.__version__}")
    ok = True
    with tempfile.TemporaryDirectory(prefix="sdt-hn-step-") as tmp:
        for i, name in enumerate(s for s in args.sizes.split(",") if s):
            seed = args.seed + i
            size_ok, kinked = run_size(name, args, seed, tmp)
            for redraw in range(1, REDRAWS + 1):
                if size_ok or not kinked:
                    break
                print(f"{name}: this draw put a module input within {KINK_REL:g} of a ReLU's kink, where float32 and "
                      f"float64 may take different sides; drawn again with seed {seed + 1000 * redraw}")
                size_ok, kinked = run_size(name, args, seed + 1000 * redraw, tmp)
            ok &= size_ok
    print(f"thresholds: loss <= {LOSS_TOL:g}, gradients <= max({GRAD_TOL:g}, {F32_FACTOR:g} x torch float32's error), "
          f"updated values <= {AFTER_TOL:g} (C f32 vs torch float64)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
