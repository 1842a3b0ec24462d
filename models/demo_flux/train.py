#!/usr/bin/env python3
"""train.py - trains the Flux demo model: Flux.1's architecture (schnell-like: no guidance embedder) at a small
size, with its two text encoders (CLIP-L's pooled output, a T5 v1.1 encoder) and a 16-channel VAE, on the demo
world (host-sim/demo/world.h), with the held-out yellow star as models/demo_model/ holds it out. It writes the
files people have for Flux, in the names sdtrain's loaders read:

  transformer.safetensors  diffusers' FluxTransformer2DModel names at the top (models/networks/diffusion/flux.h)
  clip_l.safetensors       transformers' CLIPTextModel names (text_model.*), the demo's CLIP tokenizer (1000 ids)
  t5xxl.safetensors        transformers' T5EncoderModel names (shared.weight, encoder.block.N...)
  ae.safetensors           LDM AutoencoderKL names (encoder.*, decoder.*; no quant convs), Flux's scaling 0.3611
                           and shift 0.1159
  t5_tokenizer/tokenizer.json  a SentencePiece unigram vocabulary (transformers' layout) of the demo's words
  clip_tokenizer/          the demo's CLIP tokenizer (vocab.json, merges.txt), copied from --tokenizer

in f16, plus samples.png, loss.png, vae_recon.png, world.png and train_log.json. Stages, each a share of --minutes:
  1. data: sdt-world-dump draws --images scenes (64x64) with captions;
  2. VAE: a plain autoencoder (L1 + MSE), then its mean latents are rescaled in encoder.conv_out so that
     (z - 0.1159) * 0.3611 has zero mean and unit variance, the log-variance rows pinned at -20, and the decoder
     trained on alone for the rest of its share (so it decodes exactly the shipped encoder's latents);
  3. transformer + both text encoders together: rectified flow (x_t = (1 - t) x0 + t noise, velocity target
     noise - x0, t logit-normal shifted by Flux's resolution shift for 64 image tokens), 10% captions dropped
     (classifier-free guidance), AdamW, EMA weights (exported).

The modules are written here in plain torch to the C implementation's math (flux.h, t5_encoder.h, flux_text.h;
CLIP and the VAE are the parity references tests/parity/clip_reference.py and ldm_vae.py). --parity proves it:
it writes tiny random files with this script's export, runs them through sdtrain's loaders and forward passes
(tests/parity/flux_demo_cli.c) and compares in float64 (and the T5 tokenizer's ids against sdtrain's).

    python3 models/demo_flux/train.py --world-dump build/host-sim/demo-tools/sdt-world-dump --out OUT \\
        [--minutes 9] [--seed 0] [--device cuda]
    python3 models/demo_flux/train.py --world-dump ... --out /tmp/smoke --tiny --steps 5     # a CPU check
    python3 models/demo_flux/train.py --parity --cli build/tests/parity/sdt-flux-demo-io     # exits 77 w/o torch
"""
import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:  # the parity check skips where torch is missing (CI's plain images)
    print("train.py: torch and numpy are needed; skipping")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "parity"))
sys.path.insert(0, os.path.join(ROOT, "models", "demo_model"))
from clip_reference import ClipTextModel  # noqa: E402
import demo_common as sd  # noqa: E402  (the demo world's data, batching, pictures and EMA step: the SD demo's too)
from demo_common import log  # noqa: E402
from ldm_vae import AutoencoderKL  # noqa: E402
from png_util import line_plot_png, write_png  # noqa: E402


IMAGE = sd.IMAGE
CLIP_TOKENS = sd.TOKENS
T5_LEN = 32          # the T5 sequence length trained with; give sdtrain t5_max_length 32 (--t5-max-length 32)
SCALING, SHIFT = 0.3611, 0.1159  # Flux.1's VAE latent scaling and shift (vae_config_flux)
LOGVAR = -20.0
SIZES = {
    "full": dict(clip=dict(vocab=1000, width=128, layers=2, heads=2, mlp=512),
                 t5=dict(d_model=128, layers=2, heads=2, d_kv=64, d_ff=256),
                 vae=dict(ch=32, mult=[1, 2, 2], res_blocks=1, z=16),
                 flux=dict(double=2, single=2, heads=3, head_dim=64, mlp_ratio=4)),
    # --tiny: the CPU smoke run and the parity check (heads = width / 64 rounded up, as sdtrain detects CLIP's)
    "tiny": dict(clip=dict(vocab=1000, width=32, layers=2, heads=1, mlp=64),
                 t5=dict(d_model=32, layers=2, heads=2, d_kv=8, d_ff=48),
                 vae=dict(ch=32, mult=[1, 2, 2], res_blocks=1, z=16),
                 flux=dict(double=2, single=2, heads=2, head_dim=16, mlp_ratio=4)),
}


