"""dit_reference.py - what the float64 references of the diffusion transformers share (mmdit_parity.py for SD3's
MMDiT, flux_parity.py for Flux.1): diffusers' building blocks written in plain torch (a linear layer by name, the
sinusoidal timestep embedding, tanh GELU, LayerNorm without affine, RMSNorm), and one case run through the C CLI
and compared with the reference: forward, and the gradients of sum(G * output) to the context and the pooled
projection. Import after parity_cli.torch_or_skip (it imports torch)."""
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

