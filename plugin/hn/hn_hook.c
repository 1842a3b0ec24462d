/* hn_hook.c - a chain of hypernetworks on the UNet's K/V hook; see hn_hook.h. */
#include "hn/hn_hook.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/rng.h"

#define HN_HOOK_ALIGN 256

typedef struct hn_chain_entry {
    sdt_hn *hn;
    float strength;
    bool training;
} hn_chain_entry;

/* The chain's output on the pass's context for K or V, computed at the first cross site of a
 * pass and handed to the others, and the cross sites' output gradients summed for one backward. */
typedef struct hn_shared {
    bool valid;              /* out holds the chain's output on the pass's context */
    bool pending;            /* d_sum holds gradients not yet taken back (hook_flush) */
    sdt_tensor out;          /* in's shape, the sites' out dtype */
    sdt_tensor d_sum;        /* in's shape, f32 */
    sdt_unet_hook_site site; /* the first site of the backward (its width and kind) */
    sdt_tensor in;           /* the context the gradients belong to */
    sdt_tensor d_in;         /* and where its gradient goes (has_d_in) */
    bool has_d_in;
} hn_shared;

struct sdt_hn_binding {
    sdt_backend *be;
    int count;
    hn_chain_entry entries[SDT_HN_MAX_CHAIN];
    bool train_mode;
    uint64_t seed, counter;
    void *work;
    size_t work_bytes;
    sdt_unet_kv_hook hook;
    /* ---- a UNet pass (sdt_unet_kv_hook.pass): what it computes once ---- */
    bool share_context;  /* compute the context's modules once per pass (sdt_hn_binding_share_context) */
    bool in_pass;        /* between FORWARD_BEGIN and the pass's end */
    sdt_tensor context;  /* the pass's context */
    hn_shared shared[2]; /* K, V */
    void *shared_mem;    /* [out K][out V][d_sum K][d_sum V], each up to rows x width f32 */
    size_t shared_bytes;
    void *w16_mem; /* each entry's 16-bit weight copies (sdt_hn_weights16_bytes) */
    size_t w16_bytes;
    size_t w16_at[SDT_HN_MAX_CHAIN];
    sdt_dtype w16_dtype[SDT_HN_MAX_CHAIN][2 * SDT_HN_MAX_WIDTHS]; /* the copy's dtype; F32: none this pass */
};

/* ---- workspace: [module work][chain outputs x count][two gradient buffers] ---- */

typedef struct hn_hook_layout {
    size_t module_work;
    size_t chain[SDT_HN_MAX_CHAIN];
    size_t grad_a, grad_b;
    size_t total;
} hn_hook_layout;

static size_t hook_round(size_t bytes)
{
    return (bytes + HN_HOOK_ALIGN - 1) / HN_HOOK_ALIGN * HN_HOOK_ALIGN;
}

static hn_hook_layout hook_layout(const sdt_hn_binding *b, int width, int64_t rows)
{
    hn_hook_layout l;
    size_t module = 0, row_bytes = hook_round((size_t)(rows * width) * sizeof(float));
    for (int k = 0; k < b->count; k++) {
        const sdt_hn *hn = b->entries[k].hn;
        if (!sdt_hn_has_width(hn, width)) continue;
        size_t need = sdt_hn_module_workspace_bytes(sdt_hn_get_config(hn), width, rows);
        if (need > module) module = need;
    }
    size_t used = hook_round(module);
    l.module_work = 0;
    for (int k = 0; k < b->count; k++) l.chain[k] = used, used += row_bytes;
    l.grad_a = used, used += row_bytes;
    l.grad_b = used, used += row_bytes;
    l.total = used;
    return l;
}

size_t sdt_hn_binding_workspace_bytes_by_width(const sdt_hn_binding *b, sdt_hn_width_rows rows, void *user)
{
    size_t most = 0;
    for (int k = 0; k < b->count; k++) {
        const sdt_hn_config *c = sdt_hn_get_config(b->entries[k].hn);
        for (int w = 0; w < c->width_count; w++) {
            int64_t n = rows(user, c->widths[w]);
            size_t need = n > 0 ? hook_layout(b, c->widths[w], n).total : 0;
            if (need > most) most = need;
        }
    }
    return most;
}

