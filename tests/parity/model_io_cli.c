/* model_io_cli.c - drives the C text encoder and VAE from files, for the parity scripts.
 *
 * All arrays are raw little-endian files: int32 for tokens and overrides
 * (batch, position, row triples), float32 for everything else, row-major in the
 * shapes named below. Runs on the CPU backend (the numerical reference).
 *
 *   sdt-model-io config --ckpt P [--slot sd|sdxl-l|sdxl-g]
 *       prints the detected config, one "key value" per line
 *   sdt-model-io clip --ckpt P [--slot sd|sdxl-l|sdxl-g] --tokens F --batch B --seq T --out F
 *       [--rows F --nrows R --overrides F --noverrides N] [--skip K]
 *       [--dout F] [--pooled F] [--dpooled F] [--drows F]
 *       (d(out) [B,T,C] in; pooled [B,P] out and d(pooled) [B,P] in for SDXL's bigG; d(rows) [R,C] out)
 * --slot picks the encoder: SD 1.x/2.x's (the default) or SDXL's CLIP-L / bigG.
 *   sdt-model-io vae-encode --ckpt P --image F --batch B --height H --width W --mean F --logvar F
 *   sdt-model-io vae-decode --ckpt P --latents F --batch B --height h --width w --out F
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clip_text.h"
#include "ops.h"
#include "sd_config_detect.h"
#include "sd_model.h"
#include "vae.h"
#include "weights.h"

typedef struct args {
    const char *cmd, *ckpt, *tokens, *rows, *overrides, *dout, *drows, *out, *image, *mean, *logvar, *latents;
    const char *slot, *pooled, *dpooled;
    long batch, seq, nrows, noverrides, skip, height, width;
} args;

static int fail(const char *msg)
{
    fprintf(stderr, "sdt-model-io: %s\n", msg);
    return 1;
}

static bool parse(int argc, char **argv, args *a)
{
    memset(a, 0, sizeof(*a));
    if (argc < 2) return false;
    a->cmd = argv[1];
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        const char **s = !strcmp(k, "--ckpt")        ? &a->ckpt
                         : !strcmp(k, "--tokens")    ? &a->tokens
                         : !strcmp(k, "--rows")      ? &a->rows
                         : !strcmp(k, "--overrides") ? &a->overrides
                         : !strcmp(k, "--dout")      ? &a->dout
                         : !strcmp(k, "--drows")     ? &a->drows
                         : !strcmp(k, "--out")       ? &a->out
                         : !strcmp(k, "--image")     ? &a->image
                         : !strcmp(k, "--mean")      ? &a->mean
                         : !strcmp(k, "--logvar")    ? &a->logvar
                         : !strcmp(k, "--latents")   ? &a->latents
                         : !strcmp(k, "--slot")      ? &a->slot
                         : !strcmp(k, "--pooled")    ? &a->pooled
                         : !strcmp(k, "--dpooled")   ? &a->dpooled
                                                     : NULL;
        long *n = !strcmp(k, "--batch")        ? &a->batch
                  : !strcmp(k, "--seq")        ? &a->seq
                  : !strcmp(k, "--nrows")      ? &a->nrows
                  : !strcmp(k, "--noverrides") ? &a->noverrides
                  : !strcmp(k, "--skip")       ? &a->skip
                  : !strcmp(k, "--height")     ? &a->height
                  : !strcmp(k, "--width")      ? &a->width
                                               : NULL;
        if (s)
            *s = v;
        else if (n)
            *n = strtol(v, NULL, 10);
        else
            return false;
    }
    return true;
}

/* Reads exactly bytes bytes; NULL (with a message) otherwise. */
static void *read_file(const char *path, size_t bytes)
{
    FILE *f = fopen(path, "rb");
    void *buf = malloc(bytes ? bytes : 1);
    bool ok = f && buf && fread(buf, 1, bytes, f) == bytes && fgetc(f) == EOF;
    if (f) fclose(f);
    if (!ok) {
        fprintf(stderr, "sdt-model-io: %s: expected exactly %zu bytes\n", path, bytes);
        free(buf);
        return NULL;
    }
    return buf;
}

static bool write_file(const char *path, const void *data, size_t bytes)
{
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(data, 1, bytes, f) == bytes;
    if (f && fclose(f) != 0) ok = false;
    if (!ok) fprintf(stderr, "sdt-model-io: cannot write %s\n", path);
    return ok;
}

static sdt_tensor host(void *data, sdt_dtype dt, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    return sdt_tensor_4d(data, dt, ndim, d0, d1, d2, d3);
}

static clip_slot slot_of(const args *a)
{
    if (a->slot && !strcmp(a->slot, "sdxl-l")) return CLIP_SLOT_SDXL_L;
    if (a->slot && !strcmp(a->slot, "sdxl-g")) return CLIP_SLOT_SDXL_G;
    return CLIP_SLOT_COND_STAGE;
}

