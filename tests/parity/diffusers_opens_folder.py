#!/usr/bin/env python3
"""Does diffusers itself open the diffusers folders sdtrain writes (issues 9 and 16)?

For each folder: model_index.json names classes diffusers and transformers have; UNet2DConditionModel,
AutoencoderKL and the scheduler load with diffusers' from_pretrained, CLIPTextModel (and for SDXL
text_encoder_2 as CLIPTextModelWithProjection) with transformers', each with no missing, unexpected or
mismatched weights; the tokenizers load where the folder has them (sdt-make-checkpoint writes none: a
folder without tokenizer/ gets a `skip` line); then the loaded models run once on random input and give
finite output of the right shape. SDXL (unet/config.json's addition_embed_type "text_time"): the context
is both encoders' penultimate hidden states side by side, the pooled embedding text_encoder_2's
text_embeds, as diffusers' StableDiffusionXLPipeline builds them, and the UNet runs with
added_cond_kwargs={"text_embeds": pooled, "time_ids": the six size numbers}.

--single-file FOLDER FILE: FILE is the same model in the single-file (LDM/SGM) layout, e.g. made with the
folder's seed by `sdt-make-checkpoint --layout ldm` (the generator draws the same weights in both
layouts). Then, with diffusers' own converters (diffusers.loaders.single_file_utils), every part of FILE
maps onto the model built from FOLDER's config with no missing, unexpected or mismatched key
(convert_ldm_unet_checkpoint, convert_ldm_vae_checkpoint, convert_ldm_clip_checkpoint for CLIP-L,
convert_open_clip_checkpoint for SDXL's bigG with its packed in_proj) and to the same values as FOLDER;
UNet2DConditionModel/AutoencoderKL.from_single_file(FILE, config=FOLDER) (a local config: no network)
give the folder's weights; and the folder's UNet, run by diffusers, computes the function of the
published LDM/SGM UNet (tests/parity/unet_parity.py, whose size is told by FILE's shapes, with its
published head split) on FILE's weights: max|diffusers - reference| / max|reference| <= 1e-3 (float32;
a config.json that loads but configures the model differently, e.g. the head count, is off by O(1)).

Every check prints one line: "ok  ", "FAIL" or "skip" and what it checked. Needs torch, transformers and
diffusers (diffusers' src/ folder is enough: --diffusers-src). Exit 0 when every check passes, 77 when a
library is missing (skip), 1 otherwise.

  python3 tests/parity/diffusers_opens_folder.py [--diffusers-src DIR] [--single-file FOLDER FILE]... FOLDER...
  (folders: build/host-sim/demo/model, or `sdt-make-checkpoint --config sd15|tiny-sdxl|sdxl --layout diffusers
   --seed N --out DIR`; single files: the same command with --layout ldm --out FILE.safetensors)
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REF_TOL = 1e-3
PARITY_SIZES = ("tiny", "tiny-linear", "tiny-sdxl", "sd15", "sd2", "sdxl")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--diffusers-src", help="a diffusers src/ folder to import from (when not installed)")
    ap.add_argument("--single-file", nargs=2, action="append", default=[], metavar=("FOLDER", "FILE"),
                    help="FILE: FOLDER's model in the single-file layout (repeatable)")
    ap.add_argument("folders", nargs="*")
    args = ap.parse_args()
    if not args.folders and not args.single_file:
        ap.error("give at least one FOLDER or --single-file FOLDER FILE")
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

    def attempt(what, fn):
        """Runs one check; an exception is that check's FAIL (its sentence is the finding), not the end of the run."""
        try:
            return fn()
        except Exception as e:  # noqa: BLE001
            check(False, "%s: %s: %s" % (what, type(e).__name__, e))
            return None

    print("diffusers %s, transformers %s, torch %s" % (diffusers.__version__, transformers.__version__, torch.__version__))
    folders = list(dict.fromkeys(args.folders + [f for f, _ in args.single_file]))
    for folder in folders:
        print("== %s" % folder)
        loaded = attempt("%s opens" % folder, lambda: check_folder(folder, torch, diffusers, transformers, check, attempt))
        for f, single in args.single_file:
            if f == folder:
                print("== %s (single file, configs from %s)" % (single, folder))
                attempt("%s opens" % single, lambda: check_single_file(folder, single, loaded or {}, torch, diffusers,
                                                                      transformers, check, attempt))
        del loaded
    print("%s: %d failure(s)" % ("FAIL" if failures else "PASS", failures))
    return 1 if failures else 0