static int64_t same_rows(void *user, int width)
{
    (void)width;
    return *(const int64_t *)user;
}

size_t sdt_hn_binding_workspace_bytes(const sdt_hn_binding *b, int64_t max_rows)
{
    return sdt_hn_binding_workspace_bytes_by_width(b, same_rows, &max_rows);
}

static bool hook_ensure(sdt_hn_binding *b, size_t bytes, sdt_error *error)
{
    if (bytes <= b->work_bytes) return true;
    if (b->work) b->be->free(b->be, b->work);
    b->work = b->be->alloc(b->be, bytes);
    b->work_bytes = b->work ? bytes : 0;
    if (!b->work)
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY,
                        "the hypernetwork workspace (%.1f MiB) could not be allocated "
                        "on the %s backend; use a smaller batch or image size",
                        (double)bytes / 1048576.0, b->be->name);
    return true;
}

/* ---- the pass caches ---- */

static bool hook_has_width(const sdt_hn_binding *b, int width)
{
    for (int k = 0; k < b->count; k++)
        if (sdt_hn_has_width(b->entries[k].hn, width)) return true;
    return false;
}

static size_t shared_bytes_for(const sdt_hn_binding *b, int width, int64_t rows)
{
    return hook_has_width(b, width) ? 4 * hook_round((size_t)(rows * width) * sizeof(float)) : 0;
}

static size_t w16_bytes_for(const sdt_hn_binding *b)
{
    size_t total = 0;
    for (int k = 0; k < b->count; k++) total += hook_round(sdt_hn_weights16_bytes(b->entries[k].hn));
    return total;
}

size_t sdt_hn_binding_cache_bytes(const sdt_hn_binding *b, int context_width, int64_t context_rows, bool weights16)
{
    return shared_bytes_for(b, context_width, context_rows) + (weights16 ? w16_bytes_for(b) : 0);
}

/* Grows one cache block to bytes; a refusal leaves it NULL (the pass then works per site and per call). */
static void cache_ensure(sdt_hn_binding *b, void **mem, size_t *have, size_t bytes)
{
    if (bytes <= *have && *mem) return;
    if (*mem) b->be->free(b->be, *mem);
    *mem = bytes ? b->be->alloc(b->be, bytes) : NULL;
    *have = *mem ? bytes : 0;
}

bool sdt_hn_binding_reserve_cache(sdt_hn_binding *b, int context_width, int64_t context_rows, bool weights16,
                                  sdt_error *error)
{
    size_t shared = shared_bytes_for(b, context_width, context_rows), w16 = weights16 ? w16_bytes_for(b) : 0;
    cache_ensure(b, &b->shared_mem, &b->shared_bytes, shared);
    cache_ensure(b, &b->w16_mem, &b->w16_bytes, w16);
    if ((shared && !b->shared_mem) || (w16 && !b->w16_mem))
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY,
                        "the hypernetwork's pass caches (%.1f MiB) could not be allocated "
                        "on the %s backend; use a smaller batch",
                        (double)(shared + w16) / 1048576.0, b->be->name);
    return true;
}

/* Forgets everything a pass computed: the next pass starts from the master weights and its own context. */
static void pass_reset(sdt_hn_binding *b)
{
    b->in_pass = false;
    memset(b->shared, 0, sizeof b->shared);
    for (int k = 0; k < SDT_HN_MAX_CHAIN; k++)
        for (int m = 0; m < 2 * SDT_HN_MAX_WIDTHS; m++) b->w16_dtype[k][m] = SDT_F32;
}

bool sdt_hn_binding_reserve(sdt_hn_binding *b, int64_t max_rows, sdt_error *error)
{
    return hook_ensure(b, sdt_hn_binding_workspace_bytes(b, max_rows), error);
}

bool sdt_hn_binding_reserve_by_width(sdt_hn_binding *b, sdt_hn_width_rows rows, void *user, sdt_error *error)
{
    return hook_ensure(b, sdt_hn_binding_workspace_bytes_by_width(b, rows, user), error);
}

/* ---- the chain at one site ---- */

