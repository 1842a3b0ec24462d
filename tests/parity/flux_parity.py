#!/usr/bin/env python3
"""flux_parity.py - the C Flux.1 transformer against a float64 PyTorch Flux written here.

diffusers is not installed with Debian's torch, so the reference is diffusers' FluxTransformer2DModel written out
in plain torch from its published code (transformer_flux.py forward, FluxTransformerBlock,
FluxSingleTransformerBlock, FluxAttnProcessor: [text, image] tokens, RMSNorm on q and k per head, then
apply_rotary_emb(use_real=True, use_real_unbind_dim=-1); embeddings.py FluxPosEmbed / get_1d_rotary_pos_embed
(repeat_interleave_real, float64), CombinedTimestepGuidanceTextProjEmbeddings with Timesteps(256,
flip_sin_to_cos=True, shift 0) of 1000 t and 1000 guidance; normalization.py AdaLayerNormZero,
AdaLayerNormZeroSingle, AdaLayerNormContinuous (scale, shift); the pipeline's _pack_latents /
_prepare_latent_image_ids), in float64. A tiny random Flux (sdt-flux-io gen: every norm and bias perturbed), dev
(guidance) and schnell, two latent sizes, batch 2: forward, and the gradients of sum(G * output) with respect to
the context and the pooled projection. The C side runs through sdt-flux-io (tests/parity/flux_cli.c) on the CPU
backend in f32. Thresholds: relative error <= 1e-5 forward, <= 2e-5 gradients. Exits 77 (skip) without torch.

  python3 tests/parity/flux_parity.py --cli build/tests/parity/sdt-flux-io [--seed N]
"""
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity_cli import RawFiles, cli_args, finish, torch_or_skip  # noqa: E402

torch = torch_or_skip("flux_parity")
import torch.nn.functional as F  # noqa: E402
from dit_reference import (TINY_SHAPES, case_inputs, gelu_tanh, image_ids, layer_norm, lin, pack,  # noqa: E402
                           rms_norm, run_and_compare, timestep_embedding, unpack)
from st_codec import st_read  # noqa: E402


