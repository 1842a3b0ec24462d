/* sd_cond.c - see sd_cond.h. */
#include "train/sd_cond.h"

#include <stdlib.h>
#include <string.h>

#include "sd_text_rules.h"
#include "sdtrain.h"
#include "train/prompt.h"
#include "train/t5_cache.h"
#include "train/text_cache.h"

static sdt_tensor reshaped(const sdt_tensor *t, int ndim, int64_t d0, int64_t d1, int64_t d2)
{
    int64_t shape[3] = {d0, d1, d2};
    return sdt_tensor_make(t->data, t->dtype, t->device, ndim, shape);
}

/* One prompt's slice [1, ...] of a [batch, ...] tensor. */
static sdt_tensor sample_slice(const sdt_tensor *t, int b)
{
    sdt_tensor s = *t;
    size_t per = sdt_tensor_nbytes(t) / (size_t)t->shape[0];
    s.shape[0] = 1;
    s.data = (char *)t->data + per * (size_t)b;
    return s;
}

static bool upload_tokens(sdt_backend *be, sdt_tensor *dst, const int32_t *ids, sdt_error *error)
{
    if (be->upload(be, dst->data, ids, sdt_tensor_nbytes(dst)))
        return sdt_fail(error, be->error.code, "copying the prompt to the %s backend failed: %s", be->name,
                        be->error.message);
    return true;
}

/* bigG's copy of the chunks: 0 (its pad) after each chunk's end token where CLIP-L repeats the end token. */
static bool upload_tokens_g(sd_runtime *rt, sdt_tensor *dst, const int32_t *ids, int rows, int32_t end,
                            sdt_error *error)
{
    int32_t *g = malloc((size_t)rows * SDT_PROMPT_TOKENS * sizeof(int32_t));
    if (!g) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory for the prompt");
    memcpy(g, ids, (size_t)rows * SDT_PROMPT_TOKENS * sizeof(int32_t));
    sd_text_rules text = sd_text_rules_of(&rt->cfg);
    for (int r = 0; r < rows; r++)
        sdt_tokens_pad_after_end(g + (size_t)r * SDT_PROMPT_TOKENS, SDT_PROMPT_TOKENS, end,
                                 sd_text_pad_id_g(&text, end));
    bool ok = upload_tokens(rt->be, dst, g, error);
    free(g);
    return ok;
}

/* y's size part, [batch, 6 x width], computed on the host. */
static bool upload_time_embeds(sd_runtime *rt, sdt_tensor *dst, const sdt_cond_inputs *in, sdt_error *error)
{
    int64_t per = dst->shape[1], width = per / 6;
    float *h = malloc((size_t)(in->batch * per) * sizeof(float));
    if (!h) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory for the size conditioning");
    for (int b = 0; b < in->batch; b++) {
        const sdt_sdxl_sizes *s = &in->sizes[b];
        double v[6] = {s->original_height, s->original_width, s->crop_top,
                       s->crop_left,       s->target_height,  s->target_width};
        for (int i = 0; i < 6; i++) sdt_sdxl_size_embedding(v[i], (int)width, h + b * per + i * width);
    }
    void *store = h;
    if (dst->dtype != SDT_F32) {
        store = malloc(sdt_tensor_nbytes(dst));
        if (store) sdt_store_f32(h, store, dst->dtype, in->batch * per);
    }
    bool ok = store && rt->be->upload(rt->be, dst->data, store, sdt_tensor_nbytes(dst)) == 0;
    if (store != h) free(store);
    free(h);
    if (!ok)
        return sdt_fail(error, store ? rt->be->error.code : SDT_ERR_OUT_OF_MEMORY,
                        "copying the size conditioning failed: %s",
                        store ? rt->be->error.message : "out of host memory");
    return true;
}

/* The context rows (and SDXL's pooled vectors, from each prompt's first chunk) from the text cache,
 * chunk by chunk as the encoders would have computed them (train/text_cache.h). */