/* The 16-bit copies of entry `position`'s module for this site in dtype, made at its first use in a
 * pass; NULL outside a pass, for f32, or without the block (the module then copies per call). */
static const void *hook_weights16(sdt_hn_binding *b, const sdt_unet_hook_site *site, int position, sdt_dtype dtype,
                                  sdt_error *error, bool *failed)
{
    *failed = false;
    if (!b->in_pass || !b->w16_mem || (dtype != SDT_F16 && dtype != SDT_BF16)) return NULL;
    const sdt_hn *hn = b->entries[position].hn;
    int m = sdt_hn_module_index(hn, site->width, site->kind);
    if (m < 0) return NULL;
    void *block = (char *)b->w16_mem + b->w16_at[position];
    if (b->w16_dtype[position][m] != dtype) {
        if (!sdt_hn_module_copy_weights16(hn, site->width, site->kind, dtype, block, error)) {
            *failed = true;
            return NULL;
        }
        b->w16_dtype[position][m] = dtype;
    }
    return block;
}

static sdt_hn_run hook_run(const sdt_hn_binding *b, const sdt_unet_hook_site *site, int position)
{
    sdt_hn_run run = {.training = b->train_mode && b->entries[position].training, .dropout_seed = 0, .weights16 = NULL};
    if (run.training) {
        uint64_t key = sdt_rng_bits(b->seed, SDT_RNG_DROPOUT, b->counter);
        key = sdt_rng_derive(key, (uint64_t)site->layer);
        key = sdt_rng_derive(key, (uint64_t)site->kind);
        run.dropout_seed = sdt_rng_derive(key, (uint64_t)position);
    }
    return run;
}

/* The chain positions with a module for this width, in order. A member at strength 0 adds
 * f(x) * 0: it is skipped (a preview-only member costs training nothing, hn_preview_chain.h). */
static int hook_applicable(const sdt_hn_binding *b, int width, int *positions)
{
    int n = 0;
    for (int k = 0; k < b->count; k++)
        if (b->entries[k].strength != 0.0f && sdt_hn_has_width(b->entries[k].hn, width)) positions[n++] = k;
    return n;
}

static sdt_tensor hook_buffer(const sdt_hn_binding *b, size_t offset, const sdt_tensor *like)
{
    sdt_tensor t = *like;
    t.data = (char *)b->work + offset;
    t.dtype = SDT_F32;
    return t;
}

static bool hook_wants(void *user, const sdt_unet_hook_site *site)
{
    const sdt_hn_binding *b = user;
    int positions[SDT_HN_MAX_CHAIN];
    return hook_applicable(b, site->width, positions) > 0;
}

/* Runs the chain's first `upto` applicable modules from in; module j's output goes to
 * chain buffer j, except the last one of a full forward, which goes to out. */
static bool hook_chain_forward(sdt_hn_binding *b, const sdt_unet_hook_site *site, const sdt_tensor *in, sdt_tensor *out,
                               int upto, const hn_hook_layout *l, const int *positions, sdt_error *error)
{
    const sdt_tensor *cur = in;
    sdt_tensor stage[SDT_HN_MAX_CHAIN];
    for (int j = 0; j < upto; j++) {
        const hn_chain_entry *e = &b->entries[positions[j]];
        sdt_hn_run run = hook_run(b, site, positions[j]);
        bool failed;
        run.weights16 = hook_weights16(b, site, positions[j], cur->dtype, error, &failed);
        if (failed) return false;
        stage[j] = hook_buffer(b, l->chain[j], in);
        sdt_tensor *dst = out && j == upto - 1 ? out : &stage[j];
        if (!sdt_hn_module_forward(e->hn, site->width, site->kind, &run, e->strength, cur, dst,
                                   (char *)b->work + l->module_work, error))
            return false;
        cur = dst;
    }
    return true;
}

/* May the chain at this site use the pass's shared output? A cross site whose input is the pass's
 * context, with no member drawing dropout masks (those are keyed per site, so each site differs). */
