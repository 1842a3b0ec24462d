/* unet_build.c - one walk of the LDM UNet architecture. It creates the layer
 * and unit lists and names every parameter with its canonical key and shape;
 * a binder decides what happens per parameter (enumerate for the checkpoint
 * generator, or look up and shape-check in loaded weights). Keys and shapes
 * therefore have a single home. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unet_internal.h"

typedef struct walk {
    sdt_unet *u;
    const sdt_unet_config *cfg;
    unet_binder *b;
} walk;

static bool param(walk *w, const sdt_tensor **slot, const char *prefix, const char *suffix, int ndim, int64_t d0,
                  int64_t d1, int64_t d2, int64_t d3, sdt_param_init init, float std)
{
    char key[256];
    snprintf(key, sizeof key, "%s%s.%s", SDT_UNET_KEY_PREFIX, prefix, suffix);
    int64_t shape[4] = {d0, d1, d2, d3};
    return w->b->bind(w->b, slot, key, ndim, shape, init, std);
}

static bool bind_linear(walk *w, unet_linear *l, const char *prefix, int in, int out, bool bias)
{
    l->in = in;
    l->out = out;
    l->b = NULL;
    if (!param(w, &l->w, prefix, "weight", 2, out, in, 0, 0, SDT_INIT_NORMAL, 1.0f / sqrtf((float)in))) return false;
    return !bias || param(w, &l->b, prefix, "bias", 1, out, 0, 0, 0, SDT_INIT_ZEROS, 0.0f);
}

static bool bind_conv(walk *w, unet_conv *cv, const char *prefix, int in, int out, int k, int stride)
{
    cv->in = in;
    cv->out = out;
    cv->k = k;
    cv->stride = stride;
    cv->pad = k / 2;
    float std = 1.0f / sqrtf((float)(in * k * k));
    return param(w, &cv->w, prefix, "weight", 4, out, in, k, k, SDT_INIT_NORMAL, std) &&
           param(w, &cv->b, prefix, "bias", 1, out, 0, 0, 0, SDT_INIT_ZEROS, 0.0f);
}

static bool bind_norm(walk *w, unet_norm *n, const char *prefix, int ch, int groups, float eps)
{
    n->channels = ch;
    n->groups = groups;
    n->eps = eps;
    return param(w, &n->w, prefix, "weight", 1, ch, 0, 0, 0, SDT_INIT_ONES, 0.0f) &&
           param(w, &n->b, prefix, "bias", 1, ch, 0, 0, 0, SDT_INIT_ZEROS, 0.0f);
}

static void *grow(void *arr, int *cap, int need, size_t elem)
{
    if (need <= *cap) return arr;
    int ncap = *cap ? *cap * 2 : 16;
    while (ncap < need) ncap *= 2;
    void *p = realloc(arr, (size_t)ncap * elem);
    if (!p) return NULL;
    memset((char *)p + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
    *cap = ncap;
    return p;
}

static bool out_of_memory(walk *w)
{
    sdt_fail(w->b->error, SDT_ERR_OUT_OF_MEMORY, "unet: out of host memory while building the layer list");
    return false;
}

static unet_layer *add_layer(walk *w, unet_layer_kind kind)
{
    sdt_unet *u = w->u;
    unet_layer *arr = grow(u->layers, &u->layer_cap, u->layer_count + 1, sizeof *arr);
    if (!arr) return NULL;
    u->layers = arr;
    unet_layer *l = &u->layers[u->layer_count++];
    memset(l, 0, sizeof *l);
    l->kind = kind;
    u->units[u->unit_count - 1].layer_count++;
    return l;
}

static bool add_unit(walk *w, const char *name, int skip_from)
{
    sdt_unet *u = w->u;
    unet_unit *arr = grow(u->units, &u->unit_cap, u->unit_count + 1, sizeof *arr);
    if (!arr) return out_of_memory(w);
    u->units = arr;
    unet_unit *un = &u->units[u->unit_count++];
    memset(un, 0, sizeof *un);
    snprintf(un->name, sizeof un->name, "%s", name);
    un->first_layer = u->layer_count;
    un->skip_from = skip_from;
    return true;
}

static bool add_resblock(walk *w, const char *prefix, int in_ch, int out_ch)
{
    const sdt_unet_config *c = w->cfg;
    unet_layer *l = add_layer(w, UNET_LAYER_RES);
    unet_resblock *r = l ? calloc(1, sizeof *r) : NULL;
    if (!r) return out_of_memory(w);
    l->res = r;
    w->u->units[w->u->unit_count - 1].has_resblock = true;
    snprintf(r->name, sizeof r->name, "%s", prefix);
    r->in_ch = in_ch;
    r->out_ch = out_ch;
    char p[160];
#define SUB(s) (snprintf(p, sizeof p, "%s.%s", prefix, s), p)
    if (!bind_norm(w, &r->norm1, SUB("in_layers.0"), in_ch, c->norm_groups, c->norm_eps)) return false;
    if (!bind_conv(w, &r->conv1, SUB("in_layers.2"), in_ch, out_ch, 3, 1)) return false;
    if (!bind_linear(w, &r->emb, SUB("emb_layers.1"), c->time_embed_dim, out_ch, true)) return false;
    if (!bind_norm(w, &r->norm2, SUB("out_layers.0"), out_ch, c->norm_groups, c->norm_eps)) return false;
    if (!bind_conv(w, &r->conv2, SUB("out_layers.3"), out_ch, out_ch, 3, 1)) return false;
    if (in_ch != out_ch && !bind_conv(w, &r->skip, SUB("skip_connection"), in_ch, out_ch, 1, 1)) return false;
#undef SUB
    return true;
}

static bool bind_attention(walk *w, unet_attention *a, const char *prefix, int ch, int kv_width, bool cross)
{
    snprintf(a->name, sizeof a->name, "%s", prefix);
    a->cross = cross;
    a->q_width = ch;
    a->kv_width = kv_width;
    a->inner = ch;
    a->heads = sdt_unet_config_heads(w->cfg, ch);
    sdt_unet *u = w->u;
    unet_attention **arr = grow(u->attn, &u->attn_cap, u->attn_count + 1, sizeof *arr);
    if (!arr) return out_of_memory(w);
    u->attn = arr;
    a->index = u->attn_count;
    u->attn[u->attn_count++] = a;
    char p[200];
#define SUB(s) (snprintf(p, sizeof p, "%s.%s", prefix, s), p)
    return bind_linear(w, &a->q, SUB("to_q"), ch, ch, false) &&
           bind_linear(w, &a->k, SUB("to_k"), kv_width, ch, false) &&
           bind_linear(w, &a->v, SUB("to_v"), kv_width, ch, false) &&
           bind_linear(w, &a->out, SUB("to_out.0"), ch, ch, true);
#undef SUB
}

static bool add_transformer(walk *w, const char *prefix, int ch, int depth)
{
    const sdt_unet_config *c = w->cfg;
    unet_layer *l = add_layer(w, UNET_LAYER_ST);
    unet_transformer *t = l ? calloc(1, sizeof *t) : NULL;
    if (!t) return out_of_memory(w);
    l->st = t;
    w->u->units[w->u->unit_count - 1].has_attention = true;
    snprintf(t->name, sizeof t->name, "%s", prefix);
    t->ch = ch;
    t->inner = ch;
    t->depth = depth;
    t->linear_proj = c->linear_proj;
    t->blocks = calloc((size_t)t->depth, sizeof *t->blocks);
    if (!t->blocks) return out_of_memory(w);
    char p[200];
#define SUB(...) (snprintf(p, sizeof p, __VA_ARGS__), p)
    if (!bind_norm(w, &t->norm, SUB("%s.norm", prefix), ch, c->norm_groups, c->transformer_norm_eps)) return false;
    if (t->linear_proj ? !bind_linear(w, &t->proj_in_l, SUB("%s.proj_in", prefix), ch, t->inner, true)
                       : !bind_conv(w, &t->proj_in_c, SUB("%s.proj_in", prefix), ch, t->inner, 1, 1))
        return false;
    for (int d = 0; d < t->depth; d++) {
        unet_tblock *tb = &t->blocks[d];
        char bp[160];
        snprintf(bp, sizeof bp, "%s.transformer_blocks.%d", prefix, d);
        snprintf(tb->name, sizeof tb->name, "%s", bp);
        int ff_inner = t->inner * c->ff_mult;
        if (!bind_norm(w, &tb->ln1, SUB("%s.norm1", bp), t->inner, 1, c->layernorm_eps) ||
            !bind_attention(w, &tb->attn1, SUB("%s.attn1", bp), t->inner, t->inner, false) ||
            !bind_norm(w, &tb->ln2, SUB("%s.norm2", bp), t->inner, 1, c->layernorm_eps) ||
            !bind_attention(w, &tb->attn2, SUB("%s.attn2", bp), t->inner, c->context_dim, true) ||
            !bind_norm(w, &tb->ln3, SUB("%s.norm3", bp), t->inner, 1, c->layernorm_eps) ||
            !bind_linear(w, &tb->ff1, SUB("%s.ff.net.0.proj", bp), t->inner, 2 * ff_inner, true) ||
            !bind_linear(w, &tb->ff2, SUB("%s.ff.net.2", bp), ff_inner, t->inner, true))
            return false;
    }
    if (t->linear_proj ? !bind_linear(w, &t->proj_out_l, SUB("%s.proj_out", prefix), t->inner, ch, true)
                       : !bind_conv(w, &t->proj_out_c, SUB("%s.proj_out", prefix), t->inner, ch, 1, 1))
        return false;
#undef SUB
    return true;
}

static bool add_sampler(walk *w, const char *prefix, int ch, bool up)
{
    unet_layer *l = add_layer(w, UNET_LAYER_SAMPLER);
    unet_sampler *s = l ? calloc(1, sizeof *s) : NULL;
    if (!s) return out_of_memory(w);
    l->sampler = s;
    snprintf(s->name, sizeof s->name, "%s", prefix);
    s->up = up;
    return bind_conv(w, &s->conv, prefix, ch, ch, 3, up ? 1 : 2);
}

void unet_mark_dependence(sdt_unet *u, bool through_emb)
{
    for (int i = 0; i < u->unit_count; i++) {
        unet_unit *un = &u->units[i];
        un->input_needs_grad = i > 0 && u->units[i - 1].depends;
        un->skip_needs_grad = un->skip_from >= 0 && u->units[un->skip_from].depends;
        un->depends =
            un->input_needs_grad || un->skip_needs_grad || un->has_attention || (through_emb && un->has_resblock);
    }
}

bool unet_build(sdt_unet *u, const sdt_unet_config *cfg, unet_binder *b)
{
    if (!sdt_unet_config_validate(cfg, b->error)) return false;
    u->cfg = *cfg;
    walk w = {u, &u->cfg, b};
    const sdt_unet_config *c = &u->cfg;
    const int mc = c->model_channels;
    if (!bind_linear(&w, &u->time1, "time_embed.0", mc, c->time_embed_dim, true) ||
        !bind_linear(&w, &u->time2, "time_embed.2", c->time_embed_dim, c->time_embed_dim, true))
        return false;
    if (c->adm_in_channels > 0 &&
        (!bind_linear(&w, &u->label1, "label_emb.0.0", c->adm_in_channels, c->time_embed_dim, true) ||
         !bind_linear(&w, &u->label2, "label_emb.0.2", c->time_embed_dim, c->time_embed_dim, true)))
        return false;

    /* The skip stack of LDM's input_block_chans, with the unit that produced each entry. */
    int stack_ch[4 * SDT_UNET_MAX_LEVELS * 8], stack_unit[4 * SDT_UNET_MAX_LEVELS * 8], top = 0;
    if (c->num_levels * (c->num_res_blocks + 1) + 1 > (int)(sizeof stack_ch / sizeof *stack_ch)) {
        sdt_fail(b->error, SDT_ERR_UNSUPPORTED, "unet config: num_res_blocks %d is too large for this build",
                 c->num_res_blocks);
        return false;
    }
    char name[64], prefix[96];
    if (!add_unit(&w, "input_blocks.0", -1)) return false;
    unet_layer *l = add_layer(&w, UNET_LAYER_CONV_IN);
    if (!l) return out_of_memory(&w);
    if (!bind_conv(&w, &l->conv_in, "input_blocks.0.0", c->in_channels, mc, 3, 1)) return false;
    int ch = mc, block = 1;
    stack_ch[top] = ch;
    stack_unit[top++] = 0;
    for (int level = 0; level < c->num_levels; level++) {
        for (int r = 0; r < c->num_res_blocks; r++, block++) {
            snprintf(name, sizeof name, "input_blocks.%d", block);
            if (!add_unit(&w, name, -1)) return false;
            snprintf(prefix, sizeof prefix, "%s.0", name);
            if (!add_resblock(&w, prefix, ch, c->channel_mult[level] * mc)) return false;
            ch = c->channel_mult[level] * mc;
            snprintf(prefix, sizeof prefix, "%s.1", name);
            if (c->attention[level] && !add_transformer(&w, prefix, ch, c->transformer_depth[level])) return false;
            stack_ch[top] = ch;
            stack_unit[top++] = u->unit_count - 1;
        }
        if (level != c->num_levels - 1) {
            snprintf(name, sizeof name, "input_blocks.%d", block++);
            if (!add_unit(&w, name, -1)) return false;
            snprintf(prefix, sizeof prefix, "%s.0.op", name);
            if (!add_sampler(&w, prefix, ch, false)) return false;
            stack_ch[top] = ch;
            stack_unit[top++] = u->unit_count - 1;
        }
    }
    if (!add_unit(&w, "middle_block", -1) || !add_resblock(&w, "middle_block.0", ch, ch) ||
        !add_transformer(&w, "middle_block.1", ch, c->middle_depth) || !add_resblock(&w, "middle_block.2", ch, ch))
        return false;
    block = 0;
    for (int level = c->num_levels - 1; level >= 0; level--) {
        for (int i = 0; i <= c->num_res_blocks; i++, block++) {
            top--;
            snprintf(name, sizeof name, "output_blocks.%d", block);
            if (!add_unit(&w, name, stack_unit[top])) return false;
            snprintf(prefix, sizeof prefix, "%s.0", name);
            if (!add_resblock(&w, prefix, ch + stack_ch[top], c->channel_mult[level] * mc)) return false;
            ch = c->channel_mult[level] * mc;
            int sub = 1;
            snprintf(prefix, sizeof prefix, "%s.%d", name, sub);
            if (c->attention[level]) {
                if (!add_transformer(&w, prefix, ch, c->transformer_depth[level])) return false;
                sub++;
            }
            if (level && i == c->num_res_blocks) {
                snprintf(prefix, sizeof prefix, "%s.%d.conv", name, sub);
                if (!add_sampler(&w, prefix, ch, true)) return false;
            }
        }
    }
    if (!add_unit(&w, "out", -1)) return false;
    l = add_layer(&w, UNET_LAYER_HEAD);
    unet_head *h = l ? calloc(1, sizeof *h) : NULL;
    if (!h) return out_of_memory(&w);
    l->head = h;
    if (!bind_norm(&w, &h->norm, "out.0", ch, c->norm_groups, c->norm_eps) ||
        !bind_conv(&w, &h->conv, "out.2", ch, c->out_channels, 3, 1))
        return false;
    h->conv.row_major_out = true; /* the UNet's output is NCHW, as the latents are */
    unet_mark_dependence(u, false);
    return true;
}

