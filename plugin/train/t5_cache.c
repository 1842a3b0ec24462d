/* t5_cache.c - see t5_cache.h. */
#include "train/t5_cache.h"

#include <stdlib.h>
#include <string.h>

#include "t5_context.h"

/* Prompts T5 computes together while filling the cache: a training batch's worth. */
#define T5_CACHE_GROUP 8

void sdt_t5_cache_init(sdt_t5_cache *c, int len)
{
    memset(c, 0, sizeof *c);
    c->len = len;
}

static size_t key_bytes(const sdt_t5_cache *c)
{
    return (size_t)c->len * sizeof(int32_t);
}

/* A slot's position holds -(row + 1): the key says which embedding T5 reads there, not the slot's id. */
static void mark_slots(int32_t *key, const int *pos, const int *row, int n)
{
    for (int s = 0; s < n; s++) key[pos[s]] = -(row[s] + 1);
}

static bool grow(sdt_t5_cache *c)
{
    if (c->n < c->cap) return true;
    int cap = c->cap ? c->cap * 2 : 64;
    int32_t *keys = realloc(c->keys, (size_t)cap * key_bytes(c));
    if (!keys) return false;
    c->keys = keys, c->cap = cap;
    return true;
}

bool sdt_t5_cache_add_prompt(sdt_t5_cache *c, const sdt_spm *spm, const sdt_t5_slot_rules *rules, const char *prompt,
                             sdt_error *error)
{
    int *pos = malloc((size_t)c->len * sizeof(int)), *row = malloc((size_t)c->len * sizeof(int));
    bool ok = pos && row && grow(c);
    if (!ok) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory listing the run's prompts for T5");
    if (ok) {
        int32_t *key = c->keys + (size_t)c->n * (size_t)c->len;
        sdt_t5_prompt_report rep;
        ok = sdt_t5_prompt_encode(spm, rules, prompt ? prompt : "", c->len, key, pos, row, &rep, error);
        if (ok) {
            mark_slots(key, pos, row, rep.n_slots);
            c->n++;
            c->sealed = false;
        }
    }
    free(pos);
    free(row);
    return ok;
}

/* qsort's element: a key and its length (qsort gives the comparator no other way to know it). */
typedef struct key_ref {
    const int32_t *key;
    size_t bytes;
} key_ref;

static int ref_cmp(const void *a, const void *b)
{
    const key_ref *x = a, *y = b;
    return memcmp(x->key, y->key, x->bytes);
}

bool sdt_t5_cache_seal(sdt_t5_cache *c)
{
    size_t kb = key_bytes(c);
    key_ref *refs = c->n > 1 ? malloc((size_t)c->n * sizeof *refs) : NULL;
    int32_t *sorted = c->n > 1 ? malloc((size_t)c->n * kb) : NULL;
    if (c->n > 1 && (!refs || !sorted)) {
        free(refs);
        free(sorted);
        return false;
    }
    if (c->n > 1) {
        for (int i = 0; i < c->n; i++) refs[i] = (key_ref){c->keys + (size_t)i * (size_t)c->len, kb};
        qsort(refs, (size_t)c->n, sizeof *refs, ref_cmp);
        int kept = 0;
        for (int i = 0; i < c->n; i++) {
            if (kept && memcmp(refs[i].key, sorted + (size_t)(kept - 1) * (size_t)c->len, kb) == 0) continue;
            memcpy(sorted + (size_t)kept * (size_t)c->len, refs[i].key, kb);
            kept++;
        }
        free(c->keys);
        c->keys = sorted, c->cap = c->n, c->n = kept;
        sorted = NULL;
    }
    c->sealed = true;
    free(refs);
    free(sorted);
    return true;
}

size_t sdt_t5_cache_bytes(int len, int width, sdt_dtype dtype, int n)
{
    return (size_t)len * (size_t)width * sdt_dtype_size(dtype) * (size_t)n;
}

