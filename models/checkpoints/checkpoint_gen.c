/* checkpoint_gen.c - random-weight checkpoints; see checkpoint_gen.h.
 *
 * Both layouts come from one list of canonical tensors; the diffusers folder
 * renames them with diffusers_names.h and splits them over unet/, text_encoder/
 * and vae/ (safetensors only: no config.json, which sdtrain does not need).
 */
#include "checkpoint_gen.h"
#include "diffusers_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errno.h>
#include <sys/stat.h>

#include "diffusers_names.h"
#include "safetensors.h"
#include "sd_config_detect.h"
#include "weights.h"

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

static double uniform01(uint64_t *s)
{
    return ((double)(splitmix64(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* Box-Muller, both outputs used. splitmix64's k-th draw depends only on the start state and k, so pair j takes
 * draws 2j and 2j + 1 from a state jumped to its place: the same bytes as one draw after another, in parallel
 * (a full-size Flux transformer is 12 billion values). */
static void fill_normal(float *dst, int64_t n, uint64_t *s, float mean, float std)
{
    const uint64_t start = *s;
    const int64_t pairs = (n + 1) / 2;
#pragma omp parallel for schedule(static) if (pairs > (1 << 18))
    for (int64_t j = 0; j < pairs; j++) {
        uint64_t at = start + (uint64_t)(2 * j) * 0x9E3779B97F4A7C15ull;
        double u1 = uniform01(&at), u2 = uniform01(&at);
        double r = sqrt(-2.0 * log(u1)), a = 6.283185307179586 * u2;
        dst[2 * j] = mean + std * (float)(r * cos(a));
        if (2 * j + 1 < n) dst[2 * j + 1] = mean + std * (float)(r * sin(a));
    }
    *s = start + (uint64_t)(2 * pairs) * 0x9E3779B97F4A7C15ull;
}

void sdt_ckpt_fill(float *dst, int64_t n, const sdt_param_info *p, uint64_t seed, bool perturb_all)
{
    uint64_t s = seed ^ fnv1a(p->key);
    (void)splitmix64(&s);
    switch (p->init) {
        case SDT_INIT_NORMAL:
            fill_normal(dst, n, &s, 0.0f, p->std);
            break;
        case SDT_INIT_ONES:
            if (perturb_all)
                fill_normal(dst, n, &s, 1.0f, 0.1f);
            else
                for (int64_t i = 0; i < n; i++) dst[i] = 1.0f;
            break;
        case SDT_INIT_ZEROS:
            if (perturb_all)
                fill_normal(dst, n, &s, 0.0f, 0.1f);
            else
                memset(dst, 0, (size_t)n * sizeof(float));
            break;
    }
}

/* ---- collecting parameters ---- */

typedef struct gen_tensor {
    char *name;
    int ndim;
    int64_t shape[4];
    void *data;
} gen_tensor;

typedef struct gen_ctx {
    const sdt_ckpt_spec *spec;
    gen_tensor *items;
    size_t n, cap;
    bool failed;
    char failed_key[256];
    sdt_error *error;
} gen_ctx;

static bool wanted(const gen_ctx *g, const char *key)
{
    if (g->spec->text_only) return strncmp(key, "cond_stage_model.", 17) == 0 || strncmp(key, "conditioner.", 12) == 0;
    if (g->spec->vae_only) return strncmp(key, "first_stage_model.", 18) == 0;
    if (g->spec->unet_only) return strncmp(key, SDT_UNET_KEY_PREFIX, strlen(SDT_UNET_KEY_PREFIX)) == 0;
    return true;
}

static bool collect(void *user, const sdt_param_info *p)
{
    gen_ctx *g = user;
    if (!wanted(g, p->key)) return true;
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 256;
        gen_tensor *items = realloc(g->items, cap * sizeof(*items));
        if (!items) goto oom;
        g->items = items;
        g->cap = cap;
    }
    int64_t n = 1;
    for (int i = 0; i < p->ndim; i++) n *= p->shape[i];
    float *f = malloc((size_t)n * sizeof(float));
    size_t bytes = (size_t)n * sdt_dtype_size(g->spec->dtype);
    void *data = g->spec->dtype == SDT_F32 ? (void *)f : malloc(bytes ? bytes : 1);
    char *name = strdup(p->key);
    if (!f || !data || !name) {
        free(f);
        if (data != f) free(data);
        free(name);
        goto oom;
    }
    sdt_ckpt_fill(f, n, p, g->spec->seed, g->spec->perturb_all);
    if (g->spec->unet_output_set && !strcmp(p->key, SDT_UNET_KEY_PREFIX "out.2.weight"))
        for (int64_t i = 0; i < n; i++) f[i] *= g->spec->unet_output_weight_scale;
    if (g->spec->unet_output_set && !strcmp(p->key, SDT_UNET_KEY_PREFIX "out.2.bias"))
        for (int64_t i = 0; i < n; i++) f[i] = g->spec->unet_output;
    if (data != f) {
        sdt_store_f32(f, data, g->spec->dtype, n);
        free(f);
    }
    gen_tensor *t = &g->items[g->n++];
    t->name = name;
    t->ndim = p->ndim;
    memcpy(t->shape, p->shape, sizeof(t->shape));
    t->data = data;
    return true;
oom:
    snprintf(g->failed_key, sizeof(g->failed_key), "%s", p->key);
    g->failed = true;
    return false;
}

static void free_items(gen_ctx *g)
{
    for (size_t i = 0; i < g->n; i++) {
        free(g->items[i].name);
        free(g->items[i].data);
    }
    free(g->items);
}

static bool write_ldm(const char *path, const sdt_ckpt_spec *spec, gen_ctx *g, sdt_error *error)
{
    sdt_st_write_item *items = calloc(g->n ? g->n : 1, sizeof(*items));
    if (!items) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        return false;
    }
    for (size_t i = 0; i < g->n; i++) {
        items[i].name = g->items[i].name;
        items[i].dtype = sdt_st_dtype_of(spec->dtype);
        items[i].ndim = g->items[i].ndim;
        items[i].shape = g->items[i].shape;
        items[i].data = g->items[i].data;
    }
    char seed[32];
    snprintf(seed, sizeof(seed), "%llu", (unsigned long long)spec->seed);
    sdt_st_kv meta[4] = {{"format", "pt"},
                         {"sdtrain_generator", "sdt-make-checkpoint"},
                         {"sdtrain_config", sd_family_name(spec->config.family)},
                         {"sdtrain_seed", seed}};
    bool ok = sdt_st_write(path, items, g->n, meta, 4, error);
    free(items);
    return ok;
}

static bool make_folder(const char *path, sdt_error *error)
{
    if (mkdir(path, 0777) == 0 || errno == EEXIST) return true;
    sdt_fail(error, sdt_error_code_from_errno(errno), "%s: cannot create the folder (%s)", path, strerror(errno));
    return false;
}

/* The diffusers tensors one canonical tensor becomes (names[k] owned by the caller, *owned a transposed copy
 * to free): n written to out (0 for a dropped tensor), -1 for a key with no diffusers name. */
static int diffusers_items(const gen_tensor *t, const sdt_ckpt_spec *spec, const sd_config *cfg, int *part,
                           char **names, int64_t (*shapes)[4], sdt_st_write_item *out, void **owned)
{
    sdt_diffusers_part p;
    sdt_diffusers_form form;
    char *name = sdt_diffusers_name(t->name, cfg, &p, &form);
    if (!name) return -1;
    *part = (int)p;
    size_t es = sdt_dtype_size(spec->dtype);
    if (form == SDT_DIFFUSERS_DROP || form == SDT_DIFFUSERS_CUT_LAYER) {
        free(name);
        return 0;
    }
    int n = form == SDT_DIFFUSERS_SPLIT_QKV ? 3 : 1;
    int64_t rows = t->shape[0] / n, row_elems = 1;
    for (int d = 1; d < t->ndim; d++) row_elems *= t->shape[d];
    for (int k = 0; k < n; k++) {
        names[k] = k == 0 ? name : strdup(name);
        char *q = names[k] ? strstr(names[k], ".q_proj.") : NULL;
        if (q && k > 0) q[1] = "qkv"[k];
        memcpy(shapes[k], t->shape, sizeof(shapes[k]));
        out[k].name = names[k];
        out[k].dtype = sdt_st_dtype_of(spec->dtype);
        out[k].ndim = form == SDT_DIFFUSERS_LINEAR ? 2 : t->ndim;
        out[k].shape = shapes[k];
        out[k].data = (const uint8_t *)t->data + (size_t)(k * rows * row_elems) * es;
        if (form == SDT_DIFFUSERS_SPLIT_QKV) shapes[k][0] = rows;
    }
    if (form == SDT_DIFFUSERS_TRANSPOSE) { /* [in, out] -> [out, in], element by element in the file's dtype */
        int64_t r = t->shape[0], c = t->shape[1];
        uint8_t *dst = malloc((size_t)(r * c) * es + 1);
        if (!dst) return -2;
        for (int64_t i = 0; i < r; i++)
            for (int64_t j = 0; j < c; j++)
                memcpy(dst + (size_t)(j * r + i) * es, (const uint8_t *)t->data + (size_t)(i * c + j) * es, es);
        shapes[0][0] = c, shapes[0][1] = r;
        out[0].data = dst;
        *owned = dst;
    }
    return n;
}

/* Renames every tensor to its diffusers name and writes one file per part. */
static bool write_diffusers(const char *path, const sdt_ckpt_spec *spec, const sd_config *cfg, gen_ctx *g,
                            sdt_error *error)
{
    if (!make_folder(path, error)) return false;
    size_t cap = 3 * g->n + 1, n_items = 0; /* a packed q/k/v tensor becomes three */
    sdt_st_write_item *items = calloc(cap, sizeof(*items));
    char **names = calloc(cap, sizeof(*names));
    int *parts = calloc(cap, sizeof(*parts));
    int64_t(*shapes)[4] = calloc(cap, sizeof(*shapes));
    void **owned = calloc(g->n + 1, sizeof(*owned));
    bool ok = items && names && parts && shapes && owned;
    if (!ok) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    for (size_t i = 0; ok && i < g->n; i++) {
        int part = 0;
        int n = diffusers_items(&g->items[i], spec, cfg, &part, names + n_items, shapes + n_items, items + n_items,
                                &owned[i]);
        if (n < 0) {
            sdt_fail(error, n == -1 ? SDT_ERR_INVALID_ARGUMENT : SDT_ERR_OUT_OF_MEMORY,
                     n == -1 ? "%s: no diffusers name for '%s'" : "%s: out of memory writing '%s'", path,
                     g->items[i].name);
            ok = false;
            break;
        }
        for (int k = 0; k < n; k++) {
            parts[n_items + k] = part;
            if (!names[n_items + k]) ok = sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        }
        n_items += (size_t)n;
    }
    sdt_st_kv meta[1] = {{"format", "pt"}};
    for (int p = 0; ok && p < SDT_DIFFUSERS_PART_COUNT; p++) {
        size_t n = 0;
        sdt_st_write_item *sel = calloc(n_items + 1, sizeof(*sel));
        if (!sel) {
            sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
            ok = false;
            break;
        }
        for (size_t i = 0; i < n_items; i++)
            if (parts[i] == p) sel[n++] = items[i];
        if (n) {
            char dir[4096], file[4200];
            snprintf(dir, sizeof(dir), "%s/%s", path, sdt_diffusers_folder((sdt_diffusers_part)p));
            snprintf(file, sizeof(file), "%s/%s.safetensors", dir, sdt_diffusers_file_base((sdt_diffusers_part)p));
            ok = make_folder(dir, error) && sdt_st_write(file, sel, n, meta, 1, error);
        }
        free(sel);
    }
    for (size_t i = 0; names && i < n_items; i++) free(names[i]);
    for (size_t i = 0; owned && i < g->n; i++) free(owned[i]);
    free(items), free(names), free(parts), free(shapes), free(owned);
    /* the JSON files diffusers opens a folder by (a partial folder for tests gets none) */
    if (ok && !spec->text_only && !spec->vae_only && !spec->unet_only)
        ok = sdt_diffusers_config_write(path, cfg, error);
    return ok;
}

/* The diffusers folder stores SD 2.x's OpenCLIP text tower as an HF CLIPTextModel with the
 * unused last layers already cut (23 of 24), so its default output is the same. */
static sd_config layout_config(const sdt_ckpt_spec *spec)
{
    sd_config cfg = spec->config;
    if (spec->layout == SDT_CKPT_DIFFUSERS && cfg.clip.layout == CLIP_LAYOUT_OPENCLIP) {
        cfg.clip.layout = CLIP_LAYOUT_HF;
        cfg.clip.layers -= cfg.clip.default_skip - 1;
        cfg.clip.default_skip = 1;
    }
    return cfg;
}

static bool write_layout(const char *path, const sdt_ckpt_spec *spec, gen_ctx *g, sdt_error *error)
{
    sd_config cfg = layout_config(spec);
    return spec->layout == SDT_CKPT_LDM ? write_ldm(path, spec, g, error) : write_diffusers(path, spec, &cfg, g, error);
}

bool sdt_ckpt_generate(const char *path, const sdt_ckpt_spec *spec, sdt_error *error)
{
    if (spec->dtype != SDT_F32 && spec->dtype != SDT_F16 && spec->dtype != SDT_BF16) {
        sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "%s: checkpoints are written as F32, F16 or BF16", path);
        return false;
    }
    sd_config cfg = layout_config(spec);
    gen_ctx g = {.spec = spec, .error = error};
    bool ok = sd_params(&cfg, collect, &g, error) && !g.failed;
    if (g.failed)
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY,
                 "%s: out of memory generating '%s'; free memory or write a smaller config", path, g.failed_key);
    if (ok) ok = write_layout(path, spec, &g, error);
    free_items(&g);
    return ok;
}