static bool hook_shares(const sdt_hn_binding *b, const sdt_unet_hook_site *site, const sdt_tensor *in,
                        const int *positions, int n)
{
    if (!b->share_context || !b->in_pass || !b->shared_mem || !site->cross || in->data != b->context.data ||
        in->dtype != b->context.dtype || sdt_tensor_numel(in) != sdt_tensor_numel(&b->context) ||
        b->shared_bytes < 4 * hook_round((size_t)sdt_tensor_numel(in) * sizeof(float)))
        return false;
    for (int j = 0; j < n; j++) {
        const hn_chain_entry *e = &b->entries[positions[j]];
        if (b->train_mode && e->training && sdt_hn_has_dropout(e->hn)) return false;
    }
    return true;
}

/* shared_mem's slot `slot` (0, 1: outputs K, V; 2, 3: gradient sums K, V) shaped like in. */
static sdt_tensor shared_slot(const sdt_hn_binding *b, int slot, const sdt_tensor *in, sdt_dtype dtype)
{
    sdt_tensor t = *in;
    t.data = (char *)b->shared_mem + (size_t)slot * hook_round((size_t)sdt_tensor_numel(in) * sizeof(float));
    t.dtype = dtype;
    return t;
}

static bool hook_forward(void *user, const sdt_unet_hook_site *site, const sdt_tensor *in, sdt_tensor *out,
                         bool recompute, sdt_error *error)
{
    (void)recompute; /* the same key gives the same masks: a recompute is just a forward */
    sdt_hn_binding *b = user;
    int positions[SDT_HN_MAX_CHAIN];
    int n = hook_applicable(b, site->width, positions);
    if (n == 0)
        return b->be->convert(b->be, out, in) == 0 ||
               sdt_fail(error, b->be->error.code, "copying the K/V input past the hypernetworks failed: %s",
                        b->be->error.message);
    int64_t rows = sdt_tensor_numel(in) / site->width;
    hn_hook_layout l = hook_layout(b, site->width, rows);
    if (!hook_ensure(b, l.total, error)) return false;
    if (hook_shares(b, site, in, positions, n)) {
        hn_shared *sh = &b->shared[site->kind];
        if (sh->valid && (sh->out.dtype != out->dtype || sdt_tensor_numel(&sh->out) != sdt_tensor_numel(out)))
            sh->valid = false; /* another output dtype in one pass: compute it again */
        if (!sh->valid) {
            sh->out = shared_slot(b, site->kind, out, out->dtype);
            if (!hook_chain_forward(b, site, in, &sh->out, n, &l, positions, error)) return false;
            sh->valid = true;
        }
        out->data = sh->out.data; /* unchanged until the pass ends (unet.h) */
        return true;
    }
    return hook_chain_forward(b, site, in, out, n, &l, positions, error);
}

/* The chain's backward at one site (or once for the shared context): recomputes the members'
 * inputs, then d_in += the chain's input gradient of d_out and the training members' weight
 * gradients accumulate. */
static bool hook_chain_backward(sdt_hn_binding *b, const sdt_unet_hook_site *site, const sdt_tensor *in,
                                const sdt_tensor *d_out, sdt_tensor *d_in, const int *positions, int n,
                                sdt_error *error)
{
    sdt_backend *be = b->be;
    int64_t rows = sdt_tensor_numel(in) / site->width;
    hn_hook_layout l = hook_layout(b, site->width, rows);
    if (!hook_ensure(b, l.total, error)) return false;
    /* the inputs of modules 1..n-1 */
    if (!hook_chain_forward(b, site, in, NULL, n - 1, &l, positions, error)) return false;
    sdt_tensor grad_a = hook_buffer(b, l.grad_a, in), grad_b = hook_buffer(b, l.grad_b, in);
    const sdt_tensor *g = d_out;
    for (int j = n - 1; j >= 0; j--) {
        hn_chain_entry *e = &b->entries[positions[j]];
        sdt_hn_run run = hook_run(b, site, positions[j]);
        sdt_tensor module_in = j == 0 ? *in : hook_buffer(b, l.chain[j - 1], in);
        bool failed;
        run.weights16 = hook_weights16(b, site, positions[j], module_in.dtype, error, &failed);
        if (failed) return false;
        sdt_tensor *target = d_in;
        if (j > 0) {
            target = (j % 2) ? &grad_a : &grad_b;
            if (be->zero(be, target) != 0)
                return sdt_fail(error, be->error.code, "zeroing a hypernetwork gradient buffer failed: %s",
                                be->error.message);
        }
        if (!sdt_hn_module_backward(e->hn, site->width, site->kind, &run, e->strength, &module_in, g, target,
                                    e->training, (char *)b->work + l.module_work, error))
            return false;
        g = target;
        if (!g) break; /* nothing upstream wants d_in: the remaining modules' weights get no gradient */
    }
    return true;
}

