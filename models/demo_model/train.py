#!/usr/bin/env python3
"""train.py - trains the demo model: Stable Diffusion 1.x's architecture at a small
size, on the demo world (host-sim/demo/world.h), and exports it as one LDM-layout
safetensors file that sdtrain (and any SD 1.x host) loads.

Three stages, each for a share of --minutes of wall time, all from --seed:
  1. data: sdt-world-dump draws --images scenes (64x64) with captions, in parallel;
  2. VAE: LDM's AutoencoderKL (tests/parity/ldm_vae.py), 3 levels (64 px -> 16x16x4),
     trained as a plain autoencoder (L1 + MSE); its latents are then rescaled into the
     weights so that latents * 0.18215 (SD's fixed scaling) have unit variance, and its
     log-variance is pinned at LOGVAR (the encoder is deterministic for all purposes);
  3. UNet + text encoder: LDM's UNetModel (tests/parity/unet_parity.py) and a CLIP text
     transformer in HF's layout (tests/parity/clip_reference.py), trained together on
     epsilon prediction with SD's noise schedule (scaled linear, 1000 steps), 10%
     captions dropped (for classifier-free guidance), min-SNR weighting, EMA weights.
Then samples for a few prompts (DDIM, guidance 4) and the loss curve are written as
PNGs, and the EMA model is exported in f16.

    python3 models/demo_model/train.py --world-dump build/host-sim/demo-tools/sdt-world-dump \
        --tokenizer models/demo_model/tokenizer --out OUT_DIR [--minutes 9] [--seed 0] [--device cuda]

--smoke runs every stage a few steps on small sizes (a CPU check of the script).
The captions are tokenized with tests/parity/clip_simple_tokenizer.py (the reference
models/tokenizer.c is tested against), padded to 77 with the end token as sdtrain pads.
"""
import argparse
import json
import os
import struct
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "parity"))
sys.path.insert(0, HERE)
from clip_reference import ClipTextModel  # noqa: E402
from demo_common import (IMAGE, SAMPLE_PROMPTS, TOKENS, Tokens, as_float_images, batches, draw_world,  # noqa: E402
                         grid, log, step_with_ema, to_uint8)
from ldm_vae import AutoencoderKL  # noqa: E402
from png_util import line_plot_png, write_png  # noqa: E402
from unet_parity import UNetModel  # noqa: E402

SCALING = 0.18215  # SD 1.x's latent scaling; sdtrain reads it as fixed
LOGVAR = -20.0     # the pinned encoder log-variance: std 4.5e-5
CLIP = dict(vocab=1000, width=128, layers=3, heads=2, mlp=512)  # heads = width / 64, as sdtrain detects
VAE = dict(ch=32, mult=[1, 2, 2], res_blocks=1, z=4)
UNET = dict(in_channels=4, out_channels=4, model_channels=64, channel_mult=[1, 1, 2], attention=[True, True, False],
            num_res_blocks=1, depth=[1, 1, 1], middle_depth=1, num_heads=2, head_dim=0, context_dim=CLIP["width"],
            linear_proj=False, groups=32, adm_in=0)  # tests/parity/unet_parity.py's keys (SD 1.x: no y)


# ---------------------------------------------------------------- noise schedule and sampling

def alphas_cumprod(device):
    betas = torch.linspace(0.00085 ** 0.5, 0.012 ** 0.5, 1000, dtype=torch.float64) ** 2
    return torch.cumprod(1.0 - betas, 0).to(device=device, dtype=torch.float32)


@torch.no_grad()
def ddim_sample(unet, ctx, unctx, ac, shape, steps, cfg, gen):
    """DDIM (eta 0), 'leading' spacing with offset 1, as sdtrain's previews sample."""
    x = torch.randn(shape, generator=gen, device="cpu").to(ctx.device)
    ratio = 1000 // steps
    times = [i * ratio + 1 for i in range(steps)][::-1]
    for i, t in enumerate(times):
        tt = torch.full((shape[0],), t, device=ctx.device, dtype=torch.float32)
        eps = unet(torch.cat([x, x]), torch.cat([tt, tt]), torch.cat([ctx, unctx])).float()
        e_c, e_u = eps.chunk(2)
        e = e_u + cfg * (e_c - e_u)
        a = ac[t]
        a_prev = ac[times[i + 1]] if i + 1 < len(times) else ac[0]
        x0 = (x - (1 - a).sqrt() * e) / a.sqrt()
        x = a_prev.sqrt() * x0 + (1 - a_prev).sqrt() * e
    return x


# ---------------------------------------------------------------- training stages

def train_vae(vae, pixels, seconds, max_steps, batch, gen, device, amp, losses):
    opt = torch.optim.AdamW(vae.parameters(), lr=4e-4, weight_decay=0.0)
    it, t0, step = batches(len(pixels), batch, gen, device), time.time(), 0
    vae.train()
    while step < max_steps and time.time() - t0 < seconds:
        x = as_float_images(pixels[next(it)])
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=amp):
            h = vae.quant_conv(vae.encoder(x))
            mean = h[:, :VAE["z"]]
            rec = vae.decoder(vae.post_quant_conv(mean))
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
    vae.eval()
    return step


