#!/usr/bin/env python3
"""t5_parity.py - the C T5 v1.1 encoder against a float64 PyTorch T5 written here.

transformers is not installed with Debian's torch, so the reference is transformers' T5EncoderModel
written out in plain torch from its published code (modeling_t5.py: T5LayerNorm, T5Attention with
_relative_position_bucket and compute_bias in block 0 shared by every block, no 1/sqrt(d) scaling,
T5DenseGatedActDense with gelu_new, the extended attention mask with finfo.min), in float64:
  - the relative-position buckets of every (query, key) pair, 128 and 20 max distance;
  - forward of a tiny random T5 (sdt-t5-io gen: inner width != d_model, every norm perturbed) with
    textual-inversion override rows, without a mask (diffusers' SD3/Flux practice) and with one
    (kohya's --apply_t5_attn_mask), and the gradient of sum(G * output) with respect to the rows.
The C side runs through sdt-t5-io (tests/parity/t5_cli.c) on the CPU backend in f32. Thresholds:
relative error (max |a - b| / max |b|) <= 1e-4 forward, <= 1e-3 gradients. Exits 77 (skip) without torch.

  python3 tests/parity/t5_parity.py --cli build/tests/parity/sdt-t5-io [--seed N]
"""
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity_cli import RawFiles, cli_args, finish, rel_err, torch_or_skip  # noqa: E402

torch = torch_or_skip("t5_parity")
from st_codec import st_read  # noqa: E402 (after the skip: it imports torch)


def relative_position_bucket(relative_position, num_buckets=32, max_distance=128):
    """transformers' T5Attention._relative_position_bucket, bidirectional (the encoder's)."""
    relative_buckets = 0
    num_buckets //= 2
    relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
    relative_position = torch.abs(relative_position)
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact) / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)).to(torch.long)
    relative_position_if_large = torch.min(relative_position_if_large,
                                           torch.full_like(relative_position_if_large, num_buckets - 1))
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


def buckets_table(T, max_distance):
    ctx = torch.arange(T, dtype=torch.long)[:, None]
    mem = torch.arange(T, dtype=torch.long)[None, :]
    return relative_position_bucket(mem - ctx, 32, max_distance)


def rms_norm(x, w, eps=1e-6):
    variance = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(variance + eps))


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def case_tokens(B, T, vocab, masked):
    """One case's token ids [B, T] (int32) and lengths: random ids from torch's generator (2 .. vocab - 1), each
    row ended by </s> (1) and padded (0) after it; masked: row b is T - 7 b long and lengths lists them, else every
    row is T - 3 long and lengths is None (no mask). library_parity.py's T5 cases draw theirs here too."""
    tokens = torch.randint(2, vocab, (B, T), dtype=torch.int32)
    lengths = [T - 7 * b for b in range(B)] if masked else None
    for b in range(B):
        end = lengths[b] if masked else T - 3
        tokens[b, end - 1] = 1
        tokens[b, end:] = 0
    return tokens, lengths


def t5_forward(W, x, heads, max_distance, lengths):
    """x: [B, T, d_model] input embeddings (overrides already in). Returns the last hidden state."""
    B, T, D = x.shape
    nb = W["encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"].shape[0]
    ctx = torch.arange(T)[:, None]
    mem = torch.arange(T)[None, :]
    bucket = relative_position_bucket(mem - ctx, nb, max_distance)
    bias = W["encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"][bucket]  # [T, T, H]
    bias = bias.permute(2, 0, 1).unsqueeze(0)  # [1, H, T, T]
    if lengths is not None:
        mask = (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]).to(x.dtype)  # [B, T]
        ext = (1.0 - mask[:, None, None, :]) * torch.finfo(x.dtype).min
        bias = bias + ext
    layers = 0
    while f"encoder.block.{layers}.layer.0.layer_norm.weight" in W:
        layers += 1
    h = x
    for l in range(layers):
        p = f"encoder.block.{l}.layer."
        n = rms_norm(h, W[p + "0.layer_norm.weight"])
        q = n @ W[p + "0.SelfAttention.q.weight"].T
        k = n @ W[p + "0.SelfAttention.k.weight"].T
        v = n @ W[p + "0.SelfAttention.v.weight"].T
        dk = q.shape[-1] // heads
        q, k, v = (t.view(B, T, heads, dk).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-1, -2) + bias  # no 1/sqrt(d_kv): T5's init folds it in
        attn = torch.softmax(scores, dim=-1) @ v
        attn = attn.transpose(1, 2).reshape(B, T, heads * dk)
        h = h + attn @ W[p + "0.SelfAttention.o.weight"].T
        n = rms_norm(h, W[p + "1.layer_norm.weight"])
        g = gelu_new(n @ W[p + "1.DenseReluDense.wi_0.weight"].T) * (n @ W[p + "1.DenseReluDense.wi_1.weight"].T)
        h = h + g @ W[p + "1.DenseReluDense.wo.weight"].T
    return rms_norm(h, W["encoder.final_layer_norm.weight"])


