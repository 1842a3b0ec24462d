#!/usr/bin/env python3
"""clip_vae_parity.py - the C text encoder and VAE against PyTorch.

Loads the same random-weight safetensors checkpoint (written by
sdt-make-checkpoint) into transformers' CLIPTextModel and into a PyTorch
AutoencoderKL written here to LDM's published code
(ldm/modules/diffusionmodules/model.py: Encoder, Decoder, ResnetBlock,
AttnBlock, Downsample with pad (0,1,0,1), Upsample), then compares on fresh
random inputs each run:
  - CLIP forward (CLIP skip 1 and 2, with placeholder override rows) and the
    gradient with respect to the override rows of sum(G * output); for SD 2.x
    the OpenCLIP-layout checkpoint (fused in_proj) is converted to
    CLIPTextModel names (GELU, 24 layers; skip 2 is SD 2's penultimate output);
  - VAE encoder mean/logvar and decoder output;
  - tiny-vae16: the 16-channel VAE of SD3/SD3.5 and Flux (no quant_conv / post_quant_conv, latents decoded
    from latents / scaling + shift), written as Flux's ae.safetensors is (LDM names, no prefix);
  - tiny-sdxl: SDXL's two encoders (conditioner.embedders.0 CLIP-L in transformers'
    names, conditioner.embedders.1 OpenCLIP bigG converted as SD 2.x's, its
    text_projection [in, out] transposed into CLIPTextModelWithProjection's Linear):
    the context hidden_states[-2] without the final layernorm, bigG's pooled output
    text_projection(last_hidden_state[b, ids[b].argmax()]) as sgm's FrozenOpenCLIPEmbedder2
    pools, and the override-row gradient of sum(G * context) + sum(H * pooled).
The C side runs through sdt-model-io (tests/parity/model_io_cli.c) on the CPU
backend. Thresholds (f32): relative error (max |a - b| / max |b|) <= 1e-4
forward, <= 1e-3 gradients.

Needs torch (exits 77, a skip, without it); uses transformers' CLIPTextModel when it is
installed and clip_reference.py (the same architecture, written here) otherwise.

  python3 tests/parity/clip_vae_parity.py --build build [--sizes tiny,sd15,sd2]
      [--device cuda] [--seed N] [--record tests/parity/NOTES.md] [--keep DIR]

Overrides follow A1111's hijack: the token embedding module's output has the
placeholder rows written into it before the position embedding is added.
CLIP skip N follows A1111: hidden_states[-N] then final_layer_norm (N = 1 is
last_hidden_state).
"""
import argparse
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77
try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # CI without torch: a clean skip
    print(f"clip_vae_parity: skipped ({e})")
    sys.exit(SKIP)
# transformers' CLIPTextModel is the reference where it is installed; otherwise
# clip_reference.py, written to the same published code (Debian's torch has no transformers).
try:
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection
    CLIP_REFERENCE = "transformers CLIPTextModel"
except ImportError:
    CLIPTextModel = CLIPTextModelWithProjection = None
    CLIP_REFERENCE = "clip_reference.py"
from clip_reference import ClipTextModel, ClipTextModelWithProjection  # noqa: E402
from st_codec import st_read as load_file  # noqa: E402 (F32 checkpoints: --dtype f32 below)

FWD_TOL = 1e-4
GRAD_TOL = 1e-3


def rel_err(a, b):
    a = a.detach().double().cpu()
    b = b.detach().double().cpu()
    den = max(b.abs().max().item(), 1e-12)
    return (a - b).abs().max().item() / den


# ----------------------------------------------------------------------------- C side