void unet_release_layers(sdt_unet *u)
{
    for (int i = 0; i < u->layer_count; i++) {
        unet_layer *l = &u->layers[i];
        free(l->res);
        if (l->st) free(l->st->blocks);
        free(l->st);
        free(l->sampler);
        free(l->head);
    }
    free(u->layers);
    free(u->units);
    free(u->attn);
    u->layers = NULL;
    u->units = NULL;
    u->attn = NULL;
    u->layer_count = u->unit_count = u->attn_count = 0;
}

/* ---- binders ---- */

typedef struct enum_binder {
    unet_binder base;
    sdt_param_visitor visit;
    void *user;
    bool stopped;
} enum_binder;

static bool enum_bind(unet_binder *b, const sdt_tensor **slot, const char *key, int ndim, const int64_t *shape,
                      sdt_param_init init, float std)
{
    enum_binder *e = (enum_binder *)b;
    *slot = NULL;
    sdt_param_info p = {.key = key, .ndim = ndim, .init = init, .std = std};
    for (int i = 0; i < ndim; i++) p.shape[i] = shape[i];
    if (!e->visit(e->user, &p)) {
        e->stopped = true;
        sdt_fail(b->error, SDT_ERR_INTERNAL, "unet: parameter enumeration stopped by the visitor at key %s", key);
        return false;
    }
    return true;
}