static bool upload_cached(sd_runtime *rt, const sdt_cond_inputs *in, sdt_tensor *context, sdt_tensor *pooled,
                          sdt_error *error)
{
    const sdt_text_cache *tc = rt->text_cache;
    int rows = in->batch * in->chunks;
    if (tc->dtype != in->act_dtype || tc->clip_skip != in->clip_skip)
        return sdt_fail(error, SDT_ERR_INTERNAL,
                        "the text cache holds %s values with CLIP skip %d, the pass asks for %s with %d "
                        "(a bug: please report)",
                        sdt_dtype_name(tc->dtype), tc->clip_skip, sdt_dtype_name(in->act_dtype), in->clip_skip);
    uint8_t *host = malloc((size_t)rows * tc->context_bytes + (size_t)in->batch * tc->pooled_bytes);
    if (!host) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory for the prompt's conditioning");
    uint8_t *host_pooled = host + (size_t)rows * tc->context_bytes;
    bool found = true;
    for (int r = 0; found && r < rows; r++) {
        const int32_t *ids = in->tokens + (size_t)r * SDT_PROMPT_TOKENS;
        const uint8_t *ctx = sdt_text_cache_context(tc, ids);
        found = ctx != NULL;
        if (ctx) memcpy(host + (size_t)r * tc->context_bytes, ctx, tc->context_bytes);
        if (ctx && pooled && r % in->chunks == 0)
            memcpy(host_pooled + (size_t)(r / in->chunks) * tc->pooled_bytes, sdt_text_cache_pooled(tc, ids),
                   tc->pooled_bytes);
    }
    bool ok = found && sdt_tensor_nbytes(context) == (size_t)rows * tc->context_bytes &&
              (!pooled || sdt_tensor_nbytes(pooled) == (size_t)in->batch * tc->pooled_bytes);
    if (!ok) {
        free(host);
        return sdt_fail(error, SDT_ERR_INTERNAL,
                        "a prompt of this batch is not in the text cache that replaced the text encoders "
                        "(a bug: please report)");
    }
    sdt_backend *be = rt->be;
    ok = be->upload(be, context->data, host, sdt_tensor_nbytes(context)) == 0 &&
         (!pooled || be->upload(be, pooled->data, host_pooled, sdt_tensor_nbytes(pooled)) == 0);
    free(host);
    if (!ok)
        return sdt_fail(error, be->error.code, "copying the prompt's conditioning to the %s backend failed: %s",
                        be->name, be->error.message);
    return true;
}

/* Without the encoders: the context (and pooled) tensors filled from the text cache. */
static bool forward_cached(sd_runtime *rt, sdt_arena *a, const sdt_cond_inputs *in, sdt_cond *c, sdt_error *error)
{
    const sdt_text_cache *tc = rt->text_cache;
    int64_t cshape[3] = {in->batch, (int64_t)in->chunks * SDT_PROMPT_TOKENS, tc->width},
            pshape[2] = {in->batch, tc->pooled_width};
    c->context = sdt_arena_tensor(a, in->act_dtype, 3, cshape);
    sdt_tensor *pooled = c->sdxl ? &c->text.pooled : NULL;
    if (pooled) *pooled = sdt_arena_tensor(a, in->act_dtype, 2, pshape);
    if (c->sdxl) c->text.context = c->context, c->text.batch = in->batch, c->text.chunks = in->chunks;
    if (a->measuring) return true;
    if (!sdt_arena_fits(a))
        return sdt_fail(error, a->error.code, "the prompt does not fit its arena (a bug: please report): %s",
                        a->error.message);
    return upload_cached(rt, in, &c->context, pooled, error);
}

static bool forward_sd(sd_runtime *rt, sdt_arena *a, const sdt_cond_inputs *in, sdt_cond *c, sdt_error *error)
{
    clip_text_inputs ci = {&c->tokens,    in->rows,      in->overrides,    in->n_overrides,
                           in->clip_skip, in->act_dtype, in->anomaly_check};
    if (!clip_text_forward(&rt->model.clip, rt->be, a, &ci, &c->clip, error)) return false;
    c->context = sdt_prompt_context(&c->clip.out, in->batch);
    return true;
}