@torch.no_grad()
def fold_latent_scale(vae, pixels, device):
    """Rescales the mean latents into the weights so latents * SCALING have unit std, and pins the logvar."""
    z = VAE["z"]
    means = []
    for part in pixels[:4096].split(256):
        means.append(vae.quant_conv(vae.encoder(as_float_images(part.to(device))))[:, :z].float())
    std = torch.cat(means).std().item()
    k = 1.0 / (SCALING * std)
    vae.quant_conv.weight[:z] *= k
    vae.quant_conv.bias[:z] *= k
    vae.quant_conv.weight[z:] = 0.0
    vae.quant_conv.bias[z:] = LOGVAR
    vae.post_quant_conv.weight /= k  # input channels of a 1x1 conv: [out, in, 1, 1]
    log(f"vae latent std {std:.4f}: mean rows scaled by {k:.4f}")
    return std


@torch.no_grad()
def encode_all(vae, pixels, device):
    out = []
    for part in pixels.split(1024):
        out.append(vae.encode(as_float_images(part.to(device)))[0].float() * SCALING)
    return torch.cat(out)


def train_diffusion(joint, ema, latents, tokens, empty, ac, seconds, max_steps, batch, gen, device, amp, losses):
    clip, unet = joint.clip, joint.unet
    params = list(joint.parameters())
    opt = torch.optim.AdamW(params, lr=3e-4, weight_decay=0.01)
    warmup = 200
    it, t0, step = batches(len(latents), batch, gen, device), time.time(), 0
    ema_params = list(ema.parameters())
    unet.train()
    clip.train()
    while step < max_steps and time.time() - t0 < seconds:
        idx = next(it)
        x0, ids = latents[idx], tokens[idx].clone()
        drop = torch.rand(batch, generator=gen).to(device) < 0.1
        ids[drop] = empty
        t = torch.randint(0, 1000, (batch,), generator=gen).to(device)
        noise = torch.randn(x0.shape, generator=gen).to(device)
        a = ac[t].view(-1, 1, 1, 1)
        xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
        for g in opt.param_groups:
            g["lr"] = 3e-4 * min(1.0, (step + 1) / warmup)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=amp):
            ctx = clip(ids)
            eps = unet(xt, t.float(), ctx)
        snr = a.view(-1) / (1 - a.view(-1))
        weight = torch.clamp(snr, max=5.0) / snr
        loss = (weight * (eps.float() - noise).pow(2).mean(dim=(1, 2, 3))).mean()
        step_with_ema(opt, params, ema_params, loss, step)
        if step % 10 == 0:
            losses.append((step, loss.item()))
        step += 1
        if step % 500 == 0:
            log(f"diffusion step {step}: loss {loss.item():.4f} ({step / (time.time() - t0):.1f} steps/s)")
    return step


class TextEncoder(ClipTextModel):
    """The parity reference's CLIP text model (transformers' names) at the demo size, returning
    what SD 1.x conditions on: the last layer through the final layer norm."""

    def __init__(self):
        super().__init__(CLIP["vocab"], CLIP["width"], CLIP["layers"], CLIP["heads"], TOKENS, CLIP["mlp"], "quick_gelu")
        torch.nn.init.normal_(self.text_model.embeddings.token_embedding.weight, std=0.02)
        torch.nn.init.normal_(self.text_model.embeddings.position_embedding.weight, std=0.01)

    def forward(self, input_ids):
        return super().forward(input_ids).last_hidden_state


class Joint(torch.nn.Module):
    """The text encoder and UNet as one module, so one EMA copy covers both."""

    def __init__(self, clip, unet):
        super().__init__()
        self.clip, self.unet = clip, unet


# ---------------------------------------------------------------- export

def st_write_f16(path, tensors, metadata):
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name in sorted(tensors):
        data = tensors[name].detach().to("cpu", torch.float16).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F16", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(data)]}
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