def rope_axes(head_dim):
    """flux_config_detect's axes (the file does not store them): Flux's (16, 56, 56) at 128, else the two spatial
    axes 2 floor(7 head_dim / 32) each and the rest to the first."""
    spatial = 56 if head_dim == 128 else 2 * (7 * head_dim // 32)
    return (head_dim - 2 * spatial, spatial, spatial)


def resolution_shift(image_tokens):
    """Flux's resolution-dependent shift (diffusers calculate_shift: 256 tokens -> 0.5, 4096 -> 1.15), exp(mu)."""
    mu = 0.5 + (image_tokens - 256) * (1.15 - 0.5) / (4096 - 256)
    return math.exp(mu)


def shift_sigma(t, shift):
    return shift * t / (1 + (shift - 1) * t)


# ---------------------------------------------------------------- the T5 tokenizer (SentencePiece unigram)

WORD_SCORE, CHAR_SCORE, SPACE_SCORE = -3.0, -10.0, -9.0
SPIECE = "\u2581"


class T5Tokens:
    """A SentencePiece unigram vocabulary of whole words ('▁circle') and single characters, in transformers'
    tokenizer.json layout (models/tokenizer/sentencepiece.h reads it): <pad> 0, </s> 1, <unk> 2. Encoding is
    SentencePiece's: whitespace collapsed, '▁' before each word, per word the Viterbi path of highest total
    score (a word piece beats its characters), the text's ids cut to length - 1, </s>, <pad> to length."""

    def __init__(self, words):
        pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), (SPIECE, SPACE_SCORE)]
        pieces += [(SPIECE + w, WORD_SCORE) for w in sorted(words)]
        pieces += [(chr(c), CHAR_SCORE) for c in range(0x21, 0x7F)]
        self.pieces = pieces
        self.ids = {p: i for i, (p, _) in enumerate(pieces)}
        self.score = {p: s for p, s in pieces}
        self.longest = max(len(p) for p, _ in pieces)
        self.cache = {}

    @classmethod
    def load(cls, path):
        with open(path, encoding="utf-8") as f:
            vocab = json.load(f)["model"]["vocab"]
        self = cls([])
        self.pieces = [(p, s) for p, s in vocab]
        self.ids = {p: i for i, (p, _) in enumerate(self.pieces)}
        self.score = {p: s for p, s in self.pieces}
        self.longest = max(len(p) for p, _ in self.pieces)
        return self

    def save(self, folder):
        os.makedirs(folder, exist_ok=True)
        doc = {"version": "1.0",
               "added_tokens": [{"id": i, "content": p, "single_word": False, "lstrip": False, "rstrip": False,
                                 "normalized": False, "special": True} for i, p in enumerate(("<pad>", "</s>",
                                                                                                "<unk>"))],
               "normalizer": None,
               "pre_tokenizer": {"type": "Metaspace", "replacement": SPIECE, "add_prefix_space": True},
               "model": {"type": "Unigram", "unk_id": 2, "vocab": [[p, s] for p, s in self.pieces],
                         "byte_fallback": False}}
        with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, indent=1)

    def _word(self, word):
        n = len(word)
        best = [(-math.inf, -1, None)] * (n + 1)
        best[0] = (0.0, -1, None)
        for end in range(1, n + 1):
            for start in range(max(0, end - self.longest), end):
                piece = word[start:end]
                if piece in self.ids and piece not in ("<pad>", "</s>", "<unk>") and best[start][0] > -math.inf:
                    s = best[start][0] + self.score[piece]
                    if s > best[end][0]:
                        best[end] = (s, start, piece)
            if best[end][0] == -math.inf:  # no piece ends here: the character is unknown
                best[end] = (best[end - 1][0] + CHAR_SCORE - 10.0, end - 1, None)
        out, end = [], n
        while end > 0:
            _, start, piece = best[end]
            out.append(self.ids[piece] if piece is not None else 2)
            end = start
        out.reverse()
        fused = [i for k, i in enumerate(out) if not (i == 2 and k > 0 and out[k - 1] == 2)]
        return fused

    def encode(self, text, length=T5_LEN):
        key = (text, length)
        if key not in self.cache:
            ids = [i for w in text.split() for i in self._word(SPIECE + w)][:length - 1] + [1]
            self.cache[key] = ids + [0] * (length - len(ids))
        return self.cache[key]

    def __len__(self):
        return len(self.pieces)


def caption_words(captions):
    return {w for c in captions for w in c.split()} | {w.rstrip(",") for c in captions for w in c.split()}


# ---------------------------------------------------------------- T5 v1.1 encoder (t5_encoder.h)

def t5_buckets(T, num_buckets=32, max_distance=128, device=None):
    """transformers' T5Attention._relative_position_bucket, bidirectional, of key - query."""
    rel = torch.arange(T, device=device)[None, :] - torch.arange(T, device=device)[:, None]
    half = num_buckets // 2
    ret = (rel > 0).long() * half
    n = rel.abs()
    max_exact = half // 2
    large = max_exact + (torch.log(n.float().clamp(min=1) / max_exact) / math.log(max_distance / max_exact)
                         * (half - max_exact)).long()
    large = torch.clamp(large, max=half - 1)
    return ret + torch.where(n < max_exact, n, large)


class T5RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x):
        var = x.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (x.float() * torch.rsqrt(var + self.eps)).to(x.dtype)


class T5Block(nn.Module):
    def __init__(self, d, heads, d_kv, d_ff, has_bias):
        super().__init__()
        inner = heads * d_kv
        self.layer = nn.ModuleList([nn.Module(), nn.Module()])
        a, f = self.layer
        a.layer_norm = T5RMSNorm(d)
        a.SelfAttention = nn.Module()
        sa = a.SelfAttention
        sa.q, sa.k, sa.v = (nn.Linear(d, inner, bias=False) for _ in range(3))
        sa.o = nn.Linear(inner, d, bias=False)
        if has_bias:
            sa.relative_attention_bias = nn.Embedding(32, heads)
        f.layer_norm = T5RMSNorm(d)
        f.DenseReluDense = nn.Module()
        ff = f.DenseReluDense
        ff.wi_0, ff.wi_1 = nn.Linear(d, d_ff, bias=False), nn.Linear(d, d_ff, bias=False)
        ff.wo = nn.Linear(d_ff, d, bias=False)
        self.heads, self.d_kv = heads, d_kv

    def forward(self, h, bias):
        a, f = self.layer
        B, T, _ = h.shape
        n = a.layer_norm(h)
        q, k, v = (m(n).view(B, T, self.heads, self.d_kv).transpose(1, 2)
                   for m in (a.SelfAttention.q, a.SelfAttention.k, a.SelfAttention.v))
        scores = q @ k.transpose(-1, -2) + bias  # not scaled: T5's init folds 1/sqrt(d_kv) in
        o = (torch.softmax(scores.float(), -1).to(v.dtype) @ v).transpose(1, 2).reshape(B, T, -1)
        h = h + a.SelfAttention.o(o)
        n = f.layer_norm(h)
        ff = f.DenseReluDense
        return h + ff.wo(F.gelu(ff.wi_0(n), approximate="tanh") * ff.wi_1(n))


