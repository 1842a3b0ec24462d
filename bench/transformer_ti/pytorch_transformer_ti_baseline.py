#!/usr/bin/env python3
"""PyTorch reference for one textual-inversion (embedding) training step of SD3.5 Medium, SD3.5 Large and
Flux.1 dev (issue 30, "Speed"), as diffusers' and OneTrainer's trainers run it: random (seeded) weights, bf16,
1024x1024 (latents 16x128x128, random: the VAE is not part of the step, its latents are cached).

Models (published configs, see shared/reference/transformer-families.md):
  sd35m     diffusers SD3Transformer2DModel, 24 joint blocks of 1536, MMDiT-X self-attention in blocks 0..12, QK RMS
            norm; CLIP-L + CLIP-G (transformers CLIPTextModelWithProjection) + T5 v1.1 XXL (T5EncoderModel), 256 T5
            tokens; context [77 CLIP (L|G penultimate, zero-padded to 4096) | 256 T5] x 4096; pooled L|G 2048
  sd35l     the same with 38 joint blocks of 2432, no MMDiT-X blocks
  flux-dev  diffusers FluxTransformer2DModel, 19 double + 38 single blocks of 3072, guidance embedder (3.5);
            CLIP-L (CLIPTextModel, pooled output only) + T5 XXL, 512 T5 tokens; latents packed 2x2 -> 4096 x 64
Step: one placeholder token; each trained encoder gets a trainable fp32 row (a delta added to its token
embedding's output at the placeholder's position, so only that row gets gradient; the base weights are frozen);
AdamW (lr 5e-3, weight decay 0) on the rows. Rectified flow: u = sigmoid(N(0, 1)) (logit-normal), sigma =
SD3's shift 3.0 (3u / (1 + 2u)) or Flux's resolution shift (mu 1.15 at 4096 image tokens); x_t = (1 - sigma) x0 +
sigma noise, target noise - x0, MSE (weighting none). SD3 gets timestep 1000 sigma, Flux sigma (it scales by 1000).
Encoders not trained (--train-encoders clip|t5) run once per configuration under no_grad, their outputs cached and
the models moved to the CPU for the timed steps (as OneTrainer caches and offloads them).
Each timed step is synchronised (CUDA events); peak memory is max_memory_allocated over the configuration's steps
(the weights on the GPU included). A configuration that runs out of memory is a row that says so.

Needs torch, transformers and diffusers' src on PYTHONPATH (bench/transformer_ti/fetch_sources.md), e.g.
  PYTHONPATH=DIFFUSERS_SRC python3 pytorch_transformer_ti_baseline.py --models sd35m,sd35l,flux-dev \\
      --batches 1 --checkpointing both --json OUT/transformer_ti.json
  python3 pytorch_transformer_ti_baseline.py --device cpu --tiny          # a check of the script on the CPU
"""
import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

T0 = time.time()
PH_CLIP = 4  # the placeholder's position in the CLIP prompts (after BOS and three words)
PH_T5 = 3  # and in the T5 prompt (no BOS)
EOS_POS = 8
NPOOL = 2  # cached latent batches, used in turn
GUIDANCE = 3.5  # Flux dev's distilled guidance as diffusers' and kohya's Flux trainers feed it
LR = 5e-3

# --------------------------------------------------------------------------- configs
CLIP_L = dict(vocab_size=49408, hidden_size=768, intermediate_size=3072, projection_dim=768, num_hidden_layers=12,
              num_attention_heads=12, max_position_embeddings=77, hidden_act="quick_gelu", layer_norm_eps=1e-5,
              bos_token_id=49406, eos_token_id=49407, pad_token_id=49407)
CLIP_G = dict(vocab_size=49408, hidden_size=1280, intermediate_size=5120, projection_dim=1280, num_hidden_layers=32,
              num_attention_heads=20, max_position_embeddings=77, hidden_act="gelu", layer_norm_eps=1e-5,
              bos_token_id=49406, eos_token_id=49407, pad_token_id=0)