/* [n, Wl + Wg] -> [n, Wl] and [n, Wg] (concat's backward into zeroed tensors is the split). */
static bool split_rows(sd_runtime *rt, sdt_arena *a, const sdt_tensor *rows, sdt_cond *c, sdt_error *error)
{
    int64_t wl = rt->cfg.clip.width, wg = rt->cfg.clip2.width;
    if (rows->ndim != 2 || rows->shape[1] != wl + wg)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "an SDXL embedding's rows must be [n, %lld + %lld] (clip_l, clip_g)", (long long)wl,
                        (long long)wg);
    int64_t sl[2] = {rows->shape[0], wl}, sg[2] = {rows->shape[0], wg};
    c->rows_l = sdt_arena_tensor(a, rows->dtype, 2, sl);
    c->rows_g = sdt_arena_tensor(a, rows->dtype, 2, sg);
    if (a->measuring) return true;
    if (!sdt_arena_fits(a)) return sdt_fail(error, a->error.code, "the embedding's rows: %s", a->error.message);
    if (rt->be->zero(rt->be, &c->rows_l) || rt->be->zero(rt->be, &c->rows_g) ||
        rt->be->concat_channels_backward(rt->be, &c->rows_l, &c->rows_g, rows))
        return sdt_fail(error, rt->be->error.code, "splitting the embedding's rows per encoder failed: %s",
                        rt->be->error.message);
    return true;
}

static bool forward_sdxl(sd_runtime *rt, sdt_arena *a, const sdt_cond_inputs *in, sdt_cond *c, sdt_error *error)
{
    sdt_backend *be = rt->be;
    sd_model *m = &rt->model;
    int pooled = sdt_sdxl_pooled_width(&m->cfg.unet), adm = m->cfg.unet.adm_in_channels;
    if (pooled <= 0 || (adm - pooled) % 6 != 0)
        return sdt_fail(error, SDT_ERR_UNSUPPORTED,
                        "the model has two text encoders but its UNet takes no SDXL vector "
                        "conditioning (label_emb with %d inputs); it is not an SDXL base model",
                        adm);
    bool cached = rt->text_cache != NULL;
    if (!cached) c->tokens_g = sdt_arena_tensor(a, SDT_I32, 2, c->tokens.shape);
    int64_t tshape[2] = {in->batch, adm - pooled}, yshape[2] = {in->batch, adm};
    c->time_embeds = sdt_arena_tensor(a, in->act_dtype, 2, tshape);
    if (!a->measuring) {
        if (!sdt_arena_fits(a))
            return sdt_fail(error, a->error.code, "the conditioning does not fit its arena (a bug: please report): %s",
                            a->error.message);
        if ((!cached && !upload_tokens_g(rt, &c->tokens_g, in->tokens, in->batch * in->chunks, in->end_id, error)) ||
            !upload_time_embeds(rt, &c->time_embeds, in, error))
            return false;
    }
    if (cached) {
        if (!forward_cached(rt, a, in, c, error)) return false;
    } else {
        if (in->rows && !split_rows(rt, a, in->rows, c, error)) return false;
        sdt_sdxl_text_inputs ti = {&c->tokens,
                                   &c->tokens_g,
                                   in->chunks,
                                   in->rows ? &c->rows_l : NULL,
                                   in->rows ? &c->rows_g : NULL,
                                   in->overrides,
                                   in->n_overrides,
                                   in->act_dtype,
                                   in->anomaly_check};
        if (!sdt_sdxl_text_forward(&m->clip, &m->clip2, be, a, &ti, &c->text, error)) return false;
        c->context = c->text.context;
    }
    c->y = sdt_arena_tensor(a, in->act_dtype, 2, yshape);
    if (a->measuring) return true;
    if (!sdt_arena_fits(a))
        return sdt_fail(error, a->error.code, "the conditioning does not fit its arena (a bug: please report): %s",
                        a->error.message);
    for (int b = 0; in->zero_text && b < in->batch; b++) {
        if (!in->zero_text[b]) continue;
        sdt_tensor ctx = sample_slice(&c->context, b), pool = sample_slice(&c->text.pooled, b);
        if (be->zero(be, &ctx) || be->zero(be, &pool))
            return sdt_fail(error, be->error.code, "zeroing the empty prompt's conditioning failed: %s",
                            be->error.message);
    }
    if (be->concat_channels_forward(be, &c->y, &c->text.pooled, &c->time_embeds))
        return sdt_fail(error, be->error.code, "building SDXL's vector conditioning failed: %s", be->error.message);
    return true;
}

