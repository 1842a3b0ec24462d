/* transformer_pack.c - see transformer_pack.h. */
#include "transformer_pack.h"

#include <glib.h>
#include <string.h>

#include "fp8.h"
#include "safetensors.h"

typedef struct pack {
    GArray *items;  /* sdt_st_write_item */
    GPtrArray *own; /* names, shapes and data made here */
    sdt_pack_storage storage;
} pack;

static size_t numel(const sdt_tensor *t)
{
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
    return n;
}

/* Adds name with t's shape (rows replaced by rows when > 0) and data (bytes of t's dtype). */
static void pack_add(pack *p, const char *name, const sdt_tensor *t, int64_t rows, const void *data)
{
    int64_t *shape = g_new(int64_t, t->ndim ? t->ndim : 1);
    for (int i = 0; i < t->ndim; i++) shape[i] = t->shape[i];
    if (rows > 0) shape[0] = rows;
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (size_t)shape[i];
    sdt_st_write_item it = {g_strdup(name), sdt_st_dtype_of(t->dtype), t->ndim, shape, data};
    if (p->storage != SDT_PACK_AS_IS && t->dtype != SDT_I32) {
        uint8_t *b = g_malloc(n ? n : 1);
        float *f = g_new(float, n ? n : 1);
        sdt_load_f32(data, t->dtype, f, (int64_t)n);
        sdt_fp8_kind kind = p->storage == SDT_PACK_F8_E4M3 ? SDT_FP8_E4M3 : SDT_FP8_E5M2;
        for (size_t i = 0; i < n; i++) b[i] = sdt_fp8_from_f32(f[i], kind);
        g_free(f);
        g_ptr_array_add(p->own, b);
        it.data = b;
        it.dtype = kind == SDT_FP8_E4M3 ? SDT_ST_F8_E4M3 : SDT_ST_F8_E5M2;
    }
    g_ptr_array_add(p->own, (void *)it.name);
    g_ptr_array_add(p->own, shape);
    g_array_append_val(p->items, it);
}

static const sdt_tensor *getf(const sdt_weights *w, const char *a, const char *b, int idx, const char *c, const char *d)
{
    char key[320];
    if (idx >= 0)
        g_snprintf(key, sizeof key, "%s%s%d.%s%s", a, b, idx, c, d);
    else
        g_snprintf(key, sizeof key, "%s%s%s", a, c, d);
    return sdt_weights_get(w, key);
}

static int count(const sdt_weights *w, const char *P, const char *scope, const char *probe)
{
    int n = 0;
    while (n < 1000 && getf(w, P, scope, n, probe, "")) n++;
    return n;
}

/* One rule at one block (idx -1: the top) and tail: the pieces gathered back into the file's tensor. */
static bool pack_rule(pack *p, sdt_tk_layout layout, const sdt_tk_rule *r, const sdt_weights *w, const char *P,
                      const char *out_prefix, int idx, int blocks, const char *tail, sdt_error *error)
{
    const char *dscope = sdt_tk_dst_scope(layout, r->scope), *sscope = sdt_tk_src_scope(layout, r->scope);
    int n = r->form == SDT_TK_SPLIT3 ? 3 : r->form == SDT_TK_SPLIT_QKV_MLP ? 4 : 1;
    const sdt_tensor *src[SDT_TK_MAX_PIECES];
    for (int i = 0; i < n; i++)
        if (!(src[i] = getf(w, P, dscope, idx, r->dst[i], tail))) {
            if (i == 0) return true; /* the rule does not apply here (no attn2, the last block's text stream) */
            return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: '%s%s%s' lacks its piece '%s%s'", sdt_weights_path(w),
                            dscope, r->dst[0], tail, r->dst[i], tail);
        }
    char name[320];
    if (idx >= 0)
        g_snprintf(name, sizeof name, "%s%s%d.%s%s", out_prefix, sscope, idx, r->src, tail);
    else
        g_snprintf(name, sizeof name, "%s%s%s", out_prefix, r->src, tail);
    size_t esize = sdt_dtype_size(src[0]->dtype), total = 0;
    int64_t rows = 0;
    for (int i = 0; i < n; i++) {
        total += numel(src[i]) * esize;
        rows += src[i]->ndim ? src[i]->shape[0] : 1;
    }
    char *data = g_malloc(total ? total : 1);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        memcpy(data + at, src[i]->data, numel(src[i]) * esize);
        at += numel(src[i]) * esize;
    }
    bool swap = r->form == SDT_TK_SWAP || (r->form == SDT_TK_SWAP_IF_LAST && idx == blocks - 1);
    if (swap) { /* diffusers' [scale; shift] back to the file's [shift; scale] */
        size_t half = total / 2;
        char *tmp = g_malloc(half ? half : 1);
        memcpy(tmp, data, half);
        memmove(data, data + half, half);
        memcpy(data + half, tmp, half);
        g_free(tmp);
    }
    g_ptr_array_add(p->own, data);
    pack_add(p, name, src[0], rows, data);
    return true;
}

