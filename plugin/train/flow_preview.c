/* flow_preview.c - see flow_preview.h. */
#include "train/flow_preview.h"

#include <stdlib.h>
#include <string.h>

#include "train/flow_sampler.h"
#include "train/preview_decode.h"
#include "train/rng.h"
#include "train/sd_cond.h"

typedef struct flow_preview_run {
    sd_runtime *rt;
    sdt_arena *arena;
    const sdt_tensor *context, *pooled; /* [batch, ...]: cond first */
    int batch, c, h, w;
    float *host; /* [batch, c, h, w] staging */
    sdt_error *error;
    sdt_tensor out; /* the last call's velocity (on the arena) */
} flow_preview_run;

/* One transformer call on the batch at the host latent x (every prompt the same x); out f32 on the host. */
static bool velocity_batch(flow_preview_run *p, const float *x, double timestep, double guidance, float *out,
                           sdt_error *error)
{
    sdt_backend *be = p->rt->be;
    int64_t n = (int64_t)p->c * p->h * p->w, shape[4] = {p->batch, p->c, p->h, p->w};
    size_t mark = sdt_arena_mark(p->arena);
    sdt_tensor lat = sdt_arena_tensor(p->arena, SDT_F32, 4, shape);
    float ts[2] = {(float)timestep, (float)timestep};
    bool ok = true;
    if (!p->arena->measuring) {
        for (int b = 0; b < p->batch; b++) memcpy(p->host + b * n, x, (size_t)n * sizeof(float));
        ok = sdt_arena_fits(p->arena) && be->upload(be, lat.data, p->host, (size_t)(p->batch * n) * sizeof(float)) == 0;
        if (!ok)
            sdt_fail(error, sdt_arena_fits(p->arena) ? be->error.code : p->arena->error.code,
                     "preview: the latents did not reach the %s backend", be->name);
    }
    const sdt_tensor *pred = NULL;
    flux_model *flux = p->rt->model.flux;
    if (flux) { /* Flux embeds the sigma and (dev) the distilled guidance */
        float sigmas[2] = {(float)(timestep / 1000.0), (float)(timestep / 1000.0)},
              gs[2] = {(float)guidance, (float)guidance};
        flux_inputs fi = {.latent = &lat,
                          .timesteps = sigmas,
                          .guidance = gs,
                          .context = p->context,
                          .pooled = p->pooled,
                          .act_dtype = p->rt->transformer_act_dtype};
        flux_acts *acts = malloc(sizeof *acts);
        ok = ok && acts && flux_forward(flux, be, p->arena, &fi, acts, error);
        if (!acts && error->code == SDT_ERR_OK) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "preview: out of host memory");
        if (ok) p->out = acts->out;
        free(acts);
        pred = ok ? &p->out : NULL;
    } else {
        mmdit_inputs mi = {.latent = &lat,
                           .timesteps = ts,
                           .context = p->context,
                           .pooled = p->pooled,
                           .act_dtype = p->rt->transformer_act_dtype};
        mmdit_acts *acts = malloc(sizeof *acts); /* large: off the stack, beside the prompts' sdt_cond */
        ok = ok && acts && mmdit_forward(p->rt->model.mmdit, be, p->arena, &mi, acts, error);
        if (!acts && error->code == SDT_ERR_OK) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "preview: out of host memory");
        if (ok) p->out = acts->out;
        free(acts);
        pred = ok ? &p->out : NULL;
    }
    if (ok && !p->arena->measuring && be->download(be, out, pred->data, (size_t)(p->batch * n) * sizeof(float)))
        ok = sdt_fail(error, be->error.code, "preview: the transformer's output: %s", be->error.message);
    sdt_arena_rewind(p->arena, mark);
    return ok;
}

static int velocity(void *user, const float *x, double timestep, double guidance, float *out_cond, float *out_uncond)
{
    flow_preview_run *p = user;
    int64_t n = (int64_t)p->c * p->h * p->w;
    if (!velocity_batch(p, x, timestep, guidance, p->host, p->error)) return -1; /* guidance: Flux dev's, else 0 */
    memcpy(out_cond, p->host, (size_t)n * sizeof(float));
    if (out_uncond) memcpy(out_uncond, p->host + n, (size_t)n * sizeof(float));
    return 0;
}

/* The prompt (and the negative one with guidance) through the three encoders, on the arena. */
static bool encode_prompts(sd_runtime *rt, sdt_arena *a, sdt_tokenizer *tok, const sdt_slot_rules *rules,
                           const sdt_spm *spm, const sdt_t5_slot_rules *t5_rules, const sdt_tensor *rows,
                           const sdt_flow_preview_request *req, int batch, sdt_cond *cond, sdt_flow_prompt_batch *pb,
                           sdt_error *error)
{
    const char *texts[2] = {req->prompt, req->negative ? req->negative : ""};
    if (!sdt_flow_prompts(tok, rules, spm, t5_rules, texts, batch, req->t5_len, pb, error)) return false;
    bool slots = pb->n_overrides > 0 || pb->n_t5_overrides > 0;
    sdt_cond_inputs ci = {.tokens = pb->tokens,
                          .batch = batch,
                          .chunks = 1,
                          .end_id = sdt_tokenizer_eos(tok),
                          .overrides = pb->overrides,
                          .n_overrides = pb->n_overrides,
                          .rows = slots ? rows : NULL,
                          .act_dtype = rt->dtype,
                          .t5_tokens = pb->t5_tokens,
                          .t5_len = req->t5_len,
                          .t5_overrides = pb->t5_overrides,
                          .n_t5_overrides = pb->n_t5_overrides};
    return sdt_cond_forward(rt, a, &ci, cond, error);
}

