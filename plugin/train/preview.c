/* preview.c - see preview.h. */
#include "train/preview.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/inpaint_cond.h"
#include "train/preview_decode.h"
#include "train/rng.h"
#include "train/sd_cond.h"

typedef struct preview_run {
    sd_runtime *rt;
    sdt_arena *arena;
    const sdt_tensor *context; /* [2 or 1, 77, C]: cond first */
    const sdt_tensor *y;       /* SDXL's vector conditioning [2 or 1, adm], else NULL */
    int batch;                 /* 2 with guidance */
    int c, h, w;
    int in_c;          /* the UNet's input channels: c, or c + extra for an inpainting model */
    const float *cond; /* [in_c - c, h, w]: an inpainting model's extra channels, else NULL */
    const sdt_unet_kv_hook *hook;
    float *host; /* [batch, in_c, h, w] staging */
    sdt_error *error;
} preview_run;

/* The UNet on x (host) at timestep t for each prompt of the batch. */
static int denoise(void *user, const float *x, double t, float *out_cond, float *out_uncond)
{
    preview_run *p = user;
    sdt_backend *be = p->rt->be;
    int64_t n = (int64_t)p->c * p->h * p->w, n_in = (int64_t)p->in_c * p->h * p->w;
    int64_t lshape[4] = {p->batch, p->c, p->h, p->w}, ishape[4] = {p->batch, p->in_c, p->h, p->w},
            tshape[1] = {p->batch};
    size_t mark = sdt_arena_mark(p->arena);
    sdt_tensor lat = sdt_arena_tensor(p->arena, SDT_F32, 4, ishape);
    sdt_tensor ts = sdt_arena_tensor(p->arena, SDT_F32, 1, tshape);
    float tv[2] = {(float)t, (float)t};
    for (int b = 0; b < p->batch; b++) {
        memcpy(p->host + b * n_in, x, (size_t)n * sizeof(float));
        if (p->cond) memcpy(p->host + b * n_in + n, p->cond, (size_t)(n_in - n) * sizeof(float));
    }
    sdt_unet_options uo = sdt_unet_options_default();
    uo.act_dtype = p->rt->dtype;
    uo.for_backward = false;
    uo.hook = p->hook;
    sdt_tensor out;
    bool ok = sdt_arena_fits(p->arena) &&
              be->upload(be, lat.data, p->host, (size_t)(p->batch * n_in) * sizeof(float)) == 0 &&
              be->upload(be, ts.data, tv, (size_t)p->batch * sizeof(float)) == 0;
    ok = ok && sdt_unet_forward(p->rt->model.unet, be, p->arena, &uo, &lat, &ts, p->context, p->y, &out, p->error);
    if (ok) {
        sdt_tensor o32 = sdt_arena_tensor(p->arena, SDT_F32, 4, lshape);
        ok = sdt_arena_fits(p->arena) && be->convert(be, &o32, &out) == 0 &&
             be->download(be, p->host, o32.data, (size_t)(p->batch * n) * sizeof(float)) == 0;
    }
    if (ok) {
        memcpy(out_cond, p->host, (size_t)n * sizeof(float));
        if (out_uncond) memcpy(out_uncond, p->host + n, (size_t)n * sizeof(float));
    } else if (!sdt_arena_fits(p->arena)) {
        sdt_fail(p->error, p->arena->error.code, "preview: the UNet failed: %s", p->arena->error.message);
    } else if (p->error->code == SDT_ERR_OK) {
        sdt_fail(p->error, be->error.code, "preview: the UNet failed: %s", be->error.message);
    }
    sdt_arena_rewind(p->arena, mark);
    return ok ? 0 : -1;
}

/* The prompts' conditioning (cond, then uncond) on the arena (train/sd_cond.h). SDXL is conditioned
 * on the image's own size, uncropped; an empty negative prompt is zeros there, as A1111 and diffusers do. */
static bool encode_prompts(sd_runtime *rt, sdt_arena *a, sdt_tokenizer *tok, const sdt_slot_rules *rules,
                           const sdt_tensor *rows, const sdt_preview_request *req, int batch, sdt_cond *cond,
                           clip_override *ov, sdt_error *error)
{
    sdt_prompt_encoded e[2];
    int32_t ids[2 * SDT_PROMPT_MAX_CHUNKS * SDT_PROMPT_TOKENS];
    const char *texts[2] = {req->prompt, req->negative ? req->negative : ""};
    for (int b = 0; b < batch; b++) sdt_prompt_encode(tok, rules, texts[b], &e[b]);
    int n_ov = 0, chunks = sdt_prompt_batch(tok, rules, e, batch, ids, ov, &n_ov);
    sdt_sdxl_sizes sizes[2];
    bool zero[2];
    for (int b = 0; b < batch; b++) {
        sizes[b] = (sdt_sdxl_sizes){req->height, req->width, 0, 0, req->height, req->width};
        zero[b] = b == 1 && texts[1][0] == '\0';
    }
    sdt_cond_inputs ci = {.tokens = ids,
                          .batch = batch,
                          .chunks = chunks,
                          .end_id = sdt_tokenizer_eos(tok),
                          .overrides = ov,
                          .n_overrides = n_ov,
                          .rows = n_ov ? rows : NULL,
                          .sizes = sizes,
                          .zero_text = zero,
                          .clip_skip = req->clip_skip,
                          .act_dtype = rt->dtype,
                          .anomaly_check = false};
    return sdt_cond_forward(rt, a, &ci, cond, error);
}