/* A free slot at the end of g's items (zeroed), or NULL when memory runs out. */
static gen_tensor *push_item(gen_ctx *g)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 256;
        gen_tensor *items = realloc(g->items, cap * sizeof(*items));
        if (!items) return NULL;
        g->items = items;
        g->cap = cap;
    }
    gen_tensor *t = &g->items[g->n];
    memset(t, 0, sizeof(*t));
    return t;
}

/* ---- a diffusers folder's transformers-layout encoder as the LDM file's OpenCLIP one ---- */

/* The encoder an LDM file stores in OpenCLIP's layout (packed in_proj, text_projection [in, out]) where a
 * diffusers folder has transformers' names: SDXL's bigG, and SD 2.x's OpenCLIP-H (a cond-stage encoder with
 * GELU; SD 1.x's CLIP-L is quick_gelu), which the folder keeps without its last, unused layer. Also a single
 * file with such an encoder in transformers' names (what --from wrote before) is repaired. false (hf_prefix
 * untouched) when the source has none (a proper LDM file, or SD 1.x). */
static bool openclip_in_hf_names(const sd_config *cfg, clip_config *oc, const char **hf_prefix)
{
    if (cfg->clip2.width > 0 && cfg->clip2.layout == CLIP_LAYOUT_HF) {
        *oc = cfg->clip2;
        *hf_prefix = "conditioner.embedders.1.transformer.";
    } else if (cfg->clip2.width == 0 && cfg->clip.layout == CLIP_LAYOUT_HF && cfg->clip.act == SDT_ACT_GELU) {
        *oc = cfg->clip;
        oc->layers += 1; /* the layer diffusers cut; SD 2.x conditions on the penultimate */
        oc->default_skip = 2;
        *hf_prefix = "cond_stage_model.transformer.";
    } else {
        return false;
    }
    oc->layout = CLIP_LAYOUT_OPENCLIP;
    return true;
}