def strict_problems(expected, given, ignorable=()):
    """Missing, unexpected and mismatched keys of a state dict `given` against a model's `expected` (name -> tensor);
    unexpected keys containing one of `ignorable` are left out (transformers ignores them too)."""
    missing = sorted(set(expected) - set(given))
    unexpected = sorted(k for k in set(given) - set(expected) if not any(s in k for s in ignorable))
    mismatched = sorted("%s %s vs %s" % (k, tuple(given[k].shape), tuple(expected[k].shape))
                        for k in set(given) & set(expected) if tuple(given[k].shape) != tuple(expected[k].shape))
    bad = {n: v[:5] + (["... %d in all" % len(v)] if len(v) > 5 else []) for n, v in
           (("missing", missing), ("unexpected", unexpected), ("mismatched", mismatched)) if v}
    return bad


def differing(a, b):
    """Keys of two state dicts (same keys) whose values differ (compared in float32)."""
    return sorted(k for k in a if k in b and not a[k].float().cpu().equal(b[k].float().cpu()))


def check_folder(folder, torch, diffusers, transformers, check, attempt):
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
    sdxl = "text_encoder_2" in index
    loaded = {}
    loaders = [("unet", diffusers.UNet2DConditionModel), ("vae", diffusers.AutoencoderKL),
               ("text_encoder", transformers.CLIPTextModel)]
    if sdxl:
        loaders.append(("text_encoder_2", transformers.CLIPTextModelWithProjection))
        check(index["text_encoder_2"] == ["transformers", "CLIPTextModelWithProjection"],
              "model_index.json: text_encoder_2 is transformers' CLIPTextModelWithProjection (SDXL's bigG with its projection)")
    for comp, loader in loaders:
        try:
            model, info = loader.from_pretrained(folder, subfolder=comp, output_loading_info=True)
            bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
            check(not bad, "%s loads with %s, every weight used%s" % (comp, loader.__name__, "" if not bad else ": %s" % bad))
            loaded[comp] = model.float().eval()
        except Exception as e:  # the sentence is the finding
            check(False, "%s loads with %s: %s" % (comp, loader.__name__, e))

    def scheduler():
        sched_cls = getattr(diffusers, index.get("scheduler", ["diffusers", "DDIMScheduler"])[1])
        sched = sched_cls.from_pretrained(folder, subfolder="scheduler")
        check(True, "scheduler loads as %s (prediction_type %s)" % (type(sched).__name__, sched.config.prediction_type))
    attempt("scheduler loads", scheduler)

    tokenizers = {}
    for comp, encoder in (("tokenizer", "text_encoder"), ("tokenizer_2", "text_encoder_2")):
        if comp not in index:
            continue
        if not os.path.isdir(os.path.join(folder, comp)):
            print("skip %s: the folder has no %s/ (sdt-make-checkpoint writes none; sdtrain reads vocab.json and "
                  "merges.txt there when a user's folder has them)" % (comp, comp))
            continue

        def tokenizer(comp=comp, encoder=encoder):
            tok = transformers.CLIPTokenizer.from_pretrained(folder, subfolder=comp)
            ids = tok("a photo of a cat", return_tensors="pt").input_ids
            rows = loaded[encoder].config.vocab_size if encoder in loaded else None
            check(ids.shape[-1] > 2 and (rows is None or int(ids.max()) < rows),
                  "%s loads as CLIPTokenizer (%d entries; ids of a prompt fit %s's %s token rows)" % (comp, len(tok), encoder, rows))
            tokenizers[comp] = tok
        attempt("%s loads" % comp, tokenizer)

    torch.manual_seed(0)

    def ids_for(comp, encoder):
        te = loaded[encoder]
        n = te.config.max_position_embeddings
        if comp in tokenizers:
            return tokenizers[comp]("a photo of a cat", padding="max_length", max_length=n, truncation=True,
                                    return_tensors="pt").input_ids
        return torch.zeros(1, n, dtype=torch.long)

    if "unet" in loaded and "text_encoder" in loaded and not sdxl:
        def sd_forward():
            unet, te = loaded["unet"], loaded["text_encoder"]
            with torch.no_grad():
                ctx = te(ids_for("tokenizer", "text_encoder"))[0]
                x = torch.randn(1, unet.config.in_channels, 8, 8)
                y = unet(x, torch.tensor([500]), encoder_hidden_states=ctx).sample
            check(y.shape[1] == unet.config.out_channels and bool(torch.isfinite(y).all()),
                  "UNet forward on the text encoder's context: %s, finite" % (tuple(y.shape),))
        attempt("UNet forward", sd_forward)
    if sdxl and all(c in loaded for c in ("unet", "text_encoder", "text_encoder_2")):
        def sdxl_forward():
            unet, te1, te2 = loaded["unet"], loaded["text_encoder"], loaded["text_encoder_2"]
            cfg = unet.config
            check(cfg.addition_embed_type == "text_time", "unet/config.json: addition_embed_type text_time (SDXL's "
                  "size conditioning), addition_time_embed_dim %s, projection_class_embeddings_input_dim %s"
                  % (cfg.addition_time_embed_dim, cfg.projection_class_embeddings_input_dim))
            with torch.no_grad():
                o1 = te1(ids_for("tokenizer", "text_encoder"), output_hidden_states=True)
                o2 = te2(ids_for("tokenizer_2", "text_encoder_2"), output_hidden_states=True)
                # diffusers' encode_prompt: the penultimate layer of each encoder side by side; pooled = text_embeds
                ctx = torch.cat([o1.hidden_states[-2], o2.hidden_states[-2]], dim=-1)
                pooled = o2.text_embeds
                check(ctx.shape[-1] == cfg.cross_attention_dim,
                      "context %d (text_encoder %d + text_encoder_2 %d) = unet cross_attention_dim %d"
                      % (ctx.shape[-1], o1.hidden_states[-2].shape[-1], o2.hidden_states[-2].shape[-1], cfg.cross_attention_dim))
                check(pooled.shape[-1] + 6 * cfg.addition_time_embed_dim == cfg.projection_class_embeddings_input_dim,
                      "pooled text_embeds %d + 6 x %d size embeddings = unet projection_class_embeddings_input_dim %d"
                      % (pooled.shape[-1], cfg.addition_time_embed_dim, cfg.projection_class_embeddings_input_dim))
                side = 8 * 2 ** (len(loaded["vae"].config.block_out_channels) - 1) if "vae" in loaded else 64
                time_ids = torch.tensor([[side, side, 0, 0, side, side]], dtype=ctx.dtype)  # original, crop, target
                x = torch.randn(1, cfg.in_channels, 8, 8)
                y = unet(x, torch.tensor([500]), encoder_hidden_states=ctx,
                         added_cond_kwargs={"text_embeds": pooled, "time_ids": time_ids}).sample
                y2 = unet(x, torch.tensor([500]), encoder_hidden_states=ctx,
                          added_cond_kwargs={"text_embeds": pooled, "time_ids": time_ids * 2}).sample
            check(y.shape == x.shape[:1] + (cfg.out_channels,) + x.shape[2:] and bool(torch.isfinite(y).all()),
                  "UNet forward with added_cond_kwargs (text_embeds %s, time_ids %s): %s, finite"
                  % (tuple(pooled.shape), tuple(time_ids.shape), tuple(y.shape)))
            check(not torch.equal(y, y2), "the UNet's output depends on time_ids (the size conditioning reaches it)")
        attempt("SDXL UNet forward", sdxl_forward)
    if "vae" in loaded:
        def vae_roundtrip():
            vae = loaded["vae"]
            with torch.no_grad():
                img = torch.rand(1, 3, 64, 64) * 2 - 1
                z = vae.encode(img).latent_dist.mean
                back = vae.decode(z).sample
            check(back.shape == img.shape and bool(torch.isfinite(back).all()),
                  "VAE encode/decode: latents %s, finite (scaling_factor %s)" % (tuple(z.shape), vae.config.scaling_factor))
        attempt("VAE encode/decode", vae_roundtrip)
    return loaded