/* Takes the summed gradient of the shared K or V output back through the chain, once. */
static bool hook_flush(sdt_hn_binding *b, sdt_unet_kv kind, sdt_error *error)
{
    hn_shared *sh = &b->shared[kind];
    if (!sh->pending) return true;
    sh->pending = false;
    int positions[SDT_HN_MAX_CHAIN];
    int n = hook_applicable(b, sh->site.width, positions);
    return n == 0 ||
           hook_chain_backward(b, &sh->site, &sh->in, &sh->d_sum, sh->has_d_in ? &sh->d_in : NULL, positions, n, error);
}

static bool hook_backward(void *user, const sdt_unet_hook_site *site, const sdt_tensor *in, const sdt_tensor *d_out,
                          sdt_tensor *d_in, sdt_error *error)
{
    sdt_hn_binding *b = user;
    sdt_backend *be = b->be;
    int positions[SDT_HN_MAX_CHAIN];
    int n = hook_applicable(b, site->width, positions);
    if (n == 0)
        return !d_in || be->axpy(be, d_in, 1.0f, d_out) == 0 ||
               sdt_fail(error, be->error.code, "passing the K/V gradient past the hypernetworks failed: %s",
                        be->error.message);
    if (!hook_shares(b, site, in, positions, n))
        return hook_chain_backward(b, site, in, d_out, d_in, positions, n, error);
    /* a shared site: its d_out joins the sum that BACKWARD_END takes back once */
    hn_shared *sh = &b->shared[site->kind];
    if (sh->pending && (sh->has_d_in != (d_in != NULL) || (d_in && d_in->data != sh->d_in.data)))
        if (!hook_flush(b, site->kind, error)) return false; /* another target: settle the sum so far */
    if (!sh->pending) {
        sh->d_sum = shared_slot(b, 2 + (int)site->kind, in, SDT_F32);
        sh->site = *site;
        sh->in = *in;
        sh->has_d_in = d_in != NULL;
        if (d_in) sh->d_in = *d_in;
        if (be->convert(be, &sh->d_sum, d_out) != 0)
            return sdt_fail(error, be->error.code, "starting the hypernetwork's context gradient failed: %s",
                            be->error.message);
        sh->pending = true;
        return true;
    }
    return be->axpy(be, &sh->d_sum, 1.0f, d_out) == 0 ||
           sdt_fail(error, be->error.code, "summing the hypernetwork's context gradient failed: %s", be->error.message);
}

static bool hook_pass(void *user, const sdt_unet_hook_pass *pass, sdt_error *error)
{
    sdt_hn_binding *b = user;
    switch (pass->event) {
        case SDT_UNET_PASS_FORWARD_BEGIN: {
            pass_reset(b);
            b->in_pass = true;
            b->context = *pass->context;
            bool sixteen = pass->act_dtype == SDT_F16 || pass->act_dtype == SDT_BF16 || b->context.dtype == SDT_F16 ||
                           b->context.dtype == SDT_BF16;
            /* sized here when no reserve did (tests, tools); a refusal only means per site and per call */
            if (b->share_context) {
                int width = (int)b->context.shape[b->context.ndim - 1];
                cache_ensure(b, &b->shared_mem, &b->shared_bytes,
                             shared_bytes_for(b, width, sdt_tensor_numel(&b->context) / width));
            }
            if (sixteen) cache_ensure(b, &b->w16_mem, &b->w16_bytes, w16_bytes_for(b));
            size_t at = 0;
            for (int k = 0; k < b->count; k++)
                b->w16_at[k] = at, at += hook_round(sdt_hn_weights16_bytes(b->entries[k].hn));
            return true;
        }
        case SDT_UNET_PASS_FORWARD_END:
            if (!pass->for_backward) pass_reset(b);
            return true;
        case SDT_UNET_PASS_BACKWARD_BEGIN:
            return true;
        case SDT_UNET_PASS_BACKWARD_END: {
            bool ok = hook_flush(b, SDT_UNET_K, error) && hook_flush(b, SDT_UNET_V, error);
            pass_reset(b);
            return ok;
        }
    }
    return true;
}