/* Runs (or, on a measuring arena, sizes) the whole preview. */
static bool preview_sequence(sd_runtime *rt, sdt_arena *a, sdt_tokenizer *tok, const sdt_slot_rules *rules,
                             const sdt_tensor *rows, const sdt_preview_request *req, const float *cond, uint8_t *rgb,
                             sdt_error *error)
{
    if (!sd_runtime_vae_ready(rt, error)) return false;
    sdt_backend *be = rt->be;
    const vae_model *vae = &rt->model.vae;
    int f = vae_factor(&vae->cfg), batch = req->cfg_scale != 1.0f ? 2 : 1;
    preview_run p = {rt,
                     a,
                     NULL,
                     NULL,
                     batch,
                     vae->cfg.z_channels,
                     req->height / f,
                     req->width / f,
                     vae->cfg.z_channels + inpaint_extra_channels(rt),
                     cond,
                     req->hook,
                     NULL,
                     error};
    sdt_cond text;
    clip_override ov[2 * SDT_PROMPT_MAX_CHUNKS * SDT_PROMPT_TOKENS];
    if (!encode_prompts(rt, a, tok, rules, rows, req, batch, &text, ov, error)) return false;
    p.context = &text.context;
    p.y = sdt_cond_y(&text);
    int64_t n = (int64_t)p.c * p.h * p.w;
    if (a->measuring) { /* size one UNet call and the decode; nothing runs */
        sdt_unet_options uo = sdt_unet_options_default();
        uo.act_dtype = rt->dtype;
        uo.for_backward = false;
        uo.hook = req->hook;
        int64_t bshape[4] = {batch, p.c, p.h, p.w}, inshape[4] = {batch, p.in_c, p.h, p.w}, tsh[1] = {batch};
        size_t mark = sdt_arena_mark(a);
        sdt_tensor lat = sdt_arena_tensor(a, SDT_F32, 4, inshape), ts = sdt_arena_tensor(a, SDT_F32, 1, tsh), out;
        if (!sdt_unet_forward(rt->model.unet, be, a, &uo, &lat, &ts, p.context, p.y, &out, error)) return false;
        sdt_arena_tensor(a, SDT_F32, 4, bshape);
        sdt_arena_rewind(a, mark);
        return sdt_preview_decode_rgb(rt, a, NULL, req->width, req->height, NULL, error);
    }
    float *x = malloc((size_t)n * sizeof(float)), *scratch = malloc((size_t)n * 4 * sizeof(float));
    p.host = malloc((size_t)batch * p.in_c * p.h * p.w * sizeof(float));
    bool ok = x && scratch && p.host;
    if (!ok) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "preview: out of host memory");
    ok = ok && sdt_ddim_steps_check(req->steps, error);
    if (ok) {
        sdt_noise_schedule s;
        sdt_noise_schedule_init_sd(&s);
        sdt_sampler_config sc = {req->sampler, req->steps, req->cfg_scale, rt->cfg.unet.v_prediction, req->seed};
        sdt_rng_normal_fill(req->seed, SDT_RNG_PREVIEW, 0, x, n);
        int rc = sdt_sampler_run(&s, &sc, x, n, scratch, denoise, &p);
        if (rc == SDT_SAMPLER_OUT_OF_MEMORY) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "preview: out of host memory");
        ok = rc == 0;
    }
    ok = ok && sdt_preview_decode_rgb(rt, a, x, req->width, req->height, rgb, error);
    free(x);
    free(scratch);
    free(p.host);
    return ok;
}

bool sdt_preview_render(sd_runtime *rt, work_arena *wa, sdt_tokenizer *tok, const sdt_slot_rules *rules,
                        const sdt_tensor *rows, const sdt_preview_request *req, uint8_t **rgb, sdt_error *error)
{
    *rgb = NULL;
    sdt_error_clear(error);
    inpaint_cond ic = {0};
    int f = vae_factor(&rt->model.vae.cfg);
    const float *cond =
        inpaint_extra_channels(rt) ? inpaint_cond_get(&ic, rt, wa, req->height / f, req->width / f, error) : NULL;
    if (inpaint_extra_channels(rt) && !cond) return false;
    sdt_arena measure;
    sdt_arena_init_measure(&measure, rt->be);
    bool ok = preview_sequence(rt, &measure, tok, rules, rows, req, cond, NULL, error) &&
              work_arena_reserve(wa, rt->be, measure.peak, error);
    if (ok && !(*rgb = malloc((size_t)req->width * req->height * 3))) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "preview: out of host memory");
        ok = false;
    }
    if (ok && !preview_sequence(rt, &wa->arena, tok, rules, rows, req, cond, *rgb, error)) {
        free(*rgb);
        *rgb = NULL;
        ok = false;
    }
    inpaint_cond_free(&ic);
    return ok;
}