/* A view of rows' table t (of the table-major layout: clip_l, clip_g, t5xxl; widths w[]) as [n, w[t]]. */
static sdt_tensor table_view(const sdt_tensor *rows, const int64_t w[3], int t)
{
    int64_t n = rows->shape[0], before = 0;
    for (int i = 0; i < t; i++) before += w[i];
    int64_t shape[2] = {n, w[t]};
    void *data = rows->data ? (char *)rows->data + (size_t)(n * before) * sdt_dtype_size(rows->dtype) : NULL;
    return sdt_tensor_make(data, rows->dtype, rows->device, 2, shape);
}

static bool sd3_table_widths(sd_runtime *rt, const sdt_tensor *rows, int64_t w[3], sdt_error *error)
{
    w[0] = rt->cfg.clip.width, w[1] = rt->cfg.clip2.width, w[2] = rt->cfg.t5.d_model;
    if (rows->ndim != 2 || rows->shape[1] != w[0] + w[1] + w[2])
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "an SD3.5/Flux.1 embedding's rows must be [n, %lld + %lld + %lld] (clip_l, clip_g, t5xxl "
                        "tables)",
                        (long long)w[0], (long long)w[1], (long long)w[2]);
    return true;
}

bool sdt_cond_reads_t5_cache(const sd_runtime *rt)
{
    return sd_config_is_transformer(&rt->cfg); /* SD3/SD3.5 and Flux.1: both read T5 through cond_t5_inputs */
}

sdt_tensor sdt_cond_t5_table(sd_runtime *rt, const sdt_tensor *rows)
{
    int64_t w[3];
    sdt_error ignored = {0};
    if (!rows || !sd3_table_widths(rt, rows, w, &ignored)) return (sdt_tensor){0};
    return table_view(rows, w, 2);
}

/* T5's inputs for a transformer family's conditioning (SD3's and Flux.1's): its ids on the device,
 * or with a T5 cache on the runtime (train/t5_cache.h) the batch's cached output as `hidden`, T5 not run. rows_t5:
 * the view of the embedding's t5xxl table (NULL: none). */
static void cond_t5_inputs(sd_runtime *rt, sdt_arena *a, const sdt_cond_inputs *in, sdt_cond *c,
                           const sdt_tensor *rows_t5, t5_context_inputs *t5)
{
    memset(t5, 0, sizeof *t5);
    if (rt->t5_cache) {
        int64_t shape[3] = {in->batch, in->t5_len, rt->cfg.t5.d_model};
        c->t5_hidden = sdt_arena_tensor(a, in->act_dtype, 3, shape);
        t5->hidden = &c->t5_hidden;
        return;
    }
    int64_t t5_shape[2] = {in->batch, in->t5_len};
    c->tokens_t5 = sdt_arena_tensor(a, SDT_I32, 2, t5_shape);
    *t5 = (t5_context_inputs){
        .tokens = &c->tokens_t5, .rows = rows_t5, .overrides = in->t5_overrides, .n_overrides = in->n_t5_overrides};
}

/* After the arena has room: T5's ids, or its cached output, onto the device. */
static bool cond_t5_upload(sd_runtime *rt, const sdt_cond_inputs *in, sdt_cond *c, sdt_error *error)
{
    if (rt->t5_cache)
        return sdt_t5_cache_fill(rt->t5_cache, rt->be, in->t5_tokens, in->t5_overrides, in->n_t5_overrides, in->batch,
                                 &c->t5_hidden, error);
    return upload_tokens(rt->be, &c->tokens_t5, in->t5_tokens, error);
}