def meta_model(torch, build):
    """The model without memory for its weights (its names and shapes are what count): accelerate's
    init_empty_weights as diffusers' own loaders use it, else torch 2's meta device, else a plain one."""
    try:
        from accelerate import init_empty_weights
        with init_empty_weights():
            return build()
    except ImportError:
        pass
    if hasattr(torch.device("cpu"), "__enter__"):
        with torch.device("meta"):
            return build()
    return build()


def check_single_file(folder, path, loaded, torch, diffusers, transformers, check, attempt):
    from diffusers.loaders import single_file_utils as sfu
    ckpt = sfu.load_single_file_checkpoint(path, local_files_only=True)
    sdxl = any(k.startswith("conditioner.embedders.") for k in ckpt)
    print("     %d tensors, %s" % (len(ckpt), "SDXL (conditioner.embedders.0/1)" if sdxl else "SD (cond_stage_model)"))

    def part(name, cls, subfolder, convert, ignorable=()):
        """FILE's part through diffusers' converter onto the model FOLDER's config describes: strict, same values."""
        if cls.__module__.startswith("diffusers"):
            config = cls.load_config(folder, subfolder=subfolder, local_files_only=True)
            model = meta_model(torch, lambda: cls.from_config(config))
        else:
            config = cls.config_class.from_pretrained(folder, subfolder=subfolder, local_files_only=True)
            model = meta_model(torch, lambda: cls(config))
        converted = convert(model, config)
        bad = strict_problems(model.state_dict(), converted, ignorable)
        check(not bad, "%s: the single file's weights map onto %s (%s/config.json) with no missing, unexpected or "
              "mismatched key%s" % (name, cls.__name__, subfolder, "" if not bad else ": %s" % bad))
        if subfolder in loaded:
            diff = differing(loaded[subfolder].state_dict(), converted)
            check(not diff, "%s: the single file holds the folder's values (%d tensors compared)%s"
                  % (name, len(converted), "" if not diff else ": %d differ, e.g. %s" % (len(diff), diff[:3])))
        return converted

    attempt("unet from the single file", lambda: part(
        "unet", diffusers.UNet2DConditionModel, "unet", lambda m, c: sfu.convert_ldm_unet_checkpoint(ckpt, c)))
    attempt("vae from the single file", lambda: part(
        "vae", diffusers.AutoencoderKL, "vae", lambda m, c: sfu.convert_ldm_vae_checkpoint(ckpt, c)))

    def clip_l(model, config):
        sd = sfu.convert_ldm_clip_checkpoint(ckpt)
        if not hasattr(model, "text_model"):  # transformers >= 5.6 flattened CLIPTextModel (diffusers strips it too)
            sd = {k[len("text_model."):] if k.startswith("text_model.") else k: v for k, v in sd.items()}
        return sd
    attempt("text_encoder from the single file", lambda: part(
        "text_encoder", transformers.CLIPTextModel, "text_encoder", clip_l, ignorable=("position_ids",)))
    if sdxl:
        attempt("text_encoder_2 from the single file", lambda: part(
            "text_encoder_2 (bigG, packed in_proj)", transformers.CLIPTextModelWithProjection, "text_encoder_2",
            lambda m, c: sfu.convert_open_clip_checkpoint(m, ckpt, prefix="conditioner.embedders.1.model."),
            ignorable=("position_ids",)))

    # the user's way: from_single_file with the folder as its local config (no download)
    for comp, cls in (("unet", diffusers.UNet2DConditionModel), ("vae", diffusers.AutoencoderKL)):
        def user_path(comp=comp, cls=cls):
            model = cls.from_single_file(path, config=folder, subfolder=comp, local_files_only=True,
                                         torch_dtype=torch.float32)
            if comp in loaded:
                diff = differing(loaded[comp].state_dict(), model.state_dict())
                check(not diff, "%s.from_single_file(FILE, config=FOLDER) gives the folder's %s%s"
                      % (cls.__name__, comp, "" if not diff else ": %d tensors differ, e.g. %s" % (len(diff), diff[:3])))
            else:
                check(True, "%s.from_single_file(FILE, config=FOLDER) loads" % cls.__name__)
        attempt("%s.from_single_file" % cls.__name__, user_path)

    if "unet" in loaded:
        attempt("diffusers' UNet vs the LDM/SGM reference", lambda: check_unet_function(ckpt, loaded["unet"], torch, check))


