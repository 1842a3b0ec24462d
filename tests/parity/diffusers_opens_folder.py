#!/usr/bin/env python3
"""Does diffusers itself open the diffusers folders sdtrain writes (issue 9)?

For each folder: model_index.json names classes diffusers and transformers have; UNet2DConditionModel,
AutoencoderKL and the scheduler load with diffusers' from_pretrained, CLIPTextModel and CLIPTokenizer
with transformers', each with no missing, unexpected or mismatched weights; then the loaded UNet and
VAE run once on random input and give finite output of the right shape. Needs torch, transformers and
diffusers (diffusers' src/ folder is enough: --diffusers-src). Exit 0 when every check passes, 77 when
a library is missing (skip), 1 otherwise.

  python3 tests/parity/diffusers_opens_folder.py [--diffusers-src DIR] FOLDER...
  (folders: build/host-sim/demo/model, or `sdt-make-checkpoint --config sd15 --layout diffusers --out DIR`)
"""
import argparse
import json
import os
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--diffusers-src", help="a diffusers src/ folder to import from (when not installed)")
    ap.add_argument("folders", nargs="+")
    args = ap.parse_args()
    if args.diffusers_src:
        sys.path.insert(0, args.diffusers_src)
    try:
        import torch
        import diffusers
        import transformers
    except ImportError as e:
        print("SKIP: %s" % e)
        return 77
    failures = 0

    def check(ok, what):
        nonlocal failures
        print("%s %s" % ("ok  " if ok else "FAIL", what))
        failures += 0 if ok else 1

    print("diffusers %s, transformers %s, torch %s" % (diffusers.__version__, transformers.__version__, torch.__version__))
    for folder in args.folders:
        print("== %s" % folder)
        with open(os.path.join(folder, "model_index.json")) as f:
            index = json.load(f)
        for comp, spec in index.items():
            if comp.startswith("_") or not isinstance(spec, list):
                continue
            lib, cls = spec
            if lib is None and cls is None:  # diffusers' way of writing an absent component (safety checker)
                continue
            mod = {"diffusers": diffusers, "transformers": transformers}.get(lib)
            check(mod is not None and hasattr(mod, cls), "model_index.json: %s = %s.%s exists" % (comp, lib, cls))
        loaded = {}
        for comp, loader in (("unet", diffusers.UNet2DConditionModel), ("vae", diffusers.AutoencoderKL),
                             ("text_encoder", transformers.CLIPTextModel)):
            try:
                model, info = loader.from_pretrained(folder, subfolder=comp, output_loading_info=True)
                bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
                check(not bad, "%s loads with %s, every weight used%s" % (comp, loader.__name__, "" if not bad else ": %s" % bad))
                loaded[comp] = model
            except Exception as e:  # the sentence is the finding
                check(False, "%s loads with %s: %s" % (comp, loader.__name__, e))
        try:
            sched_cls = getattr(diffusers, index.get("scheduler", ["diffusers", "DDIMScheduler"])[1])
            sched = sched_cls.from_pretrained(folder, subfolder="scheduler")
            check(True, "scheduler loads as %s (prediction_type %s)" % (type(sched).__name__, sched.config.prediction_type))
        except Exception as e:
            check(False, "scheduler loads: %s" % e)
        try:
            tok = transformers.CLIPTokenizer.from_pretrained(folder, subfolder="tokenizer")
            check(len(tok("a photo").input_ids) > 2, "tokenizer loads (%d entries)" % len(tok))
        except Exception as e:
            check(False, "tokenizer loads: %s" % e)
        torch.manual_seed(0)
        if "unet" in loaded and "text_encoder" in loaded:
            unet, te = loaded["unet"].float().eval(), loaded["text_encoder"].float().eval()
            ids = torch.zeros(1, te.config.max_position_embeddings, dtype=torch.long)
            with torch.no_grad():
                ctx = te(ids)[0]
                c = unet.config.in_channels
                x = torch.randn(1, c, 8, 8)
                y = unet(x, torch.tensor([500]), encoder_hidden_states=ctx).sample
            check(y.shape[1] == unet.config.out_channels and bool(torch.isfinite(y).all()),
                  "UNet forward on the text encoder's context: %s, finite" % (tuple(y.shape),))
        if "vae" in loaded:
            vae = loaded["vae"].float().eval()
            with torch.no_grad():
                img = torch.rand(1, 3, 64, 64) * 2 - 1
                z = vae.encode(img).latent_dist.mean
                back = vae.decode(z).sample
            check(back.shape == img.shape and bool(torch.isfinite(back).all()),
                  "VAE encode/decode: latents %s, finite" % (tuple(z.shape),))
    print("%s: %d failure(s)" % ("FAIL" if failures else "PASS", failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