def main():
    args = cli_args()
    failures = 0
    with RawFiles.temporary() as files:
        path, write, read = files.path, files.write, files.read

        # the buckets, every pair of a 300-token sequence
        for md in (128, 20):
            subprocess.run([args.cli, "buckets", "--seq", "300", "--max-distance", str(md), "--out", path("b")],
                           check=True)
            got = read("b", (300, 300), torch.int32).to(torch.long)
            bad = (got != buckets_table(300, md)).sum().item()
            print(f"buckets, max distance {md}: {bad} of 90000 pairs differ")
            failures += bad != 0

        ckpt = path("t5.safetensors")
        subprocess.run([args.cli, "gen", "--out", ckpt, "--seed", str(args.seed)], check=True)
        W = {k: v.to(torch.float64) for k, v in st_read(ckpt).items()}
        heads = W["encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"].shape[1]
        vocab, D = W["shared.weight"].shape
        for B, T, masked in ((2, 40, False), (2, 40, True), (1, 77, False)):
            tokens, lengths = case_tokens(B, T, vocab, masked)
            R = 3
            rows = torch.randn(R, D, dtype=torch.float64)
            overrides = [(0, 1, 0), (0, 2, 1), (B - 1, 5, 2), (B - 1, 9, 0)]
            G = torch.randn(B, T, D, dtype=torch.float64)
            cmd = [args.cli, "run", "--ckpt", ckpt, "--tokens", write("tok", tokens, torch.int32),
                   "--batch", str(B), "--seq", str(T), "--max-distance", "20",
                   "--rows", write("rows", rows, torch.float32), "--nrows", str(R),
                   "--overrides", write("ov", torch.tensor(overrides, dtype=torch.int32), torch.int32),
                   "--noverrides", str(len(overrides)), "--dout", write("dout", G, torch.float32),
                   "--out", path("out"), "--drows", path("drows")]
            if masked:
                cmd += ["--lengths", write("len", torch.tensor(lengths, dtype=torch.int32), torch.int32)]
            subprocess.run(cmd, check=True)
            c_out = read("out", (B, T, D)).to(torch.float64)
            c_drows = read("drows", (R, D)).to(torch.float64)

            # the reference gets the same f32-rounded inputs the C side got
            rows_ref = rows.to(torch.float32).to(torch.float64).requires_grad_(True)
            G_ref = G.to(torch.float32).to(torch.float64)
            x = W["shared.weight"][tokens.long()].clone()
            for (b, p, r) in overrides:
                x[b, p] = rows_ref[r]
            out = t5_forward(W, x, heads, 20, lengths)
            (out * G_ref).sum().backward()
            ef, eg = rel_err(c_out, out.detach()), rel_err(c_drows, rows_ref.grad)
            ok = ef <= 1e-4 and eg <= 1e-3
            failures += not ok
            print(f"B {B} T {T} mask {masked}: forward rel err {ef:.3g}, row gradient rel err {eg:.3g}"
                  f" {'ok' if ok else 'FAIL'}")
    return finish("t5_parity", failures)


if __name__ == "__main__":
    sys.exit(main())