class T5Encoder(nn.Module):
    """transformers' T5EncoderModel names: shared.weight, encoder.block.N.layer.{0,1}..., encoder.final_layer_norm;
    no mask (diffusers runs T5 unmasked), relative position bias from block 0 shared by all."""

    def __init__(self, vocab, d_model, layers, heads, d_kv, d_ff):
        super().__init__()
        self.shared = nn.Embedding(vocab, d_model)
        self.encoder = nn.Module()
        self.encoder.block = nn.ModuleList(T5Block(d_model, heads, d_kv, d_ff, i == 0) for i in range(layers))
        self.encoder.final_layer_norm = T5RMSNorm(d_model)
        nn.init.normal_(self.shared.weight, std=1.0)
        for blk in self.encoder.block:  # T5's init scales (t5_params)
            sa, ff = blk.layer[0].SelfAttention, blk.layer[1].DenseReluDense
            nn.init.normal_(sa.q.weight, std=(d_model * d_kv) ** -0.5)
            for m in (sa.k, sa.v, ff.wi_0, ff.wi_1):
                nn.init.normal_(m.weight, std=d_model ** -0.5)
            nn.init.normal_(sa.o.weight, std=(heads * d_kv) ** -0.5)
            nn.init.normal_(ff.wo.weight, std=d_ff ** -0.5)

    def forward(self, ids):
        T = ids.shape[1]
        rel = self.encoder.block[0].layer[0].SelfAttention.relative_attention_bias
        bias = rel(t5_buckets(T, device=ids.device)).permute(2, 0, 1)[None]
        h = self.shared(ids)
        for blk in self.encoder.block:
            h = blk(h, bias.to(h.dtype))
        return self.encoder.final_layer_norm(h)


# ---------------------------------------------------------------- CLIP-L (flux_text.h: pooler_output only)

class ClipL(ClipTextModel):
    """The parity reference's CLIP text model; Flux reads its pooled output: the final layer norm at the end
    token (the first largest id, as transformers and sdtrain pick it)."""

    def __init__(self, c):
        super().__init__(c["vocab"], c["width"], c["layers"], c["heads"], CLIP_TOKENS, c["mlp"], "quick_gelu")
        nn.init.normal_(self.text_model.embeddings.token_embedding.weight, std=0.02)
        nn.init.normal_(self.text_model.embeddings.position_embedding.weight, std=0.01)

    def forward(self, ids):
        h = super().forward(ids).last_hidden_state
        return h[torch.arange(ids.shape[0], device=ids.device), ids.argmax(-1)]


# ---------------------------------------------------------------- the Flux transformer (flux.h)

class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps).to(x.dtype) * self.weight


def layer_norm(x):
    return F.layer_norm(x, (x.shape[-1],), eps=1e-6)


