/* unet_internal.h - the UNet's layers, saved activations and run context
 * (shared by unet*.c only).
 *
 * The network is a list of units (LDM's TimestepEmbedSequential: conv_in,
 * input_blocks.i, middle_block, output_blocks.i, and the output head); a unit
 * is a short list of layers. A unit is the checkpointing granule: with
 * checkpointing on, forward keeps only unit outputs and backward reruns the
 * unit's layers before going back through them.
 */
#ifndef SDT_MODELS_UNET_INTERNAL_H
#define SDT_MODELS_UNET_INTERNAL_H

#include "unet.h"

/* ---- parameters ---- */
typedef struct unet_norm {
    const sdt_tensor *w, *b;
    int channels, groups;
    float eps;
} unet_norm;
typedef struct unet_linear {
    const sdt_tensor *w, *b;
    int in, out;
} unet_linear;
typedef struct unet_conv {
    const sdt_tensor *w, *b;
    int in, out, k, stride, pad;
    bool row_major_out; /* writes NCHW in a channels-last run too (conv_out: the UNet's output) */
} unet_conv;

/* ---- run context: one forward or backward call ---- */
typedef struct unet_ctx {
    sdt_unet *u;
    sdt_backend *be;
    sdt_arena *arena;
    const sdt_unet_options *opt;
    const sdt_unet_kv_hook *hook;
    bool measuring;
    bool recompute; /* rerunning a unit inside backward (checkpointing) */
    sdt_dtype dt;
    bool channels_last;        /* the 4-D activations are channels-last (tensor.h): the backend prefers it */
    const sdt_tensor *context; /* [B, T, context_dim], the cross-attention K/V input */
    sdt_tensor emb_act;        /* SiLU(time embedding) [B, time_embed_dim], input of every ResBlock's emb_layers */
    sdt_tensor *d_emb_act;     /* backward towards y: every ResBlock accumulates its emb_layers' input gradient
                            * here (f32); NULL when d(y) is not asked for */
    sdt_error *error;
} unet_ctx;