/* Prints each part's detected config (a text-only or VAE-only file has just one part). */
static int cmd_config(const args *a, const sdt_weights *w)
{
    sd_config c;
    sdt_error error = {0};
    bool any = false;
    if (sd_config_detect(w, &c, &error)) printf("family %s\n", sd_family_name(c.family));
    if (clip_config_detect_at(w, slot_of(a), &c.clip, &error)) {
        any = true;
        printf("clip_layout %s\nclip_vocab %d\nclip_width %d\nclip_layers %d\nclip_heads %d\nclip_positions %d\n"
               "clip_mlp %d\nclip_act %s\nclip_default_skip %d\nclip_final_norm %d\nclip_projection %d\n",
               c.clip.layout == CLIP_LAYOUT_HF ? "hf" : "openclip", c.clip.vocab, c.clip.width, c.clip.layers,
               c.clip.heads, c.clip.positions, c.clip.mlp_width, c.clip.act == SDT_ACT_GELU ? "gelu" : "quick_gelu",
               c.clip.default_skip, c.clip.context_without_final_norm ? 0 : 1, c.clip.projection_dim);
    }
    if (vae_config_detect(w, &c.vae, &error)) {
        any = true;
        printf("vae_ch %d\nvae_levels %d\nvae_res_blocks %d\nvae_z %d\nvae_groups %d\nvae_scaling %.9g\nvae_shift "
               "%.9g\nvae_quant_conv %d\nvae_prefix %s\nvae_ch_mult",
               c.vae.ch, c.vae.levels, c.vae.res_blocks, c.vae.z_channels, c.vae.groups, c.vae.scaling, c.vae.shift,
               c.vae.has_quant_conv, vae_key_prefix(w)[0] ? vae_key_prefix(w) : "-");
        for (int i = 0; i < c.vae.levels; i++) printf(" %d", c.vae.ch_mult[i]);
        printf("\n");
    }
    return any ? 0 : fail("neither a text encoder nor a VAE was found in the checkpoint");
}

static int cmd_clip(const args *a, const sdt_weights *w, sdt_backend *be)
{
    sdt_error error = {0};
    clip_config cfg;
    clip_text_model m;
    if (!clip_config_detect_at(w, slot_of(a), &cfg, &error) || !clip_text_load(&m, &cfg, w, &error))
        return fail(error.message);
    if (!a->tokens || !a->out || a->batch < 1 || a->seq < 1) return fail("clip needs --tokens --batch --seq --out");
    int64_t B = a->batch, T = a->seq, C = cfg.width, R = a->nrows, N = a->noverrides, P = cfg.projection_dim;
    if ((a->pooled || a->dpooled) && P == 0)
        return fail("--pooled/--dpooled need an encoder with a projection (sdxl-g)");
    int32_t *tokens = read_file(a->tokens, (size_t)(B * T) * 4);
    float *rows = R > 0 ? read_file(a->rows, (size_t)(R * C) * 4) : NULL;
    clip_override *ov = N > 0 ? read_file(a->overrides, (size_t)N * sizeof(clip_override)) : NULL;
    float *dout = a->dout ? read_file(a->dout, (size_t)(B * T * C) * 4) : NULL;
    float *dpooled = a->dpooled ? read_file(a->dpooled, (size_t)(B * P) * 4) : NULL;
    if (!tokens || (R > 0 && !rows) || (N > 0 && !ov) || (a->dout && !dout) || (a->dpooled && !dpooled)) return 1;
    float *drows = calloc((size_t)(R > 0 ? R : 1) * C, sizeof(float));
    sdt_tensor tok_t = host(tokens, SDT_I32, 2, B, T, 0, 0), rows_t = host(rows, SDT_F32, 2, R, C, 0, 0);
    sdt_tensor dout_t = host(dout, SDT_F32, 3, B, T, C, 0), drows_t = host(drows, SDT_F32, 2, R, C, 0, 0);
    sdt_tensor dpooled_t = host(dpooled, SDT_F32, 2, B, P, 0, 0);
    const sdt_tensor *dout_p = dout ? &dout_t : NULL, *dpooled_p = dpooled ? &dpooled_t : NULL;
    bool backward = dout || dpooled;
    clip_text_inputs in = {.tokens = &tok_t,
                           .rows = R > 0 ? &rows_t : NULL,
                           .overrides = ov,
                           .n_overrides = (int)N,
                           .clip_skip = (int)a->skip,
                           .act_dtype = SDT_F32};
    sdt_arena meas, arena;
    clip_text_acts acts;
    sdt_arena_init_measure(&meas, be);
    if (!clip_text_forward(&m, be, &meas, &in, &acts, &error) ||
        (backward && !clip_text_backward_pooled(&m, be, &meas, &acts, dout_p, dpooled_p, &drows_t, &error)))
        return fail(error.message);
    if (!sdt_arena_init(&arena, be, meas.peak)) return fail(be->error.message);
    if (!clip_text_forward(&m, be, &arena, &in, &acts, &error) ||
        (backward && !clip_text_backward_pooled(&m, be, &arena, &acts, dout_p, dpooled_p, &drows_t, &error)))
        return fail(error.message);
    bool ok = write_file(a->out, acts.out.data, (size_t)(B * T * C) * 4);
    if (ok && a->pooled) ok = write_file(a->pooled, acts.pooled.data, (size_t)(B * P) * 4);
    if (ok && backward && a->drows) ok = write_file(a->drows, drows, (size_t)(R * C) * 4);
    sdt_arena_release(&arena);
    free(tokens), free(rows), free(ov), free(dout), free(dpooled), free(drows);
    return ok ? 0 : 1;
}