def timestep_embedding(t, dim=256):
    """diffusers get_timestep_embedding(flip_sin_to_cos=True, downscale_freq_shift=0): [cos, sin]."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    emb = t[:, None].float() * freqs[None].to(t.dtype if t.dtype == torch.float64 else torch.float32)
    return torch.cat([torch.cos(emb), torch.sin(emb)], -1)


def rope_tables(T, gh, gw, axes, device, dtype):
    """FluxPosEmbed: text ids (0, 0, 0), image ids (0, row, col); per axis of width d the angle
    id / 10000^(2k/d), cos and sin repeated over the pair (float64, then dtype)."""
    ids = torch.zeros(T + gh * gw, 3, dtype=torch.float64)
    ids[T:, 1] = torch.arange(gh, dtype=torch.float64).repeat_interleave(gw)
    ids[T:, 2] = torch.arange(gw, dtype=torch.float64).repeat(gh)
    cos, sin = [], []
    for i, d in enumerate(axes):
        freqs = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
        f = torch.outer(ids[:, i], freqs)
        cos.append(f.cos().repeat_interleave(2, 1))
        sin.append(f.sin().repeat_interleave(2, 1))
    return torch.cat(cos, -1).to(device, dtype), torch.cat(sin, -1).to(device, dtype)


def rotate(x, cos, sin):
    """diffusers apply_rotary_emb(use_real=True, use_real_unbind_dim=-1): pairs interleaved; x [B, heads, S, D]."""
    re, im = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
    return x * cos + torch.stack([-im, re], -1).flatten(3) * sin


def attention(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v)
    return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), -1) @ v


class Attn(nn.Module):
    def __init__(self, H, head_dim, joint):
        super().__init__()
        self.to_q, self.to_k, self.to_v = nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, H)
        self.norm_q, self.norm_k = RMSNorm(head_dim), RMSNorm(head_dim)
        if joint:
            self.add_q_proj, self.add_k_proj, self.add_v_proj = nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, H)
            self.norm_added_q, self.norm_added_k = RMSNorm(head_dim), RMSNorm(head_dim)
            self.to_out = nn.ModuleList([nn.Linear(H, H)])
            self.to_add_out = nn.Linear(H, H)
        self.head_dim = head_dim


class FeedForward(nn.Module):
    def __init__(self, H, F_):
        super().__init__()
        self.net = nn.ModuleList([nn.Module(), nn.Identity(), nn.Linear(F_, H)])
        self.net[0].proj = nn.Linear(H, F_)

    def forward(self, x):
        return self.net[2](F.gelu(self.net[0].proj(x), approximate="tanh"))


class AdaLinear(nn.Module):
    def __init__(self, H, n):
        super().__init__()
        self.linear = nn.Linear(H, n * H)


class DoubleBlock(nn.Module):
    """FluxTransformerBlock: adaLN-Zero per stream, joint attention over [text; image] with RoPE."""

    def __init__(self, H, heads, head_dim, F_):
        super().__init__()
        self.norm1, self.norm1_context = AdaLinear(H, 6), AdaLinear(H, 6)
        self.attn = Attn(H, head_dim, True)
        self.ff, self.ff_context = FeedForward(H, F_), FeedForward(H, F_)
        self.heads = heads

    def forward(self, x, c, silu_temb, cos, sin):
        B, N, H = x.shape
        T = c.shape[1]
        sm, cm = self.norm1.linear(silu_temb)[:, None], self.norm1_context.linear(silu_temb)[:, None]
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = sm.chunk(6, -1)
        c_shift_msa, c_scale_msa, c_gate_msa, c_shift_mlp, c_scale_mlp, c_gate_mlp = cm.chunk(6, -1)
        nx = layer_norm(x) * (1 + scale_msa) + shift_msa
        nc = layer_norm(c) * (1 + c_scale_msa) + c_shift_msa
        a = self.attn

        def split(t, n):
            return t.view(B, n, self.heads, -1).transpose(1, 2)

        q = torch.cat([a.norm_added_q(split(a.add_q_proj(nc), T)), a.norm_q(split(a.to_q(nx), N))], 2)
        k = torch.cat([a.norm_added_k(split(a.add_k_proj(nc), T)), a.norm_k(split(a.to_k(nx), N))], 2)
        v = torch.cat([split(a.add_v_proj(nc), T), split(a.to_v(nx), N)], 2)
        o = attention(rotate(q, cos, sin), rotate(k, cos, sin), v).transpose(1, 2).reshape(B, T + N, H)
        x = x + gate_msa * a.to_out[0](o[:, T:])
        x = x + gate_mlp * self.ff(layer_norm(x) * (1 + scale_mlp) + shift_mlp)
        c = c + c_gate_msa * a.to_add_out(o[:, :T])
        c = c + c_gate_mlp * self.ff_context(layer_norm(c) * (1 + c_scale_mlp) + c_shift_mlp)
        return x, c


class SingleBlock(nn.Module):
    """FluxSingleTransformerBlock over [text; image]: attention and the MLP in parallel, proj_out over both."""

    def __init__(self, H, heads, head_dim, F_):
        super().__init__()
        self.norm = AdaLinear(H, 3)
        self.attn = Attn(H, head_dim, False)
        self.proj_mlp, self.proj_out = nn.Linear(H, F_), nn.Linear(H + F_, H)
        self.heads = heads

    def forward(self, s, silu_temb, cos, sin):
        B, S, H = s.shape
        shift, scale, gate = self.norm.linear(silu_temb)[:, None].chunk(3, -1)
        n = layer_norm(s) * (1 + scale) + shift
        a = self.attn

        def split(t):
            return t.view(B, S, self.heads, -1).transpose(1, 2)

        q, k = rotate(a.norm_q(split(a.to_q(n))), cos, sin), rotate(a.norm_k(split(a.to_k(n))), cos, sin)
        o = attention(q, k, split(a.to_v(n))).transpose(1, 2).reshape(B, S, H)
        return s + gate * self.proj_out(torch.cat([o, F.gelu(self.proj_mlp(n), approximate="tanh")], -1))


class MlpEmbedder(nn.Module):
    def __init__(self, cin, H):
        super().__init__()
        self.linear_1, self.linear_2 = nn.Linear(cin, H), nn.Linear(H, H)

    def forward(self, x):
        return self.linear_2(F.silu(self.linear_1(x)))


class FluxTransformer(nn.Module):
    """diffusers' FluxTransformer2DModel (schnell: no guidance embedder) with its parameter names; the latent
    [B, C, h, w] packed in 2 x 2 patches ((c, py, px) features) and unpacked on the way out."""

    def __init__(self, f, in_channels, context_dim, pooled_dim):
        super().__init__()
        H, F_ = f["heads"] * f["head_dim"], f["heads"] * f["head_dim"] * f["mlp_ratio"]
        self.heads, self.axes = f["heads"], rope_axes(f["head_dim"])
        self.x_embedder, self.context_embedder = nn.Linear(4 * in_channels, H), nn.Linear(context_dim, H)
        self.time_text_embed = nn.Module()
        self.time_text_embed.timestep_embedder = MlpEmbedder(256, H)
        self.time_text_embed.text_embedder = MlpEmbedder(pooled_dim, H)
        self.transformer_blocks = nn.ModuleList(DoubleBlock(H, f["heads"], f["head_dim"], F_)
                                                for _ in range(f["double"]))
        self.single_transformer_blocks = nn.ModuleList(SingleBlock(H, f["heads"], f["head_dim"], F_)
                                                       for _ in range(f["single"]))
        self.norm_out = AdaLinear(H, 2)
        self.proj_out = nn.Linear(H, 4 * in_channels)
        self.rope_cache = {}

    def zero_init(self):
        """adaLN-Zero: modulations and the output projection start at zero (every block the identity)."""
        mods = [b.norm1.linear for b in self.transformer_blocks] + [b.norm1_context.linear
                                                                     for b in self.transformer_blocks]
        mods += [b.norm.linear for b in self.single_transformer_blocks] + [self.norm_out.linear, self.proj_out]
        for m in mods:
            nn.init.zeros_(m.weight)
            nn.init.zeros_(m.bias)

    def forward(self, latent, t, context, pooled):
        B, C, h, w = latent.shape
        gh, gw = h // 2, w // 2
        x = latent.view(B, C, gh, 2, gw, 2).permute(0, 2, 4, 1, 3, 5).reshape(B, gh * gw, 4 * C)
        x = self.x_embedder(x)
        temb = self.time_text_embed.timestep_embedder(timestep_embedding(1000 * t).to(x.dtype))
        temb = temb + self.time_text_embed.text_embedder(pooled)
        silu_temb = F.silu(temb)
        c = self.context_embedder(context)
        T = c.shape[1]
        table_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32  # f32 under autocast, as in C
        key = (T, gh, gw, x.device, table_dtype)
        if key not in self.rope_cache:
            self.rope_cache[key] = rope_tables(T, gh, gw, self.axes, x.device, table_dtype)
        cos, sin = self.rope_cache[key]
        for blk in self.transformer_blocks:
            x, c = blk(x, c, silu_temb, cos, sin)
        s = torch.cat([c, x], 1)
        for blk in self.single_transformer_blocks:
            s = blk(s, silu_temb, cos, sin)
        scale, shift = self.norm_out.linear(silu_temb)[:, None].chunk(2, -1)  # continuous adaLN: scale, shift
        x = self.proj_out(layer_norm(s[:, T:]) * (1 + scale) + shift)
        return x.view(B, gh, gw, C, 2, 2).permute(0, 3, 1, 4, 2, 5).reshape(B, C, h, w)


# ---------------------------------------------------------------- the model set

class FluxDemo(nn.Module):
    """The transformer and both text encoders as one module (one optimizer, one EMA copy)."""

    def __init__(self, size, t5_vocab):
        super().__init__()
        self.clip = ClipL(size["clip"])
        t = size["t5"]
        self.t5 = T5Encoder(t5_vocab, t["d_model"], t["layers"], t["heads"], t["d_kv"], t["d_ff"])
        self.flux = FluxTransformer(size["flux"], size["vae"]["z"], t["d_model"], size["clip"]["width"])

    def forward(self, latent, t, clip_ids, t5_ids):
        return self.flux(latent, t, self.t5(t5_ids), self.clip(clip_ids))


def make_vae(size):
    v = size["vae"]
    return AutoencoderKL(v["ch"], v["mult"], v["res_blocks"], v["z"], SCALING, use_quant_conv=False, shift=SHIFT)


def t5_vocab_rows(n_pieces):
    """T5's embedding has rows past the pieces (32128 for 32100): room for added tokens, rounded to 32."""
    return (n_pieces + 8 + 31) // 32 * 32


