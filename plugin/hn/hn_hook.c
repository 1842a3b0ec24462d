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

struct sdt_hn_binding {
    sdt_backend *be;
    int count;
    hn_chain_entry entries[SDT_HN_MAX_CHAIN];
    bool train_mode;
    uint64_t seed, counter;
    void *work;
    size_t work_bytes;
    sdt_unet_kv_hook hook;
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
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "the hypernetwork workspace (%.1f MiB) could not be allocated "
                        "on the %s backend; use a smaller batch or image size", (double)bytes / 1048576.0, b->be->name);
    return true;
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

static sdt_hn_run hook_run(const sdt_hn_binding *b, const sdt_unet_hook_site *site, int position)
{
    sdt_hn_run run = {.training = b->train_mode && b->entries[position].training, .dropout_seed = 0};
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
static bool hook_chain_forward(sdt_hn_binding *b, const sdt_unet_hook_site *site, const sdt_tensor *in,
                               sdt_tensor *out, int upto, const hn_hook_layout *l, const int *positions, sdt_error *error)
{
    const sdt_tensor *cur = in;
    sdt_tensor stage[SDT_HN_MAX_CHAIN];
    for (int j = 0; j < upto; j++) {
        const hn_chain_entry *e = &b->entries[positions[j]];
        sdt_hn_run run = hook_run(b, site, positions[j]);
        stage[j] = hook_buffer(b, l->chain[j], in);
        sdt_tensor *dst = out && j == upto - 1 ? out : &stage[j];
        if (!sdt_hn_module_forward(e->hn, site->width, site->kind, &run, e->strength, cur, dst,
                                   (char *)b->work + l->module_work, error))
            return false;
        cur = dst;
    }
    return true;
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
               sdt_fail(error, b->be->error.code, "copying the K/V input past the hypernetworks failed: %s", b->be->error.message);
    int64_t rows = sdt_tensor_numel(in) / site->width;
    hn_hook_layout l = hook_layout(b, site->width, rows);
    return hook_ensure(b, l.total, error) && hook_chain_forward(b, site, in, out, n, &l, positions, error);
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
               sdt_fail(error, be->error.code, "passing the K/V gradient past the hypernetworks failed: %s", be->error.message);
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
        sdt_tensor *target = d_in;
        if (j > 0) {
            target = (j % 2) ? &grad_a : &grad_b;
            if (be->zero(be, target) != 0)
                return sdt_fail(error, be->error.code, "zeroing a hypernetwork gradient buffer failed: %s", be->error.message);
        }
        if (!sdt_hn_module_backward(e->hn, site->width, site->kind, &run, e->strength, &module_in, g, target,
                                    e->training, (char *)b->work + l.module_work, error))
            return false;
        g = target;
        if (!g) break; /* nothing upstream wants d_in: the remaining modules' weights get no gradient */
    }
    return true;
}

/* ---- public ---- */

sdt_hn_binding *sdt_hn_binding_create(sdt_backend *be, sdt_error *error)
{
    if (!be) {
        sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "no backend given for the hypernetwork binding; pass the one the "
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
    return b;
}

void sdt_hn_binding_free(sdt_hn_binding *b)
{
    if (!b) return;
    if (b->work) b->be->free(b->be, b->work);
    free(b);
}

bool sdt_hn_binding_add(sdt_hn_binding *b, sdt_hn *hn, float strength, bool training, sdt_error *error)
{
    if (!hn) return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "no hypernetwork given to add to the chain");
    if (b->count >= SDT_HN_MAX_CHAIN)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "hypernetwork \"%s\": the chain already holds %d "
                        "hypernetworks, the most it takes; drop one", sdt_hn_get_config(hn)->name, SDT_HN_MAX_CHAIN);
    if (!isfinite(strength))
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "hypernetwork \"%s\": strength %g is not a finite number; "
                        "use e.g. 1.0",
                         sdt_hn_get_config(hn)->name, (double)strength);
    if (sdt_hn_backend(hn) != b->be)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "hypernetwork \"%s\" lives on the %s backend but the UNet "
                        "runs on %s; load it "
                         "on the UNet's backend", sdt_hn_get_config(hn)->name, sdt_hn_backend(hn)->name, b->be->name);
    for (int k = 0; k < b->count; k++)
        if (b->entries[k].hn == hn)
            return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "hypernetwork \"%s\" is already in the chain; add each "
                            "once (raise its strength instead)", sdt_hn_get_config(hn)->name);
    b->entries[b->count++] = (hn_chain_entry){.hn = hn, .strength = strength, .training = training};
    return true;
}

int sdt_hn_binding_count(const sdt_hn_binding *b) { return b->count; }

bool sdt_hn_binding_set_strength(sdt_hn_binding *b, int index, float strength, sdt_error *error)
{
    if (index < 0 || index >= b->count)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "chain entry %d does not exist; the chain holds "
                        "%d", index, b->count);
    if (!isfinite(strength))
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "strength %g is not a finite number; use e.g. "
                        "1.0", (double)strength);
    b->entries[index].strength = strength;
    return true;
}

void sdt_hn_binding_set_step(sdt_hn_binding *b, uint64_t seed, uint64_t counter)
{
    b->train_mode = true;
    b->seed = seed;
    b->counter = counter;
}

void sdt_hn_binding_set_eval(sdt_hn_binding *b) { b->train_mode = false; }

const sdt_unet_kv_hook *sdt_hn_binding_hook(sdt_hn_binding *b) { return &b->hook; }