def check_unet_function(ckpt, unet, torch, check):
    """The folder's UNet run by diffusers against tests/parity/unet_parity.py's published architecture on the single
    file's weights (same inputs, float32): a config.json that diverges from the weights' architecture shows here."""
    sys.path.insert(0, HERE)
    import unet_parity
    prefix = unet_parity.PREFIX
    weights = {k[len(prefix):]: v for k, v in ckpt.items() if k.startswith(prefix)}
    shapes = {k: tuple(v.shape) for k, v in weights.items()}
    size = None
    for name in PARITY_SIZES:
        model = meta_model(torch, lambda: unet_parity.UNetModel(unet_parity.config(name)))
        if {k: tuple(v.shape) for k, v in model.state_dict().items()} == shapes:
            size = name
            break
    if size is None:
        check(False, "the single file's UNet is none of unet_parity's sizes %s (no reference to compare with)" % (PARITY_SIZES,))
        return
    cfg = unet_parity.config(size)
    ref = meta_model(torch, lambda: unet_parity.UNetModel(cfg))  # no random init of 2.6 billion weights
    if any(p.is_meta for p in ref.parameters()):
        ref = ref.to_empty(device="cpu")
    ref.load_state_dict({k: v.float() for k, v in weights.items()}, strict=True)
    ref.eval()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(1, cfg["in_channels"], 8, 8, generator=gen)
    t = torch.tensor([500.0])
    ctx = torch.randn(1, 77, cfg["context_dim"], generator=gen)
    kwargs, y = {}, None
    if cfg["adm_in"]:
        add_dim = unet.config.addition_time_embed_dim
        pooled = torch.randn(1, cfg["adm_in"] - 6 * add_dim, generator=gen)
        time_ids = torch.tensor([[1024.0, 768.0, 16.0, 32.0, 1024.0, 1024.0]])
        kwargs = {"added_cond_kwargs": {"text_embeds": pooled, "time_ids": time_ids}}
        # SGM's vector conditioning: the pooled embedding, then each size number's [cos, sin] embedding
        y = torch.cat([pooled, unet_parity.timestep_embedding(time_ids.flatten(), add_dim).reshape(1, -1)], dim=-1)
    with torch.no_grad():
        want = ref(x, t, ctx, y)
        got = unet.float()(x, t, encoder_hidden_states=ctx, **kwargs).sample
    err = ((got - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()
    check(err <= REF_TOL, "diffusers' UNet on the folder's config computes the %s reference UNet (unet_parity.py, "
          "published head split%s) on the single file's weights: max rel err %.1e (<= %g)"
          % (size, ", y = pooled + size embeddings" if y is not None else "", err, REF_TOL))


if __name__ == "__main__":
    sys.exit(main())