# T5 v1.1 XXL as SD3's text_encoder_3 and Flux's text_encoder_2; dropout_rate is 0.1 in the published file and
# 0 here: the step's cost is the same and the loss stays a deterministic function of the seed.
T5_XXL = dict(vocab_size=32128, d_model=4096, d_kv=64, d_ff=10240, num_layers=24, num_heads=64,
              relative_attention_num_buckets=32, relative_attention_max_distance=128, dropout_rate=0.0,
              layer_norm_epsilon=1e-6, feed_forward_proj="gated-gelu", is_encoder_decoder=True, use_cache=False,
              tie_word_embeddings=False, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
SD35_COMMON = dict(sample_size=128, patch_size=2, in_channels=16, out_channels=16, attention_head_dim=64,
                   joint_attention_dim=4096, pooled_projection_dim=2048, qk_norm="rms_norm")
MODELS = {
    "sd35m": dict(family="sd3", t5_len=256, latent=128,
                  transformer=dict(SD35_COMMON, num_layers=24, num_attention_heads=24, caption_projection_dim=1536,
                                   pos_embed_max_size=384, dual_attention_layers=tuple(range(13)))),
    "sd35l": dict(family="sd3", t5_len=256, latent=128,
                  transformer=dict(SD35_COMMON, num_layers=38, num_attention_heads=38, caption_projection_dim=2432,
                                   pos_embed_max_size=192, dual_attention_layers=())),
    "flux-dev": dict(family="flux", t5_len=512, latent=128,
                     transformer=dict(patch_size=1, in_channels=64, num_layers=19, num_single_layers=38,
                                      attention_head_dim=128, num_attention_heads=24, joint_attention_dim=4096,
                                      pooled_projection_dim=768, guidance_embeds=True, axes_dims_rope=(16, 56, 56))),
}
# --tiny: the same architectures a few channels wide (a check of the script, not a measurement)
TINY_CLIP_L = dict(CLIP_L, hidden_size=16, intermediate_size=32, projection_dim=16, num_hidden_layers=2,
                   num_attention_heads=2)
TINY_CLIP_G = dict(CLIP_G, hidden_size=24, intermediate_size=48, projection_dim=24, num_hidden_layers=2,
                   num_attention_heads=2)
TINY_T5 = dict(T5_XXL, d_model=48, d_kv=8, d_ff=64, num_layers=2, num_heads=6)
TINY_MODELS = {
    "sd35m": dict(family="sd3", t5_len=16, latent=16,
                  transformer=dict(SD35_COMMON, sample_size=16, attention_head_dim=8, joint_attention_dim=48,
                                   pooled_projection_dim=40, num_layers=3, num_attention_heads=2,
                                   caption_projection_dim=16, pos_embed_max_size=16, dual_attention_layers=(0, 1))),
    "sd35l": dict(family="sd3", t5_len=16, latent=16,
                  transformer=dict(SD35_COMMON, sample_size=16, attention_head_dim=8, joint_attention_dim=48,
                                   pooled_projection_dim=40, num_layers=3, num_attention_heads=3,
                                   caption_projection_dim=24, pos_embed_max_size=16, dual_attention_layers=())),
    "flux-dev": dict(family="flux", t5_len=16, latent=16,
                     transformer=dict(patch_size=1, in_channels=64, num_layers=1, num_single_layers=2,
                                      attention_head_dim=16, num_attention_heads=2, joint_attention_dim=48,
                                      pooled_projection_dim=16, guidance_embeds=True, axes_dims_rope=(4, 6, 6))),
}


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


def sdpa_math(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """F.scaled_dot_product_attention's math path, for torch < 2.0 (Debian's 1.13, the CPU check only)."""
    s = query @ key.transpose(-2, -1) * (scale if scale is not None else query.shape[-1] ** -0.5)
    if is_causal:
        n, m = s.shape[-2:]
        s = s.masked_fill(torch.ones(n, m, dtype=torch.bool, device=s.device).triu(m - n + 1), float("-inf"))
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask
    p = torch.softmax(s.float(), dim=-1).to(query.dtype)
    return F.dropout(p, dropout_p) @ value


if not hasattr(F, "scaled_dot_product_attention"):
    F.scaled_dot_product_attention = sdpa_math


def oom_errors():
    e = getattr(torch.cuda, "OutOfMemoryError", None)
    return (e,) if e is not None else ()


def is_oom(e):
    return isinstance(e, oom_errors()) or "out of memory" in str(e)


# --------------------------------------------------------------------------- building
@contextlib.contextmanager
def building(dev, dtype):
    """Parameters made directly in dtype on dev (a 12B model never exists in fp32)."""
    old = torch.get_default_dtype()
    old_dev = torch.get_default_device() if hasattr(torch, "get_default_device") else "cpu"
    torch.set_default_dtype(dtype)
    if hasattr(torch, "set_default_device"):  # torch >= 2.0; on 1.13 (CPU only) every tensor is made on the CPU
        torch.set_default_device(dev)
    try:
        yield
    finally:
        torch.set_default_dtype(old)
        if hasattr(torch, "set_default_device"):
            torch.set_default_device(old_dev)


def scaled_depth(n, f, least=1):
    return max(least, int(round(n * f)))


def build(name, a, dev, dtype):
    """The model's transformer and encoders: dict(transformer, clip_l, clip_g (SD3 only), t5)."""
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection, T5Config, T5EncoderModel
    spec = (TINY_MODELS if a.tiny else MODELS)[name]
    cl, cg, t5c = (TINY_CLIP_L, TINY_CLIP_G, TINY_T5) if a.tiny else (CLIP_L, CLIP_G, T5_XXL)
    f = a.depth_scale
    cl = dict(cl, num_hidden_layers=scaled_depth(cl["num_hidden_layers"], f, 2))  # 2: the penultimate state
    cg = dict(cg, num_hidden_layers=scaled_depth(cg["num_hidden_layers"], f, 2))
    t5c = dict(t5c, num_layers=scaled_depth(t5c["num_layers"], f))
    tc = dict(spec["transformer"])
    tc["num_layers"] = scaled_depth(tc["num_layers"], f)
    if "num_single_layers" in tc:
        tc["num_single_layers"] = scaled_depth(tc["num_single_layers"], f)
    if "dual_attention_layers" in tc:
        tc["dual_attention_layers"] = tuple(i for i in tc["dual_attention_layers"] if i < tc["num_layers"] - 1)
    torch.manual_seed(0)
    m = {}
    with building(dev, dtype):
        if spec["family"] == "sd3":
            from diffusers import SD3Transformer2DModel
            m["transformer"] = SD3Transformer2DModel(**tc)
            m["clip_l"] = CLIPTextModelWithProjection(CLIPTextConfig(**cl))
            m["clip_g"] = CLIPTextModelWithProjection(CLIPTextConfig(**cg))
        else:
            from diffusers import FluxTransformer2DModel
            m["transformer"] = FluxTransformer2DModel(**tc)
            m["clip_l"] = CLIPTextModel(CLIPTextConfig(**cl))
        m["t5"] = T5EncoderModel(T5Config(**t5c))
    for mod in m.values():
        mod.to(device=dev, dtype=dtype).requires_grad_(False).eval()
    # transformers' from_pretrained keeps T5's feed-forward output projection in fp32 (_keep_in_fp32_modules),
    # as the pipelines load it; a model built from a config does not, so do it here.
    keep = [k for attr in ("_keep_in_fp32_modules", "_keep_in_fp32_modules_strict")
            for k in (getattr(m["t5"], attr, None) or ())]
    for n_, sub in m["t5"].named_modules():
        if any(n_.endswith("." + k) for k in keep):
            sub.float()
    return spec, m


def n_params(mod):
    return sum(p.numel() for p in mod.parameters())


# --------------------------------------------------------------------------- one configuration's step
def clip_ids(B, pad, g):
    ids = torch.randint(0, 49405, (B, 77), generator=g)
    ids[:, 0] = 49406
    ids[:, EOS_POS] = 49407
    ids[:, EOS_POS + 1:] = pad  # CLIP-L pads with end-of-text, CLIP-G (OpenCLIP) with 0
    return ids


def t5_ids(B, n, g):
    ids = torch.randint(2, 32000, (B, n), generator=g)
    ids[:, EOS_POS] = 1  # SentencePiece pieces, EOS, pads of 0
    ids[:, EOS_POS + 1:] = 0
    return ids


class Step:
    def __init__(self, spec, m, B, ckpt, train, dev, dtype, compiled):
        self.spec, self.m, self.B, self.dev, self.dtype = spec, m, B, dev, dtype
        self.flux = spec["family"] == "flux"
        self.i = 0
        self.hooks, self.offloaded = [], []
        torch.manual_seed(1)  # each configuration draws the same noise and timesteps, whatever ran before it
        g = torch.Generator().manual_seed(123)
        encoders = ["clip_l", "t5"] if self.flux else ["clip_l", "clip_g", "t5"]
        self.ids = {"clip_l": clip_ids(B, 49407, g).to(dev), "t5": t5_ids(B, spec["t5_len"], g).to(dev)}
        if not self.flux:
            self.ids["clip_g"] = clip_ids(B, 0, g).to(dev)
        h = w = spec["latent"]
        self.lat = torch.randn(NPOOL, B, 16, h, w, generator=g).to(dev)
        if self.flux:  # image positions (0, row, col) over the packed grid, text positions 0
            r, c = torch.meshgrid(torch.arange(h // 2), torch.arange(w // 2), indexing="ij")
            self.img_ids = torch.stack([torch.zeros_like(r), r, c], -1).reshape(-1, 3).float().to(dev)
            self.txt_ids = torch.zeros(spec["t5_len"], 3, device=dev)
            seq = (h // 2) * (w // 2)  # Flux's resolution shift: mu from the image token count, 256..4096 -> 0.5..1.15
            self.mu = 0.5 + (1.15 - 0.5) * (seq - 256) / (4096 - 256)
        self.trained = [e for e in encoders if train == "all" or (train == "clip") == e.startswith("clip")]
        self.frozen = [e for e in encoders if e not in self.trained]
        for e in encoders:
            m[e].train(ckpt and e in self.trained)
            if ckpt and e in self.trained:
                m[e].gradient_checkpointing_enable()
            else:
                m[e].gradient_checkpointing_disable()
        tr = m["transformer"]
        tr.train(ckpt)
        if ckpt:
            tr.enable_gradient_checkpointing()
        else:
            tr.disable_gradient_checkpointing()
        self.net = torch.compile(tr) if compiled else tr
        # the placeholder's rows: a zero fp32 delta per trained encoder, added at the placeholder's position
        self.rows = {}
        for e in self.trained:
            emb = m[e].get_input_embeddings()
            pos = PH_T5 if e == "t5" else PH_CLIP
            mask = torch.zeros(1, self.ids[e].shape[1], 1, dtype=torch.bool, device=dev)
            mask[:, pos] = True
            v = nn.Parameter(torch.zeros(emb.weight.shape[1], device=dev, dtype=torch.float32))
            self.rows[e] = v
            self.hooks.append(emb.register_forward_hook(
                lambda mod, inp, out, v=v, mask=mask: out + mask * v.to(out.dtype)))
        self.opt = torch.optim.AdamW(list(self.rows.values()), lr=LR, weight_decay=0.0)
        # encoders not trained: their outputs once, then the models leave the GPU for the timed steps
        self.cache = {}
        with torch.no_grad(), self.autocast():
            for e in self.frozen:
                self.cache[e] = tuple(None if t is None else t.detach() for t in self.run_encoder(e))
        for e in self.frozen:
            if dev != "cpu":
                m[e].to("cpu")
                self.offloaded.append(e)

    def autocast(self):
        if self.dev == "cpu":
            return contextlib.nullcontext()
        return torch.autocast("cuda", dtype=self.dtype)

    def run_encoder(self, e):
        """(per-token states the context takes, pooled vector or None)."""
        mod = self.m[e]
        if e == "t5":
            return mod(input_ids=self.ids[e]).last_hidden_state, None
        if self.flux:  # Flux takes CLIP-L's pooled output only
            return None, mod(input_ids=self.ids[e]).pooler_output
        o = mod(input_ids=self.ids[e], output_hidden_states=True)
        return o.hidden_states[-2], o.text_embeds

    def close(self):
        for h in self.hooks:
            h.remove()
        for e in self.offloaded:
            self.m[e].to(self.dev)
        self.offloaded = []

    def sigmas(self):
        u = torch.sigmoid(torch.randn(self.B, device=self.dev))  # logit-normal, mean 0, std 1
        if self.flux:
            return math.exp(self.mu) / (math.exp(self.mu) + 1 / u - 1)
        return 3.0 * u / (1 + 2.0 * u)  # SD3's shift 3.0

    def step(self):
        B = self.B
        x0 = self.lat[self.i % NPOOL]
        self.i += 1
        noise = torch.randn_like(x0)
        s = self.sigmas()
        sv = s.view(B, 1, 1, 1)
        xt = (1 - sv) * x0 + sv * noise
        target = noise - x0
        with self.autocast():
            out = {e: self.cache[e] if e in self.cache else self.run_encoder(e) for e in self.m if e != "transformer"}
            if self.flux:
                h, w = xt.shape[-2:]
                pack = lambda x: x.view(B, 16, h // 2, 2, w // 2, 2).permute(0, 2, 4, 1, 3, 5).reshape(B, -1, 64)
                xt, target = pack(xt), pack(target)
                pred = self.net(hidden_states=xt.to(self.dtype), encoder_hidden_states=out["t5"][0],
                                pooled_projections=out["clip_l"][1], timestep=s.to(self.dtype),
                                img_ids=self.img_ids, txt_ids=self.txt_ids,
                                guidance=torch.full((B,), GUIDANCE, device=self.dev, dtype=self.dtype),
                                return_dict=False)[0]
            else:
                clip = torch.cat([out["clip_l"][0], out["clip_g"][0]], dim=-1)
                clip = F.pad(clip, (0, out["t5"][0].shape[-1] - clip.shape[-1]))
                ctx = torch.cat([clip, out["t5"][0].to(clip.dtype)], dim=1)
                pooled = torch.cat([out["clip_l"][1], out["clip_g"][1]], dim=-1)
                pred = self.net(hidden_states=xt.to(self.dtype), encoder_hidden_states=ctx, pooled_projections=pooled,
                                timestep=(1000 * s).to(self.dtype), return_dict=False)[0]
        loss = F.mse_loss(pred.float(), target.float())
        loss.backward()
        gn = {e: v.grad.detach().norm() for e, v in self.rows.items()}
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return loss.detach(), gn


def reset_memory(dev):
    import gc
    gc.collect()
    if dev != "cpu":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def run_config(name, spec, m, B, ckpt, train, compiled, a, dev, dtype):
    row = dict(model=name, B=B, checkpointing=ckpt, train_encoders=train, compiled=compiled)
    reset_memory(dev)
    st = None
    try:
        st = Step(spec, m, B, ckpt, train, dev, dtype, compiled)
        row["trained"] = st.trained
        if dev != "cpu":  # the peak from here: weights on the GPU, untrained encoders' outputs cached and offloaded
            torch.cuda.reset_peak_memory_stats()
        for _ in range(a.warmup):
            st.step()
        if dev != "cpu":
            torch.cuda.synchronize()
        ts, losses, gns = [], [], []
        for _ in range(a.steps):
            if dev != "cpu":
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                loss, gn = st.step()
                e.record()
                e.synchronize()
                ts.append(s.elapsed_time(e))
            else:
                t = time.perf_counter()
                loss, gn = st.step()
                ts.append((time.perf_counter() - t) * 1e3)
            losses.append(loss)
            gns.append(gn)
        med = statistics.median(ts)
        row.update(ms_median=med, ms_min=min(ts), ms_max=max(ts), img_s=B * 1000 / med,
                   peak_gib=torch.cuda.max_memory_allocated() / 2**30 if dev != "cpu" else None,
                   losses=[float(x) for x in losses], finite=all(bool(torch.isfinite(x)) for x in losses),
                   row_grad_norm={e: float(v) for e, v in gns[-1].items()},
                   row_norm={e: float(v.detach().norm()) for e, v in st.rows.items()})
        # what makes it an embedding step: every trained row got a gradient and moved, nothing else learns
        row["rows_learn"] = all(v > 0 for v in row["row_grad_norm"].values()) and \
            all(v > 0 for v in row["row_norm"].values())
        row["frozen_with_grad"] = sum(1 for mod in m.values() for p in mod.parameters() if p.grad is not None)
    except Exception as e:  # out of memory, a compile failure or any other error is a row, not the end of the run
        import traceback
        row.update(skipped="out of memory" if is_oom(e) else "compile failed" if compiled else "failed",
                   error=f"{type(e).__name__}: {str(e)[:160]}", trace=traceback.format_exc()[-2000:])
        if dev != "cpu":
            row["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    finally:
        if st is not None:
            st.close()
        del st
        reset_memory(dev)
    log(fmt_row(row))
    return row


def matmul_peak(dev, n=8192, reps=10):
    """The card's bf16 matmul rate in this sitting (the yardstick of bench/NOTES.md's runs)."""
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        a @ b
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    med = statistics.median(ts)
    return dict(n=n, ms_median=med, tflops_median=2 * n ** 3 / (med * 1e-3) / 1e12)


def save(path, res):
    if not path:
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f, indent=1)
    os.replace(tmp, path)


# --------------------------------------------------------------------------- table
HEAD = (f"{'model':9s} {'B':>2s} {'ckpt':4s} {'train':5s} {'compile':7s} {'ms/step':>9s} {'min':>9s} "
        f"{'img/s':>7s} {'peak GiB':>8s}  note")


def fmt_row(r):
    def num(k, f):
        return format(r[k], f) if r.get(k) is not None else format("-", ">" + f.split(".")[0])
    note = r.get("skipped", "") + (f" ({r['error'].split(':')[0]})" if "error" in r else "")
    if not note:
        note = ("finite" if r["finite"] else "NOT FINITE") + ("" if r["rows_learn"] else ", rows do not learn") + \
            (f", {r['frozen_with_grad']} frozen params with grad" if r["frozen_with_grad"] else "")
    return (f"{r['model']:9s} {r['B']:2d} {'on' if r['checkpointing'] else 'off':4s} {r['train_encoders']:5s} "
            f"{'yes' if r['compiled'] else 'no':7s} {num('ms_median', '9.1f')} {num('ms_min', '9.1f')} "
            f"{num('img_s', '7.3f')} {num('peak_gib', '8.2f')}  {note}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="sd35m,sd35l,flux-dev", help="from " + ",".join(MODELS))
    ap.add_argument("--batches", default="1", help="comma-separated batch sizes")
    ap.add_argument("--checkpointing", default="both", choices=["on", "off", "both"],
                    help="gradient checkpointing of the transformer and the trained encoders")
    ap.add_argument("--train-encoders", default="all", choices=["all", "clip", "t5"],
                    help="which encoders' placeholder rows train (the others' outputs are cached)")
    ap.add_argument("--steps", type=int, default=None, help="timed steps (default 10; 2 with --tiny)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 3; 1 with --tiny)")
    ap.add_argument("--compile", action="store_true", help="also each configuration with torch.compile(transformer)")
    ap.add_argument("--depth-scale", type=float, default=1.0, help="blocks of every model times F (a quick check)")
    ap.add_argument("--json", default="", help="write the results here")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--tiny", action="store_true", help="tiny configs of the same architectures (a check, CPU)")
    a = ap.parse_args()
    a.steps = a.steps if a.steps is not None else (2 if a.tiny else 10)
    a.warmup = a.warmup if a.warmup is not None else (1 if a.tiny else 3)
    names = a.models.split(",")
    bad = [n for n in names if n not in MODELS]
    if bad:
        ap.error(f"--models: unknown {', '.join(bad)}; known: {', '.join(MODELS)}")
    if not 0 < a.depth_scale <= 1:
        ap.error("--depth-scale: give a fraction in (0, 1]")
    dev, dtype = a.device, getattr(torch, a.dtype)
    import diffusers
    import transformers
    env = dict(torch=torch.__version__, diffusers=diffusers.__version__, transformers=transformers.__version__,
               python=sys.version.split()[0], device=torch.cuda.get_device_name() if dev != "cpu" else "cpu",
               dtype=a.dtype, tiny=a.tiny, depth_scale=a.depth_scale, steps=a.steps, warmup=a.warmup)
    log("env", json.dumps(env))
    if dev != "cpu":
        torch.backends.cuda.matmul.allow_tf32 = True
    res = dict(env=env, configs=[])
    if dev != "cpu":
        res["matmul_peak"] = matmul_peak(dev)
        log("bf16 matmul", json.dumps(res["matmul_peak"]))
    ckpts = {"on": [True], "off": [False], "both": [False, True]}[a.checkpointing]
    for name in names:
        reset_memory(dev)
        try:
            spec, m = build(name, a, dev, dtype)
        except Exception as e:
            import traceback
            row = dict(model=name, skipped=("out of memory" if is_oom(e) else "failed") + " building the models",
                       error=f"{type(e).__name__}: {str(e)[:160]}", trace=traceback.format_exc()[-2000:])
            log(name, row["skipped"], row["error"])
            res["configs"].append(row)
            save(a.json, res)
            continue
        res.setdefault("params", {})[name] = {k: n_params(v) for k, v in m.items()}
        log(name, "params (M):", ", ".join(f"{k} {v / 1e6:.1f}" for k, v in res["params"][name].items()))
        for ck in ckpts:
            for B in [int(b) for b in a.batches.split(",")]:
                for compiled in ([False, True] if a.compile else [False]):
                    res["configs"].append(run_config(name, spec, m, B, ck, a.train_encoders, compiled, a, dev,
                                                     dtype))
                    save(a.json, res)  # after every row: a call cut short keeps what it measured
        del m
        reset_memory(dev)
    print(HEAD)
    for r in res["configs"]:
        print(fmt_row(r) if "B" in r else f"{r['model']:9s} {r['skipped']}")
    save(a.json, res)
    bad = [r for r in res["configs"] if r.get("skipped", "").startswith("failed") or
           ("skipped" not in r and not (r["finite"] and r["rows_learn"]))]
    for r in bad:
        print(f"{r['model']}: {r.get('trace') or 'loss not finite or a row without gradient'}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
