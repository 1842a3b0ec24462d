"""dit_reference.py - what the checks of the diffusion transformers against a reference share (mmdit_parity.py for
SD3's MMDiT and flux_parity.py for Flux.1 against float64 references written here, library_parity.py against
diffusers' own classes): diffusers' building blocks written in plain torch (a linear layer by name, the sinusoidal
timestep embedding, tanh GELU, LayerNorm without affine, RMSNorm), the Flux pipeline's latent packing and image
ids, one case's random inputs, and one case run through the C CLI and compared with the reference: forward, and
the gradients of sum(G * output) to the context and the pooled projection. Import after parity_cli.torch_or_skip
(it imports torch)."""
import math
import subprocess

import torch
import torch.nn.functional as F

from parity_cli import rel_err


def lin(W, name, x):
    return x @ W[name + ".weight"].T + W[name + ".bias"]


def timestep_embedding(t, dim=256):
    """diffusers get_timestep_embedding(flip_sin_to_cos=True, downscale_freq_shift=0)."""
    half = dim // 2
    exponent = -math.log(10000) * torch.arange(half, dtype=torch.float64) / half
    emb = t[:, None].to(torch.float64) * torch.exp(exponent)[None, :]
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)
    return torch.cat([emb[:, half:], emb[:, :half]], dim=-1)


def gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


def layer_norm(x):
    return F.layer_norm(x, (x.shape[-1],), eps=1e-6)


def rms_norm(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def f32(t):
    """t rounded to float32 and back: what the C side reads."""
    return t.to(torch.float32).to(torch.float64)


def pack(latents):
    """The Flux pipeline's _pack_latents: [B, C, h, w] -> [B, h/2 * w/2, 4C]."""
    B, C, h, w = latents.shape
    latents = latents.view(B, C, h // 2, 2, w // 2, 2).permute(0, 2, 4, 1, 3, 5)
    return latents.reshape(B, (h // 2) * (w // 2), C * 4)


def unpack(x, h, w):
    """The Flux pipeline's _unpack_latents."""
    B, N, D = x.shape
    x = x.view(B, h // 2, w // 2, D // 4, 2, 2).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(B, D // 4, h, w)


def image_ids(h, w):
    """The Flux pipeline's _prepare_latent_image_ids for a [h, w] latent (2D: one set for the batch)."""
    ids = torch.zeros(h // 2, w // 2, 3, dtype=torch.float64)
    ids[..., 1] = ids[..., 1] + torch.arange(h // 2, dtype=torch.float64)[:, None]
    ids[..., 2] = ids[..., 2] + torch.arange(w // 2, dtype=torch.float64)[None, :]
    return ids.reshape(-1, 3)


# The tiny cases' sizes (B, latent h, latent w, context tokens): square, and not square with another token count.
TINY_SHAPES = ((2, 8, 8, 5), (2, 4, 10, 7))


def case_inputs(B, C, h, w, T, CD, PD, t_scale=1.0):
    """One case's inputs in float64: latent [B, C, h, w], context [B, T, CD], pooled [B, PD] and G (the output's
    weights in the loss, like the latent) drawn from torch's generator in that order; timesteps t_scale * (b + 1) /
    (B + 1) (Flux's in [0, 1], SD3's t_scale 1000) and Flux dev's guidance (3.5, 1.5, ...) drawn from nothing.
    Returns latent, ts, gs, ctx, pooled, G."""
    latent = torch.randn(B, C, h, w, dtype=torch.float64)
    ts = torch.tensor([t_scale * (b + 1) / (B + 1) for b in range(B)], dtype=torch.float64)
    gs = torch.tensor([3.5, 1.5][:B], dtype=torch.float64)
    ctx, pooled = torch.randn(B, T, CD, dtype=torch.float64), torch.randn(B, PD, dtype=torch.float64)
    G = torch.randn(B, C, h, w, dtype=torch.float64)
    return latent, ts, gs, ctx, pooled, G


def run_and_compare(cli, files, ckpt, latent, ts, ctx, pooled, G, forward, label, guidance=None, fwd_tol=1e-5,
                    grad_tol=2e-5):
    """One case: the C CLI's `run` on ckpt with these inputs (float64; guidance for Flux dev, else None) against
    forward(latent, ts, [guidance,] ctx, pooled) on their float32 roundings. Prints label's line; True when the
    forward is within fwd_tol and both gradients within grad_tol (relative to the largest magnitude)."""
    path, write, read = files.path, files.write, files.read64
    B, C, h, w = latent.shape
    T, CD = ctx.shape[1], ctx.shape[2]
    PD = pooled.shape[1]
    cmd = [cli, "run", "--ckpt", ckpt, "--batch", str(B), "--height", str(h), "--width", str(w),
           "--ctx-tokens", str(T), "--latent", write("lat", latent), "--timesteps", write("ts", ts)]
    if guidance is not None:
        cmd += ["--guidance", write("gs", guidance)]
    cmd += ["--context", write("ctx", ctx), "--pooled", write("pool", pooled), "--dout", write("dout", G),
            "--out", path("out"), "--dcontext", path("dctx"), "--dpooled", path("dpool")]
    subprocess.run(cmd, check=True)
    c_out, c_dctx, c_dpool = read("out", (B, C, h, w)), read("dctx", (B, T, CD)), read("dpool", (B, PD))
    ctx_ref, pool_ref = f32(ctx).requires_grad_(True), f32(pooled).requires_grad_(True)
    conditioning = (f32(guidance),) if guidance is not None else ()
    out = forward(f32(latent), f32(ts), *conditioning, ctx_ref, pool_ref)
    (out * f32(G)).sum().backward()
    ef, ec = rel_err(c_out, out.detach()), rel_err(c_dctx, ctx_ref.grad)
    ep = rel_err(c_dpool, pool_ref.grad)
    ok = ef <= fwd_tol and ec <= grad_tol and ep <= grad_tol
    print(f"{label}: forward rel err {ef:.3g}, d(context) {ec:.3g}, d(pooled) {ep:.3g} {'ok' if ok else 'FAIL'}")
    return ok