typedef struct gather_ctx {
    gen_ctx *g;
    const sdt_weights *w;
    const sd_config *cfg; /* the folder's: sdt_diffusers_name's diffusers side */
    const char *hf_prefix;
    const char *src;
    sdt_dtype dtype;
    const sdt_tensor **taken; /* the source tensors used, for naming one left over */
    size_t used, cap;
    bool failed;
} gather_ctx;

static void shape_text(int ndim, const int64_t *shape, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (used < size) snprintf(buf + used, size - used, "]");
}

/* One OpenCLIP parameter p from the transformers tensor(s) sdt_diffusers_name names for it, undoing the form
 * the folder is written with: q/k/v concatenated into in_proj, the projection transposed back to [in, out]; a
 * cut layer's tensors are zeros (an identity resblock); dropped ones (logit_scale, SD 2.x's text_projection)
 * are left out, as diffusers' own convert_diffusers_to_original_* scripts do. */
static bool gather_openclip_param(void *user, const sdt_param_info *p)
{
    gather_ctx *c = user;
    sdt_diffusers_part part;
    sdt_diffusers_form form;
    char *name = sdt_diffusers_name(p->key, c->cfg, &part, &form);
    int64_t numel = 1;
    for (int d = 0; d < p->ndim; d++) numel *= p->shape[d];
    if (!name) {
        sdt_fail(c->g->error, SDT_ERR_INVALID_ARGUMENT, "%s: no diffusers name for '%s'", c->src, p->key);
        c->failed = true;
        return false;
    }
    if (form == SDT_DIFFUSERS_DROP) {
        free(name);
        return true;
    }
    gen_tensor *dst = push_item(c->g);
    float *f32 = malloc((size_t)numel * sizeof(float) + 1), *tmp = NULL;
    if (dst) dst->name = strdup(p->key), dst->data = malloc((size_t)numel * sdt_dtype_size(c->dtype) + 1);
    bool ok = dst && f32 && dst->name && dst->data;
    if (!ok) sdt_fail(c->g->error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory converting '%s'", c->src, p->key);
    const int n = form == SDT_DIFFUSERS_SPLIT_QKV ? 3 : 1;
    int64_t want[4] = {p->shape[0] / n, p->ndim > 1 ? p->shape[1] : 0, 0, 0};
    if (form == SDT_DIFFUSERS_TRANSPOSE) want[0] = p->shape[1], want[1] = p->shape[0];
    if (ok && form == SDT_DIFFUSERS_CUT_LAYER) memset(f32, 0, (size_t)numel * sizeof(float));
    char *q = strstr(name, ".q_proj.");
    for (int k = 0; ok && form != SDT_DIFFUSERS_CUT_LAYER && k < n; k++) {
        if (q && form == SDT_DIFFUSERS_SPLIT_QKV) q[1] = "qkv"[k];
        char key[512];
        snprintf(key, sizeof key, "%s%s", c->hf_prefix, name);
        const sdt_tensor *t = sdt_weights_get(c->w, key);
        bool same = t && t->ndim == p->ndim;
        for (int d = 0; same && d < p->ndim; d++) same = t->shape[d] == want[d];
        if (!same) {
            char have[96], need[96];
            shape_text(p->ndim, want, need, sizeof need);
            if (t) shape_text(t->ndim, t->shape, have, sizeof have);
            ok = sdt_fail(c->g->error, SDT_ERR_BAD_FORMAT,
                          "%s: %s/ %s '%s'%s%s, which the single file's '%s' is made of "
                          "(as %s); the folder is incomplete or damaged: copy the whole %s/ again",
                          c->src, sdt_diffusers_folder(part), t ? "holds" : "has no tensor", name,
                          t ? " with shape " : "", t ? have : "", p->key, need, sdt_diffusers_folder(part));
            break;
        }
        int64_t part_n = numel / n;
        if (form == SDT_DIFFUSERS_TRANSPOSE) { /* [out, in] -> [in, out] */
            tmp = malloc((size_t)numel * sizeof(float) + 1);
            if (!tmp) {
                ok = sdt_fail(c->g->error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory converting '%s'", c->src, p->key);
                break;
            }
            sdt_load_f32(t->data, t->dtype, tmp, numel);
            for (int64_t i = 0; i < want[0]; i++)
                for (int64_t j = 0; j < want[1]; j++) f32[j * want[0] + i] = tmp[i * want[1] + j];
        } else {
            sdt_load_f32(t->data, t->dtype, f32 + k * part_n, part_n); /* exact for F32, F16, BF16 into F32 */
        }
        if (c->used < c->cap) c->taken[c->used] = t;
        c->used++;
    }
    if (ok) {
        dst->ndim = p->ndim;
        for (int d = 0; d < 4; d++) dst->shape[d] = d < p->ndim ? p->shape[d] : 0;
        sdt_store_f32(f32, dst->data, c->dtype, numel);
        c->g->n++;
    } else if (dst) {
        free(dst->name), free(dst->data);
    }
    free(f32), free(tmp), free(name);
    c->failed = !ok;
    return ok;
}

bool sdt_ckpt_convert(const char *src, const char *path, sdt_ckpt_layout layout, int dtype, sdt_error *error)
{
    sdt_weights *w = sdt_weights_open(src, error);
    if (!w) return false;
    sdt_ckpt_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.layout = layout;
    gen_ctx g = {.spec = &spec, .error = error};
    bool ok = sd_config_detect(w, &spec.config, error);
    if (ok && sd_config_is_transformer(&spec.config))
        ok = sdt_fail(error, SDT_ERR_UNSUPPORTED,
                      "%s: checkpoints of the family %s are not converted between the LDM and diffusers layouts "
                      "(sdtrain, ComfyUI and Forge read SAI's all-in-one file as it is)",
                      src, sd_family_title(spec.config.family));
    size_t n = ok ? sdt_weights_count(w) : 0;
    /* To the LDM layout, an OpenCLIP encoder the folder keeps in transformers' names goes back to OpenCLIP's. */
    clip_config oc;
    const char *hf_prefix = NULL;
    if (ok && layout == SDT_CKPT_LDM) (void)openclip_in_hf_names(&spec.config, &oc, &hf_prefix);
    size_t hf_count = 0;
    if (n) spec.dtype = dtype < 0 ? sdt_weights_get(w, sdt_weights_key(w, 0))->dtype : (sdt_dtype)dtype;
    for (size_t i = 0; ok && i < n; i++) {
        const char *key = sdt_weights_key(w, i);
        const sdt_tensor *t = sdt_weights_get(w, key);
        if (t->ndim > 4 || (t->dtype != SDT_F32 && t->dtype != SDT_F16 && t->dtype != SDT_BF16)) {
            ok = sdt_fail(error, SDT_ERR_UNSUPPORTED,
                          "%s: tensor '%s' is %s with %d dimensions; only float tensors "
                          "(F32, F16, BF16) of up to 4 dimensions are converted",
                          src, key, sdt_dtype_name(t->dtype), t->ndim);
            break;
        }
        if (hf_prefix && strncmp(key, hf_prefix, strlen(hf_prefix)) == 0) {
            hf_count++;
            continue; /* gathered below */
        }
        int64_t n_values = sdt_tensor_numel(t);
        gen_tensor *dst = push_item(&g);
        if (dst)
            dst->name = strdup(key), dst->data = malloc(n_values ? (size_t)n_values * sdt_dtype_size(spec.dtype) : 1);
        float *f32 = malloc(n_values ? (size_t)n_values * sizeof(float) : 1);
        if (!dst || !dst->name || !dst->data || !f32) {
            if (dst) free(dst->name), free(dst->data);
            free(f32);
            ok = sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory converting '%s'", src, key);
            break;
        }
        dst->ndim = t->ndim;
        for (int d = 0; d < 4; d++) dst->shape[d] = d < t->ndim ? t->shape[d] : 0;
        sdt_load_f32(t->data, t->dtype, f32, n_values); /* exact for any of the three into F32 */
        sdt_store_f32(f32, dst->data, spec.dtype, n_values);
        free(f32);
        g.n++;
    }
    if (ok && hf_prefix) {
        gather_ctx c = {.g = &g,
                        .w = w,
                        .cfg = &spec.config,
                        .hf_prefix = hf_prefix,
                        .src = src,
                        .dtype = spec.dtype,
                        .taken = calloc(hf_count + 1, sizeof(*c.taken)),
                        .cap = hf_count};
        ok = c.taken ? clip_params(&oc, gather_openclip_param, &c) && !c.failed
                     : sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory converting the checkpoint", src);
        for (size_t i = 0; ok && c.used != hf_count && i < n; i++) { /* a tensor with no place would be lost: name it */
            const char *key = sdt_weights_key(w, i);
            const sdt_tensor *t = sdt_weights_get(w, key);
            bool taken = strncmp(key, hf_prefix, strlen(hf_prefix)) != 0;
            for (size_t k = 0; !taken && k < c.used && k < c.cap; k++) taken = c.taken[k] == t;
            if (!taken)
                ok = sdt_fail(
                    error, SDT_ERR_BAD_FORMAT,
                    "%s: %s/ holds '%s', which the single file's OpenCLIP layout has no "
                    "place for; remove it, or convert a folder as diffusers writes it",
                    src, sdt_diffusers_folder(spec.config.clip2.width > 0 ? SDT_DIFFUSERS_TEXT2 : SDT_DIFFUSERS_TEXT),
                    key + strlen(hf_prefix));
        }
        free(c.taken);
        if (ok) {
            if (spec.config.clip2.width > 0)
                spec.config.clip2 = oc;
            else
                spec.config.clip = oc;
        }
    }
    if (ok) ok = write_layout(path, &spec, &g, error);
    free_items(&g);
    sdt_weights_close(w);
    return ok;
}