/* SD3's three encoders on one 77-token sequence for each CLIP and T5's own ids (sd3_text.h). */
static bool forward_sd3(sd_runtime *rt, sdt_arena *a, const sdt_cond_inputs *in, sdt_cond *c, sdt_error *error)
{
    if (in->chunks != 1)
        return sdt_fail(error, SDT_ERR_INTERNAL,
                        "SD3 conditions on one 77-token sequence per encoder, not %d chunks (a bug: please report)",
                        in->chunks);
    if (rt->text_cache)
        return sdt_fail(error, SDT_ERR_INTERNAL, "SD3's encoders have no text cache yet (a bug: please report)");
    if (rt->part_parked[SD_PART_T5XXL] && !rt->t5_cache) /* never run T5 on released weights */
        return sdt_fail(error, SDT_ERR_INTERNAL, "T5 left the device without a T5 cache (a bug: please report)");
    sd_model *m = &rt->model;
    t5_context_inputs t5; /* c->rows_t5 is set below */
    c->tokens_g = sdt_arena_tensor(a, SDT_I32, 2, c->tokens.shape);
    cond_t5_inputs(rt, a, in, c, in->rows ? &c->rows_t5 : NULL, &t5);
    if (!a->measuring) {
        if (!sdt_arena_fits(a))
            return sdt_fail(error, a->error.code, "the prompt does not fit its arena (a bug: please report): %s",
                            a->error.message);
        int32_t pad_g = clip_pad_id(&rt->cfg.clip2, in->end_id);
        int32_t *g = malloc((size_t)in->batch * SDT_PROMPT_TOKENS * sizeof(int32_t));
        if (!g) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory for the prompt");
        memcpy(g, in->tokens, (size_t)in->batch * SDT_PROMPT_TOKENS * sizeof(int32_t));
        for (int r = 0; r < in->batch; r++)
            sdt_tokens_pad_after_end(g + (size_t)r * SDT_PROMPT_TOKENS, SDT_PROMPT_TOKENS, in->end_id, pad_g);
        bool ok = upload_tokens(rt->be, &c->tokens_g, g, error) && cond_t5_upload(rt, in, c, error);
        free(g);
        if (!ok) return false;
    }
    int64_t w[3];
    if (in->rows) {
        if (!sd3_table_widths(rt, in->rows, w, error)) return false;
        c->rows_l = table_view(in->rows, w, 0);
        c->rows_g = table_view(in->rows, w, 1);
        c->rows_t5 = table_view(in->rows, w, 2);
    }
    c->trained_tables =
        in->trained_tables ? in->trained_tables : SDT_ENCODER_CLIP_L | SDT_ENCODER_CLIP_G | SDT_ENCODER_T5XXL;
    sdt_sd3_text_inputs ti = {
        .tokens_l = &c->tokens,
        .tokens_g = &c->tokens_g,
        .rows_l = in->rows ? &c->rows_l : NULL,
        .rows_g = in->rows ? &c->rows_g : NULL,
        .overrides = in->overrides,
        .n_overrides = in->n_overrides,
        .t5 = t5,
        .joint_dim = rt->cfg.mmdit.context_dim,
        .clip_skip = 0, /* SD3 reads the penultimate layers (its pipeline's clip_skip None) */
        .act_dtype = in->act_dtype,
        .anomaly_check = in->anomaly_check,
    };
    if (!sdt_sd3_text_forward(&m->clip, &m->clip2, &m->t5, rt->be, a, &ti, &c->text3, error)) return false;
    c->context = c->text3.context;
    return true;
}

/* Flux's CLIP-L (its pooled output) on one 77-token sequence and T5 on its own ids (flux_text.h). */
static bool forward_flux(sd_runtime *rt, sdt_arena *a, const sdt_cond_inputs *in, sdt_cond *c, sdt_error *error)
{
    if (in->chunks != 1)
        return sdt_fail(error, SDT_ERR_INTERNAL,
                        "Flux conditions on one 77-token sequence for CLIP-L, not %d chunks (a bug: please report)",
                        in->chunks);
    if (rt->text_cache)
        return sdt_fail(error, SDT_ERR_INTERNAL, "Flux's encoders have no text cache yet (a bug: please report)");
    if (rt->part_parked[SD_PART_T5XXL] && !rt->t5_cache) /* never run T5 on released weights */
        return sdt_fail(error, SDT_ERR_INTERNAL, "T5 left the device without a T5 cache (a bug: please report)");
    t5_context_inputs t5; /* c->rows_t5 is set below */
    cond_t5_inputs(rt, a, in, c, in->rows ? &c->rows_t5 : NULL, &t5);
    if (!a->measuring) {
        if (!sdt_arena_fits(a))
            return sdt_fail(error, a->error.code, "the prompt does not fit its arena (a bug: please report): %s",
                            a->error.message);
        if (!cond_t5_upload(rt, in, c, error)) return false;
    }
    int64_t w[3];
    if (in->rows) {
        if (!sd3_table_widths(rt, in->rows, w, error)) return false;
        c->rows_l = table_view(in->rows, w, 0);
        c->rows_t5 = table_view(in->rows, w, 2);
    }
    c->trained_tables = in->trained_tables ? in->trained_tables : SDT_ENCODER_CLIP_L | SDT_ENCODER_T5XXL;
    sdt_flux_text_inputs ti = {
        .tokens_l = &c->tokens,
        .rows_l = in->rows ? &c->rows_l : NULL,
        .overrides = in->overrides,
        .n_overrides = in->n_overrides,
        .t5 = t5,
        .act_dtype = in->act_dtype,
        .anomaly_check = in->anomaly_check,
    };
    if (!sdt_flux_text_forward(&rt->model.clip, &rt->model.t5, rt->be, a, &ti, &c->textf, error)) return false;
    c->context = c->textf.context;
    return true;
}

