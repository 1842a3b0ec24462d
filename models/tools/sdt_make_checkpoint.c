/* sdt-make-checkpoint - writes a seeded random-weight Stable Diffusion checkpoint.
 *
 *   sdt-make-checkpoint --config tiny|sd15|sd2|tiny-sdxl|sdxl|tiny-t5|t5xxl|tiny-mmdit|sd3-mmdit|sd35-medium-mmdit|sd35-large-mmdit|tiny-vae16|tiny-flux|flux-dev|flux-schnell|tiny-sd3|tiny-flux-dev|tiny-flux-schnell --out PATH [--dtype f32|f16|bf16]
 *                       [--seed N] [--layout ldm|diffusers] [--perturb-all]
 *                       [--text-only | --vae-only | --unet-only] [--clip-vocab N] [--unet-in-channels N]
 *                       [--openclip] [--unet-output VALUE]
 *   sdt-make-checkpoint --from CHECKPOINT --layout ldm|diffusers --out PATH [--dtype f32|f16|bf16]
 *
 * --clip-vocab sets the text encoder's token rows (49408 for a tiny model that the
 * CLIP tokenizer built into the plugin fits); --unet-in-channels 9 makes an inpainting
 * model (latent, mask, masked-image latent); --openclip gives the model SD 2.x's kind of
 * text encoder (OpenCLIP layout, GELU, penultimate layer) and UNet (linear projections);
 * --unet-output VALUE sets the UNet's last conv's bias and scales its weights by 1/1000, so
 * the UNet returns about VALUE everywhere (an epsilon-like or v-like answer to the
 * prediction-type probe) and still depends on the prompt (it trains).
 * tiny-sdxl and sdxl are SDXL base (CLIP ViT-L and OpenCLIP bigG under conditioner.embedders.0/1,
 * the UNet with label_emb, the VAE; sd_config_preset) or, with --text-only/--unet-only/--vae-only, a part.
 * --from converts a checkpoint between the layouts (sdt_ckpt_convert): an SDXL or SD 2.x folder's OpenCLIP
 * encoder becomes the single file's OpenCLIP layout, as hosts expect it.
 * tiny-t5 and t5xxl write a T5 v1.1 encoder alone (t5_gen.h; the names of t5xxl_fp16.safetensors): the tiny
 * test model or T5-XXL's shapes (4.7 billion parameters: use --dtype bf16 for a 9.5 GB file).
 * tiny-mmdit, sd3-mmdit, sd35-medium-mmdit and sd35-large-mmdit write an SD3 MMDiT transformer alone in
 * diffusers' names (mmdit_gen.h; transformer/diffusion_pytorch_model.safetensors): the tiny test model, SD3
 * Medium's, SD3.5 Medium's (MMDiT-X) or SD3.5 Large's shapes (8.1 billion parameters).
 * tiny-flux, flux-dev and flux-schnell write a Flux.1 transformer alone in diffusers' names (flux_gen.h): the tiny
 * test model or Flux dev's / schnell's shapes (11.9 billion parameters: use --dtype bf16 for a 24 GB file).
 * tiny-vae16 writes the 16-channel VAE of SD3/SD3.5 and Flux.1 (no quant convs) alone, tiny (vae_config_tiny16),
 * in the LDM names at the top as Flux's ae.safetensors has them (vae_gen.h).
 * tiny-sd3 writes a whole tiny SD3.5 model (sd_config_preset(SD_FAMILY_TINY_SD3): MMDiT, CLIP-L, CLIP-G, T5 and the
 * 16-channel VAE, their widths meeting) in SAI's all-in-one layout (sd3_gen.h); --without clip_l,clip_g,t5xxl,vae
 * leaves parts out (e.g. --without t5xxl: sd3.5_medium.safetensors without T5), --part clip_l|clip_g|t5xxl|vae
 * writes one part alone (a lone file's names; transformer: diffusers' names at the top, as a folder's
 * transformer/diffusion_pytorch_model.safetensors); the same seed gives a part the same tensors in either file.
 * tiny-flux-dev and tiny-flux-schnell write a whole tiny Flux.1 model (sd_config_preset(SD_FAMILY_TINY_FLUX), schnell
 * without the guidance embedder: the transformer, CLIP-L, T5 and the VAE) in ComfyUI's all-in-one layout, with
 * --without and --part as tiny-sd3 (no clip_g: Flux has none); --without clip_l,t5xxl,vae gives BFL's
 * transformer-only file under model.diffusion_model..
 * --pack writes the transformer families' files as people have them (transformer_pack.h) from diffusers-named
 * files (--transformer: tiny-mmdit's output, or a Flux transformer in diffusers' names): sai-sd3 (SAI's SD3/SD3.5
 * all-in-one, with the parts given: --t5xxl, --clip-l, --clip-g in transformers' names, --vae in LDM names),
 * bfl-flux (flux1-dev.safetensors' layout), comfy-flux (the same under model.diffusion_model., with --t5xxl,
 * --clip-l, and --vae under vae.), plain (one part alone, e.g. t5xxl_fp8_e4m3fn.safetensors with --fp8 e4m3).
 * --vae takes a checkpoint's VAE (first_stage_model.*, e.g. --config tiny --vae-only).
 * For tests and benchmarks; the weights mean nothing, but every name and shape
 * is the real architecture's, so hosts and sdtrain load them like a real model.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_gen.h"
#include "flux_gen.h"
#include "mmdit_gen.h"
#include "sd3_gen.h"
#include "t5_gen.h"
#include "vae_gen.h"
#include "transformer_pack.h"

static int usage(const char *msg)
{
    if (msg) fprintf(stderr, "sdt-make-checkpoint: %s\n", msg);
    fprintf(
        stderr,
        "usage: sdt-make-checkpoint --config tiny|sd15|sd2|tiny-sdxl|sdxl|tiny-t5|t5xxl|tiny-mmdit|sd3-mmdit|sd35-medium-mmdit|sd35-large-mmdit|tiny-vae16|tiny-flux|flux-dev|flux-schnell|tiny-sd3|tiny-flux-dev|tiny-flux-schnell --out PATH [--dtype f32|f16|bf16] [--seed N]\n"
        "                           [--without clip_l,clip_g,t5xxl,vae | --part transformer|clip_l|clip_g|t5xxl|vae] (tiny-sd3, tiny-flux-dev, tiny-flux-schnell)\n"
        "                           [--layout ldm|diffusers] [--perturb-all] [--text-only | --vae-only | --unet-only]\n"
        "                           [--clip-vocab N] [--unet-in-channels N] [--openclip] [--unet-output VALUE]\n"
        "       sdt-make-checkpoint --from CHECKPOINT --layout ldm|diffusers --out PATH [--dtype ...]\n"
        "                           (the same weights in that layout; --dtype converts, default: as they are)\n"
        "       sdt-make-checkpoint --pack sai-sd3|bfl-flux|comfy-flux|plain --out PATH [--transformer FILE]\n"
        "                           [--t5xxl FILE] [--clip-l FILE] [--clip-g FILE] [--vae FILE] [--fp8 e4m3|e5m2]\n");
    return 2;
}

/* --pack: people's layouts of the transformer families from diffusers-named files. */
/* Whether a VAE file keeps its keys at the top (a lone VAE file) rather than under first_stage_model. */
static bool vae_at_top(const sdt_weights *w)
{
    for (size_t k = 0; k < sdt_weights_count(w); k++)
        if (!strncmp(sdt_weights_key(w, k), "first_stage_model.", strlen("first_stage_model."))) return false;
    return true;
}

