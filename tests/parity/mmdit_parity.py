#!/usr/bin/env python3
"""mmdit_parity.py - the C SD3 MMDiT against a float64 PyTorch MMDiT written here.

diffusers is not installed with Debian's torch, so the reference is diffusers' SD3Transformer2DModel written
out in plain torch from its published code (transformer_sd3.py forward; embeddings.py PatchEmbed with
cropped_pos_embed, get_timestep_embedding [cos, sin], CombinedTimestepTextProjEmbeddings; normalization.py
AdaLayerNormZero and AdaLayerNormContinuous (scale, shift); attention.py JointTransformerBlock with
context_pre_only in the last block, FeedForward gelu-approximate; attention_processor.py JointAttnProcessor2_0:
[image, text] tokens, RMSNorm on q and k per head), in float64. A tiny random MMDiT (sdt-mmdit-io gen: every
norm and bias perturbed), with and without QK norm, with and without SD3.5 Medium's MMDiT-X blocks (attn2,
SD35AdaLayerNormZeroX's 9 chunks), latents of two sizes (the position table cropped at the
centre), batch 2: forward, and the gradients of sum(G * output) with respect to the context
(encoder_hidden_states) and the pooled projection. The C side runs through sdt-mmdit-io
(tests/parity/mmdit_cli.c) on the CPU backend in f32. Thresholds: relative error (max |a - b| / max |b|)
<= 1e-5 forward, <= 2e-5 gradients (f32 against float64; measured ~1e-6). Exits 77 (skip) without torch.

  python3 tests/parity/mmdit_parity.py --cli build/tests/parity/sdt-mmdit-io [--seed N]
"""
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity_cli import RawFiles, cli_args, finish, torch_or_skip  # noqa: E402

torch = torch_or_skip("mmdit_parity")
import torch.nn.functional as F  # noqa: E402
from dit_reference import (TINY_SHAPES, case_inputs, gelu_tanh, layer_norm, lin, rms_norm,  # noqa: E402
                           run_and_compare, timestep_embedding)
from st_codec import st_read  # noqa: E402 (after the skip: it imports torch)


