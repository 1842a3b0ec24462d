#!/usr/bin/env python3
"""sd3_text_parity.py - the C SD3 / Flux.1 text conditioning against a float64 PyTorch reference.

The reference follows diffusers' pipelines line by line (transformers is not installed with Debian's
torch, so the encoders are clip_reference.py's CLIP, strict-loading the C generator's weights, and
t5_parity.py's T5):
  - StableDiffusion3Pipeline.encode_prompt (pipeline_stable_diffusion_3.py): each CLIP encoder a
    CLIPTextModelWithProjection run with output_hidden_states=True, prompt_embeds =
    hidden_states[-2] (hidden_states[-(clip_skip + 2)] with the pipeline's clip_skip), pooled =
    output[0] (text_projection of final_layer_norm at the end token, input_ids.argmax(-1));
    clip = cat([L, G], -1); F.pad(clip, (0, t5.shape[-1] - clip.shape[-1])); cat([clip, t5], -2);
    pooled = cat([L pooled, G pooled], -1); without T5 the pipeline's zeros [B, 77, joint_attention_dim];
  - FluxPipeline.encode_prompt (pipeline_flux.py): CLIPTextModel's pooler_output (no projection) and T5's
    last hidden state as the context.
Placeholder rows replace token embeddings at their positions in CLIP's and T5's sequences. Checked:
the context, the pooled vector and the gradient of sum(Gc * context) + sum(Gp * pooled) with respect to
every encoder's rows (clip_l, clip_g, t5xxl). The C side runs through sdt-sd3-text-io
(tests/parity/sd3_text_cli.c) on the CPU backend in f32. Thresholds: relative error (max |a - b| /
max |b|) <= 1e-4 forward, <= 1e-3 gradients. Exits 77 (skip) without torch.

  python3 tests/parity/sd3_text_parity.py --cli build/tests/parity/sdt-sd3-text-io [--seed N]
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity_cli import RawFiles, cli_args, finish, rel_err, torch_or_skip  # noqa: E402

torch = torch_or_skip("sd3_text_parity")
import torch.nn.functional as F  # noqa: E402
from clip_reference import ClipTextModel, ClipTextModelWithProjection  # noqa: E402
from st_codec import st_read  # noqa: E402
from t5_parity import t5_forward  # noqa: E402

T = 77


def load_clip(path, heads, act, projected):
    raw = st_read(path)
    sd = {}
    for k, v in raw.items():
        i = k.index(".transformer.") + len(".transformer.")
        sd[k[i:]] = v.to(torch.float64)
    vocab, width = sd["text_model.embeddings.token_embedding.weight"].shape
    positions = sd["text_model.embeddings.position_embedding.weight"].shape[0]
    layers = len({k.split(".")[3] for k in sd if k.startswith("text_model.encoder.layers.")})
    hidden = sd["text_model.encoder.layers.0.mlp.fc1.weight"].shape[0]
    if projected:
        m = ClipTextModelWithProjection(vocab, width, layers, heads, positions, hidden, act,
                                        sd["text_projection.weight"].shape[0])
    else:
        m = ClipTextModel(vocab, width, layers, heads, positions, hidden, act)
    m.load_state_dict(sd, strict=True)
    return m.to(torch.float64)


def clip_run(m, ids, rows, overrides):
    """CLIPTextModel(WithProjection) with output_hidden_states=True and rows at the overrides: (hidden_states,
    pooled), pooled = [text_projection of] final_layer_norm(last)[b, ids[b].argmax()]."""
    tm = m.text_model
    x = tm.embeddings.token_embedding.weight[ids.long()].clone()
    for (b, p, r) in overrides:
        x[b, p] = rows[r]
    h = x + tm.embeddings.position_embedding.weight[: ids.shape[1]][None]
    hidden = [h]
    for layer in tm.encoder.layers:
        h = layer(h)
        hidden.append(h)
    last = tm.final_layer_norm(h)
    pooled = last[torch.arange(ids.shape[0]), ids.long().argmax(-1)]
    if hasattr(m, "text_projection"):
        pooled = m.text_projection(pooled)
    return hidden, pooled


def t5_run(W, ids, rows, overrides):
    heads = W["encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"].shape[1]
    x = W["shared.weight"][ids.long()].clone()
    for (b, p, r) in overrides:
        x[b, p] = rows[r]
    return t5_forward(W, x, heads, 128, None)


def main():
    args = cli_args()
    failures = 0
    with RawFiles.temporary() as files:
        path, write, read = files.path, files.write, files.read64

        for family, no_t5, clip_skip in (("sd3", False, 0), ("sd3", True, 0), ("sd3", False, 3), ("flux", False, 0)):
            flux = family == "flux"
            d = path(family)
            os.makedirs(d, exist_ok=True)
            info = subprocess.run([args.cli, "gen", "--dir", d, "--seed", str(args.seed)] + (["--flux"] if flux else []),
                                  check=True, capture_output=True, text=True).stdout.split()
            l_heads, g_heads = int(info[1]), int(info[3])
            L = load_clip(os.path.join(d, "clip_l.safetensors"), l_heads, "quick_gelu", not flux)
            G = None if flux else load_clip(os.path.join(d, "clip_g.safetensors"), g_heads, "gelu", True)
            W5 = {k: v.to(torch.float64) for k, v in st_read(os.path.join(d, "t5.safetensors")).items()}
            V, D = W5["shared.weight"].shape
            vocab = L.text_model.embeddings.token_embedding.weight.shape[0]
            B, L5, R = 2, 16, 3
            # CLIP-L's ids padded with the end token (vocab - 1), bigG's with 0 after it; T5's text, </s>, <pad>
            ids_l = torch.full((B, T), vocab - 1, dtype=torch.int32)
            ids_t5 = torch.zeros((B, L5), dtype=torch.int32)
            for b in range(B):
                n = 8 + 6 * b
                ids_l[b, 0] = vocab - 2
                ids_l[b, 1:n] = torch.randint(1, vocab - 2, (n - 1,), dtype=torch.int32)
                n5 = 7 + 4 * b
                ids_t5[b, :n5] = torch.randint(2, V - 4, (n5,), dtype=torch.int32)
                ids_t5[b, n5] = 1
            ov = [(0, 2, 0), (0, 3, 1), (1, 5, 2), (1, 9, 0)]
            ov5 = [(0, 1, 0), (0, 2, 1), (1, 4, 2), (1, 10, 0)]
            for (b, p, _) in ov:
                ids_l[b, p] = 0  # the slot token, as A1111 writes it
            ids_g = ids_l.clone()
            for b in range(B):
                end = int(ids_l[b].long().argmax())
                ids_g[b, end + 1:] = 0
            Cl = L.text_model.final_layer_norm.weight.shape[0]
            Cg = 0 if flux else G.text_model.final_layer_norm.weight.shape[0]
            rows_l = torch.randn(R, Cl, dtype=torch.float64) * 0.05
            rows_g = torch.randn(R, max(Cg, 1), dtype=torch.float64) * 0.05
            rows_t5 = torch.randn(R, D, dtype=torch.float64)
            ctx_rows = L5 if flux else T + (T if no_t5 else L5)
            P = Cl if flux else L.text_projection.weight.shape[0] + G.text_projection.weight.shape[0]
            Gc = torch.randn(B, ctx_rows, D, dtype=torch.float64)
            Gp = torch.randn(B, P, dtype=torch.float64)
            cmd = [args.cli, "run", "--dir", d, "--batch", str(B), "--t5-len", str(L5),
                   "--tokens-l", write("tl", ids_l, torch.int32), "--tokens-g", write("tg", ids_g, torch.int32),
                   "--tokens-t5", write("t5", ids_t5, torch.int32), "--nrows", str(R),
                   "--rows-l", write("rl", rows_l, torch.float32), "--rows-g", write("rg", rows_g, torch.float32),
                   "--rows-t5", write("rt", rows_t5, torch.float32),
                   "--ov", write("ov", torch.tensor(ov, dtype=torch.int32), torch.int32), "--nov", str(len(ov)),
                   "--ov5", write("ov5", torch.tensor(ov5, dtype=torch.int32), torch.int32), "--nov5", str(len(ov5)),
                   "--clip-skip", str(clip_skip), "--dcontext", write("dc", Gc, torch.float32),
                   "--dpooled", write("dp", Gp, torch.float32), "--out-context", path("oc"), "--out-pooled",
                   path("op"), "--drows-l", path("drl"), "--drows-g", path("drg"), "--drows-t5", path("drt")]
            cmd += (["--flux"] if flux else []) + (["--no-t5"] if no_t5 else [])
            subprocess.run(cmd, check=True)
            c_ctx, c_pool = read("oc", (B, ctx_rows, D)), read("op", (B, P))
            c_grads = {"clip_l": read("drl", (R, Cl)), "t5xxl": read("drt", (R, D))}
            if not flux:
                c_grads["clip_g"] = read("drg", (R, Cg))

            # the reference, on the same f32-rounded inputs
            def f32(t):
                return t.to(torch.float32).to(torch.float64).requires_grad_(True)
            ref_rows = {"clip_l": f32(rows_l), "clip_g": f32(rows_g), "t5xxl": f32(rows_t5)}
            hl, pl = clip_run(L, ids_l, ref_rows["clip_l"], ov)
            t5_out = (torch.zeros(B, T, D, dtype=torch.float64) if no_t5
                      else t5_run(W5, ids_t5, ref_rows["t5xxl"], ov5))
            if flux:
                ctx, pooled = t5_out, pl
            else:
                hg, pg = clip_run(G, ids_g, ref_rows["clip_g"], ov)
                pipeline_skip = None if clip_skip == 0 else clip_skip - 2  # ours: A1111's count, 2 = penultimate
                k = -2 if pipeline_skip is None else -(pipeline_skip + 2)
                clip = torch.cat([hl[k], hg[k]], dim=-1)
                clip = F.pad(clip, (0, t5_out.shape[-1] - clip.shape[-1]))
                ctx = torch.cat([clip, t5_out], dim=-2)
                pooled = torch.cat([pl, pg], dim=-1)
            ((ctx * Gc.to(torch.float32).to(torch.float64)).sum()
             + (pooled * Gp.to(torch.float32).to(torch.float64)).sum()).backward()
            ef, ep = rel_err(c_ctx, ctx.detach()), rel_err(c_pool, pooled.detach())
            ok = ef <= 1e-4 and ep <= 1e-4
            line = f"{family} no_t5={no_t5} clip_skip={clip_skip}: context {ef:.3g}, pooled {ep:.3g}"
            pad = 0.0 if flux else c_ctx[:, :T, Cl + Cg:].abs().max().item()
            ok = ok and pad == 0.0
            for name, g in c_grads.items():
                want = ref_rows[name].grad
                if name == "t5xxl" and no_t5:
                    want = torch.zeros_like(g)
                    eg = g.abs().max().item()
                else:
                    eg = rel_err(g, want[:, :g.shape[1]])
                ok = ok and eg <= 1e-3
                line += f", d{name} {eg:.3g}"
            failures += not ok
            print(line + (" ok" if ok else " FAIL"))
    return finish("sd3_text_parity", failures)


if __name__ == "__main__":
    sys.exit(main())