bool sdt_cond_forward(sd_runtime *rt, sdt_arena *a, const sdt_cond_inputs *in, sdt_cond *c, sdt_error *error)
{
    memset(c, 0, sizeof *c);
    c->flux = sd_config_is_flux(&rt->cfg);
    c->sd3 = sd_config_is_transformer(&rt->cfg) && !c->flux;
    c->sdxl = sd_text_rules_of(&rt->cfg).sdxl;
    if (c->sdxl && !in->sizes && !a->measuring)
        return sdt_fail(error, SDT_ERR_INTERNAL,
                        "SDXL conditioning without the size conditioning (a bug: please report)");
    if (rt->text_cache && (in->rows || in->n_overrides))
        return sdt_fail(error, SDT_ERR_INTERNAL,
                        "an embedding's rows reached a prompt whose text encoders were replaced by the "
                        "text cache (a bug: please report)");
    if (rt->text_parked && !rt->text_cache)
        return sdt_fail(error, SDT_ERR_INTERNAL,
                        "the text encoders left the device without a text cache (a bug: please report)");
    if (rt->t5_cache && !sdt_cond_reads_t5_cache(rt))
        return sdt_fail(
            error, SDT_ERR_INTERNAL,
            "T5's output was cached for a model whose conditioning does not read it (a bug: please report)");
    bool cached = rt->text_cache != NULL;
    if (!cached) {
        int64_t tshape[2] = {(int64_t)in->batch * in->chunks, SDT_PROMPT_TOKENS};
        c->tokens = sdt_arena_tensor(a, SDT_I32, 2, tshape);
        if (!a->measuring) {
            if (!sdt_arena_fits(a))
                return sdt_fail(error, a->error.code, "the prompt does not fit its arena (a bug: please report): %s",
                                a->error.message);
            if (!upload_tokens(rt->be, &c->tokens, in->tokens, error)) return false;
        }
    }
    if (c->sd3) return forward_sd3(rt, a, in, c, error);
    if (c->flux) return forward_flux(rt, a, in, c, error);
    if (c->sdxl) return forward_sdxl(rt, a, in, c, error);
    return cached ? forward_cached(rt, a, in, c, error) : forward_sd(rt, a, in, c, error);
}

const sdt_tensor *sdt_cond_y(const sdt_cond *c)
{
    return c->sdxl ? &c->y : NULL;
}

const sdt_tensor *sdt_cond_pooled(const sdt_cond *c)
{
    return c->sd3 ? &c->text3.pooled : c->flux ? &c->textf.pooled : NULL;
}

