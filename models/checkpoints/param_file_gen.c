/* param_file_gen.c - one network's seeded random parameters as a safetensors file; see param_file_gen.h. */
#include "param_file_gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_gen.h"
#include "safetensors.h"

typedef struct param_gen_item {
    char *name;
    int ndim;
    int64_t shape[4];
    void *data;
} param_gen_item;

typedef struct param_gen_ctx {
    param_gen_item *items;
    size_t n, cap;
    sdt_dtype dtype;
    uint64_t seed;
    bool perturb_all, failed;
} param_gen_ctx;

static bool gen_visit(void *user, const sdt_param_info *p)
{
    param_gen_ctx *g = user;
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 64;
        param_gen_item *items = realloc(g->items, cap * sizeof(*items));
        if (!items) return !(g->failed = true);
        g->items = items, g->cap = cap;
    }
    int64_t n = 1;
    for (int i = 0; i < p->ndim; i++) n *= p->shape[i];
    float *f = malloc((size_t)n * sizeof(float));
    void *data = g->dtype == SDT_F32 ? (void *)f : malloc((size_t)n * sdt_dtype_size(g->dtype));
    char *name = strdup(p->key);
    if (!f || !data || !name) {
        free(f);
        if (data != f) free(data);
        free(name);
        return !(g->failed = true);
    }
    sdt_ckpt_fill(f, n, p, g->seed, g->perturb_all);
    if (data != f) {
        sdt_store_f32(f, data, g->dtype, n);
        free(f);
    }
    param_gen_item *t = &g->items[g->n++];
    t->name = name, t->ndim = p->ndim, t->data = data;
    memcpy(t->shape, p->shape, sizeof t->shape);
    return true;
}

bool sdt_param_file_generate(const char *path, const char *network, const char *generator,
                             sdt_param_enumerator enumerate, const void *cfg, sdt_dtype dtype, uint64_t seed,
                             bool perturb_all, sdt_error *error)
{
    if (dtype != SDT_F32 && dtype != SDT_F16 && dtype != SDT_BF16)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "%s: the %s file is written in f32, f16 or bf16", path,
                        network);
    param_gen_ctx g = {.dtype = dtype, .seed = seed, .perturb_all = perturb_all};
    enumerate(cfg, gen_visit, &g);
    sdt_st_write_item *items = g.failed ? NULL : calloc(g.n ? g.n : 1, sizeof(*items));
    bool ok = items != NULL;
    if (!ok) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory generating the %s weights", path, network);
    for (size_t i = 0; ok && i < g.n; i++)
        items[i] = (sdt_st_write_item){g.items[i].name, sdt_st_dtype_of(dtype), g.items[i].ndim, g.items[i].shape,
                                       g.items[i].data};
    char seed_text[32];
    snprintf(seed_text, sizeof seed_text, "%llu", (unsigned long long)seed);
    sdt_st_kv meta[3] = {{"format", "pt"}, {"sdtrain_generator", generator}, {"sdtrain_seed", seed_text}};
    ok = ok && sdt_st_write(path, items, g.n, meta, 3, error);
    free(items);
    for (size_t i = 0; i < g.n; i++) free(g.items[i].name), free(g.items[i].data);
    free(g.items);
    return ok;
}