/* Runs (or, on a measuring arena, sizes) the whole preview. */
static bool preview_sequence(sd_runtime *rt, sdt_arena *a, sdt_tokenizer *tok, const sdt_slot_rules *rules,
                             const sdt_spm *spm, const sdt_t5_slot_rules *t5_rules, const sdt_tensor *rows,
                             const sdt_flow_preview_request *req, sdt_flow_prompt_batch *pb, uint8_t *rgb,
                             sdt_error *error)
{
    if (!sd_runtime_vae_ready(rt, error)) return false;
    const vae_model *vae = &rt->model.vae;
    int f = vae_factor(&vae->cfg), batch = req->cfg_scale != 1.0f ? 2 : 1;
    flow_preview_run p = {rt,   a,     NULL, NULL, batch, vae->cfg.z_channels, req->height / f, req->width / f,
                          NULL, error, {0}};
    sdt_cond text;
    if (!encode_prompts(rt, a, tok, rules, spm, t5_rules, rows, req, batch, &text, pb, error)) return false;
    p.context = &text.context;
    p.pooled = sdt_cond_pooled(&text);
    int64_t n = (int64_t)p.c * p.h * p.w;
    if (a->measuring) { /* size one transformer call and the decode; nothing runs */
        if (!velocity_batch(&p, NULL, 1000.0, req->guidance, NULL, error)) return false;
        return sdt_preview_decode_rgb(rt, a, NULL, req->width, req->height, NULL, error);
    }
    float *x = malloc((size_t)n * sizeof(float)), *scratch = malloc((size_t)n * 2 * sizeof(float));
    p.host = malloc((size_t)batch * n * sizeof(float));
    bool ok = x && scratch && p.host;
    if (!ok) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "preview: out of host memory");
    ok = ok && sdt_flow_steps_check(req->steps, error);
    if (ok) {
        sdt_flow_sampler_config sc = {.steps = req->steps,
                                      .cfg_scale = req->cfg_scale,
                                      .guidance = req->guidance,
                                      .shift = req->shift,
                                      .image_seq_len = (double)(p.h / 2) * (double)(p.w / 2),
                                      .sd3_spacing = rt->model.flux == NULL}; /* FluxPipeline passes its sigmas */
        sdt_rng_normal_fill(req->seed, SDT_RNG_PREVIEW, 0, x, n);
        int rc = sdt_flow_sample(&sc, x, n, scratch, velocity, &p);
        if (rc && error->code == SDT_ERR_OK) sdt_fail(error, SDT_ERR_INTERNAL, "preview: the sampler stopped (%d)", rc);
        ok = rc == 0;
    }
    ok = ok && sdt_preview_decode_rgb(rt, a, x, req->width, req->height, rgb, error);
    free(x);
    free(scratch);
    free(p.host);
    return ok;
}

bool sdt_flow_preview_render(sd_runtime *rt, work_arena *wa, sdt_tokenizer *tok, const sdt_slot_rules *rules,
                             const sdt_spm *spm, const sdt_t5_slot_rules *t5_rules, const sdt_tensor *rows,
                             const sdt_flow_preview_request *req, uint8_t **rgb, sdt_error *error)
{
    *rgb = NULL;
    sdt_error_clear(error);
    if (!sd_config_is_transformer(&rt->cfg))
        return sdt_fail(error, SDT_ERR_INTERNAL, "a flow preview of a UNet model (a bug: please report)");
    int len = req->t5_len > 0 ? req->t5_len : 1;
    sdt_flow_prompt_batch pb = {.tokens = malloc(2 * SDT_PROMPT_TOKENS * sizeof(int32_t)),
                                .overrides = malloc(2 * SDT_PROMPT_TOKENS * sizeof(clip_override)),
                                .t5_tokens = malloc((size_t)(2 * len) * sizeof(int32_t)),
                                .t5_overrides = malloc((size_t)(2 * len) * sizeof(t5_override))};
    bool ok = pb.tokens && pb.overrides && pb.t5_tokens && pb.t5_overrides;
    if (!ok) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "preview: out of host memory");
    sdt_arena measure;
    sdt_arena_init_measure(&measure, rt->be);
    ok = ok && preview_sequence(rt, &measure, tok, rules, spm, t5_rules, rows, req, &pb, NULL, error) &&
         work_arena_reserve(wa, rt->be, measure.peak, error);
    if (ok && !(*rgb = malloc((size_t)req->width * req->height * 3))) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "preview: out of host memory");
        ok = false;
    }
    if (ok && !preview_sequence(rt, &wa->arena, tok, rules, spm, t5_rules, rows, req, &pb, *rgb, error)) {
        free(*rgb);
        *rgb = NULL;
        ok = false;
    }
    free(pb.tokens);
    free(pb.overrides);
    free(pb.t5_tokens);
    free(pb.t5_overrides);
    return ok;
}