/* SD3: each trained table's gradient straight into its view of drows (sd3_text accumulates). */
static bool backward_sd3(sd_runtime *rt, sdt_arena *a, const sdt_cond *c, const sdt_tensor *dcontext,
                         const sdt_tensor *dpooled, sdt_tensor *drows, sdt_error *error)
{
    if (!drows || (!c->rows_l.data && !a->measuring)) return true; /* nothing upstream trains */
    int64_t w[3];
    if (!sd3_table_widths(rt, drows, w, error)) return false;
    sdt_tensor dl = table_view(drows, w, 0), dg = table_view(drows, w, 1), d5 = table_view(drows, w, 2);
    uint32_t t = c->trained_tables;
    sd_model *m = &rt->model;
    return sdt_sd3_text_backward(&m->clip, &m->clip2, &m->t5, rt->be, a, &c->text3, dcontext, dpooled,
                                 t & SDT_ENCODER_CLIP_L ? &dl : NULL, t & SDT_ENCODER_CLIP_G ? &dg : NULL,
                                 t & SDT_ENCODER_T5XXL ? &d5 : NULL, error);
}

/* Flux: CLIP-L's table from d(pooled), T5's from d(context), each into its view of drows. */
static bool backward_flux(sd_runtime *rt, sdt_arena *a, const sdt_cond *c, const sdt_tensor *dcontext,
                          const sdt_tensor *dpooled, sdt_tensor *drows, sdt_error *error)
{
    if (!drows || (!c->rows_l.data && !a->measuring)) return true; /* nothing upstream trains */
    int64_t w[3];
    if (!sd3_table_widths(rt, drows, w, error)) return false;
    sdt_tensor dl = table_view(drows, w, 0), d5 = table_view(drows, w, 2);
    uint32_t t = c->trained_tables;
    return sdt_flux_text_backward(&rt->model.clip, &rt->model.t5, rt->be, a, &c->textf, dcontext, dpooled,
                                  t & SDT_ENCODER_CLIP_L ? &dl : NULL, t & SDT_ENCODER_T5XXL ? &d5 : NULL, error);
}

bool sdt_cond_backward(sd_runtime *rt, sdt_arena *a, const sdt_cond *c, const sdt_tensor *dcontext,
                       const sdt_tensor *dy, sdt_tensor *drows, sdt_error *error)
{
    sdt_backend *be = rt->be;
    sd_model *m = &rt->model;
    if (c->sd3) return backward_sd3(rt, a, c, dcontext, dy, drows, error);
    if (c->flux) return backward_flux(rt, a, c, dcontext, dy, drows, error);
    if (!c->sdxl) {
        sdt_tensor d = reshaped(dcontext, 3, c->clip.out.shape[0], c->clip.out.shape[1], c->clip.out.shape[2]);
        return clip_text_backward(&m->clip, be, a, &c->clip, &d, drows, error);
    }
    if (!c->rows_l.data && !a->measuring) return true; /* no embedding: nothing upstream trains */
    size_t mark = sdt_arena_mark(a);
    sdt_tensor dpooled = {0}, joined = {0};
    const sdt_tensor *dp = NULL;
    if (dy) dpooled = sdt_arena_tensor(a, c->text.pooled.dtype, 2, c->text.pooled.shape);
    sdt_tensor dl = sdt_arena_tensor(a, SDT_F32, 2, c->rows_l.shape),
               dg = sdt_arena_tensor(a, SDT_F32, 2, c->rows_g.shape);
    if (drows) joined = sdt_arena_tensor(a, SDT_F32, 2, drows->shape);
    bool ok = true;
    if (!a->measuring) {
        if (!sdt_arena_fits(a)) {
            sdt_arena_rewind(a, mark);
            return sdt_fail(error, a->error.code, "the embedding's gradient: %s", a->error.message);
        }
        ok = !(dy && (be->zero(be, &dpooled) || be->concat_channels_backward(be, &dpooled, NULL, dy))) &&
             !be->zero(be, &dl) && !be->zero(be, &dg);
        if (!ok) sdt_fail(error, be->error.code, "the pooled embedding's gradient failed: %s", be->error.message);
    }
    if (dy) dp = &dpooled;
    ok = ok && sdt_sdxl_text_backward(&m->clip, &m->clip2, be, a, &c->text, dcontext, dp, &dl, &dg, error);
    /* drows += [dl, dg] side by side, as the rows are kept */
    if (ok && !a->measuring && drows &&
        (be->concat_channels_forward(be, &joined, &dl, &dg) || be->add_forward(be, drows, drows, &joined)))
        ok = sdt_fail(error, be->error.code, "joining the embedding's gradients failed: %s", be->error.message);
    sdt_arena_rewind(a, mark);
    return ok;
}