static bool pack_transformer(pack *p, sdt_tk_layout layout, const sdt_weights *w, const char *P, const char *out_prefix,
                             sdt_error *error)
{
    int n_rules;
    const sdt_tk_rule *rules = sdt_tk_rules(layout, &n_rules);
    int blocks = count(w, P, "transformer_blocks.", "norm1.linear.weight");
    int singles = count(w, P, "single_transformer_blocks.", "norm.linear.weight");
    static const char *const tails[] = {"weight", "bias"};
    for (int r = 0; r < n_rules; r++) {
        const sdt_tk_rule *rule = &rules[r];
        if (rule->alias) continue; /* written in the first spelling */
        size_t len = strlen(rule->src);
        bool head = rule->src[len - 1] == '.';
        int from = rule->scope == SDT_TK_TOP ? -1 : 0;
        int to = rule->scope == SDT_TK_TOP ? 0 : rule->scope == SDT_TK_BLOCK ? blocks : singles;
        for (int idx = from; idx < to; idx++)
            for (int t = 0; t < (head ? 2 : 1); t++)
                if (!pack_rule(p, layout, rule, w, P, out_prefix, idx, blocks, head ? tails[t] : "", error))
                    return false;
    }
    return true;
}

bool sdt_pack_write(const char *path, sdt_tk_layout layout, const sdt_weights *w_transformer,
                    const char *transformer_prefix, const char *out_prefix, const sdt_pack_part *parts, int n_parts,
                    sdt_pack_storage storage, sdt_error *error)
{
    pack p = {g_array_new(FALSE, FALSE, sizeof(sdt_st_write_item)), g_ptr_array_new_with_free_func(g_free), storage};
    bool ok = true;
    if (w_transformer && layout != SDT_TK_NONE)
        ok = pack_transformer(&p, layout, w_transformer, transformer_prefix ? transformer_prefix : "",
                              layout == SDT_TK_SAI_SD3 ? SDT_TK_TRANSFORMER_PREFIX
                              : out_prefix             ? out_prefix
                                                       : "",
                              error);
    for (int i = 0; ok && i < n_parts; i++) {
        size_t plen = strlen(parts[i].from_prefix), taken = 0;
        for (size_t k = 0; k < sdt_weights_count(parts[i].w); k++) {
            const char *key = sdt_weights_key(parts[i].w, k);
            if (strncmp(key, parts[i].from_prefix, plen) != 0) continue;
            char *name = g_strconcat(parts[i].to_prefix, key + plen, NULL);
            const sdt_tensor *t = sdt_weights_get(parts[i].w, key);
            pack_add(&p, name, t, 0, t->data);
            g_free(name);
            taken++;
        }
        if (!taken) /* a part that gives nothing would be a file without it, written as if it held it */
            ok =
                sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: no tensor under '%s' to pack; give a file that holds the part",
                         sdt_weights_path(parts[i].w), parts[i].from_prefix);
    }
    if (ok) ok = sdt_st_write(path, (const sdt_st_write_item *)(void *)p.items->data, p.items->len, NULL, 0, error);
    g_array_free(p.items, TRUE);
    g_ptr_array_free(p.own, TRUE);
    return ok;
}
