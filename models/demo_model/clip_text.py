"""clip_text.py - CLIP's text transformer in Hugging Face's CLIPTextModel layout and
parameter names (text_model.embeddings, .encoder.layers.N, .final_layer_norm), the
layout sdtrain reads under cond_stage_model.transformer. For the demo model's
training (train.py): torch only, no transformers. SD 1.x's use: a causal mask and no
padding mask, quick GELU, the last layer's output through the final layer norm.
"""
import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj = nn.Linear(width, width), nn.Linear(width, width)
        self.v_proj, self.out_proj = nn.Linear(width, width), nn.Linear(width, width)

    def forward(self, x, mask):
        b, t, c = x.shape
        split = lambda y: y.reshape(b, t, self.heads, c // self.heads).transpose(1, 2)
        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        w = (q @ k.transpose(-1, -2)) * (c // self.heads) ** -0.5 + mask
        out = w.softmax(dim=-1) @ v
        return self.out_proj(out.transpose(1, 2).reshape(b, t, c))


class MLP(nn.Module):
    def __init__(self, width, mlp):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(width, mlp), nn.Linear(mlp, width)

    def forward(self, x):
        h = self.fc1(x)
        return self.fc2(h * torch.sigmoid(1.702 * h))  # quick GELU


class Layer(nn.Module):
    def __init__(self, width, heads, mlp):
        super().__init__()
        self.layer_norm1, self.layer_norm2 = nn.LayerNorm(width, eps=1e-5), nn.LayerNorm(width, eps=1e-5)
        self.self_attn, self.mlp = Attention(width, heads), MLP(width, mlp)

    def forward(self, x, mask):
        x = x + self.self_attn(self.layer_norm1(x), mask)
        return x + self.mlp(self.layer_norm2(x))


class CLIPTextModel(nn.Module):
    def __init__(self, vocab, width, layers, heads, mlp, positions=77):
        super().__init__()
        self.text_model = nn.Module()
        tm = self.text_model
        tm.embeddings = nn.Module()
        tm.embeddings.token_embedding = nn.Embedding(vocab, width)
        tm.embeddings.position_embedding = nn.Embedding(positions, width)
        nn.init.normal_(tm.embeddings.token_embedding.weight, std=0.02)
        nn.init.normal_(tm.embeddings.position_embedding.weight, std=0.01)
        tm.encoder = nn.Module()
        tm.encoder.layers = nn.ModuleList([Layer(width, heads, mlp) for _ in range(layers)])
        tm.final_layer_norm = nn.LayerNorm(width, eps=1e-5)

    def forward(self, ids, token_rows=None):
        """ids [B, T]; token_rows, when given, replaces the token embedding output [B, T, C]."""
        tm = self.text_model
        t = ids.shape[1]
        x = tm.embeddings.token_embedding(ids) if token_rows is None else token_rows
        x = x + tm.embeddings.position_embedding.weight[:t]
        mask = torch.full((t, t), float("-inf"), device=ids.device).triu(1).to(x.dtype)
        for layer in tm.encoder.layers:
            x = layer(x, mask)
        return tm.final_layer_norm(x)
