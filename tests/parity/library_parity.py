#!/usr/bin/env python3
"""library_parity.py - the C SD3 MMDiT, Flux.1 transformer and T5 encoder against diffusers' and transformers' own
classes (SD3Transformer2DModel, FluxTransformer2DModel, T5EncoderModel), each strict-loading the file sdtrain's
generator wrote.

mmdit_parity.py, flux_parity.py and t5_parity.py check the C side against float64 re-implementations written in
this folder; this script checks it against the libraries themselves, so a misreading of the libraries' code in
those re-implementations (or of the names the files carry) shows here. Per model:
  1. the C CLI's `gen` writes a random file (every norm and bias perturbed) in diffusers' / transformers' names;
  2. the library class is built from the matching config in float64 and load_state_dict(strict=True) reads that
     file (a missing or unexpected key is a FAIL naming the keys; a tied alias the file does not repeat, T5's
     encoder.embed_tokens.weight = shared.weight, is given the same tensor, as from_pretrained does);
  3. forward on the same inputs (float32-rounded for both), and the gradients of sum(G * output), G random, to the
     context and the pooled projection (transformers) or to inputs_embeds (T5: the C side gets every position as
     a textual-inversion override row and returns d(rows)); T5 also forward from token ids (the library's own
     embedding lookup), with and without an attention mask.
The C side runs through the CLI's `run` (CPU backend, f32); the libraries in float64 on the CPU. Their float64
path still rounds a few things to float32: diffusers' RMSNorm variance and RoPE, transformers' T5LayerNorm variance
(~1e-7 relative), and diffusers' timestep sinusoid (get_timestep_embedding: a float32 arange and timesteps, so
Flux dev's 1000 * guidance of 3500 is off by ~2e-4 in its argument): Flux dev measures ~2e-5 where the rest
measure ~1e-6 (with that sinusoid in float64, 4e-7). Thresholds: relative error (max |a - b| / max |b|) <= 1e-4
forward, <= 1e-3 gradients. Can fail: Flux built with RoPE axes (6, 4, 6) instead of the file's (4, 6, 6) ->
forward 0.26, d(context) 0.72; an SD3 model without the file's MMDiT-X blocks -> strict load FAIL, 20 unexpected
keys (transformer_blocks.0.attn2.*).

Sizes: tiny (the generators' test configs; MMDiT with and without QK norm and MMDiT-X blocks, Flux dev and schnell;
seconds) and full (full width, depth reduced: SD3.5 Medium 1536 wide, 24 heads of 64, 2 blocks, the first an
MMDiT-X block, QK norm, P 384; Flux.1 dev 3072 wide, 24 heads of 128, 1 double + 1 single block; T5-XXL 4096
wide, 64 heads, d_ff 10240, vocab 32128, 2 layers; three ~2 GB files in a temporary folder, 7 GB of memory at
most; 4 min on this busy 2-core machine, tiny and full, most of it the generator writing the files).

A family whose library does not import is skipped with its reason; exit 77 (ctest's skip) when nothing ran
(no torch, or neither library: CI's Debian torch 1.13 has no diffusers). --lib-path folders go first on
sys.path (a diffusers src/, transformers src/, huggingface_hub src/, a safetensors stand-in; see
bench/transformer_ti/fetch_sources.md for the releases that import on Debian's torch 1.13: diffusers v0.31.0,
transformers 4.28.0, huggingface_hub v0.24.7).

  python3 tests/parity/library_parity.py --build build [--sizes tiny,full] [--families mmdit,flux,t5]
          [--lib-path DIR]... [--seed N]
"""
import argparse
import contextlib
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity_cli import SKIP, RawFiles, rel_err, torch_or_skip  # noqa: E402

FWD_TOL, GRAD_TOL = 1e-4, 1e-3
T0 = time.time()


def log(*a):
    print(f"[{time.time() - T0:6.1f}s]", *a, flush=True)


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, help="the build folder (its tests/parity/sdt-*-io)")
    ap.add_argument("--sizes", default="tiny", help="tiny, full or both, comma-separated")
    ap.add_argument("--families", default="mmdit,flux,t5,vae")
    ap.add_argument("--lib-path", action="append", default=[], help="a folder to import the libraries from")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    a.sizes, a.families = a.sizes.split(","), a.families.split(",")
    for s in a.sizes:
        if s not in ("tiny", "full"):
            ap.error(f"--sizes: {s} is not tiny or full")
    for f in a.families:
        if f not in ("mmdit", "flux", "t5", "vae"):
            ap.error(f"--families: {f} is not mmdit, flux, t5 or vae")
    return a