# ---------------------------------------------------------------- files

ST_DTYPES = {torch.float16: "F16", torch.float32: "F32", torch.float64: "F64"}


def st_write(path, tensors, metadata, dtype):
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name in sorted(tensors):
        data = tensors[name].detach().to("cpu", dtype).contiguous().numpy().tobytes()
        header[name] = {"dtype": ST_DTYPES[dtype], "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
        for b in blobs:
            f.write(b)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def export(folder, model, vae, dtype, metadata, clip_prefix=""):
    """The four files (see the docstring), in dtype. clip_prefix: "" for the shipped lone CLIP-L file
    (text_model.* at the top, as ComfyUI's clip_l.safetensors); the parity check puts it where sdtrain's CLIP
    loader reads a CLIP-L today."""
    os.makedirs(folder, exist_ok=True)
    state = lambda m, p="": {p + k: v for k, v in m.state_dict().items()}
    st_write(os.path.join(folder, "transformer.safetensors"), state(model.flux), metadata, dtype)
    st_write(os.path.join(folder, "clip_l.safetensors"), state(model.clip, clip_prefix), metadata, dtype)
    st_write(os.path.join(folder, "t5xxl.safetensors"), state(model.t5), metadata, dtype)
    st_write(os.path.join(folder, "ae.safetensors"), state(vae), metadata, dtype)


# ---------------------------------------------------------------- training stages

def train_vae(vae, pixels, seconds, max_steps, batch, gen, device, amp, losses):
    """A plain autoencoder on the mean latents (the first z rows of encoder.conv_out)."""
    z = vae.encoder.conv_out.out_channels // 2
    opt = torch.optim.AdamW(vae.parameters(), lr=4e-4, weight_decay=0.0)
    it, t0, step = sd.batches(len(pixels), batch, gen, device), time.time(), 0
    vae.train()
    while step < max_steps and time.time() - t0 < seconds:
        x = sd.as_float_images(pixels[next(it)])
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=amp):
            mean = vae.encoder(x)[:, :z]
            rec = vae.decoder(mean)
        rec = rec.float()
        loss = F.l1_loss(rec, x) + F.mse_loss(rec, x) + 1e-5 * mean.float().pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 10 == 0:
            losses.append(loss.item())
        step += 1
        if step % 200 == 0:
            log(f"vae step {step}: loss {loss.item():.4f}")
    return step


@torch.no_grad()
def fold_latent_scale(vae, pixels, device):
    """encoder.conv_out's mean rows become a z + b so that (z' - SHIFT) * SCALING has zero mean and unit std; the
    logvar rows are pinned at LOGVAR; decoder.conv_in takes z' (exact but at the border, where the zero padding
    no longer stands for the old zero: the decoder is trained on after this)."""
    conv, dec = vae.encoder.conv_out, vae.decoder.conv_in
    z = conv.out_channels // 2
    means = torch.cat([vae.encoder(sd.as_float_images(p.to(device)))[:, :z].float() for p in pixels[:4096].split(256)])
    mu, std = means.mean().item(), means.std().item()
    a = 1.0 / (SCALING * std)
    b = SHIFT - a * mu
    conv.weight[:z] *= a
    conv.bias[:z] = conv.bias[:z] * a + b
    conv.weight[z:] = 0.0
    conv.bias[z:] = LOGVAR
    dec.bias += (dec.weight.sum(dim=(2, 3)) @ torch.full((z,), -b / a, device=dec.weight.device))
    dec.weight /= a
    log(f"vae latents mean {mu:.4f} std {std:.4f}: folded as {a:.4f} z + {b:.4f}")
    return mu, std


