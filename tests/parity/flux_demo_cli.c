/* flux_demo_cli.c - runs the C side of models/demo_flux/train.py's parity check (--parity): the files the
 * script writes, loaded as sdtrain loads them (config detection from names and shapes; T5 and the VAE as lone
 * part files, sdt_weights_open_part), and the T5 tokenizer it builds. Raw little-endian files, row-major:
 * int32 for token ids, float32 for the rest. CPU backend, f32.
 *
 *   sdt-flux-demo-io run --dir D --batch B --t5-len L --height h --width w --clip-tokens F --t5-tokens F
 *                        --latent F --timesteps F --context F --pooled F --image F
 *                        --out-pooled F --out-context F --out-velocity F --out-mean F --out-logvar F
 *                        --out-decoded F
 *       D holds transformer.safetensors (diffusers' names at the top), clip_l.safetensors (transformers' names
 *       under conditioner.embedders.0.transformer.: no loader reads a lone Flux CLIP-L file yet), t5xxl.safetensors
 *       and ae.safetensors. CLIP-L's pooled output and T5's context come from the token files (through
 *       sdt_flux_text_forward); the transformer's velocity from --latent [B, C, h, w], --timesteps [B], --context
 *       [B, L, D] and --pooled [B, P]; the VAE encodes --image [B, 3, 4h, 4w] (mean and logvar) and decodes
 *       --latent.
 *   sdt-flux-demo-io spm --tokenizer P --length L
 *       one prompt per stdin line -> its L ids (sdt_spm_encode), space-separated, one line each
 *   sdt-flux-demo-io files --dir D
 *       the shipped layout: transformer.safetensors detected as a Flux.1 transformer (sdt_tf_detect), and
 *       clip_l, t5xxl and ae .safetensors opened as the lone parts people download (sdt_weights_open_part,
 *       told apart by sdt_tf_lone_part); prints what it found, exits 1 on the first file that is not so
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clip_text.h"
#include "flux.h"
#include "flux_text.h"
#include "param_cli_common.h"
#include "sentencepiece.h"
#include "t5_encoder.h"
#include "transformer_detect.h"
#include "transformer_keys.h"
#include "vae.h"
#include "weights.h"

const char *const param_cli_name = "sdt-flux-demo-io";

static int run_spm(int argc, char **argv)
{
    sdt_error err = {0};
    sdt_spm *tok = sdt_spm_load(cli_arg(argc, argv, "--tokenizer"), &err);
    if (!tok) return cli_fail(&err);
    const int L = (int)cli_num(argc, argv, "--length");
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)L);
    char line[4096];
    while (ids && fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        if (!sdt_spm_encode(tok, line, L, ids, NULL, &err)) return cli_fail(&err);
        for (int i = 0; i < L; i++) printf(i ? " %d" : "%d", ids[i]);
        printf("\n");
    }
    free(ids);
    sdt_spm_free(tok);
    return 0;
}

static int run_files(int argc, char **argv)
{
    static const struct {
        const char *name;
        int part;
        sdt_tf_part lone;
    } parts[] = {{"clip_l.safetensors", SDT_PART_CLIP_L, SDT_TF_CLIP_L},
                 {"t5xxl.safetensors", SDT_PART_T5XXL, SDT_TF_T5XXL},
                 {"ae.safetensors", SDT_PART_VAE, SDT_TF_VAE}};
    sdt_error err = {0};
    const char *dir = cli_arg(argc, argv, "--dir");
    char path[1024];
    snprintf(path, sizeof path, "%s/transformer.safetensors", dir);
    sdt_weights *w = sdt_weights_open(path, &err);
    if (!w) return cli_fail(&err);
    sdt_tf_info info;
    const bool flux = sdt_tf_detect(w, &info) && info.family == SDT_TF_FLUX;
    printf("transformer.safetensors: %s (%s)\n", flux ? info.variant : "not a Flux transformer",
           flux ? info.layout : "-");
    sdt_weights_close(w);
    if (!flux) return 1;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, parts[i].name);
        sdt_weights *raw = sdt_weights_open(path, &err);
        const bool lone = raw && sdt_tf_lone_part(raw) == parts[i].lone;
        if (raw) sdt_weights_close(raw);
        w = sdt_weights_open_part(path, (sdt_weights_part)parts[i].part, &err);
        if (!w) return cli_fail(&err);
        printf("%s: opens as its part, %s\n", parts[i].name, lone ? "told apart as a lone part" : "NOT a lone part");
        sdt_weights_close(w);
        if (!lone) return 1;
    }
    return 0;
}

static sdt_weights *open_in(const char *dir, const char *name, int part, sdt_error *err)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return part < 0 ? sdt_weights_open(path, err) : sdt_weights_open_part(path, (sdt_weights_part)part, err);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "spm")) return run_spm(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "files")) return run_files(argc, argv);
    if (argc < 2 || strcmp(argv[1], "run")) {
        fprintf(stderr, "usage: sdt-flux-demo-io run|spm|files ... (see flux_demo_cli.c)\n");
        return 2;
    }
    sdt_error err = {0};
    const char *dir = cli_arg(argc, argv, "--dir");
    sdt_weights *wt = open_in(dir, "transformer.safetensors", -1, &err);
    sdt_weights *wl = wt ? open_in(dir, "clip_l.safetensors", -1, &err) : NULL;
    sdt_weights *w5 = wl ? open_in(dir, "t5xxl.safetensors", SDT_PART_T5XXL, &err) : NULL;
    sdt_weights *wv = w5 ? open_in(dir, "ae.safetensors", SDT_PART_VAE, &err) : NULL;
    if (!wv) return cli_fail(&err);
    static flux_model fm;
    static clip_text_model cm;
    static t5_encoder t5;
    static vae_model vm;
    flux_config fc;
    clip_config cc;
    t5_config tc;
    vae_config vc;
    sdt_backend *be = sdt_backend_cpu_create(0);
    if (!flux_config_detect(wt, "", &fc, &err) || !flux_load(&fm, &fc, wt, &err)) return cli_fail(&err);
    if (!clip_config_detect_at(wl, CLIP_SLOT_SDXL_L, &cc, &err)) return cli_fail(&err);
    cc.default_skip = 1; /* Flux's CLIP-L: CLIPTextModel's pooler_output, every layer, no projection */
    cc.context_without_final_norm = false;
    cc.projection_dim = 0;
    cc.pooled_without_projection = true;
    if (!clip_text_load(&cm, &cc, wl, &err)) return cli_fail(&err);
    if (!t5_config_detect(w5, SDT_TK_T5XXL_PREFIX, &tc, &err) || !t5_encoder_load(&t5, &tc, w5, &err))
        return cli_fail(&err);
    if (!vae_config_detect(wv, &vc, &err)) return cli_fail(&err);
    const vae_config flux_vae = vae_config_flux();
    vc.scaling = flux_vae.scaling;
    vc.shift = flux_vae.shift;
    if (!vae_load(&vm, &vc, wv, be, &err)) return cli_fail(&err);
    printf("flux: %d + %d blocks, %d heads of %d, axes (%d, %d, %d), %s; clip_l width %d, %d layers; t5 d_model %d, "
           "%d layers; vae ch %d, z %d\n",
           fc.double_layers, fc.single_layers, fc.heads, fc.head_dim, fc.axes_dim[0], fc.axes_dim[1], fc.axes_dim[2],
           fc.guidance ? "guidance" : "no guidance", cc.width, cc.layers, tc.d_model, tc.layers, vc.ch, vc.z_channels);

    const long B = cli_num(argc, argv, "--batch"), L = cli_num(argc, argv, "--t5-len"),
               h = cli_num(argc, argv, "--height"), w = cli_num(argc, argv, "--width"), C = fc.in_channels,
               D = tc.d_model, P = cc.width, f = vae_factor(&vc);
    int32_t *tok_l = cli_read_all(cli_arg(argc, argv, "--clip-tokens"), (size_t)(B * FLUX_CLIP_TOKENS) * 4);
    int32_t *tok_5 = cli_read_all(cli_arg(argc, argv, "--t5-tokens"), (size_t)(B * L) * 4);
    float *latent = cli_read_all(cli_arg(argc, argv, "--latent"), (size_t)(B * C * h * w) * 4);
    float *ts = cli_read_all(cli_arg(argc, argv, "--timesteps"), (size_t)B * 4);
    float *ctx = cli_read_all(cli_arg(argc, argv, "--context"), (size_t)(B * L * fc.context_dim) * 4);
    float *pooled = cli_read_all(cli_arg(argc, argv, "--pooled"), (size_t)(B * fc.pooled_dim) * 4);
    float *image = cli_read_all(cli_arg(argc, argv, "--image"), (size_t)(B * 3 * h * f * w * f) * 4);
    sdt_tensor ttl = sdt_tensor_4d(tok_l, SDT_I32, 2, B, FLUX_CLIP_TOKENS, 0, 0),
               tt5 = sdt_tensor_4d(tok_5, SDT_I32, 2, B, L, 0, 0), tlat = sdt_tensor_4d(latent, SDT_F32, 4, B, C, h, w),
               tctx = sdt_tensor_4d(ctx, SDT_F32, 3, B, L, fc.context_dim, 0),
               tpool = sdt_tensor_4d(pooled, SDT_F32, 2, B, fc.pooled_dim, 0, 0),
               timg = sdt_tensor_4d(image, SDT_F32, 4, B, 3, h * f, w * f);
    float *mean = malloc(sizeof(float) * (size_t)(B * vc.z_channels * h * w)),
          *logvar = malloc(sizeof(float) * (size_t)(B * vc.z_channels * h * w)),
          *decoded = malloc(sizeof(float) * (size_t)(B * 3 * h * f * w * f));
    sdt_tensor tmean = sdt_tensor_4d(mean, SDT_F32, 4, B, vc.z_channels, h, w),
               tlogv = sdt_tensor_4d(logvar, SDT_F32, 4, B, vc.z_channels, h, w),
               tdec = sdt_tensor_4d(decoded, SDT_F32, 4, B, 3, h * f, w * f);
    sdt_flux_text_inputs tin = {.tokens_l = &ttl, .t5 = {.tokens = &tt5}, .act_dtype = SDT_F32};
    flux_inputs fin = {&tlat, ts, NULL, &tctx, &tpool, false, SDT_F32};
    static sdt_flux_text_acts ta;
    static flux_acts fa;
    sdt_arena measure, arena;
    sdt_arena_init_measure(&measure, be);
    if (!sdt_flux_text_forward(&cm, &t5, be, &measure, &tin, &ta, &err) ||
        !flux_forward(&fm, be, &measure, &fin, &fa, &err) ||
        !vae_encode(&vm, be, &measure, &timg, SDT_F32, &tmean, &tlogv, &err) ||
        !vae_decode(&vm, be, &measure, &tlat, SDT_F32, &tdec, &err))
        return cli_fail(&err);
    if (!sdt_arena_init(&arena, be, measure.peak)) return cli_fail(&arena.error);
    if (!sdt_flux_text_forward(&cm, &t5, be, &arena, &tin, &ta, &err)) return cli_fail(&err);
    cli_write_all(cli_arg(argc, argv, "--out-pooled"), ta.pooled.data, (size_t)(B * P) * 4);
    cli_write_all(cli_arg(argc, argv, "--out-context"), ta.context.data, (size_t)(B * L * D) * 4);
    if (!flux_forward(&fm, be, &arena, &fin, &fa, &err)) return cli_fail(&err);
    cli_write_all(cli_arg(argc, argv, "--out-velocity"), fa.out.data, (size_t)(B * C * h * w) * 4);
    sdt_arena_release(&arena);
    sdt_arena_init_measure(&measure, be);
    if (!vae_encode(&vm, be, &measure, &timg, SDT_F32, &tmean, &tlogv, &err) ||
        !vae_decode(&vm, be, &measure, &tlat, SDT_F32, &tdec, &err) || !sdt_arena_init(&arena, be, measure.peak))
        return cli_fail(&err);
    if (!vae_encode(&vm, be, &arena, &timg, SDT_F32, &tmean, &tlogv, &err) ||
        !vae_decode(&vm, be, &arena, &tlat, SDT_F32, &tdec, &err))
        return cli_fail(&err);
    cli_write_all(cli_arg(argc, argv, "--out-mean"), mean, (size_t)(B * vc.z_channels * h * w) * 4);
    cli_write_all(cli_arg(argc, argv, "--out-logvar"), logvar, (size_t)(B * vc.z_channels * h * w) * 4);
    cli_write_all(cli_arg(argc, argv, "--out-decoded"), decoded, (size_t)(B * 3 * h * f * w * f) * 4);
    sdt_arena_release(&arena);
    vae_free(&vm);
    flux_free(&fm);
    be->destroy(be);
    sdt_weights_close(wt), sdt_weights_close(wl), sdt_weights_close(w5), sdt_weights_close(wv);
    free(tok_l), free(tok_5), free(latent), free(ts), free(ctx), free(pooled), free(image);
    free(mean), free(logvar), free(decoded);
    return 0;
}
