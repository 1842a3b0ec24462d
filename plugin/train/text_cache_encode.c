/* text_cache_encode.c - see text_cache_encode.h. */
#include "train/text_cache_encode.h"

#include <stdlib.h>
#include <string.h>

#include "train/sd_cond.h"

/* Chunks encoded together: what a training batch of a few long prompts puts through the encoders. */
#define TEXT_CACHE_GROUP 8

/* The encoders' inputs for `count` chunks of one sequence each (SDXL's size part is not kept: any sizes). */
static sdt_cond_inputs group_inputs(const sdt_text_cache *c, sd_runtime *rt, const int32_t *ids, int count,
                                    const sdt_sdxl_sizes *sizes, int clip_skip, bool anomaly_check)
{
    sdt_cond_inputs ci = {.tokens = ids,
                          .batch = count,
                          .chunks = 1,
                          .end_id = c->end_id,
                          .sizes = sizes,
                          .clip_skip = clip_skip,
                          .act_dtype = rt->dtype,
                          .anomaly_check = anomaly_check};
    return ci;
}

static bool download(sdt_backend *be, void *dst, const sdt_tensor *t, size_t bytes, sdt_error *error)
{
    if (sdt_tensor_nbytes(t) != bytes)
        return sdt_fail(error, SDT_ERR_INTERNAL,
                        "the text encoders' output has %zu bytes where the text cache expects %zu "
                        "(a bug: please report)",
                        sdt_tensor_nbytes(t), bytes);
    if (be->download(be, dst, t->data, bytes))
        return sdt_fail(error, be->error.code, "reading the text encoders' output back from the %s backend failed: %s",
                        be->name, be->error.message);
    return true;
}

bool sdt_text_cache_encode(sdt_text_cache *c, sd_runtime *rt, work_arena *wa, int clip_skip, bool anomaly_check,
                           sdt_text_cache_progress progress, void *user, sdt_error *error)
{
    if (!c->sealed || rt->text_cache || rt->text_parked)
        return sdt_fail(error, SDT_ERR_INTERNAL,
                        "the text cache was encoded without the text encoders (a bug: please report)");
    c->dtype = rt->dtype;
    c->clip_skip = clip_skip;
    c->width = sdt_text_cache_context_width(rt);
    c->pooled_width = sdt_text_cache_pooled_width(rt);
    c->context_bytes = (size_t)SDT_PROMPT_TOKENS * (size_t)c->width * sdt_dtype_size(c->dtype);
    c->pooled_bytes = (size_t)c->pooled_width * sdt_dtype_size(c->dtype);
    free(c->context);
    free(c->pooled);
    c->context = malloc(c->n ? (size_t)c->n * c->context_bytes : 1);
    c->pooled = c->pooled_bytes ? malloc((size_t)c->n * c->pooled_bytes + 1) : NULL;
    if (!c->context || (c->pooled_bytes && !c->pooled))
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory for the text cache (%zu MiB)",
                        sdt_text_cache_bytes(rt, c->dtype, c->n) >> 20);
    sdt_sdxl_sizes sizes[TEXT_CACHE_GROUP];
    for (int i = 0; i < TEXT_CACHE_GROUP; i++) sizes[i] = (sdt_sdxl_sizes){64, 64, 0, 0, 64, 64};
    int group = c->n < TEXT_CACHE_GROUP ? (c->n ? c->n : 1) : TEXT_CACHE_GROUP;
    sdt_arena measure;
    sdt_arena_init_measure(&measure, rt->be);
    sdt_cond cond;
    sdt_cond_inputs ci = group_inputs(c, rt, NULL, group, sizes, clip_skip, false);
    if (!sdt_cond_forward(rt, &measure, &ci, &cond, error) || !work_arena_reserve(wa, rt->be, measure.peak, error))
        return sdt_error_wrap(error, "encoding the run's prompts once");
    for (int at = 0; at < c->n; at += group) {
        int count = c->n - at < group ? c->n - at : group;
        if (progress && !progress(user, at, c->n))
            return sdt_fail(error, SDT_ERR_INTERRUPTED, "encoding the run's prompts was interrupted");
        sdt_arena_rewind(&wa->arena, 0);
        sdt_arena_clear_error(&wa->arena);
        ci = group_inputs(c, rt, c->keys + (size_t)at * SDT_PROMPT_TOKENS, count, sizes, clip_skip, anomaly_check);
        if (!sdt_cond_forward(rt, &wa->arena, &ci, &cond, error))
            return sdt_error_wrap(error, "encoding the run's prompts once");
        if (!download(rt->be, c->context + (size_t)at * c->context_bytes, &cond.context,
                      (size_t)count * c->context_bytes, error))
            return false;
        if (c->pooled && !download(rt->be, c->pooled + (size_t)at * c->pooled_bytes, &cond.text.pooled,
                                   (size_t)count * c->pooled_bytes, error))
            return false;
    }
    sdt_arena_rewind(&wa->arena, 0);
    return true;
}