args = parse_args()
for p in reversed(args.lib_path):
    sys.path.insert(0, os.path.abspath(p))
torch = torch_or_skip("library_parity")
import torch.nn.functional as F  # noqa: E402
from dit_reference import TINY_SHAPES, case_inputs, f32, image_ids, pack, run_and_compare, unpack  # noqa: E402
from st_codec import st_read, st_shapes  # noqa: E402
from t5_parity import case_tokens  # noqa: E402


def sdpa_math(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """F.scaled_dot_product_attention's math path in the inputs' dtype, for torch < 2.0 (Debian's 1.13), which
    diffusers' attention processors call. Never installed on torch >= 2.0."""
    s = query @ key.transpose(-2, -1) * (scale if scale is not None else query.shape[-1] ** -0.5)
    if is_causal:
        n, m = s.shape[-2:]
        s = s.masked_fill(torch.ones(n, m, dtype=torch.bool).triu(m - n + 1), float("-inf"))
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask
    return torch.softmax(s, dim=-1) @ value


if not hasattr(F, "scaled_dot_product_attention"):
    F.scaled_dot_product_attention = sdpa_math


def importable(module):
    """None when module imports, else the reason (one line)."""
    try:
        __import__(module)
        return None
    except Exception as e:  # an ImportError, or a library too new for this torch failing at import
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


@contextlib.contextmanager
def float64_default():
    """Parameters made in float64 from the start (a full-width model never exists in float32 as well), and
    torch.nn.init's initializers skipped while the model is built: strict loading overwrites every parameter, and
    drawing ~0.5 billion random values per full-width model is most of its construction time."""
    old = torch.get_default_dtype()
    names = ("uniform_", "normal_", "trunc_normal_", "kaiming_uniform_", "kaiming_normal_", "xavier_uniform_",
             "xavier_normal_", "constant_", "zeros_", "ones_")
    saved = {n: getattr(torch.nn.init, n) for n in names if hasattr(torch.nn.init, n)}
    torch.set_default_dtype(torch.float64)
    for n in saved:
        setattr(torch.nn.init, n, lambda tensor, *a, **k: tensor)
    try:
        yield
    finally:
        torch.set_default_dtype(old)
        for n, f in saved.items():
            setattr(torch.nn.init, n, f)


def strict_load(model, path, label):
    """load_state_dict(strict=True) of the generator's file into model (float64). Keys of model the file lacks
    that are the very tensor of a key the file has (tied weights) get that key's values, as from_pretrained ties
    them. Returns True, or prints FAIL lines naming the missing / unexpected keys."""
    W = st_read(path, mapped=True)
    own = model.state_dict(keep_vars=True)
    # the library's own tie declarations (transformers >= 4.31: a list of keys tied to the input embeddings, or
    # {key: source}), besides tensors that are one object (4.28)
    declared = getattr(model, "_tied_weights_keys", None) or ()
    if not isinstance(declared, dict):
        emb = getattr(model, "get_input_embeddings", lambda: None)()
        source = next((j for j in own if emb is not None and own[j] is emb.weight), None)
        declared = {k: source for k in declared}
    tied = {}
    for k in own:
        if k not in W:
            twin = next((j for j in W if j in own and own[j] is own[k]), None)
            twin = twin or (declared.get(k) if declared.get(k) in W else None)
            if twin is not None:
                tied[k] = twin
    sd = dict(W)  # float32: load_state_dict's copy_ widens into the float64 parameters (no float64 copy of the file)
    for k, twin in tied.items():
        sd[k] = sd[twin]
    try:
        model.load_state_dict(sd, strict=True)
    except RuntimeError as e:
        missing = sorted(set(own) - set(sd))
        unexpected = sorted(set(sd) - set(own))
        print(f"FAIL {label}: load_state_dict(strict=True) of {os.path.basename(path)}: "
              f"{len(missing)} missing {missing[:8]}, {len(unexpected)} unexpected {unexpected[:8]}"
              + ("" if missing or unexpected else f" ({str(e).splitlines()[0]})"))
        return False
    del sd
    log(f"{label}: strict load of {len(W)} tensors ok"
        + (f" (tied: {', '.join(f'{k} = {v}' for k, v in tied.items())})" if tied else ""))
    model.requires_grad_(False).eval()
    return True


def gen(cli, path, *opts):
    t = time.time()
    subprocess.run([cli, "gen", "--out", path, "--seed", str(args.seed), *opts], check=True)
    log(f"{os.path.basename(cli)} gen {' '.join(opts)}: {os.path.getsize(path) / 1e9:.2f} GB in "
        f"{time.time() - t:.1f}s")


def timed_compare(*a, **k):
    t = time.time()
    ok = run_and_compare(*a, fwd_tol=FWD_TOL, grad_tol=GRAD_TOL, **k)
    log(f"  ({time.time() - t:.1f}s)")
    return ok


# ------------------------------------------------------------------------------------------ SD3 MMDiT
def mmdit_cases(size):
    """(label, gen options, latent sizes (B, h, w, T))."""
    if size == "tiny":
        return [("tiny qk_norm", [], TINY_SHAPES), ("tiny qk_norm MMDiT-X 2", ["--dual", "2"], TINY_SHAPES),
                ("tiny SD3.0 (no qk_norm) MMDiT-X 1", ["--no-qk-norm", "--dual", "1"], TINY_SHAPES[:1])]
    return [("SD3.5 Medium width, 2 blocks (1 MMDiT-X)", ["--config", "sd35-medium", "--layers", "2", "--dual", "1"],
             ((2, 8, 8, 7),))]


def check_mmdit(files, cli, size):
    from diffusers import SD3Transformer2DModel
    failures = 0
    for label, opts, shapes in mmdit_cases(size):
        ckpt = files.path("mmdit.safetensors")
        gen(cli, ckpt, *opts)
        hdr = st_shapes(ckpt)  # the shapes give the config, as mmdit_config_detect reads them
        H, CD = hdr["context_embedder.weight"]
        PD = hdr["time_text_embed.text_embedder.linear_1.weight"][1]
        C, patch = hdr["pos_embed.proj.weight"][1], hdr["pos_embed.proj.weight"][2]
        pos_max = int(round(math.sqrt(hdr["pos_embed.pos_embed"][1])))
        qk = "transformer_blocks.0.attn.norm_q.weight" in hdr
        head_dim = hdr["transformer_blocks.0.attn.norm_q.weight"][0] if qk else 64
        layers = sum(1 for k in hdr if k.endswith(".norm1.linear.weight"))
        dual = sum(1 for k in hdr if k.endswith(".attn2.to_q.weight"))
        del hdr
        with float64_default():
            model = SD3Transformer2DModel(
                sample_size=pos_max * patch, patch_size=patch, in_channels=C, num_layers=layers,
                attention_head_dim=head_dim, num_attention_heads=H // head_dim, joint_attention_dim=CD,
                caption_projection_dim=H, pooled_projection_dim=PD, out_channels=C, pos_embed_max_size=pos_max,
                dual_attention_layers=tuple(range(dual)), qk_norm="rms_norm" if qk else None)
        if not strict_load(model, ckpt, f"SD3Transformer2DModel {label}"):
            failures += 1
            continue
        torch.manual_seed(args.seed)  # the inputs, whatever building the model drew

        def forward(latent, ts, ctx, pooled):
            return model(hidden_states=latent, encoder_hidden_states=ctx, pooled_projections=pooled, timestep=ts,
                         return_dict=False)[0]

        for B, h, w, T in shapes:
            latent, ts, _, ctx, pooled, G = case_inputs(B, C, h, w, T, CD, PD, t_scale=1000.0)
            failures += not timed_compare(cli, files, ckpt, latent, ts, ctx, pooled, G, forward,
                                          f"SD3Transformer2DModel {label}, B {B} latent {h}x{w} T {T}")
        del model
    return failures


# ------------------------------------------------------------------------------------------ Flux.1
def flux_cases(size):
    """(label, gen options, RoPE axes, latent sizes (B, h, w, T))."""
    if size == "tiny":
        return [("tiny dev", [], (4, 6, 6), TINY_SHAPES), ("tiny schnell", ["--schnell"], (4, 6, 6), TINY_SHAPES[:1])]
    return [("Flux.1 dev width, 1 double + 1 single block", ["--config", "dev", "--double", "1", "--single", "1"],
             (16, 56, 56), ((2, 8, 8, 7),))]


def check_flux(files, cli, size):
    from diffusers import FluxTransformer2DModel
    failures = 0
    for label, opts, axes, shapes in flux_cases(size):
        ckpt = files.path("flux.safetensors")
        gen(cli, ckpt, *opts)
        hdr = st_shapes(ckpt)
        H, CD = hdr["context_embedder.weight"]
        PD = hdr["time_text_embed.text_embedder.linear_1.weight"][1]
        C4 = hdr["x_embedder.weight"][1]
        head_dim = hdr["transformer_blocks.0.attn.norm_q.weight"][0]
        double = sum(1 for k in hdr if k.startswith("transformer_blocks.") and k.endswith(".norm1.linear.weight"))
        single = sum(1 for k in hdr if k.startswith("single_transformer_blocks.") and k.endswith(".norm.linear.weight"))
        guidance = "time_text_embed.guidance_embedder.linear_1.weight" in hdr
        del hdr
        with float64_default():
            model = FluxTransformer2DModel(
                patch_size=1, in_channels=C4, num_layers=double, num_single_layers=single,
                attention_head_dim=head_dim, num_attention_heads=H // head_dim, joint_attention_dim=CD,
                pooled_projection_dim=PD, guidance_embeds=guidance, axes_dims_rope=axes)
        if not strict_load(model, ckpt, f"FluxTransformer2DModel {label}"):
            failures += 1
            continue
        torch.manual_seed(args.seed)  # the inputs, whatever building the model drew
        for B, h, w, T in shapes:
            latent, ts, gs, ctx, pooled, G = case_inputs(B, C4 // 4, h, w, T, CD, PD)
            img_ids, txt_ids = image_ids(h, w), torch.zeros(T, 3, dtype=torch.float64)

            def forward(latent, ts, gs, ctx, pooled):
                out = model(hidden_states=pack(latent), encoder_hidden_states=ctx, pooled_projections=pooled,
                            timestep=ts, img_ids=img_ids, txt_ids=txt_ids, guidance=gs if guidance else None,
                            return_dict=False)[0]
                return unpack(out, h, w)

            failures += not timed_compare(cli, files, ckpt, latent, ts, ctx, pooled, G, forward,
                                          f"FluxTransformer2DModel {label}, B {B} latent {h}x{w} T {T}", guidance=gs)
        del model
    return failures


# ------------------------------------------------------------------------------------------ T5 encoder
def t5_cases(size):
    if size == "tiny":
        return "tiny", [], ((2, 40, False), (2, 40, True), (1, 77, False))
    return "T5-XXL width, 2 layers", ["--config", "xxl", "--layers", "2"], ((2, 40, False), (2, 40, True))


def check_t5(files, cli, size):
    from transformers import T5Config, T5EncoderModel
    path, write, read = files.path, files.write, files.read
    label, opts, shapes = t5_cases(size)
    ckpt = path("t5.safetensors")
    gen(cli, ckpt, *opts)
    hdr = st_shapes(ckpt)
    vocab, D = hdr["shared.weight"]
    heads = hdr["encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"][1]
    inner, d_ff = hdr["encoder.block.0.layer.0.SelfAttention.q.weight"][0], \
        hdr["encoder.block.0.layer.1.DenseReluDense.wi_0.weight"][0]
    layers = sum(1 for k in hdr if k.endswith(".layer.0.layer_norm.weight"))
    del hdr
    try:  # transformers' own switch for its _init_weights (tensor methods, not torch.nn.init)
        from transformers.modeling_utils import no_init_weights
    except ImportError:
        no_init_weights = contextlib.nullcontext
    with float64_default(), no_init_weights():
        model = T5EncoderModel(T5Config(
            vocab_size=vocab, d_model=D, d_kv=inner // heads, d_ff=d_ff, num_layers=layers, num_heads=heads,
            relative_attention_num_buckets=32, relative_attention_max_distance=128, dropout_rate=0.0,
            layer_norm_epsilon=1e-6, feed_forward_proj="gated-gelu", is_encoder_decoder=False, use_cache=False))
        model.to(torch.float64)  # a transformers that takes the dtype from the config rather than torch's default
    if not strict_load(model, ckpt, f"T5EncoderModel {label}"):
        return 1
    torch.manual_seed(args.seed)  # the inputs, whatever building the model drew
    failures = 0
    for B, T, masked in shapes:
        t = time.time()
        tokens, lengths = case_tokens(B, T, vocab, masked)
        mask = (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]).to(torch.int64) if masked else None
        # every position an override row: d(rows) is the gradient to inputs_embeds
        rows = torch.randn(B * T, D, dtype=torch.float64)
        overrides = torch.tensor([(b, p, b * T + p) for b in range(B) for p in range(T)], dtype=torch.int32)
        G = torch.randn(B, T, D, dtype=torch.float64)
        base = [cli, "run", "--ckpt", ckpt, "--tokens", write("tok", tokens, torch.int32), "--batch", str(B),
                "--seq", str(T)]
        if masked:
            base += ["--lengths", write("len", torch.tensor(lengths, dtype=torch.int32), torch.int32)]
        subprocess.run(base + ["--out", path("out_ids")], check=True)
        subprocess.run(base + ["--rows", write("rows", rows), "--nrows", str(B * T),
                               "--overrides", write("ov", overrides, torch.int32), "--noverrides", str(B * T),
                               "--dout", write("dout", G), "--out", path("out"), "--drows", path("drows")], check=True)
        c_ids = read("out_ids", (B, T, D)).to(torch.float64)
        c_out = read("out", (B, T, D)).to(torch.float64)
        c_d = read("drows", (B * T, D)).to(torch.float64).reshape(B, T, D)
        ref_ids = model(input_ids=tokens.long(), attention_mask=mask).last_hidden_state
        emb = f32(rows).reshape(B, T, D).requires_grad_(True)
        out = model(inputs_embeds=emb, attention_mask=mask).last_hidden_state
        (out * f32(G)).sum().backward()
        ei, ef, eg = rel_err(c_ids, ref_ids), rel_err(c_out, out.detach()), rel_err(c_d, emb.grad)
        ok = ei <= FWD_TOL and ef <= FWD_TOL and eg <= GRAD_TOL
        failures += not ok
        print(f"T5EncoderModel {label}, B {B} T {T} mask {masked}: forward from ids rel err {ei:.3g}, from "
              f"inputs_embeds {ef:.3g}, d(inputs_embeds) {eg:.3g} {'ok' if ok else 'FAIL'}")
        log(f"  ({time.time() - t:.1f}s)")
    return failures


# ------------------------------------------------------------------------------------------ 16-channel VAE
def check_vae(files, build, size):
    """sdt-make-checkpoint's tiny-vae16 (LDM names, as SD3's and Flux's single files carry it) through diffusers'
    own single-file key mapping (convert_ldm_vae_checkpoint, what from_single_file uses) into AutoencoderKL
    (16 latent channels, no quant convs): encode (the posterior's mean and logvar) and decode (the C decoder takes
    latents / scaling + shift first, so diffusers' decode gets that). Forward only: the VAE is frozen in training.
    Tiny only (there is no full-width 16-channel VAE file alone)."""
    if size != "tiny":
        return 0
    from diffusers import AutoencoderKL
    try:
        from diffusers.loaders.single_file_utils import convert_ldm_vae_checkpoint
    except ImportError as e:  # a trimmed diffusers (no pipelines/) whose loaders need them
        print(f"FAIL AutoencoderKL tiny-vae16: diffusers' single-file key mapping does not import ({e})")
        return 1
    io = os.path.join(build, "tests", "parity", "sdt-model-io")
    ckpt = files.path("vae16.safetensors")
    subprocess.run([os.path.join(build, "models", "tools", "sdt-make-checkpoint"), "--config", "tiny-vae16", "--out",
                    ckpt, "--seed", str(args.seed), "--dtype", "f32", "--perturb-all"], check=True,
                   stdout=subprocess.DEVNULL)
    cfg = dict(line.partition(" ")[::2] for line in subprocess.run(
        [io, "config", "--ckpt", ckpt], check=True, capture_output=True, text=True).stdout.splitlines())
    levels, z = int(cfg["vae_levels"]), int(cfg["vae_z"])
    scaling, shift = float(cfg["vae_scaling"]), float(cfg["vae_shift"])
    config = dict(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * levels,
                  up_block_types=("UpDecoderBlock2D",) * levels,
                  block_out_channels=tuple(int(cfg["vae_ch"]) * int(m) for m in cfg["vae_ch_mult"].split()),
                  layers_per_block=int(cfg["vae_res_blocks"]), latent_channels=z,
                  norm_num_groups=int(cfg["vae_groups"]),
                  scaling_factor=scaling, shift_factor=shift, use_quant_conv=cfg["vae_quant_conv"] == "1",
                  use_post_quant_conv=cfg["vae_quant_conv"] == "1")
    W = st_read(ckpt)
    converted = convert_ldm_vae_checkpoint(W, config)
    label = "AutoencoderKL tiny-vae16"
    if len(converted) != len(W):
        print(f"FAIL {label}: diffusers' convert_ldm_vae_checkpoint kept {len(converted)} of the file's {len(W)} "
              f"tensors")
        return 1
    with float64_default():
        vae = AutoencoderKL(**config)
    own = set(vae.state_dict())
    try:
        vae.load_state_dict(converted, strict=True)
    except RuntimeError:
        print(f"FAIL {label}: load_state_dict(strict=True): missing {sorted(own - set(converted))[:8]}, "
              f"unexpected {sorted(set(converted) - own)[:8]}")
        return 1
    vae.requires_grad_(False).eval()
    torch.manual_seed(args.seed)  # the inputs, whatever building the model drew
    log(f"{label}: {len(W)} tensors, diffusers' key mapping, strict load ok")
    f, B, H, Wd = 2 ** (levels - 1), 2, 32, 32 + 2 ** (levels - 1)  # non-square on purpose
    image = f32(torch.rand(B, 3, H, Wd, dtype=torch.float64) * 2 - 1)
    subprocess.run([io, "vae-encode", "--ckpt", ckpt, "--image", files.write("img", image), "--batch", str(B),
                    "--height", str(H), "--width", str(Wd), "--mean", files.path("mean"),
                    "--logvar", files.path("logvar")], check=True)
    shape = (B, z, H // f, Wd // f)
    post = vae.encode(image).latent_dist
    em = rel_err(files.read64("mean", shape), post.mean)
    el = rel_err(files.read64("logvar", shape), post.logvar)
    latents = f32(torch.randn(B, z, H // f, Wd // f + 1, dtype=torch.float64))
    subprocess.run([io, "vae-decode", "--ckpt", ckpt, "--latents", files.write("lat", latents), "--batch", str(B),
                    "--height", str(H // f), "--width", str(Wd // f + 1), "--out", files.path("dec")], check=True)
    ed = rel_err(files.read64("dec", (B, 3, H, Wd + f)), vae.decode(latents / scaling + shift).sample)
    ok = em <= FWD_TOL and el <= FWD_TOL and ed <= FWD_TOL
    print(f"{label}, B {B} image {H}x{Wd}: encoder mean rel err {em:.3g}, logvar {el:.3g}, decoder {ed:.3g} "
          f"{'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


def main():
    torch.manual_seed(args.seed)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    need = {"mmdit": "diffusers", "flux": "diffusers", "t5": "transformers", "vae": "diffusers"}
    checks = {"mmdit": check_mmdit, "flux": check_flux, "t5": check_t5, "vae": check_vae}
    exes = {"mmdit": "sdt-mmdit-io", "flux": "sdt-flux-io", "t5": "sdt-t5-io"}
    failures, ran, skipped = 0, 0, []
    for lib in sorted({need[f] for f in args.families}):
        why = importable(lib)
        if why:
            fams = [f for f in args.families if need[f] == lib]
            print(f"library_parity: {lib} does not import ({why}): skipping {', '.join(fams)}")
            skipped += fams
        else:
            mod = sys.modules[lib]
            log(f"{lib} {getattr(mod, '__version__', '?')} from {os.path.dirname(mod.__file__)}")
    log(f"torch {torch.__version__}, seed {args.seed}")
    with RawFiles.temporary() as files:
        for size in args.sizes:
            for fam in args.families:
                if importable(need[fam]):
                    continue
                where = os.path.join(args.build, "tests", "parity", exes[fam]) if fam in exes else args.build
                failures += checks[fam](files, where, size)
                ran += 1
    if not ran:
        print("library_parity: skipped (no family's library imports)")
        return SKIP
    print("library_parity: " + ("all passed" if failures == 0 else f"{failures} failed")
          + (f" (skipped: {', '.join(skipped)})" if skipped else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