def rope_tables(ids, axes, theta=10000.0):
    """FluxPosEmbed: per axis get_1d_rotary_pos_embed(repeat_interleave_real=True, use_real=True), concatenated."""
    cos, sin = [], []
    for i, d in enumerate(axes):
        freqs = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64)[: d // 2] / d))
        f = torch.outer(ids[:, i].to(torch.float64), freqs)
        cos.append(f.cos().repeat_interleave(2, dim=1))
        sin.append(f.sin().repeat_interleave(2, dim=1))
    return torch.cat(cos, -1), torch.cat(sin, -1)


def apply_rotary_emb(x, cos, sin):
    """diffusers apply_rotary_emb(use_real=True, use_real_unbind_dim=-1); x [B, heads, S, D]."""
    x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
    x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
    return x * cos[None, None] + x_rotated * sin[None, None]


def flux_forward(W, latent, timestep, guidance, context, pooled, heads, axes):
    B, C, h, w = latent.shape
    x = lin(W, "x_embedder", pack(latent))
    Hd = x.shape[-1]

    def mlp_embed(name, v):
        return lin(W, name + ".linear_2", F.silu(lin(W, name + ".linear_1", v)))

    temb = mlp_embed("time_text_embed.timestep_embedder", timestep_embedding(timestep * 1000))
    if "time_text_embed.guidance_embedder.linear_1.weight" in W:
        temb = temb + mlp_embed("time_text_embed.guidance_embedder", timestep_embedding(guidance * 1000))
    temb = temb + mlp_embed("time_text_embed.text_embedder", pooled)
    c = lin(W, "context_embedder", context)
    T = c.shape[1]
    ids = torch.cat([torch.zeros(T, 3, dtype=torch.float64), image_ids(h, w)], 0)
    cos, sin = rope_tables(ids, axes)

    def split(t):
        return t.view(B, -1, heads, Hd // heads).transpose(1, 2)

    def attend(q, k, v):
        q, k = apply_rotary_emb(q, cos, sin), apply_rotary_emb(k, cos, sin)
        o = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(Hd // heads), -1) @ v
        return o.transpose(1, 2).reshape(B, -1, Hd)

    l = 0
    while f"transformer_blocks.{l}.norm1.linear.weight" in W:
        p = f"transformer_blocks.{l}."
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = \
            lin(W, p + "norm1.linear", F.silu(temb)).chunk(6, dim=1)
        c_shift_msa, c_scale_msa, c_gate_msa, c_shift_mlp, c_scale_mlp, c_gate_mlp = \
            lin(W, p + "norm1_context.linear", F.silu(temb)).chunk(6, dim=1)
        nx = layer_norm(x) * (1 + scale_msa[:, None]) + shift_msa[:, None]
        nc = layer_norm(c) * (1 + c_scale_msa[:, None]) + c_shift_msa[:, None]
        q, k, v = (split(lin(W, p + "attn." + n, nx)) for n in ("to_q", "to_k", "to_v"))
        cq, ck, cv = (split(lin(W, p + "attn." + n, nc)) for n in ("add_q_proj", "add_k_proj", "add_v_proj"))
        q, k = rms_norm(q, W[p + "attn.norm_q.weight"]), rms_norm(k, W[p + "attn.norm_k.weight"])
        cq, ck = rms_norm(cq, W[p + "attn.norm_added_q.weight"]), rms_norm(ck, W[p + "attn.norm_added_k.weight"])
        o = attend(torch.cat([cq, q], 2), torch.cat([ck, k], 2), torch.cat([cv, v], 2))
        oc, ox = o[:, :T], o[:, T:]
        x = x + gate_msa[:, None] * lin(W, p + "attn.to_out.0", ox)
        n2 = layer_norm(x) * (1 + scale_mlp[:, None]) + shift_mlp[:, None]
        x = x + gate_mlp[:, None] * lin(W, p + "ff.net.2", gelu_tanh(lin(W, p + "ff.net.0.proj", n2)))
        c = c + c_gate_msa[:, None] * lin(W, p + "attn.to_add_out", oc)
        n2c = layer_norm(c) * (1 + c_scale_mlp[:, None]) + c_shift_mlp[:, None]
        c = c + c_gate_mlp[:, None] * lin(W, p + "ff_context.net.2", gelu_tanh(lin(W, p + "ff_context.net.0.proj", n2c)))
        l += 1
    s = torch.cat([c, x], 1)
    l = 0
    while f"single_transformer_blocks.{l}.norm.linear.weight" in W:
        p = f"single_transformer_blocks.{l}."
        shift, scale, gate = lin(W, p + "norm.linear", F.silu(temb)).chunk(3, dim=1)
        n = layer_norm(s) * (1 + scale[:, None]) + shift[:, None]
        mlp = gelu_tanh(lin(W, p + "proj_mlp", n))
        q, k, v = (split(lin(W, p + "attn." + m, n)) for m in ("to_q", "to_k", "to_v"))
        q, k = rms_norm(q, W[p + "attn.norm_q.weight"]), rms_norm(k, W[p + "attn.norm_k.weight"])
        s = s + gate[:, None] * lin(W, p + "proj_out", torch.cat([attend(q, k, v), mlp], 2))
        l += 1
    x = s[:, T:]
    scale, shift = lin(W, "norm_out.linear", F.silu(temb)).chunk(2, dim=1)
    x = layer_norm(x) * (1 + scale[:, None]) + shift[:, None]
    return unpack(lin(W, "proj_out", x), h, w)


def main():
    args = cli_args()
    failures = 0
    with RawFiles.temporary() as files:
        for schnell in (False, True):
            ckpt = files.path(f"flux{schnell}.safetensors")
            subprocess.run([args.cli, "gen", "--out", ckpt, "--seed", str(args.seed)]
                           + (["--schnell"] if schnell else []), check=True)
            W = {k: v.to(torch.float64) for k, v in st_read(ckpt).items()}
            Hd, CD = W["context_embedder.weight"].shape
            PD = W["time_text_embed.text_embedder.linear_1.weight"].shape[1]
            C = W["x_embedder.weight"].shape[1] // 4
            D = W["transformer_blocks.0.attn.norm_q.weight"].shape[0]
            heads, axes = Hd // D, (4, 6, 6)  # flux_config_tiny
            for B, h, w, T in TINY_SHAPES:
                latent, ts, gs, ctx, pooled, G = case_inputs(B, C, h, w, T, CD, PD)
                forward = lambda *x: flux_forward(W, *x, heads, axes)  # noqa: E731
                label = f"{'schnell' if schnell else 'dev'} B {B} latent {h}x{w} T {T}"
                failures += not run_and_compare(args.cli, files, ckpt, latent, ts, ctx, pooled, G, forward, label,
                                                guidance=gs)
    return finish("flux_parity", failures)


if __name__ == "__main__":
    sys.exit(main())