static int pack_main(int argc, char **argv)
{
    const char *layout = NULL, *out = NULL, *files[5] = {NULL}; /* transformer, t5xxl, clip-l, clip-g, vae */
    static const char *const flags[5] = {"--transformer", "--t5xxl", "--clip-l", "--clip-g", "--vae"};
    static const char *const prefixes[5] = {"", SDT_TK_T5XXL_PREFIX, SDT_TK_CLIP_L_PREFIX, SDT_TK_CLIP_G_PREFIX,
                                            "first_stage_model."};
    sdt_pack_storage storage = SDT_PACK_AS_IS;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool known = false;
        for (int k = 0; k < 5 && v; k++)
            if (!strcmp(a, flags[k])) files[k] = argv[++i], known = true;
        if (known) continue;
        if (!strcmp(a, "--pack") && v)
            layout = argv[++i];
        else if (!strcmp(a, "--out") && v)
            out = argv[++i];
        else if (!strcmp(a, "--fp8") && v) {
            const char *f = argv[++i];
            if (strcmp(f, "e4m3") && strcmp(f, "e5m2")) return usage("--fp8 must be e4m3 or e5m2");
            storage = !strcmp(f, "e4m3") ? SDT_PACK_F8_E4M3 : SDT_PACK_F8_E5M2;
        } else {
            fprintf(stderr, "sdt-make-checkpoint: unknown or incomplete argument '%s' with --pack\n", a);
            return usage(NULL);
        }
    }
    if (!out || !layout) return usage("--pack needs a layout and --out");
    sdt_tk_layout tk = !strcmp(layout, "sai-sd3")                                     ? SDT_TK_SAI_SD3
                       : !strcmp(layout, "bfl-flux") || !strcmp(layout, "comfy-flux") ? SDT_TK_BFL_FLUX
                                                                                      : SDT_TK_NONE;
    bool plain = !strcmp(layout, "plain");
    if (tk == SDT_TK_NONE && !plain) return usage("--pack must be sai-sd3, bfl-flux, comfy-flux or plain");
    if (!plain && !files[0]) return usage("--pack sai-sd3/bfl-flux/comfy-flux needs --transformer FILE");
    if (!strcmp(layout, "bfl-flux") && (files[1] || files[2] || files[3] || files[4]))
        return usage("bfl-flux is the transformer alone (flux1-dev.safetensors' layout)");
    if (!strcmp(layout, "comfy-flux") && files[3]) return usage("comfy-flux takes no --clip-g (Flux has none)");
    int given = 0;
    for (int k = 1; k < 5; k++) given += files[k] != NULL;
    if (plain && (files[0] || given != 1)) return usage("--pack plain takes one of --t5xxl, --clip-l, --clip-g, --vae");
    sdt_error error = {0};
    sdt_weights *w[5] = {NULL};
    sdt_pack_part parts[4];
    int n_parts = 0;
    bool ok = true;
    for (int k = 0; k < 5 && ok; k++) {
        if (!files[k]) continue;
        ok = (w[k] = sdt_weights_open(files[k], &error)) != NULL;
        /* ComfyUI's Flux checkpoints keep the VAE under "vae." (transformer_keys.h) */
        const char *to = plain ? "" : k == 4 && !strcmp(layout, "comfy-flux") ? "vae." : prefixes[k];
        /* a VAE from a whole checkpoint sits under first_stage_model., a lone VAE file (ae.safetensors) at the top */
        const char *from = k == 4 && ok && !vae_at_top(w[k]) ? "first_stage_model." : "";
        if (ok && k) parts[n_parts++] = (sdt_pack_part){w[k], from, to};
    }
    if (ok)
        ok = sdt_pack_write(out, plain ? SDT_TK_NONE : tk, w[0], "",
                            !strcmp(layout, "comfy-flux") ? SDT_TK_TRANSFORMER_PREFIX : "", parts, n_parts, storage,
                            &error);
    for (int k = 0; k < 5; k++) sdt_weights_close(w[k]);
    if (!ok) {
        fprintf(stderr, "sdt-make-checkpoint: %s\n", error.message);
        return 1;
    }
    printf("wrote %s (%s%s)\n", out, layout,
           storage == SDT_PACK_F8_E4M3   ? ", F8_E4M3"
           : storage == SDT_PACK_F8_E5M2 ? ", F8_E5M2"
                                         : "");
    return 0;
}