/* The index of key (binary search over the sealed keys), or -1. */
static long find(const sdt_t5_cache *c, const int32_t *key)
{
    size_t kb = key_bytes(c);
    long lo = 0, hi = (long)c->n - 1;
    while (c->sealed && lo <= hi) {
        long mid = lo + (hi - lo) / 2;
        int r = memcmp(key, c->keys + (size_t)mid * (size_t)c->len, kb);
        if (r == 0) return mid;
        if (r < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return -1;
}

/* A group's ids (slots back to token 0, whose embedding the rows replace) and its slots. */
static int group_inputs(const sdt_t5_cache *c, int at, int count, int32_t *ids, t5_override *ov)
{
    int n = 0;
    for (int p = 0; p < count; p++) {
        const int32_t *key = c->keys + (size_t)(at + p) * (size_t)c->len;
        for (int i = 0; i < c->len; i++) {
            ids[(size_t)p * (size_t)c->len + (size_t)i] = key[i] < 0 ? 0 : key[i];
            if (key[i] < 0) ov[n++] = (t5_override){p, i, -key[i] - 1};
        }
    }
    return n;
}

/* One group through T5 on arena a (measuring: sizes only); out: its output, [count, len, width]. */
static bool run_group(sd_runtime *rt, sdt_arena *a, int len, const int32_t *ids, int count, const sdt_tensor *t5_rows,
                      const t5_override *ov, int n_ov, sdt_tensor *out, sdt_error *error)
{
    sdt_backend *be = rt->be;
    int64_t shape[2] = {count, len};
    sdt_tensor tokens = sdt_arena_tensor(a, SDT_I32, 2, shape);
    if (!a->measuring) {
        if (!sdt_arena_fits(a))
            return sdt_fail(error, a->error.code, "T5's prompts do not fit their arena (a bug: please report): %s",
                            a->error.message);
        if (be->upload(be, tokens.data, ids, sdt_tensor_nbytes(&tokens)))
            return sdt_fail(error, be->error.code, "copying the prompts to the %s backend failed: %s", be->name,
                            be->error.message);
    }
    t5_context_inputs in = {.tokens = &tokens, .rows = n_ov ? t5_rows : NULL, .overrides = ov, .n_overrides = n_ov};
    t5_context_acts acts;
    if (!t5_context_forward(&rt->model.t5, be, a, &in, count, rt->dtype, "the T5 cache", &acts, error)) return false;
    *out = acts.out;
    return true;
}

bool sdt_t5_cache_encode(sdt_t5_cache *c, sd_runtime *rt, work_arena *wa, const sdt_tensor *t5_rows, sdt_error *error)
{
    if (!c->sealed || rt->t5_cache || rt->part_parked[SD_PART_T5XXL])
        return sdt_fail(error, SDT_ERR_INTERNAL, "the T5 cache was computed without T5 (a bug: please report)");
    c->dtype = rt->dtype;
    c->width = rt->cfg.t5.d_model;
    c->value_bytes = sdt_t5_cache_bytes(c->len, c->width, c->dtype, 1);
    free(c->values);
    c->values = malloc(c->n ? (size_t)c->n * c->value_bytes : 1);
    int group = c->n < T5_CACHE_GROUP ? (c->n ? c->n : 1) : T5_CACHE_GROUP;
    int32_t *ids = malloc((size_t)group * (size_t)c->len * sizeof(int32_t));
    t5_override *ov = malloc((size_t)group * (size_t)c->len * sizeof(t5_override));
    bool ok = c->values && ids && ov;
    if (!ok)
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory for the T5 cache (%zu MiB)",
                 sdt_t5_cache_bytes(c->len, c->width, c->dtype, c->n) >> 20);
    int with_slots = 0; /* a slot in the measured group, so the overrides' cost is counted */
    for (int i = 0; ok && i < c->n * c->len && !with_slots; i++) with_slots = c->keys[i] < 0;
    if (ok && with_slots && !t5_rows)
        ok = sdt_fail(error, SDT_ERR_INTERNAL,
                      "a prompt of the T5 cache has the placeholder but no t5xxl rows came "
                      "(a bug: please report)");
    sdt_tensor out;
    if (ok) {
        sdt_arena measure;
        sdt_arena_init_measure(&measure, rt->be);
        const t5_override slot = {0, 0, 0};
        ok = run_group(rt, &measure, c->len, NULL, group, t5_rows, &slot, with_slots, &out, error) &&
             work_arena_reserve(wa, rt->be, measure.peak, error);
    }
    for (int at = 0; ok && at < c->n; at += group) {
        int count = c->n - at < group ? c->n - at : group;
        int n_ov = group_inputs(c, at, count, ids, ov);
        sdt_arena_rewind(&wa->arena, 0);
        sdt_arena_clear_error(&wa->arena);
        ok = run_group(rt, &wa->arena, c->len, ids, count, t5_rows, ov, n_ov, &out, error);
        if (ok && sdt_tensor_nbytes(&out) != (size_t)count * c->value_bytes)
            ok = sdt_fail(error, SDT_ERR_INTERNAL,
                          "T5's output has %zu bytes where the T5 cache expects %zu (a bug: please report)",
                          sdt_tensor_nbytes(&out), (size_t)count * c->value_bytes);
        if (ok && rt->be->download(rt->be, c->values + (size_t)at * c->value_bytes, out.data, sdt_tensor_nbytes(&out)))
            ok = sdt_fail(error, rt->be->error.code, "reading T5's output back from the %s backend failed: %s",
                          rt->be->name, rt->be->error.message);
    }
    sdt_arena_rewind(&wa->arena, 0);
    free(ids);
    free(ov);
    return ok ? true : sdt_error_wrap(error, "computing T5's output for the run's prompts once");
}

bool sdt_t5_cache_fill(const sdt_t5_cache *c, sdt_backend *be, const int32_t *tokens, const t5_override *overrides,
                       int n_overrides, int batch, sdt_tensor *hidden, sdt_error *error)
{
    size_t bytes = (size_t)batch * c->value_bytes;
    if (sdt_tensor_nbytes(hidden) != bytes || hidden->dtype != c->dtype)
        return sdt_fail(error, SDT_ERR_INTERNAL,
                        "the batch asks the T5 cache for %zu bytes of %s, it holds %zu a prompt in %s (a bug: please "
                        "report)",
                        sdt_tensor_nbytes(hidden), sdt_dtype_name(hidden->dtype), c->value_bytes,
                        sdt_dtype_name(c->dtype));
    uint8_t *host = malloc(bytes ? bytes : 1);
    int32_t *key = malloc(key_bytes(c));
    if (!host || !key) {
        free(host);
        free(key);
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory for T5's cached output");
    }
    bool found = true;
    for (int b = 0; found && b < batch; b++) {
        memcpy(key, tokens + (size_t)b * (size_t)c->len, key_bytes(c));
        for (int s = 0; s < n_overrides; s++)
            if (overrides[s].batch == b && overrides[s].position >= 0 && overrides[s].position < c->len)
                key[overrides[s].position] = -(overrides[s].row + 1);
        long i = find(c, key);
        found = i >= 0;
        if (found) memcpy(host + (size_t)b * c->value_bytes, c->values + (size_t)i * c->value_bytes, c->value_bytes);
    }
    bool ok = found && be->upload(be, hidden->data, host, bytes) == 0;
    free(host);
    free(key);
    if (!found)
        return sdt_fail(error, SDT_ERR_INTERNAL,
                        "a prompt of this batch is not in the T5 cache that replaced T5 (a bug: please report)");
    if (!ok)
        return sdt_fail(error, be->error.code, "copying T5's cached output to the %s backend failed: %s", be->name,
                        be->error.message);
    return true;
}

void sdt_t5_cache_free(sdt_t5_cache *c)
{
    free(c->keys);
    free(c->values);
    int len = c->len;
    memset(c, 0, sizeof *c);
    c->len = len;
}