def train_decoder(vae, pixels, seconds, max_steps, batch, gen, device, amp, losses):
    """The decoder alone on the folded encoder's latents (z' = mean, what the pipelines decode)."""
    z = vae.encoder.conv_out.out_channels // 2
    opt = torch.optim.AdamW(vae.decoder.parameters(), lr=2e-4, weight_decay=0.0)
    it, t0, step = sd.batches(len(pixels), batch, gen, device), time.time(), 0
    while step < max_steps and time.time() - t0 < seconds:
        x = sd.as_float_images(pixels[next(it)])
        with torch.no_grad(), torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=amp):
            mean = vae.encoder(x)[:, :z]
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=amp):
            rec = vae.decoder(mean.float())
        loss = F.l1_loss(rec.float(), x) + F.mse_loss(rec.float(), x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 10 == 0:
            losses.append(loss.item())
        step += 1
    return step


@torch.no_grad()
def encode_all(vae, pixels, device):
    out = []
    for part in pixels.split(1024):
        mean, _ = vae.encode(sd.as_float_images(part.to(device)))
        out.append((mean.float() - SHIFT) * SCALING)
    return torch.cat(out)


def train_flow(model, ema, latents, clip_ids, t5_ids, empty, seconds, max_steps, batch, gen, device, amp, losses,
               shift):
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=3e-4, weight_decay=0.01)
    warmup = 200
    it, t0, step = sd.batches(len(latents), batch, gen, device), time.time(), 0
    ema_params = list(ema.parameters())
    model.train()
    while step < max_steps and time.time() - t0 < seconds:
        idx = next(it)
        x0, ids_l, ids_5 = latents[idx], clip_ids[idx].clone(), t5_ids[idx].clone()
        drop = (torch.rand(batch, generator=gen) < 0.1).to(device)
        ids_l[drop], ids_5[drop] = empty[0], empty[1]
        t = shift_sigma(torch.sigmoid(torch.randn(batch, generator=gen)), shift).to(device)
        noise = torch.randn(x0.shape, generator=gen).to(device)
        xt = (1 - t.view(-1, 1, 1, 1)) * x0 + t.view(-1, 1, 1, 1) * noise
        for g in opt.param_groups:
            g["lr"] = 3e-4 * min(1.0, (step + 1) / warmup)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=amp):
            v = model(xt, t, ids_l, ids_5)
        loss = (v.float() - (noise - x0)).pow(2).mean()
        sd.step_with_ema(opt, params, ema_params, loss, step)
        if step % 10 == 0:
            losses.append((step, loss.item()))
        step += 1
        if step % 500 == 0:
            log(f"flow step {step}: loss {loss.item():.4f} ({step / (time.time() - t0):.1f} steps/s)")
    return step


@torch.no_grad()
def euler_sample(model, ids_l, ids_5, empty, shape, steps, cfg, shift, gen, device):
    """The flow-matching Euler sampler from t = 1 to 0 on shifted sigmas, classifier-free guidance cfg."""
    x = torch.randn(shape, generator=gen).to(device)
    sig = [shift_sigma(1 - i / steps, shift) for i in range(steps + 1)]
    n = shape[0]
    ctx, pooled = model.t5(torch.cat([ids_5, empty[1][None].expand(n, -1)])), model.clip(
        torch.cat([ids_l, empty[0][None].expand(n, -1)]))
    for i in range(steps):
        t = torch.full((2 * n,), sig[i], device=device)
        v = model.flux(torch.cat([x, x]), t, ctx, pooled).float()
        vc, vu = v.chunk(2)
        x = x + (sig[i + 1] - sig[i]) * (vu + cfg * (vc - vu))
    return x


# ---------------------------------------------------------------- parity (--parity)