class CModel:
    def __init__(self, build, workdir):
        self.exe = os.path.join(build, "tests", "parity", "sdt-model-io")
        self.gen = os.path.join(build, "models", "tools", "sdt-make-checkpoint")
        for p in (self.exe, self.gen):
            if not os.path.exists(p):
                sys.exit(f"clip_vae_parity: {p} not found; build the project first (cmake --build {build})")
        self.dir = workdir
        self.n = 0

    def path(self, name):
        self.n += 1
        return os.path.join(self.dir, f"{self.n:03d}-{name}")

    def run(self, *args):
        r = subprocess.run([self.exe, *map(str, args)], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"sdt-model-io {args[0]} failed: {r.stderr.strip()}")
        return r.stdout

    def make_checkpoint(self, config, seed, part):
        out = self.path(f"{config}-{part}.safetensors")
        args = [self.gen, "--config", config, "--out", out, "--seed", str(seed), "--dtype", "f32", "--perturb-all"]
        if part == "text":
            args.append("--text-only")
        elif part == "vae" and config != "tiny-vae16":  # tiny-vae16 is a VAE file already
            args.append("--vae-only")
        subprocess.run(args, check=True, capture_output=True)
        return out

    def config(self, ckpt, slot="sd"):
        cfg = {}
        for line in self.run("config", "--ckpt", ckpt, "--slot", slot).splitlines():
            k, _, v = line.partition(" ")
            cfg[k] = v
        return cfg

    def write(self, t, name, dtype):
        p = self.path(name)
        with open(p, "wb") as f:
            f.write(t.detach().cpu().contiguous().to(dtype).numpy().tobytes())
        return p

    def read(self, path, shape):
        data = torch.from_file(path, size=int(torch.tensor(shape).prod().item()), dtype=torch.float32)
        return data.reshape(shape).clone()

    def clip(self, ckpt, tokens, rows, overrides, skip, dout, slot="sd", dpooled=None):
        B, T = tokens.shape
        tok = self.write(tokens, "tokens.i32", torch.int32)
        out = self.path("clip-out.f32")
        args = ["clip", "--ckpt", ckpt, "--slot", slot, "--tokens", tok, "--batch", B, "--seq", T, "--out", out,
                "--skip", skip]
        pooled = None
        if dpooled is not None:
            pooled = self.path("pooled.f32")
            args += ["--pooled", pooled, "--dpooled", self.write(dpooled, "dpooled.f32", torch.float32)]
        R = rows.shape[0] if rows is not None else 0
        if R:
            ov = torch.tensor(overrides, dtype=torch.int32)
            args += ["--rows", self.write(rows, "rows.f32", torch.float32), "--nrows", R,
                     "--overrides", self.write(ov, "ov.i32", torch.int32), "--noverrides", len(overrides)]
        drows = None
        if dout is not None:
            drows = self.path("drows.f32")
            args += ["--dout", self.write(dout, "dout.f32", torch.float32), "--drows", drows]
        self.run(*args)
        C = dout.shape[2] if dout is not None else rows.shape[1]
        o = self.read(out, (B, T, C))
        g = self.read(drows, tuple(rows.shape)) if drows else None
        if dpooled is not None:
            return o, g, self.read(pooled, tuple(dpooled.shape))
        return o, g

    def vae_encode(self, ckpt, image, f, z):
        B, _, H, W = image.shape
        mean, logvar = self.path("mean.f32"), self.path("logvar.f32")
        self.run("vae-encode", "--ckpt", ckpt, "--image", self.write(image, "image.f32", torch.float32),
                 "--batch", B, "--height", H, "--width", W, "--mean", mean, "--logvar", logvar)
        shape = (B, z, H // f, W // f)
        return self.read(mean, shape), self.read(logvar, shape)

    def vae_decode(self, ckpt, latents, f):
        B, _, h, w = latents.shape
        out = self.path("decoded.f32")
        self.run("vae-decode", "--ckpt", ckpt, "--latents", self.write(latents, "latents.f32", torch.float32),
                 "--batch", B, "--height", h, "--width", w, "--out", out)
        return self.read(out, (B, 3, h * f, w * f))


# ----------------------------------------------------------------------------- PyTorch CLIP

class OverrideEmbedding(nn.Module):
    """A1111-style: token embeddings with placeholder rows written in (out of place, so rows get gradients)."""

    def __init__(self, base, rows, overrides):
        super().__init__()
        self.base, self.rows, self.overrides = base, rows, overrides

    def forward(self, ids):
        e = self.base(ids)
        if not self.overrides:
            return e
        b = torch.tensor([o[0] for o in self.overrides], device=e.device)
        p = torch.tensor([o[1] for o in self.overrides], device=e.device)
        r = torch.tensor([o[2] for o in self.overrides], device=e.device)
        return e.index_put((b, p), self.rows[r].to(e.dtype))


def openclip_to_hf(sd, layers, P="cond_stage_model.model."):
    """LDM layout (open_clip names, fused in_proj; SD 2.x's, or SDXL's bigG under conditioner.embedders.1.model.)
    -> transformers CLIPTextModel names; text_projection [in, out] -> CLIPTextModelWithProjection's Linear [out, in]
    when the config uses it."""
    out = {
        "text_model.embeddings.token_embedding.weight": sd[P + "token_embedding.weight"],
        "text_model.embeddings.position_embedding.weight": sd[P + "positional_embedding"],
        "text_model.final_layer_norm.weight": sd[P + "ln_final.weight"],
        "text_model.final_layer_norm.bias": sd[P + "ln_final.bias"],
    }
    for i in range(layers):
        r, h = f"{P}transformer.resblocks.{i}.", f"text_model.encoder.layers.{i}."
        for (name, w), b in zip(zip(("q_proj", "k_proj", "v_proj"), sd[r + "attn.in_proj_weight"].chunk(3, 0)),
                                sd[r + "attn.in_proj_bias"].chunk(3, 0)):
            out[h + f"self_attn.{name}.weight"] = w.clone()
            out[h + f"self_attn.{name}.bias"] = b.clone()
        pairs = {"attn.out_proj": "self_attn.out_proj", "ln_1": "layer_norm1", "ln_2": "layer_norm2",
                 "mlp.c_fc": "mlp.fc1", "mlp.c_proj": "mlp.fc2"}
        for src, dst in pairs.items():
            out[h + dst + ".weight"] = sd[r + src + ".weight"]
            out[h + dst + ".bias"] = sd[r + src + ".bias"]
    if P.startswith("conditioner.") and P + "text_projection" in sd:
        out["text_projection.weight"] = sd[P + "text_projection"].t().contiguous()
    return out


def clip_model(cfg):
    """An untrained CLIP text model of the checkpoint's sizes (with the projection when it has one), from
    transformers or clip_reference.py."""
    projection = int(cfg.get("clip_projection", "0"))
    if CLIPTextModel is None:
        sizes = (int(cfg["clip_vocab"]), int(cfg["clip_width"]), int(cfg["clip_layers"]), int(cfg["clip_heads"]),
                 int(cfg["clip_positions"]), int(cfg["clip_mlp"]), cfg["clip_act"])
        return ClipTextModelWithProjection(*sizes, projection) if projection else ClipTextModel(*sizes)
    hf = CLIPTextConfig(vocab_size=int(cfg["clip_vocab"]), hidden_size=int(cfg["clip_width"]),
                        intermediate_size=int(cfg["clip_mlp"]), num_hidden_layers=int(cfg["clip_layers"]),
                        num_attention_heads=int(cfg["clip_heads"]), max_position_embeddings=int(cfg["clip_positions"]),
                        hidden_act=cfg["clip_act"], layer_norm_eps=1e-5,
                        projection_dim=projection or int(cfg["clip_width"]))
    try:
        hf._attn_implementation = "eager"  # the plain softmax(QK^T)V path
    except AttributeError:
        pass  # older transformers: eager is the only path
    return CLIPTextModelWithProjection(hf) if projection else CLIPTextModel(hf)


SLOT_PREFIX = {"sd": "cond_stage_model.", "sdxl-l": "conditioner.embedders.0.", "sdxl-g": "conditioner.embedders.1."}


def torch_clip(sd, cfg, device, dtype, slot="sd"):
    model = clip_model(cfg)
    if cfg["clip_layout"] == "openclip":
        state = openclip_to_hf(sd, int(cfg["clip_layers"]), SLOT_PREFIX[slot] + "model.")
    else:
        prefix = SLOT_PREFIX[slot] + "transformer."
        state = {k[len(prefix):]: v for k, v in sd.items() if k.startswith(prefix)}
    # transformers 5 names the text model's parameters without the "text_model." prefix that 4.x used.
    expected = set(model.state_dict().keys())
    if not any(k.startswith("text_model.") for k in expected) and "text_projection.weight" not in expected:
        state = {k[len("text_model."):] if k.startswith("text_model.") else k: v for k, v in state.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or any("position_ids" not in m for m in missing):
        raise RuntimeError(f"CLIP state dict mismatch: missing {missing}, unexpected {unexpected}")
    return model.to(device=device, dtype=dtype).eval().requires_grad_(False)


def _text_model(model):
    """The text transformer: model.text_model in transformers 4, the model itself in 5."""
    return getattr(model, "text_model", model)


def torch_clip_run(model, tokens, rows, overrides, skip, dout, device, dtype):
    rows_p = rows.to(device=device, dtype=dtype).clone().requires_grad_(True)
    base = _text_model(model).embeddings.token_embedding
    _text_model(model).embeddings.token_embedding = OverrideEmbedding(base, rows_p, overrides)
    try:
        out = model(input_ids=tokens.to(device=device, dtype=torch.long), output_hidden_states=True)
        z = out.last_hidden_state if skip <= 1 else _text_model(model).final_layer_norm(out.hidden_states[-skip])
        (z * dout.to(device=device, dtype=dtype)).sum().backward()
    finally:
        _text_model(model).embeddings.token_embedding = base
    return z.detach().float().cpu(), rows_p.grad.detach().float().cpu()


def torch_clip_sdxl_run(model, tokens, rows, overrides, dout, dpooled, device, dtype):
    """SDXL's conditioning from one encoder: hidden_states[-2] (no final layernorm) and, with a projection, the
    pooled output at each row's first largest id; the override-row gradient of sum(dout * context) +
    sum(dpooled * pooled)."""
    rows_p = rows.to(device=device, dtype=dtype).clone().requires_grad_(True)
    text = _text_model(model)
    base = text.embeddings.token_embedding
    text.embeddings.token_embedding = OverrideEmbedding(base, rows_p, overrides)
    ids = tokens.to(device=device, dtype=torch.long)
    try:
        out = text(input_ids=ids, output_hidden_states=True)
        context = out.hidden_states[-2]
        loss = (context * dout.to(device=device, dtype=dtype)).sum()
        pooled = None
        if dpooled is not None:
            end = ids.argmax(dim=-1)
            pooled = model.text_projection(out.last_hidden_state[torch.arange(ids.shape[0]), end])
            loss = loss + (pooled * dpooled.to(device=device, dtype=dtype)).sum()
        loss.backward()
    finally:
        text.embeddings.token_embedding = base
    return (context.detach().float().cpu(), None if pooled is None else pooled.detach().float().cpu(),
            rows_p.grad.detach().float().cpu())


# ----------------------------------------------------------------------------- PyTorch AutoencoderKL (LDM)

from ldm_vae import AutoencoderKL  # noqa: E402 (the one PyTorch LDM VAE, shared with the demo model)


def torch_vae(sd, cfg, device, dtype):
    mult = [int(m) for m in cfg["vae_ch_mult"].split()]
    vae = AutoencoderKL(int(cfg["vae_ch"]), mult, int(cfg["vae_res_blocks"]), int(cfg["vae_z"]),
                        float(cfg["vae_scaling"]), cfg["vae_quant_conv"] == "1", float(cfg["vae_shift"]))
    prefix = cfg["vae_prefix"] if cfg["vae_prefix"] != "-" else ""
    vae.load_state_dict({k[len(prefix):]: v for k, v in sd.items() if k.startswith(prefix)}, strict=True)
    return vae.to(device=device, dtype=dtype).eval().requires_grad_(False)


# ----------------------------------------------------------------------------- the checks

class Report:
    def __init__(self):
        self.rows = []

    def add(self, size, check, err, tol):
        ok = err <= tol
        self.rows.append((size, check, err, tol, ok))
        print(f"  {size:5s} {check:34s} rel err {err:.3e} (<= {tol:.0e}) {'ok' if ok else 'FAIL'}", flush=True)

    @property
    def passed(self):
        return all(r[4] for r in self.rows)


def check_clip(c, size, seed, gen, device, dtype, report):
    ckpt = c.make_checkpoint(size, seed, "text")
    cfg = c.config(ckpt)
    model = torch_clip(load_file(ckpt), cfg, device, dtype)
    width, vocab, T = int(cfg["clip_width"]), int(cfg["clip_vocab"]), int(cfg["clip_positions"])
    B, R = 2, 2
    tokens = torch.randint(0, vocab, (B, T), generator=gen, dtype=torch.int32)
    table_std = _text_model(model).embeddings.token_embedding.weight.float().std().item()
    rows = torch.randn(R, width, generator=gen) * table_std
    overrides = [(0, 1 + int(torch.randint(0, 5, (1,), generator=gen)), 0), (1, 3, 0),
                 (1, 4 + int(torch.randint(0, 60, (1,), generator=gen)), 1)]
    for skip in (1, 2):
        dout = torch.randn(B, T, width, generator=gen)
        c_out, c_grad = c.clip(ckpt, tokens, rows, overrides, skip, dout)
        t_out, t_grad = torch_clip_run(model, tokens, rows, overrides, skip, dout, device, dtype)
        report.add(size, f"clip forward (skip {skip})", rel_err(c_out, t_out), FWD_TOL)
        report.add(size, f"clip d(override rows) (skip {skip})", rel_err(c_grad, t_grad), GRAD_TOL)


def check_clip_sdxl(c, size, seed, gen, device, dtype, report):
    ckpt = c.make_checkpoint(size, seed, "text")
    for slot in ("sdxl-l", "sdxl-g"):
        cfg = c.config(ckpt, slot)
        model = torch_clip(load_file(ckpt), cfg, device, dtype, slot)
        width, vocab, T = int(cfg["clip_width"]), int(cfg["clip_vocab"]), int(cfg["clip_positions"])
        projection = int(cfg["clip_projection"])
        B, R = 2, 2
        # start, text, the end token (the vocabulary's last id), then zeros as OpenCLIP pads; row 1 has a
        # second end token later, which is not the pooled position
        tokens = torch.zeros(B, T, dtype=torch.int32)
        for b, end in enumerate((10 + int(torch.randint(0, 20, (1,), generator=gen)), 40)):
            tokens[b, 0] = vocab - 2
            tokens[b, 1:end] = torch.randint(1, vocab - 2, (end - 1,), generator=gen, dtype=torch.int32)
            tokens[b, end] = vocab - 1
        tokens[1, 60] = vocab - 1
        table_std = _text_model(model).embeddings.token_embedding.weight.float().std().item()
        rows = torch.randn(R, width, generator=gen) * table_std
        overrides = [(0, 2, 0), (1, 3, 0), (1, 5 + int(torch.randint(0, 20, (1,), generator=gen)), 1)]
        dout = torch.randn(B, T, width, generator=gen)
        dpooled = torch.randn(B, projection, generator=gen) if projection else None
        got = c.clip(ckpt, tokens, rows, overrides, 0, dout, slot, dpooled)
        t_ctx, t_pooled, t_grad = torch_clip_sdxl_run(model, tokens, rows, overrides, dout, dpooled, device, dtype)
        report.add(size, f"{slot} context (penultimate, no ln)", rel_err(got[0], t_ctx), FWD_TOL)
        if projection:
            report.add(size, f"{slot} pooled", rel_err(got[2], t_pooled), FWD_TOL)
        report.add(size, f"{slot} d(override rows)", rel_err(got[1], t_grad), GRAD_TOL)


def check_vae(c, size, seed, gen, device, dtype, report, image_size):
    ckpt = c.make_checkpoint(size, seed, "vae")
    cfg = c.config(ckpt)
    vae = torch_vae(load_file(ckpt), cfg, device, dtype)
    f = 2 ** (int(cfg["vae_levels"]) - 1)
    z = int(cfg["vae_z"])
    B = 2 if size in ("tiny", "tiny-vae16") else 1
    image = torch.rand(B, 3, image_size, image_size + f, generator=gen) * 2 - 1  # non-square on purpose
    c_mean, c_logvar = c.vae_encode(ckpt, image, f, z)
    with torch.no_grad():
        t_mean, t_logvar = vae.encode(image.to(device=device, dtype=dtype))
    report.add(size, "vae encoder mean", rel_err(c_mean, t_mean), FWD_TOL)
    report.add(size, "vae encoder logvar", rel_err(c_logvar, t_logvar), FWD_TOL)
    latents = torch.randn(B, z, image_size // f, image_size // f + 1, generator=gen)
    c_img = c.vae_decode(ckpt, latents, f)
    with torch.no_grad():
        t_img = vae.decode(latents.to(device=device, dtype=dtype))
    report.add(size, "vae decoder", rel_err(c_img, t_img), FWD_TOL)


def record(path, device, dtype, seed, report, elapsed):
    card = torch.cuda.get_device_name() if device.startswith("cuda") else "cpu"
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    new = not os.path.exists(path) or "| date |" not in open(path).read()
    with open(path, "a") as f:
        if new:
            f.write("# Parity runs\n\n| date | script | reference device | torch dtype | seed | size | check | rel err | tol | ok |\n"
                    "|---|---|---|---|---|---|---|---|---|---|\n")
        for size, check, err, tol, ok in report.rows:
            f.write(f"| {stamp} | clip_vae_parity.py | {card} | {dtype} | {seed} | {size} | {check} | {err:.3e} | "
                    f"{tol:.0e} | {'yes' if ok else 'NO'} |\n")
    print(f"recorded {len(report.rows)} results in {path} ({elapsed:.0f} s)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="the CMake build folder holding sdt-model-io and sdt-make-checkpoint")
    ap.add_argument("--sizes", default="tiny,sd15,sd2",
                    help="comma list of tiny, sd15, sd2 (text encoder only), tiny-sdxl (SDXL's two text encoders), "
                         "tiny-vae16 (SD3's and Flux's 16-channel VAE only)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--torch-dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--seed", type=int, default=None, help="default: fresh from the clock (printed)")
    ap.add_argument("--image-size", type=int, default=0, help="VAE image side (default 32 tiny, 64 sd15)")
    ap.add_argument("--record", default=None, help="append the results to this markdown file")
    ap.add_argument("--keep", default=None, help="keep the exchanged files in this folder")
    args = ap.parse_args()

    seed = args.seed if args.seed is not None else int(time.time())
    print(f"clip_vae_parity: seed {seed} (--seed replays), torch {torch.__version__}, device {args.device}, "
          f"CLIP reference: {CLIP_REFERENCE}")
    # Full-precision matmuls and convolutions on the reference side.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dtype = getattr(torch, args.torch_dtype)
    gen = torch.Generator().manual_seed(seed)
    workdir = args.keep or tempfile.mkdtemp(prefix="sdt-parity-")
    os.makedirs(workdir, exist_ok=True)
    c = CModel(args.build, workdir)
    report = Report()
    t0 = time.time()
    try:
        for size in args.sizes.split(","):
            size = size.strip()
            if size not in ("tiny", "sd15", "sd2", "tiny-sdxl", "tiny-vae16"):
                sys.exit(f"clip_vae_parity: unknown size '{size}' (tiny, sd15, sd2, tiny-sdxl, tiny-vae16)")
            if size == "tiny-sdxl":
                check_clip_sdxl(c, size, seed, gen, args.device, dtype, report)
                continue
            image_size = args.image_size or (32 if size in ("tiny", "tiny-vae16") else 64)
            if size == "tiny-vae16":
                check_vae(c, size, seed, gen, args.device, dtype, report, image_size)
                continue
            check_clip(c, size, seed, gen, args.device, dtype, report)
            if size != "sd2":  # SD 2.x has the SD 1.x VAE
                check_vae(c, size, seed, gen, args.device, dtype, report, image_size)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.record:
        record(args.record, args.device, args.torch_dtype, seed, report, time.time() - t0)
    print("clip_vae_parity: " + ("all checks passed" if report.passed else "FAILED"))
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