bool unet_fail(unet_ctx *c, sdt_error_code code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Reports a failed op (or an arena overflow) at a layer, naming its key prefix. */
bool unet_op_failed(unet_ctx *c, const char *where, const char *op);
bool unet_arena_ok(unet_ctx *c, const char *where);

/* Runs a backend op unless measuring; a nonzero status or an overflowed arena is an error. */
#define UNET_OP(c, where, call)                                                                                        \
    do {                                                                                                               \
        if (!(c)->measuring) {                                                                                         \
            if (!unet_arena_ok((c), (where))) return false;                                                            \
            if ((call) != 0) return unet_op_failed((c), (where), #call);                                               \
        }                                                                                                              \
    } while (0)

/* An activation (c->dt; 4-D ones in the run's layout) or f32 statistics tensor from the arena. */
sdt_tensor unet_act(unet_ctx *c, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3);
sdt_tensor unet_stat(unet_ctx *c, int64_t d0, int64_t d1);
/* An activation shaped and laid out like t. */
sdt_tensor unet_act_like(unet_ctx *c, const sdt_tensor *t);
/* An activation's shape and dtype without memory (what unet_forget leaves). */
sdt_tensor unet_shape(unet_ctx *c, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3);
/* A zeroed f32 [d0, d1] gradient buffer (the time embedding's, accumulated over every ResBlock). */
bool unet_zeroed_stat(unet_ctx *c, int64_t d0, int64_t d1, sdt_tensor *out, const char *where);
/* A gradient buffer shaped like t, not zeroed: for an op that writes it whole (linear_input_grad,
 * conv2d_input_grad). */
sdt_tensor unet_grad_buffer(unet_ctx *c, const sdt_tensor *t);
/* A zeroed gradient buffer shaped like t (backward accumulates). */
bool unet_grad_like(unet_ctx *c, const sdt_tensor *t, sdt_tensor *out, const char *where);
/* After its arena memory is rewound, t keeps only its shape and dtype: a temporary that backward needs
 * as a shape (a frozen layer's input: the input gradient reads no input values). An op that reads
 * its values refuses it (no data) instead of reading freed memory. */
void unet_forget(sdt_tensor *t);
/* t's memory viewed row-major with another shape (same numel; sdt_tensor_reshape). */
sdt_tensor unet_view(const sdt_tensor *t, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3);

/* ---- layers ---- */
typedef struct unet_resblock {
    char name[192];
    int in_ch, out_ch;
    unet_norm norm1, norm2;
    unet_conv conv1, conv2, skip; /* skip.w NULL: identity */
    unet_linear emb;
    /* saved: the norms' statistics and conv1's output h; a1 and a2 (the SiLU outputs, conv inputs) are
     * shapes only (unet_forget) */
    sdt_tensor mean1, rstd1, a1, h, mean2, rstd2, a2;
} unet_resblock;

typedef struct unet_attention {
    char name[192];
    int index; /* global attention layer index */
    bool cross;
    int q_width, kv_width, inner, heads;
    unet_linear q, k, v, out;
    /* saved */
    sdt_tensor kin, vin; /* hooked K/V inputs (or the plain input when not hooked): shapes only */
    bool k_hooked, v_hooked;
    sdt_tensor qt, kt, vt, lse, o; /* lse [B, heads, Tq] f32: attention's saved softmax statistics */
} unet_attention;

typedef struct unet_tblock {
    char name[192];
    unet_norm ln1, ln2, ln3; /* groups unused */
    unet_attention attn1, attn2;
    unet_linear ff1, ff2;
    /* saved: x0 -> x1 (after attn1) -> x2 (after attn2) -> x3 (after ff), the norms' statistics and the
     * GEGLU input f1; the norms' outputs n1..n3 and the GEGLU output g feed frozen linears only, so they
     * are shapes (unet_forget), except n1 when a hypernetwork hooks the self-attention (its input) */
    sdt_tensor x0, n1, m1, r1, x1, n2, m2, r2, x2, n3, m3, r3, f1, g, x3;
} unet_tblock;

typedef struct unet_transformer {
    char name[192];
    int ch, inner, depth;
    unet_norm norm;
    bool linear_proj;
    unet_conv proj_in_c, proj_out_c;
    unet_linear proj_in_l, proj_out_l;
    unet_tblock *blocks;
    /* saved: the norm's statistics; n, p and s_img (inputs of proj_in/proj_out) are shapes only */
    sdt_tensor n, mean, rstd, p, s_img;
    /* the checkpointing recompute of a transformer deeper than one block kept only each block's input and
     * output (blocks[d].x0, .x3): its backward recomputes one block at a time (unet_st_forward) */
    bool per_block;
} unet_transformer;

typedef struct unet_sampler {
    char name[192];
    bool up;
    unet_conv conv;
    sdt_tensor upx; /* the upsampled input (the conv's): a shape only */
} unet_sampler;

typedef struct unet_head {
    unet_norm norm;
    unet_conv conv;
    sdt_tensor mean, rstd, a; /* a: a shape only */
} unet_head;

typedef enum unet_layer_kind {
    UNET_LAYER_CONV_IN,
    UNET_LAYER_RES,
    UNET_LAYER_ST,
    UNET_LAYER_SAMPLER,
    UNET_LAYER_HEAD,
} unet_layer_kind;

typedef struct unet_layer {
    unet_layer_kind kind;
    unet_conv conv_in;
    unet_resblock *res;
    unet_transformer *st;
    unet_sampler *sampler;
    unet_head *head;
    sdt_tensor x, out; /* saved input view and output */
} unet_layer;

typedef struct unet_unit {
    char name[64];
    int first_layer, layer_count;
    int skip_from; /* unit whose output is concatenated to the input, or -1 */
    bool has_attention;
    bool has_resblock;     /* reads the time embedding, so depends on y */
    bool input_needs_grad; /* the stream input depends on the context (or y) */
    bool skip_needs_grad;
    bool depends; /* the output depends on the context (or y): backward must visit this unit */
    bool kept;    /* forward kept the internals (no recompute needed) */
    sdt_tensor x, skip, cat, out;
} unet_unit;

struct sdt_unet {
    sdt_unet_config cfg;
    bool bound; /* parameters come from weights; false: a plan for measuring only */
    unet_linear time1, time2;
    unet_linear label1, label2; /* label_emb.0.0 / .0.2 when adm_in_channels > 0 */
    unet_layer *layers;
    int layer_count, layer_cap;
    unet_unit *units;
    int unit_count, unit_cap;
    unet_attention **attn; /* by global index */
    int attn_count, attn_cap;
    /* the last forward, for backward */
    bool have_forward;
    sdt_unet_options fwd_opt;
    sdt_unet_kv_hook fwd_hook;
    const sdt_tensor *context;
    const sdt_tensor *y;
    sdt_tensor emb_act;
    sdt_tensor emb_pre, label_pre, label_act; /* with y: time embedding + label_emb before the SiLU, and
                                               * label_emb.0.0's output before and after its SiLU */
    bool fwd_channels_last;                   /* the layout the forward's activations have */
    const sdt_arena *fwd_arena;
    size_t fwd_mark;
};

/* ---- building: one walk of the architecture both enumerates and binds ---- */
typedef struct unet_binder {
    /* Called per parameter; *slot receives the tensor when loading. */
    bool (*bind)(struct unet_binder *b, const sdt_tensor **slot, const char *key, int ndim, const int64_t *shape,
                 sdt_param_init init, float std);
    sdt_error *error;
} unet_binder;

bool unet_build(sdt_unet *u, const sdt_unet_config *cfg, unet_binder *b);
/* Which units backward visits: those whose output depends on the context, and with
 * through_emb (d(y) asked for) on the time embedding too, i.e. every unit from the
 * first ResBlock on. */
void unet_mark_dependence(sdt_unet *u, bool through_emb);
void unet_release_layers(sdt_unet *u);

/* ---- layer forward/backward (unet_resblock.c, unet_transformer.c) ----
 * Forward reads l->x, allocates and fills l->out. Backward takes d_out and
 * accumulates into d_x (NULL: the input needs no gradient). */
bool unet_res_forward(unet_ctx *c, unet_resblock *r, const sdt_tensor *x, sdt_tensor *out);
bool unet_res_backward(unet_ctx *c, unet_resblock *r, const sdt_tensor *x, const sdt_tensor *d_out, sdt_tensor *d_x);
bool unet_st_forward(unet_ctx *c, unet_transformer *t, const sdt_tensor *x, const sdt_tensor *context, sdt_tensor *out);
bool unet_st_backward(unet_ctx *c, unet_transformer *t, const sdt_tensor *x, const sdt_tensor *context,
                      const sdt_tensor *d_out, sdt_tensor *d_x, sdt_tensor *d_context);
bool unet_sampler_forward(unet_ctx *c, unet_sampler *s, const sdt_tensor *x, sdt_tensor *out);
bool unet_sampler_backward(unet_ctx *c, unet_sampler *s, const sdt_tensor *x, const sdt_tensor *d_out, sdt_tensor *d_x);
bool unet_head_forward(unet_ctx *c, unet_head *h, const sdt_tensor *x, sdt_tensor *out);
bool unet_head_backward(unet_ctx *c, unet_head *h, const sdt_tensor *x, const sdt_tensor *d_out, sdt_tensor *d_x);
/* A conv's output for input x (shape only is read), allocated from the arena. */
sdt_tensor unet_conv_alloc(unet_ctx *c, const unet_conv *cv, const sdt_tensor *x);
/* out = conv(x) into an allocated out. */
bool unet_conv_run(unet_ctx *c, const unet_conv *cv, const char *where, const sdt_tensor *x, sdt_tensor *out);
/* d_x = the frozen conv's input gradient for input x (a shape), in a fresh buffer it writes whole. */
bool unet_conv_input_grad(unet_ctx *c, const unet_conv *cv, const char *where, const sdt_tensor *x,
                          const sdt_tensor *d_out, sdt_tensor *d_x);
/* Both: the output allocated, then computed. */
bool unet_conv_forward(unet_ctx *c, const unet_conv *cv, const char *where, const sdt_tensor *x, sdt_tensor *out);

#endif