bool sdt_unet_enumerate_params(const sdt_unet_config *c, sdt_param_visitor visit, void *user, sdt_error *error)
{
    sdt_unet u;
    memset(&u, 0, sizeof u);
    enum_binder e = {{enum_bind, error}, visit, user, false};
    bool ok = unet_build(&u, c, &e.base);
    unet_release_layers(&u);
    return ok;
}

static bool unbound_bind(unet_binder *b, const sdt_tensor **slot, const char *key, int ndim, const int64_t *shape,
                         sdt_param_init init, float std)
{
    (void)b, (void)key, (void)ndim, (void)shape, (void)init, (void)std;
    *slot = NULL;
    return true;
}

sdt_unet *sdt_unet_create_unbound(const sdt_unet_config *c, sdt_error *error)
{
    sdt_unet *u = calloc(1, sizeof *u);
    if (!u) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "unet: out of host memory");
        return NULL;
    }
    unet_binder b = {unbound_bind, error};
    if (!unet_build(u, c, &b)) {
        sdt_unet_free(u);
        return NULL;
    }
    return u;
}

typedef struct load_binder {
    unet_binder base;
    const sdt_weights *w;
} load_binder;

static bool load_bind(unet_binder *b, const sdt_tensor **slot, const char *key, int ndim, const int64_t *shape,
                      sdt_param_init init, float std)
{
    (void)init;
    (void)std;
    load_binder *lb = (load_binder *)b;
    *slot = sdt_weights_require(lb->w, key, ndim, shape, b->error);
    return *slot != NULL;
}

sdt_unet *sdt_unet_load(const sdt_unet_config *c, const sdt_weights *w, sdt_error *error)
{
    sdt_unet *u = calloc(1, sizeof *u);
    if (!u) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "unet: out of host memory");
        return NULL;
    }
    load_binder lb = {{load_bind, error}, w};
    if (!unet_build(u, c, &lb.base)) {
        sdt_unet_free(u);
        return NULL;
    }
    u->bound = true;
    return u;
}

void sdt_unet_free(sdt_unet *u)
{
    if (!u) return;
    unet_release_layers(u);
    free(u);
}

const sdt_unet_config *sdt_unet_get_config(const sdt_unet *u)
{
    return &u->cfg;
}

int sdt_unet_attention_count(const sdt_unet *u)
{
    return u->attn_count;
}

bool sdt_unet_attention_site(const sdt_unet *u, int layer, sdt_unet_hook_site *site)
{
    if (layer < 0 || layer >= u->attn_count) return false;
    const unet_attention *a = u->attn[layer];
    site->layer = layer;
    site->kind = SDT_UNET_K;
    site->width = a->kv_width;
    site->cross = a->cross;
    return true;
}
