"""clip_reference.py - a PyTorch CLIP text encoder written to transformers' published
CLIPTextModel (modeling_clip.py: CLIPTextEmbeddings, CLIPAttention, CLIPMLP,
CLIPEncoderLayer, causal mask, final_layer_norm), with the same parameter names, for
machines without transformers (Debian's python3-torch has none).

ClipTextModelWithProjection adds transformers' text_projection (Linear, no bias) as
CLIPTextModelWithProjection names it: SDXL's second encoder in diffusers' text_encoder_2.

clip_vae_parity.py uses transformers when it is installed and this module otherwise.
"""
import math
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F

ACTIVATIONS = {
    "quick_gelu": lambda x: x * torch.sigmoid(1.702 * x),
    "gelu": lambda x: F.gelu(x),  # the exact (erf) form, as transformers' "gelu"
}


class Embeddings(nn.Module):
    def __init__(self, vocab, width, positions):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, width)
        self.position_embedding = nn.Embedding(positions, width)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        return self.token_embedding(ids) + self.position_embedding(pos)[None]


class Attention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj = nn.Linear(width, width), nn.Linear(width, width)
        self.v_proj, self.out_proj = nn.Linear(width, width), nn.Linear(width, width)

    def forward(self, x):
        B, T, C = x.shape
        d = C // self.heads

        def split(t):
            return t.reshape(B, T, self.heads, d).transpose(1, 2)

        q, k, v = split(self.q_proj(x) / math.sqrt(d)), split(self.k_proj(x)), split(self.v_proj(x))
        scores = q @ k.transpose(-1, -2)
        causal = torch.full((T, T), float("-inf"), dtype=x.dtype, device=x.device).triu(1)
        h = torch.softmax(scores + causal, dim=-1) @ v
        return self.out_proj(h.transpose(1, 2).reshape(B, T, C))


class Mlp(nn.Module):
    def __init__(self, width, hidden, act):
        super().__init__()
        self.fc1, self.fc2, self.act = nn.Linear(width, hidden), nn.Linear(hidden, width), ACTIVATIONS[act]

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class EncoderLayer(nn.Module):
    def __init__(self, width, heads, hidden, act, eps):
        super().__init__()
        self.layer_norm1, self.layer_norm2 = nn.LayerNorm(width, eps=eps), nn.LayerNorm(width, eps=eps)
        self.self_attn, self.mlp = Attention(width, heads), Mlp(width, hidden, act)

    def forward(self, x):
        x = x + self.self_attn(self.layer_norm1(x))
        return x + self.mlp(self.layer_norm2(x))


class TextTransformer(nn.Module):
    def __init__(self, vocab, width, layers, heads, positions, hidden, act, eps):
        super().__init__()
        self.embeddings = Embeddings(vocab, width, positions)
        self.encoder = nn.Module()
        self.encoder.layers = nn.ModuleList(EncoderLayer(width, heads, hidden, act, eps) for _ in range(layers))
        self.final_layer_norm = nn.LayerNorm(width, eps=eps)

    def forward(self, input_ids, output_hidden_states=False):
        h = self.embeddings(input_ids)
        hidden = [h]
        for layer in self.encoder.layers:
            h = layer(h)
            hidden.append(h)
        return SimpleNamespace(last_hidden_state=self.final_layer_norm(h),
                               hidden_states=tuple(hidden) if output_hidden_states else None)


class ClipTextModel(nn.Module):
    """Parameter names as transformers 4's CLIPTextModel: text_model.embeddings..., text_model.encoder.layers.N..."""

    def __init__(self, vocab, width, layers, heads, positions, hidden, act, eps=1e-5):
        super().__init__()
        self.text_model = TextTransformer(vocab, width, layers, heads, positions, hidden, act, eps)

    def forward(self, input_ids, output_hidden_states=False):
        return self.text_model(input_ids, output_hidden_states)


class ClipTextModelWithProjection(ClipTextModel):
    """transformers' CLIPTextModelWithProjection names: text_model.* and text_projection.weight [P, C]."""

    def __init__(self, vocab, width, layers, heads, positions, hidden, act, projection, eps=1e-5):
        super().__init__(vocab, width, layers, heads, positions, hidden, act, eps)
        self.text_projection = nn.Linear(width, projection, bias=False)