def parity(cli, seed, size_name):
    """Tiny random files from this script's export, run by sdtrain's loaders and forwards (sdt-flux-demo-io),
    against this script's modules in float64."""
    torch.manual_seed(seed)
    size = SIZES[size_name]
    captions = ["a small red circle on a navy background, top left", "a large object on a gray background, center",
                "", "a  LARGE yellow\tstar,  on a teal background!? bottom-right é"]
    tok5 = T5Tokens(caption_words(captions[:2]) | {"star", "yellow"})
    model = FluxDemo(size, t5_vocab_rows(len(tok5))).double()
    vae = make_vae(size).double()
    with torch.no_grad():  # every parameter perturbed (norms and biases too), so a name or a term out of place shows
        for p in list(model.parameters()) + list(vae.parameters()):
            p.add_(torch.randn_like(p) * (0.3 if p.dim() == 1 else 0.02))
    failures = 0
    with tempfile.TemporaryDirectory(prefix="sdt-flux-demo-") as d:
        export(d, model, vae, torch.float32, {"format": "pt"}, clip_prefix="conditioner.embedders.0.transformer.")
        tok5.save(os.path.join(d, "t5_tokenizer"))
        # T5 tokenizer: the C SentencePiece reader and encoder against this script's
        out = subprocess.run([cli, "spm", "--tokenizer", os.path.join(d, "t5_tokenizer"), "--length", str(T5_LEN)],
                             input="\n".join(captions) + "\n", capture_output=True, text=True, check=True).stdout
        c_ids = [[int(v) for v in line.split()] for line in out.splitlines()]
        re = T5Tokens.load(os.path.join(d, "t5_tokenizer", "tokenizer.json"))
        py_ids = [re.encode(c) for c in captions]
        ok = c_ids == py_ids
        failures += not ok
        print(f"T5 tokenizer: {len(captions)} prompts, ids {'equal' if ok else 'DIFFER'}")
        if not ok:
            for a, b in zip(c_ids, py_ids):
                print(" C ", a, "\n py", b)
        # CLIP ids from the demo tokenizer, the rest random
        clip_ids = sd.Tokens(os.path.join(ROOT, "models", "demo_model", "tokenizer"))

        B, h, w = 2, 6, 8
        ids_l = torch.tensor([clip_ids(c) for c in captions[:B]], dtype=torch.int32)
        ids_5 = torch.tensor(py_ids[:B], dtype=torch.int32)
        latent = torch.randn(B, 16, h, w, dtype=torch.float64)
        ts = torch.tensor([0.3, 0.85], dtype=torch.float64)
        ctx = torch.randn(B, T5_LEN, size["t5"]["d_model"], dtype=torch.float64)
        pooled = torch.randn(B, size["clip"]["width"], dtype=torch.float64)
        image = torch.rand(B, 3, 4 * h, 4 * w, dtype=torch.float64) * 2 - 1
        files = {}

        def raw(name, t, dtype=np.float32):
            files[name] = os.path.join(d, name)
            t.numpy().astype(dtype).tofile(files[name])
            return files[name]

        def back(name, shape):
            return torch.from_numpy(np.fromfile(os.path.join(d, name), dtype=np.float32).reshape(shape)).double()

        cmd = [cli, "run", "--dir", d, "--batch", str(B), "--t5-len", str(T5_LEN), "--height", str(h), "--width",
               str(w), "--clip-tokens", raw("ids_l", ids_l, np.int32), "--t5-tokens", raw("ids_5", ids_5, np.int32),
               "--latent", raw("lat", latent), "--timesteps", raw("ts", ts), "--context", raw("ctx", ctx),
               "--pooled", raw("pool", pooled), "--image", raw("img", image)]
        for name in ("pooled", "context", "velocity", "mean", "logvar", "decoded"):
            cmd += [f"--out-{name}", os.path.join(d, "c_" + name)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        print(res.stdout.strip())
        if res.returncode:
            print(res.stderr.strip())
            print("flux demo parity: the C side failed")
            return 1
        f32 = lambda t: t.float().double()  # the inputs as the C side read them
        with torch.no_grad():
            ref = {"pooled": model.clip(ids_l.long()), "context": model.t5(ids_5.long()),
                   "velocity": model.flux(f32(latent), f32(ts), f32(ctx), f32(pooled))}
            mean, logvar = vae.encode(f32(image))
            ref.update(mean=mean, logvar=logvar, decoded=vae.decode(f32(latent)))
        shapes = {"pooled": (B, -1), "context": (B, T5_LEN, -1), "velocity": (B, 16, h, w), "mean": (B, 16, h, w),
                  "logvar": (B, 16, h, w), "decoded": (B, 3, 4 * h, 4 * w)}
        for name, r in ref.items():
            c = back("c_" + name, shapes[name])
            err = ((c - r).norm() / r.norm().clamp(min=1e-30)).item()
            ok = err <= 2e-5
            failures += not ok
            print(f"{name}: shape {tuple(r.shape)}, relative error {err:.3g} {'ok' if ok else 'FAIL'}")
        # the shipped layout (clip_l.safetensors with text_model.* at the top, f16) opens as sdtrain's parts
        shipped = os.path.join(d, "shipped")
        export(shipped, model, vae, torch.float16, {"format": "pt"})
        res = subprocess.run([cli, "files", "--dir", shipped], capture_output=True, text=True)
        print(res.stdout.strip() + ("\n" + res.stderr.strip() if res.returncode else ""))
        failures += res.returncode != 0
    print("flux demo parity: " + ("ok" if not failures else f"{failures} FAILED"))
    return 1 if failures else 0


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world-dump", help="the sdt-world-dump executable")
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "models", "demo_model", "tokenizer"),
                    help="the demo's CLIP tokenizer folder (vocab.json, merges.txt)")
    ap.add_argument("--out", help="output folder (model files, pictures, log)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--images", type=int, default=150000, help="scenes in the training set")
    ap.add_argument("--minutes", type=float, default=9.0, help="wall time for the VAE and flow stages")
    ap.add_argument("--vae-share", type=float, default=0.2, help="share of --minutes for the VAE")
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tiny", action="store_true", help="tiny sizes and 512 scenes (a CPU check of the script)")
    ap.add_argument("--steps", type=int, default=0, help="stop every training stage after this many steps")
    ap.add_argument("--parity", action="store_true", help="the parity check against sdtrain's C code (see --cli)")
    ap.add_argument("--parity-size", choices=sorted(SIZES), default="tiny", help="with --parity: which sizes")
    ap.add_argument("--cli", help="with --parity: the sdt-flux-demo-io executable (tests/parity/flux_demo_cli.c)")
    args = ap.parse_args()
    if args.parity:
        torch.set_num_threads(1)
        return parity(args.cli, args.seed, args.parity_size)
    if not args.world_dump or not args.out:
        ap.error("--world-dump and --out are needed to train")
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    device = torch.device(args.device)
    amp = device.type == "cuda"
    if amp:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    os.makedirs(args.out, exist_ok=True)
    gen = torch.Generator().manual_seed(args.seed)
    size = SIZES["tiny" if args.tiny else "full"]
    n_images = 512 if args.tiny else args.images
    batch = 8 if args.tiny else args.batch
    max_steps = args.steps or 10 ** 9
    t_start = time.time()
    log(f"train.py (Flux demo): seed {args.seed}, torch {torch.__version__}, device {device}"
        f"{' (' + torch.cuda.get_device_name() + ')' if amp else ''}")

    with tempfile.TemporaryDirectory(prefix="sdt-world-") as workdir:
        pixels_np, lines = sd.draw_world(args.world_dump, args.seed, n_images, workdir, os.cpu_count() or 1)
    captions = [line[0] for line in lines]
    tok_l = sd.Tokens(args.tokenizer)
    tok5 = T5Tokens(caption_words(captions + sd.SAMPLE_PROMPTS))
    tok5.save(os.path.join(args.out, "t5_tokenizer"))
    os.makedirs(os.path.join(args.out, "clip_tokenizer"), exist_ok=True)
    for name in ("vocab.json", "merges.txt"):  # the demo's CLIP tokenizer, shipped beside clip_l.safetensors
        shutil.copyfile(os.path.join(args.tokenizer, name), os.path.join(args.out, "clip_tokenizer", name))
    clip_ids = torch.tensor([tok_l(c) for c in captions], dtype=torch.long, device=device)
    t5_ids = torch.tensor([tok5.encode(c) for c in captions], dtype=torch.long, device=device)
    empty = (torch.tensor(tok_l(""), device=device), torch.tensor(tok5.encode(""), device=device))
    pixels = torch.from_numpy(pixels_np).to(device)
    write_png(os.path.join(args.out, "world.png"), sd.grid(pixels_np[:64], 8))
    log(f"drew {n_images} scenes, {len(tok_l.cache)} distinct captions, T5 vocabulary {len(tok5)} pieces "
        f"({time.time() - t_start:.0f} s)")

    vae = make_vae(size).to(device)
    model = FluxDemo(size, t5_vocab_rows(len(tok5))).to(device)
    model.flux.zero_init()
    count = lambda m: sum(p.numel() for p in m.parameters())
    log(f"parameters: transformer {count(model.flux)}, CLIP-L {count(model.clip)}, T5 {count(model.t5)}, "
        f"VAE {count(vae)}")

    budget = args.minutes * 60.0
    vae_losses, dec_losses, flow_losses = [], [], []
    vae_seconds = math.inf if args.steps else budget * args.vae_share
    steps_vae = train_vae(vae, pixels, vae_seconds * 0.75, max_steps, batch, gen, device, amp, vae_losses)
    mu, std = fold_latent_scale(vae, pixels, device)
    steps_dec = train_decoder(vae, pixels, vae_seconds * 0.25, max_steps, batch, gen, device, amp, dec_losses)
    vae.eval()
    vae.requires_grad_(False)
    latents = encode_all(vae, pixels, device)
    with torch.no_grad():
        recon = vae.decode(latents[:16])
    write_png(os.path.join(args.out, "vae_recon.png"), sd.grid(np.concatenate([pixels_np[:16], sd.to_uint8(recon)]),
                                                               16))
    log(f"vae: {steps_vae} + {steps_dec} (decoder) steps; latents {tuple(latents.shape)} mean "
        f"{latents.mean().item():.3f} std {latents.std().item():.3f} ({time.time() - t_start:.0f} s)")

    ema = FluxDemo(size, t5_vocab_rows(len(tok5))).to(device)
    ema.load_state_dict(model.state_dict())
    ema.requires_grad_(False)
    shift = resolution_shift((IMAGE // 8) ** 2)
    remaining = math.inf if args.steps else budget - (time.time() - t_start) - 40.0
    steps_flow = train_flow(model, ema, latents, clip_ids, t5_ids, empty, remaining, max_steps, batch, gen, device,
                            amp, flow_losses, shift)
    log(f"flow: {steps_flow} steps at batch {batch} ({time.time() - t_start:.0f} s)")

    ema.eval()
    sample_gen = torch.Generator().manual_seed(args.seed + 1)
    per_prompt, sample_steps = (1, 3) if args.tiny else (8, 30)
    prompts = [p for p in sd.SAMPLE_PROMPTS for _ in range(per_prompt)]
    with torch.no_grad():
        z = euler_sample(ema, torch.tensor([tok_l(p) for p in prompts], device=device),
                         torch.tensor([tok5.encode(p) for p in prompts], device=device), empty,
                         (len(prompts), size["vae"]["z"], IMAGE // 4, IMAGE // 4), sample_steps, 4.0, shift,
                         sample_gen, device)
        images = sd.to_uint8(vae.decode(z))
    write_png(os.path.join(args.out, "samples.png"), sd.grid(images, per_prompt))
    line_plot_png(os.path.join(args.out, "loss.png"), [s for s, _ in flow_losses], [v for _, v in flow_losses],
                  title_rows=[f"rectified-flow loss, {steps_flow} steps, batch {batch}"])
    meta = {"format": "pt", "sdtrain_generator": "models/demo_flux/train.py", "sdtrain_seed": str(args.seed),
            "sdtrain_images": str(n_images), "sdtrain_vae_steps": f"{steps_vae}+{steps_dec}",
            "sdtrain_flow_steps": str(steps_flow), "sdtrain_batch": str(batch), "sdtrain_t5_max_length": str(T5_LEN),
            "sdtrain_flow_shift": f"{shift:.6f}", "sdtrain_vae_scaling": str(SCALING),
            "sdtrain_vae_shift": str(SHIFT), "sdtrain_device": torch.cuda.get_device_name() if amp else "cpu",
            "sdtrain_torch": torch.__version__}
    export(args.out, ema, vae, torch.float16, meta)
    total = sum(os.path.getsize(os.path.join(args.out, f)) for f in
                ("transformer.safetensors", "clip_l.safetensors", "t5xxl.safetensors", "ae.safetensors"))
    with open(os.path.join(args.out, "train_log.json"), "w") as f:
        json.dump({"meta": meta, "vae_latent_mean_std": [mu, std], "vae_loss_every_10": vae_losses,
                   "decoder_loss_every_10": dec_losses, "flow_loss": flow_losses,
                   "sample_prompts": sd.SAMPLE_PROMPTS, "seconds": time.time() - t_start}, f)
    log(f"wrote the model files ({total / 2 ** 20:.1f} MiB) to {args.out} in {time.time() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