def mmdit_forward(W, latent, timestep, context, pooled, heads, patch, pos_max):
    B, C, Hh, Ww = latent.shape
    gh, gw = Hh // patch, Ww // patch
    # PatchEmbed
    x = F.conv2d(latent, W["pos_embed.proj.weight"], W["pos_embed.proj.bias"], stride=patch)
    x = x.flatten(2).transpose(1, 2)
    Hd = x.shape[-1]
    top, left = (pos_max - gh) // 2, (pos_max - gw) // 2
    pos = W["pos_embed.pos_embed"].reshape(1, pos_max, pos_max, Hd)[:, top:top + gh, left:left + gw, :]
    x = x + pos.reshape(1, -1, Hd)
    # CombinedTimestepTextProjEmbeddings
    temb = lin(W, "time_text_embed.timestep_embedder.linear_2",
               F.silu(lin(W, "time_text_embed.timestep_embedder.linear_1", timestep_embedding(timestep))))
    temb = temb + lin(W, "time_text_embed.text_embedder.linear_2",
                      F.silu(lin(W, "time_text_embed.text_embedder.linear_1", pooled)))
    c = lin(W, "context_embedder", context)
    layers = 0
    while f"transformer_blocks.{layers}.norm1.linear.weight" in W:
        layers += 1
    qk_norm = "transformer_blocks.0.attn.norm_q.weight" in W
    N = x.shape[1]
    for l in range(layers):
        p = f"transformer_blocks.{l}."
        pre_only = l == layers - 1
        dual = p + "attn2.to_q.weight" in W
        emb = lin(W, p + "norm1.linear", F.silu(temb))
        if dual:  # SD35AdaLayerNormZeroX
            (shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp,
             shift_msa2, scale_msa2, gate_msa2) = emb.chunk(9, dim=1)
            nx2 = layer_norm(x) * (1 + scale_msa2[:, None]) + shift_msa2[:, None]
        else:
            shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = emb.chunk(6, dim=1)
        nx = layer_norm(x) * (1 + scale_msa[:, None]) + shift_msa[:, None]
        if pre_only:
            scale, shift = lin(W, p + "norm1_context.linear", F.silu(temb)).chunk(2, dim=1)
            nc = layer_norm(c) * (1 + scale[:, None]) + shift[:, None]
        else:
            c_shift_msa, c_scale_msa, c_gate_msa, c_shift_mlp, c_scale_mlp, c_gate_mlp = \
                lin(W, p + "norm1_context.linear", F.silu(temb)).chunk(6, dim=1)
            nc = layer_norm(c) * (1 + c_scale_msa[:, None]) + c_shift_msa[:, None]

        def split(t):
            return t.view(B, -1, heads, Hd // heads).transpose(1, 2)

        q, k, v = (split(lin(W, p + "attn." + n, nx)) for n in ("to_q", "to_k", "to_v"))
        cq, ck, cv = (split(lin(W, p + "attn." + n, nc)) for n in ("add_q_proj", "add_k_proj", "add_v_proj"))
        if qk_norm:
            q, k = rms_norm(q, W[p + "attn.norm_q.weight"]), rms_norm(k, W[p + "attn.norm_k.weight"])
            cq, ck = rms_norm(cq, W[p + "attn.norm_added_q.weight"]), rms_norm(ck, W[p + "attn.norm_added_k.weight"])
        q, k, v = torch.cat([q, cq], 2), torch.cat([k, ck], 2), torch.cat([v, cv], 2)
        scores = q @ k.transpose(-1, -2) / math.sqrt(Hd // heads)
        o = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(B, -1, Hd)
        ox, oc = o[:, :N], o[:, N:]
        x = x + gate_msa[:, None] * lin(W, p + "attn.to_out.0", ox)
        if dual:  # attn2: self-attention over the image tokens (AttnProcessor2_0 with the same QK norm)
            q2, k2, v2 = (split(lin(W, p + "attn2." + n, nx2)) for n in ("to_q", "to_k", "to_v"))
            if qk_norm:
                q2, k2 = rms_norm(q2, W[p + "attn2.norm_q.weight"]), rms_norm(k2, W[p + "attn2.norm_k.weight"])
            o2 = torch.softmax(q2 @ k2.transpose(-1, -2) / math.sqrt(Hd // heads), -1) @ v2
            x = x + gate_msa2[:, None] * lin(W, p + "attn2.to_out.0", o2.transpose(1, 2).reshape(B, -1, Hd))
        n2 = layer_norm(x) * (1 + scale_mlp[:, None]) + shift_mlp[:, None]
        x = x + gate_mlp[:, None] * lin(W, p + "ff.net.2", gelu_tanh(lin(W, p + "ff.net.0.proj", n2)))
        if not pre_only:
            c = c + c_gate_msa[:, None] * lin(W, p + "attn.to_add_out", oc)
            n2c = layer_norm(c) * (1 + c_scale_mlp[:, None]) + c_shift_mlp[:, None]
            c = c + c_gate_mlp[:, None] * lin(W, p + "ff_context.net.2",
                                              gelu_tanh(lin(W, p + "ff_context.net.0.proj", n2c)))
    scale, shift = lin(W, "norm_out.linear", F.silu(temb)).chunk(2, dim=1)
    x = layer_norm(x) * (1 + scale[:, None]) + shift[:, None]
    x = lin(W, "proj_out", x)
    x = x.reshape(B, gh, gw, patch, patch, C)
    x = torch.einsum("nhwpqc->nchpwq", x)
    return x.reshape(B, C, gh * patch, gw * patch)


def main():
    args = cli_args()
    failures = 0
    with RawFiles.temporary() as files:
        for qk, dual in ((True, 0), (False, 0), (True, 2), (False, 1)):
            ckpt = files.path(f"mmdit{qk}{dual}.safetensors")
            subprocess.run([args.cli, "gen", "--out", ckpt, "--seed", str(args.seed), "--dual", str(dual)]
                           + ([] if qk else ["--no-qk-norm"]), check=True)
            W = {k: v.to(torch.float64) for k, v in st_read(ckpt).items()}
            Hd, CD = W["context_embedder.weight"].shape
            PD = W["time_text_embed.text_embedder.linear_1.weight"].shape[1]
            C, patch = W["pos_embed.proj.weight"].shape[1], W["pos_embed.proj.weight"].shape[2]
            pos_max = int(round(math.sqrt(W["pos_embed.pos_embed"].shape[1])))
            heads = Hd // (W["transformer_blocks.0.attn.norm_q.weight"].shape[0] if qk else 64)
            for B, h, w, T in TINY_SHAPES:
                latent, ts, _, ctx, pooled, G = case_inputs(B, C, h, w, T, CD, PD, t_scale=1000.0)
                forward = lambda *x: mmdit_forward(W, *x, heads, patch, pos_max)  # noqa: E731
                label = f"qk_norm {qk} MMDiT-X blocks {dual} B {B} latent {h}x{w} T {T}"
                failures += not run_and_compare(args.cli, files, ckpt, latent, ts, ctx, pooled, G, forward, label)
    return finish("mmdit_parity", failures)


if __name__ == "__main__":
    sys.exit(main())