static int cmd_vae(const args *a, const sdt_weights *w, sdt_backend *be, bool encode)
{
    sdt_error error = {0};
    vae_config cfg;
    vae_model m;
    if (!vae_config_detect(w, &cfg, &error) || !vae_load(&m, &cfg, w, be, &error)) return fail(error.message);
    int64_t B = a->batch, H = a->height, W = a->width, f = vae_factor(&cfg), Z = cfg.z_channels;
    if (B < 1 || H < 1 || W < 1) return fail("vae needs --batch --height --width");
    sdt_arena meas, arena;
    sdt_arena_init_measure(&meas, be);
    int rc = 1;
    if (encode) {
        if (!a->image || !a->mean || !a->logvar) return fail("vae-encode needs --image --mean --logvar");
        int64_t h = H / f, wl = W / f, n_lat = B * Z * h * wl;
        float *image = read_file(a->image, (size_t)(B * 3 * H * W) * 4);
        float *mean = calloc((size_t)n_lat, 4), *logvar = calloc((size_t)n_lat, 4);
        if (!image) return 1;
        sdt_tensor it = host(image, SDT_F32, 4, B, 3, H, W), mt = host(mean, SDT_F32, 4, B, Z, h, wl);
        sdt_tensor lt = host(logvar, SDT_F32, 4, B, Z, h, wl);
        if (!vae_encode(&m, be, &meas, &it, SDT_F32, &mt, &lt, &error)) return fail(error.message);
        if (!sdt_arena_init(&arena, be, meas.peak)) return fail(be->error.message);
        if (!vae_encode(&m, be, &arena, &it, SDT_F32, &mt, &lt, &error)) return fail(error.message);
        rc = write_file(a->mean, mean, (size_t)n_lat * 4) && write_file(a->logvar, logvar, (size_t)n_lat * 4) ? 0 : 1;
        free(image), free(mean), free(logvar);
    } else {
        if (!a->latents || !a->out) return fail("vae-decode needs --latents --out");
        int64_t n_img = B * 3 * H * f * W * f;
        float *lat = read_file(a->latents, (size_t)(B * Z * H * W) * 4), *image = calloc((size_t)n_img, 4);
        if (!lat) return 1;
        sdt_tensor lt = host(lat, SDT_F32, 4, B, Z, H, W), it = host(image, SDT_F32, 4, B, 3, H * f, W * f);
        if (!vae_decode(&m, be, &meas, &lt, SDT_F32, &it, &error)) return fail(error.message);
        if (!sdt_arena_init(&arena, be, meas.peak)) return fail(be->error.message);
        if (!vae_decode(&m, be, &arena, &lt, SDT_F32, &it, &error)) return fail(error.message);
        rc = write_file(a->out, image, (size_t)n_img * 4) ? 0 : 1;
        free(lat), free(image);
    }
    sdt_arena_release(&arena);
    vae_free(&m);
    return rc;
}

int main(int argc, char **argv)
{
    args a;
    if (!parse(argc, argv, &a) || !a.ckpt)
        return fail("usage: sdt-model-io config|clip|vae-encode|vae-decode --ckpt PATH [options]; see model_io_cli.c");
    sdt_error error = {0};
    sdt_weights *w = sdt_weights_open(a.ckpt, &error);
    if (!w) return fail(error.message);
    sdt_backend *be = sdt_backend_cpu_create(0);
    if (!be) return fail("cannot create the CPU backend");
    int rc;
    if (!strcmp(a.cmd, "config"))
        rc = cmd_config(&a, w);
    else if (!strcmp(a.cmd, "clip"))
        rc = cmd_clip(&a, w, be);
    else if (!strcmp(a.cmd, "vae-encode"))
        rc = cmd_vae(&a, w, be, true);
    else if (!strcmp(a.cmd, "vae-decode"))
        rc = cmd_vae(&a, w, be, false);
    else
        rc = fail("unknown command; use config, clip, vae-encode or vae-decode");
    be->destroy(be);
    sdt_weights_close(w);
    return rc;
}