/* ---- public ---- */

sdt_hn_binding *sdt_hn_binding_create(sdt_backend *be, sdt_error *error)
{
    if (!be) {
        sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                 "no backend given for the hypernetwork binding; pass the one the "
                 "UNet runs on");
        return NULL;
    }
    sdt_hn_binding *b = calloc(1, sizeof(*b));
    if (!b) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory for a hypernetwork binding");
        return NULL;
    }
    b->be = be;
    b->hook.user = b;
    b->hook.wants = hook_wants;
    b->hook.forward = hook_forward;
    b->hook.backward = hook_backward;
    b->hook.pass = hook_pass;
    b->share_context = true;
    pass_reset(b);
    return b;
}

void sdt_hn_binding_free(sdt_hn_binding *b)
{
    if (!b) return;
    if (b->work) b->be->free(b->be, b->work);
    if (b->shared_mem) b->be->free(b->be, b->shared_mem);
    if (b->w16_mem) b->be->free(b->be, b->w16_mem);
    free(b);
}

bool sdt_hn_binding_add(sdt_hn_binding *b, sdt_hn *hn, float strength, bool training, sdt_error *error)
{
    if (!hn) return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "no hypernetwork given to add to the chain");
    if (b->count >= SDT_HN_MAX_CHAIN)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "hypernetwork \"%s\": the chain already holds %d "
                        "hypernetworks, the most it takes; drop one",
                        sdt_hn_get_config(hn)->name, SDT_HN_MAX_CHAIN);
    if (!isfinite(strength))
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "hypernetwork \"%s\": strength %g is not a finite number; "
                        "use e.g. 1.0",
                        sdt_hn_get_config(hn)->name, (double)strength);
    if (sdt_hn_backend(hn) != b->be)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "hypernetwork \"%s\" lives on the %s backend but the UNet "
                        "runs on %s; load it "
                        "on the UNet's backend",
                        sdt_hn_get_config(hn)->name, sdt_hn_backend(hn)->name, b->be->name);
    for (int k = 0; k < b->count; k++)
        if (b->entries[k].hn == hn)
            return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                            "hypernetwork \"%s\" is already in the chain; add each "
                            "once (raise its strength instead)",
                            sdt_hn_get_config(hn)->name);
    b->entries[b->count++] = (hn_chain_entry){.hn = hn, .strength = strength, .training = training};
    pass_reset(b);
    return true;
}

int sdt_hn_binding_count(const sdt_hn_binding *b)
{
    return b->count;
}

bool sdt_hn_binding_set_strength(sdt_hn_binding *b, int index, float strength, sdt_error *error)
{
    if (index < 0 || index >= b->count)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "chain entry %d does not exist; the chain holds "
                        "%d",
                        index, b->count);
    if (!isfinite(strength))
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "strength %g is not a finite number; use e.g. "
                        "1.0",
                        (double)strength);
    b->entries[index].strength = strength;
    pass_reset(b);
    return true;
}

void sdt_hn_binding_set_step(sdt_hn_binding *b, uint64_t seed, uint64_t counter)
{
    pass_reset(b);
    b->train_mode = true;
    b->seed = seed;
    b->counter = counter;
}

void sdt_hn_binding_set_eval(sdt_hn_binding *b)
{
    pass_reset(b);
    b->train_mode = false;
}

void sdt_hn_binding_share_context(sdt_hn_binding *b, bool share)
{
    pass_reset(b);
    b->share_context = share;
}

const sdt_unet_kv_hook *sdt_hn_binding_hook(sdt_hn_binding *b)
{
    return &b->hook;
}