def ldm_state(clip, unet, vae):
    out = {}
    for k, v in clip.state_dict().items():
        out["cond_stage_model.transformer." + k] = v
    for k, v in unet.state_dict().items():
        out["model.diffusion_model." + k] = v
    for k, v in vae.state_dict().items():
        out["first_stage_model." + k] = v
    return out


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world-dump", required=True, help="the sdt-world-dump executable")
    ap.add_argument("--tokenizer", default=os.path.join(HERE, "tokenizer"), help="folder with vocab.json, merges.txt")
    ap.add_argument("--out", required=True, help="output folder (model, samples, loss curve, log)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--images", type=int, default=150000, help="scenes in the training set")
    ap.add_argument("--minutes", type=float, default=9.0, help="wall time for the VAE and diffusion stages")
    ap.add_argument("--vae-share", type=float, default=0.22, help="share of --minutes for the VAE")
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--smoke", action="store_true", help="a few steps of everything, small sizes (CPU check)")
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    device = torch.device(args.device)
    amp = device.type == "cuda"
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    os.makedirs(args.out, exist_ok=True)
    gen = torch.Generator().manual_seed(args.seed)
    n_images = 512 if args.smoke else args.images
    batch = 8 if args.smoke else args.batch
    vae_steps, diff_steps = (3, 4) if args.smoke else (10 ** 9, 10 ** 9)
    t_start = time.time()
    log(f"train.py: seed {args.seed}, torch {torch.__version__}, device {device}"
        f"{' (' + torch.cuda.get_device_name() + ')' if device.type == 'cuda' else ''}")

    with tempfile.TemporaryDirectory(prefix="sdt-world-") as workdir:
        pixels_np, lines = draw_world(args.world_dump, args.seed, n_images, workdir, os.cpu_count() or 1)
    tokenize = Tokens(args.tokenizer)
    tokens = torch.tensor([tokenize(line[0]) for line in lines], dtype=torch.long, device=device)
    empty = torch.tensor(tokenize(""), dtype=torch.long, device=device)
    pixels = torch.from_numpy(pixels_np).to(device)
    write_png(os.path.join(args.out, "world.png"), grid(pixels_np[:64], 8))
    log(f"drew {n_images} scenes, {len(tokenize.cache)} distinct captions ({time.time() - t_start:.0f} s)")

    vae = AutoencoderKL(VAE["ch"], VAE["mult"], VAE["res_blocks"], VAE["z"], SCALING).to(device)
    clip = TextEncoder().to(device)
    unet = UNetModel(UNET).to(device)
    count = lambda m: sum(p.numel() for p in m.parameters())
    log(f"parameters: text encoder {count(clip)}, UNet {count(unet)}, VAE {count(vae)}")

    budget = args.minutes * 60.0
    vae_losses, diff_losses = [], []
    vae_seconds = float("inf") if args.smoke else budget * args.vae_share
    steps_vae = train_vae(vae, pixels, vae_seconds, vae_steps, batch, gen, device, amp, vae_losses)
    latent_std = fold_latent_scale(vae, pixels, device)
    vae.requires_grad_(False)
    with torch.no_grad():
        recon = vae.decode(vae.encode(as_float_images(pixels[:16]))[0] * SCALING)
    write_png(os.path.join(args.out, "vae_recon.png"),
              grid(np.concatenate([pixels_np[:16], to_uint8(recon)]), 16))
    latents = encode_all(vae, pixels, device)
    log(f"vae: {steps_vae} steps; latents {tuple(latents.shape)} std {latents.std().item():.3f} "
        f"({time.time() - t_start:.0f} s)")

    joint = Joint(clip, unet)
    ema = Joint(TextEncoder(), UNetModel(UNET)).to(device)
    ema.load_state_dict(joint.state_dict())
    ema.requires_grad_(False)
    ac = alphas_cumprod(device)
    remaining = float("inf") if args.smoke else budget - (time.time() - t_start) - 30.0  # leave time to sample, export
    steps_diff = train_diffusion(joint, ema, latents, tokens, empty, ac, remaining, diff_steps, batch, gen, device,
                                 amp, diff_losses)
    log(f"diffusion: {steps_diff} steps at batch {batch} ({time.time() - t_start:.0f} s)")

    ema.eval()
    sample_gen = torch.Generator().manual_seed(args.seed + 1)
    per_prompt, sample_steps = (1, 3) if args.smoke else (8, 30)
    with torch.no_grad():
        ctx = ema.clip(torch.tensor([tokenize(p) for p in SAMPLE_PROMPTS for _ in range(per_prompt)], device=device))
        unctx = ema.clip(empty[None].expand(len(ctx), -1))
        z = ddim_sample(ema.unet, ctx, unctx, ac, (len(ctx), VAE["z"], IMAGE // 4, IMAGE // 4), sample_steps, 4.0,
                        sample_gen)
        images = to_uint8(vae.decode(z))
    write_png(os.path.join(args.out, "samples.png"), grid(images, per_prompt))

    line_plot_png(os.path.join(args.out, "loss.png"), [s for s, _ in diff_losses], [v for _, v in diff_losses],
                  title_rows=[f"diffusion loss (min-SNR-5 weighted), {steps_diff} steps, batch {batch}"])
    meta = {"format": "pt", "sdtrain_generator": "models/demo_model/train.py", "sdtrain_seed": str(args.seed),
            "sdtrain_images": str(n_images), "sdtrain_vae_steps": str(steps_vae),
            "sdtrain_diffusion_steps": str(steps_diff), "sdtrain_batch": str(batch),
            "sdtrain_device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
            "sdtrain_torch": torch.__version__}
    model_path = os.path.join(args.out, "sdtrain-demo.safetensors")
    st_write_f16(model_path, ldm_state(ema.clip, ema.unet, vae), meta)
    with open(os.path.join(args.out, "train_log.json"), "w") as f:
        json.dump({"meta": meta, "latent_std": latent_std, "vae_loss_every_10": vae_losses,
                   "diffusion_loss": diff_losses, "sample_prompts": SAMPLE_PROMPTS,
                   "seconds": time.time() - t_start}, f)
    log(f"wrote {model_path} ({os.path.getsize(model_path) / 2 ** 20:.1f} MiB) in {time.time() - t_start:.0f} s")


if __name__ == "__main__":
    main()