static bool parse_dtype(const char *s, sdt_dtype *out)
{
    if (!strcmp(s, "f32"))
        *out = SDT_F32;
    else if (!strcmp(s, "f16"))
        *out = SDT_F16;
    else if (!strcmp(s, "bf16"))
        *out = SDT_BF16;
    else
        return false;
    return true;
}

/* sd_part of "clip_l", "clip_g", "t5xxl", "vae" (SD_PART_DENOISER for anything else). */
static sd_part sd3_part_of(const char *name, size_t len)
{
    static const char *const names[SD_PART_COUNT] = {"transformer", "clip_l", "clip_g", "t5xxl", "vae"};
    for (int p = SD_PART_CLIP_L; p < SD_PART_COUNT; p++)
        if (strlen(names[p]) == len && !strncmp(name, names[p], len)) return (sd_part)p;
    return SD_PART_DENOISER;
}

/* --config tiny-sd3, tiny-flux-dev, tiny-flux-schnell: the all-in-one file without the parts listed, or one part
 * alone. */
static int sd3_main(const char *config, const sdt_ckpt_spec *spec, const char *out, const char *without,
                    const char *part)
{
    if (spec->layout != SDT_CKPT_LDM || spec->text_only || spec->vae_only || spec->unet_only || spec->unet_output_set)
        return usage("tiny-sd3 and tiny-flux-* take only --out, --dtype, --seed, --perturb-all, --without and --part");
    if (without && part) return usage("--without and --part exclude each other");
    bool flux = strcmp(config, "tiny-sd3") != 0;
    sd_config cfg = sd_config_preset(flux ? SD_FAMILY_TINY_FLUX : SD_FAMILY_TINY_SD3);
    if (!strcmp(config, "tiny-flux-schnell")) cfg.flux.guidance = false;
    sdt_error error = {0};
    bool ok;
    if (part) {
        sd_part p = sd3_part_of(part, strlen(part)); /* "transformer": diffusers' names alone */
        if ((p == SD_PART_DENOISER && strcmp(part, "transformer") != 0) || (flux && p == SD_PART_CLIP_G))
            return usage(flux ? "--part must be transformer, clip_l, t5xxl or vae"
                              : "--part must be transformer, clip_l, clip_g, t5xxl or vae");
        ok = sd3_generate_part(out, &cfg, p, spec->dtype, spec->seed, spec->perturb_all, &error);
    } else {
        bool in[SD_PART_COUNT] = {true, true, true, true, true};
        for (const char *s = without; s && *s;) {
            size_t len = strcspn(s, ",");
            sd_part p = sd3_part_of(s, len);
            if (p == SD_PART_DENOISER || (flux && p == SD_PART_CLIP_G))
                return usage(flux ? "--without takes clip_l, t5xxl and vae, comma-separated"
                                  : "--without takes clip_l, clip_g, t5xxl and vae, comma-separated");
            in[p] = false;
            s += len + (s[len] == ',');
        }
        ok = sd3_generate(out, &cfg, in, spec->dtype, spec->seed, spec->perturb_all, &error);
    }
    if (!ok) {
        fprintf(stderr, "sdt-make-checkpoint: %s\n", error.message);
        return 1;
    }
    printf("wrote %s (%s %s%s, seed %llu)\n", out, flux ? config : "tiny SD3.5", part ? part : "all-in-one",
           without ? " without the parts named" : "", (unsigned long long)spec->seed);
    return 0;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--pack")) return pack_main(argc, argv);
    sdt_ckpt_spec spec;
    memset(&spec, 0, sizeof(spec));
    spec.dtype = SDT_F32;
    spec.layout = SDT_CKPT_LDM;
    const char *out = NULL, *config = NULL, *from = NULL, *without = NULL, *part = NULL;
    bool dtype_given = false;
    long clip_vocab = 0, unet_in = 0;
    bool openclip = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--config") && v)
            config = argv[++i];
        else if (!strcmp(a, "--out") && v)
            out = argv[++i];
        else if (!strcmp(a, "--from") && v)
            from = argv[++i];
        else if (!strcmp(a, "--without") && v)
            without = argv[++i];
        else if (!strcmp(a, "--part") && v)
            part = argv[++i];
        else if (!strcmp(a, "--seed") && v)
            spec.seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(a, "--dtype") && v) {
            if (!parse_dtype(argv[++i], &spec.dtype)) return usage("--dtype must be f32, f16 or bf16");
            dtype_given = true;
        } else if (!strcmp(a, "--layout") && v) {
            const char *l = argv[++i];
            if (!strcmp(l, "ldm"))
                spec.layout = SDT_CKPT_LDM;
            else if (!strcmp(l, "diffusers"))
                spec.layout = SDT_CKPT_DIFFUSERS;
            else
                return usage("--layout must be ldm or diffusers");
        } else if (!strcmp(a, "--perturb-all"))
            spec.perturb_all = true;
        else if (!strcmp(a, "--text-only"))
            spec.text_only = true;
        else if (!strcmp(a, "--unet-in-channels") && v) {
            char *end;
            unet_in = strtol(argv[++i], &end, 10);
            if (*end || unet_in < 1 || unet_in > 64) return usage("--unet-in-channels must be a number from 1 to 64");
        } else if (!strcmp(a, "--clip-vocab") && v) {
            char *end;
            clip_vocab = strtol(argv[++i], &end, 10);
            if (*end || clip_vocab < 2 || clip_vocab > 1000000)
                return usage("--clip-vocab must be a number from 2 to 1000000");
        } else if (!strcmp(a, "--vae-only"))
            spec.vae_only = true;
        else if (!strcmp(a, "--unet-only"))
            spec.unet_only = true;
        else if (!strcmp(a, "--openclip"))
            openclip = true;
        else if (!strcmp(a, "--unet-output") && v) {
            char *end;
            spec.unet_output = strtof(argv[++i], &end);
            spec.unet_output_set = true;
            spec.unet_output_weight_scale = 1e-3f;
            if (*end || !(spec.unet_output > -1e4f && spec.unet_output < 1e4f))
                return usage("--unet-output must be a number between -10000 and 10000");
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return usage(NULL), 0;
        else {
            fprintf(stderr, "sdt-make-checkpoint: unknown or incomplete argument '%s'\n", a);
            return usage(NULL);
        }
    }
    if (!out) return usage("--out is required");
    sdt_error error = {0};
    if (from) {
        if (config) return usage("--from converts an existing checkpoint; leave out --config");
        if (!sdt_ckpt_convert(from, out, spec.layout, dtype_given ? (int)spec.dtype : -1, &error)) {
            fprintf(stderr, "sdt-make-checkpoint: %s\n", error.message);
            return 1;
        }
        printf("wrote %s (%s in the %s layout)\n", out, from, spec.layout == SDT_CKPT_LDM ? "ldm" : "diffusers");
        return 0;
    }
    bool whole_transformer_model = config && (!strcmp(config, "tiny-sd3") || !strcmp(config, "tiny-flux-dev") ||
                                              !strcmp(config, "tiny-flux-schnell"));
    if ((without || part) && !whole_transformer_model)
        return usage("--without and --part are tiny-sd3's, tiny-flux-dev's and tiny-flux-schnell's");
    if (whole_transformer_model) return sd3_main(config, &spec, out, without, part);
    if (config && (!strcmp(config, "tiny-t5") || !strcmp(config, "t5xxl"))) {
        if (spec.layout != SDT_CKPT_LDM || spec.text_only || spec.vae_only || spec.unet_only || openclip ||
            clip_vocab || unet_in || spec.unet_output_set)
            return usage("a T5 encoder file takes only --out, --dtype, --seed and --perturb-all");
        t5_config t5 = !strcmp(config, "t5xxl") ? t5_config_xxl() : t5_config_tiny();
        if (!t5_generate(out, &t5, spec.dtype, spec.seed, spec.perturb_all, &error)) {
            fprintf(stderr, "sdt-make-checkpoint: %s\n", error.message);
            return 1;
        }
        printf("wrote %s (T5 encoder %s, seed %llu)\n", out, config, (unsigned long long)spec.seed);
        return 0;
    }
    if (config && (!strcmp(config, "tiny-mmdit") || !strcmp(config, "sd3-mmdit") ||
                   !strcmp(config, "sd35-medium-mmdit") || !strcmp(config, "sd35-large-mmdit"))) {
        if (spec.layout != SDT_CKPT_LDM || spec.text_only || spec.vae_only || spec.unet_only || openclip ||
            clip_vocab || unet_in || spec.unet_output_set)
            return usage("an MMDiT transformer file takes only --out, --dtype, --seed and --perturb-all");
        mmdit_config mm = !strcmp(config, "sd3-mmdit")           ? mmdit_config_sd3_medium()
                          : !strcmp(config, "sd35-medium-mmdit") ? mmdit_config_sd35_medium()
                          : !strcmp(config, "sd35-large-mmdit")  ? mmdit_config_sd35_large()
                                                                 : mmdit_config_tiny();
        if (!mmdit_generate(out, &mm, spec.dtype, spec.seed, spec.perturb_all, &error)) {
            fprintf(stderr, "sdt-make-checkpoint: %s\n", error.message);
            return 1;
        }
        printf("wrote %s (MMDiT transformer %s, seed %llu)\n", out, config, (unsigned long long)spec.seed);
        return 0;
    }
    if (config && (!strcmp(config, "tiny-flux") || !strcmp(config, "flux-dev") || !strcmp(config, "flux-schnell"))) {
        if (spec.layout != SDT_CKPT_LDM || spec.text_only || spec.vae_only || spec.unet_only || openclip ||
            clip_vocab || unet_in || spec.unet_output_set)
            return usage("a Flux transformer file takes only --out, --dtype, --seed and --perturb-all");
        flux_config fc = !strcmp(config, "flux-dev")       ? flux_config_dev()
                         : !strcmp(config, "flux-schnell") ? flux_config_schnell()
                                                           : flux_config_tiny();
        if (!flux_generate(out, &fc, spec.dtype, spec.seed, spec.perturb_all, &error)) {
            fprintf(stderr, "sdt-make-checkpoint: %s\n", error.message);
            return 1;
        }
        printf("wrote %s (Flux transformer %s, seed %llu)\n", out, config, (unsigned long long)spec.seed);
        return 0;
    }
    if (config && !strcmp(config, "tiny-vae16")) {
        if (spec.layout != SDT_CKPT_LDM || spec.text_only || spec.vae_only || spec.unet_only || openclip ||
            clip_vocab || unet_in || spec.unet_output_set)
            return usage("a VAE file takes only --out, --dtype, --seed and --perturb-all");
        vae_config vae = vae_config_tiny16();
        if (!vae_generate(out, &vae, "", spec.dtype, spec.seed, spec.perturb_all, &error)) {
            fprintf(stderr, "sdt-make-checkpoint: %s\n", error.message);
            return 1;
        }
        printf("wrote %s (16-channel VAE %s, seed %llu)\n", out, config, (unsigned long long)spec.seed);
        return 0;
    }
    sd_family family;
    if (!config || !sd_family_parse(config, &family))
        return usage("--config must be tiny, sd15, sd2, tiny-sdxl, sdxl, tiny-t5, t5xxl, tiny-mmdit, sd3-mmdit, "
                     "sd35-medium-mmdit, sd35-large-mmdit, tiny-vae16, tiny-flux, "
                     "flux-dev, flux-schnell, tiny-sd3, tiny-flux-dev or tiny-flux-schnell");
    if (family == SD_FAMILY_SD3)
        return usage("a full-size SD3.5 model: write its parts (sd35-large-mmdit, t5xxl, ...)");
    if (family == SD_FAMILY_FLUX || family == SD_FAMILY_TINY_FLUX)
        return usage("a Flux.1 model: tiny-flux-dev or tiny-flux-schnell (whole), or its parts (flux-dev, t5xxl, ...)");
    if ((int)spec.text_only + (int)spec.vae_only + (int)spec.unet_only > 1)
        return usage("--text-only, --vae-only and --unet-only exclude each other");
    spec.config = sd_config_preset(family);
    bool sdxl = spec.config.clip2.width > 0;
    if (sdxl && openclip) return usage("--openclip makes an SD 2.x-like model; SDXL has its own two text encoders");
    if (clip_vocab) spec.config.clip.vocab = (int)clip_vocab;
    if (unet_in) spec.config.unet.in_channels = (int)unet_in;
    if (openclip) {
        spec.config.clip.layout = CLIP_LAYOUT_OPENCLIP;
        spec.config.clip.act = SDT_ACT_GELU;
        spec.config.clip.default_skip = 2;
        spec.config.unet.linear_proj = true;
    }
    if (!sdt_ckpt_generate(out, &spec, &error)) {
        fprintf(stderr, "sdt-make-checkpoint: %s\n", error.message);
        return 1;
    }
    printf("wrote %s (%s%s, seed %llu)\n", out, sd_family_name(family), spec.unet_only ? " UNet" : "",
           (unsigned long long)spec.seed);
    return 0;
}
