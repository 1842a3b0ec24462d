/* vae.c - AutoencoderKL forward (encoder and decoder); see vae.h. */
#include "vae.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "c_numeric.h"
#include "model_util.h"

#define FS VAE_KEY_PREFIX
#define MODULE "vae"

/* ---------------------------------------------------------------- configs */

vae_config vae_config_sd(void)
{
    vae_config c = {.in_channels = 3,
                    .ch = 128,
                    .levels = 4,
                    .ch_mult = {1, 2, 4, 4},
                    .res_blocks = 2,
                    .z_channels = 4,
                    .groups = 32,
                    .eps = 1e-6f,
                    .scaling = 0.18215f,
                    .has_quant_conv = 1};
    return c;
}

vae_config vae_config_tiny(void)
{
    vae_config c = {.in_channels = 3,
                    .ch = 64,
                    .levels = 2,
                    .ch_mult = {1, 2},
                    .res_blocks = 1,
                    .z_channels = 4,
                    .groups = 32,
                    .eps = 1e-6f,
                    .scaling = 0.18215f,
                    .has_quant_conv = 1};
    return c;
}

/* diffusers' vae/config.json of stabilityai/stable-diffusion-3.5-large and -medium (AutoencoderKL:
 * latent_channels 16, use_quant_conv / use_post_quant_conv false, scaling_factor 1.5305, shift_factor
 * 0.0609; Stability-AI/sd3.5 sd3_impls.py's SD3LatentFormat the same), used by StableDiffusion3Pipeline
 * as (latents / scaling_factor) + shift_factor. */
#define VAE_SD3_SCALING 1.5305f
#define VAE_SD3_SHIFT 0.0609f
/* black-forest-labs/FLUX.1-dev and -schnell vae/config.json: scaling_factor 0.3611, shift_factor 0.1159
 * (BFL's flux/util.py AutoEncoderParams the same; FluxPipeline decodes (latents / scaling_factor) +
 * shift_factor). */
#define VAE_FLUX_SCALING 0.3611f
#define VAE_FLUX_SHIFT 0.1159f

vae_config vae_config_sd3(void)
{
    vae_config c = vae_config_sd();
    c.z_channels = 16;
    c.has_quant_conv = 0;
    c.scaling = VAE_SD3_SCALING;
    c.shift = VAE_SD3_SHIFT;
    return c;
}

vae_config vae_config_flux(void)
{
    vae_config c = vae_config_sd3();
    c.scaling = VAE_FLUX_SCALING;
    c.shift = VAE_FLUX_SHIFT;
    return c;
}

vae_config vae_config_tiny16(void)
{
    vae_config c = vae_config_tiny();
    c.z_channels = 16;
    c.has_quant_conv = 0;
    c.scaling = VAE_SD3_SCALING;
    c.shift = VAE_SD3_SHIFT;
    return c;
}

int vae_factor(const vae_config *c)
{
    return 1 << (c->levels - 1);
}

bool vae_config_check(const vae_config *c, sdt_error *error)
{
    bool ok = c->in_channels > 0 && c->ch > 0 && c->levels >= 1 && c->levels <= VAE_MAX_LEVELS && c->res_blocks >= 1 &&
              c->res_blocks <= VAE_MAX_RES_BLOCKS && c->z_channels > 0 && c->groups > 0 && isfinite(c->shift) &&
              c->scaling > 0 && isfinite(c->scaling);
    for (int i = 0; ok && i < c->levels; i++) ok = c->ch_mult[i] > 0 && (c->ch * c->ch_mult[i]) % c->groups == 0;
    if (!ok)
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "vae: config (width %d, %d levels, %d resnets per level, z %d) is not supported: at most "
                 "%d levels and %d resnets, every level's width divisible by the %d groupnorm groups",
                 c->ch, c->levels, c->res_blocks, c->z_channels, VAE_MAX_LEVELS, VAE_MAX_RES_BLOCKS, c->groups);
    return ok;
}

const char *vae_key_prefix(const sdt_weights *w)
{
    if (!sdt_weights_get(w, FS "encoder.conv_in.weight") && sdt_weights_get(w, "encoder.conv_in.weight") &&
        sdt_weights_get(w, "decoder.conv_in.weight"))
        return "";
    return FS;
}

static int count_levels(const sdt_weights *w, const char *prefix)
{
    int n = 0;
    while (n <= VAE_MAX_LEVELS && mu_has(w, "%sencoder.down.%d.block.0.conv1.weight", prefix, n)) n++;
    return n;
}

static int count_blocks(const sdt_weights *w, const char *prefix, int level)
{
    int n = 0;
    while (n <= VAE_MAX_RES_BLOCKS && mu_has(w, "%sencoder.down.%d.block.%d.conv1.weight", prefix, level, n)) n++;
    return n;
}

bool vae_config_detect(const sdt_weights *w, vae_config *cfg, sdt_error *error)
{
    const char *prefix = vae_key_prefix(w);
    const sdt_tensor *cin = mu_get(w, "%sencoder.conv_in.weight", prefix);
    const sdt_tensor *din = mu_get(w, "%sdecoder.conv_in.weight", prefix);
    if (!cin || !din || cin->ndim != 4 || din->ndim != 4) {
        if (sdt_weights_missing_part(w, "first_stage_model.", error)) return false;
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: no VAE found (expected " FS "encoder.conv_in.weight and " FS
                 "decoder.conv_in.weight as 4-d conv weights, or encoder.conv_in.weight and "
                 "decoder.conv_in.weight in a lone VAE file); use a checkpoint with its VAE",
                 sdt_weights_path(w));
        return false;
    }
    vae_config c = vae_config_sd();
    c.ch = (int)cin->shape[0];
    c.in_channels = (int)cin->shape[1];
    c.z_channels = (int)din->shape[1];
    c.levels = count_levels(w, prefix);
    c.res_blocks = c.levels > 0 ? count_blocks(w, prefix, 0) : 0;
    c.has_quant_conv = mu_has(w, "%squant_conv.weight", prefix) ? 1 : 0;
    if (!c.has_quant_conv && c.z_channels == 16) {
        c.scaling = VAE_SD3_SCALING;
        c.shift = VAE_SD3_SHIFT;
    }
    for (int i = 0; i < VAE_MAX_LEVELS; i++) {
        const sdt_tensor *t = i < c.levels ? mu_get(w, "%sencoder.down.%d.block.0.conv1.weight", prefix, i) : NULL;
        c.ch_mult[i] = t && t->ndim == 4 ? (int)(t->shape[0] / (c.ch > 0 ? c.ch : 1)) : 0;
    }
    if (!vae_config_check(&c, error)) return false;
    *cfg = c;
    return true;
}

/* ---------------------------------------------------------------- parameter walk
 *
 * One description of the architecture's parameters serves enumeration (for the
 * checkpoint generator and memory estimates) and loading (shape-checked lookup
 * into the model's fields). */

typedef struct walk_param {
    sdt_param_info info;
    sdt_tensor *dst; /* model field to fill */
    bool as_linear;  /* a 1x1 conv used as a linear [C, C]; diffusers-style [C, C] is accepted too */
} walk_param;

typedef bool (*walk_fn)(void *user, const walk_param *p);

typedef struct walker {
    walk_fn fn;
    void *user;
    const char *prefix; /* before every key: VAE_KEY_PREFIX or "" (vae_key_prefix) */
} walker;

static bool put(walker *wk, sdt_tensor *dst, sdt_param_init init, float std, int ndim, int64_t d0, int64_t d1,
                int64_t d2, int64_t d3, bool as_linear, const char *fmt, ...) __attribute__((format(printf, 11, 12)));

static bool put(walker *wk, sdt_tensor *dst, sdt_param_init init, float std, int ndim, int64_t d0, int64_t d1,
                int64_t d2, int64_t d3, bool as_linear, const char *fmt, ...)
{
    char key[256];
    size_t head = strlen(wk->prefix);
    if (head >= sizeof(key)) head = sizeof(key) - 1;
    memcpy(key, wk->prefix, head);
    va_list ap;
    va_start(ap, fmt);
    sdt_c_vsnprintf(key + head, sizeof(key) - head, fmt, ap);
    va_end(ap);
    walk_param p;
    memset(&p, 0, sizeof(p));
    p.info.key = key;
    p.info.ndim = ndim;
    p.info.shape[0] = d0;
    p.info.shape[1] = d1;
    p.info.shape[2] = d2;
    p.info.shape[3] = d3;
    p.info.init = init;
    p.info.std = std;
    p.dst = dst;
    p.as_linear = as_linear;
    return wk->fn(wk->user, &p);
}

static float conv_std(int64_t cin, int64_t k)
{
    return 1.0f / sqrtf((float)(cin * k * k));
}

static bool walk_norm(walker *wk, sdt_tensor *w, sdt_tensor *b, int64_t C, const char *prefix, const char *name)
{
    return put(wk, w, SDT_INIT_ONES, 0, 1, C, 0, 0, 0, false, "%s.%s.weight", prefix, name) &&
           put(wk, b, SDT_INIT_ZEROS, 0, 1, C, 0, 0, 0, false, "%s.%s.bias", prefix, name);
}

static bool walk_conv(walker *wk, sdt_tensor *w, sdt_tensor *b, int64_t cout, int64_t cin, int64_t k,
                      const char *prefix, const char *name)
{
    return put(wk, w, SDT_INIT_NORMAL, conv_std(cin, k), 4, cout, cin, k, k, false, "%s.%s.weight", prefix, name) &&
           put(wk, b, SDT_INIT_ZEROS, 0, 1, cout, 0, 0, 0, false, "%s.%s.bias", prefix, name);
}

/* A 1x1 conv at the VAE's top (quant_conv, post_quant_conv). */
static bool walk_top_conv(walker *wk, sdt_tensor *w, sdt_tensor *b, int64_t cout, int64_t cin, const char *name)
{
    return put(wk, w, SDT_INIT_NORMAL, conv_std(cin, 1), 4, cout, cin, 1, 1, false, "%s.weight", name) &&
           put(wk, b, SDT_INIT_ZEROS, 0, 1, cout, 0, 0, 0, false, "%s.bias", name);
}

static bool walk_resblock(walker *wk, vae_resblock *r, int cin, int cout, const char *prefix)
{
    r->cin = cin;
    r->cout = cout;
    bool ok = walk_norm(wk, &r->n1_w, &r->n1_b, cin, prefix, "norm1") &&
              walk_conv(wk, &r->c1_w, &r->c1_b, cout, cin, 3, prefix, "conv1") &&
              walk_norm(wk, &r->n2_w, &r->n2_b, cout, prefix, "norm2") &&
              walk_conv(wk, &r->c2_w, &r->c2_b, cout, cout, 3, prefix, "conv2");
    if (ok && cin != cout) ok = walk_conv(wk, &r->sc_w, &r->sc_b, cout, cin, 1, prefix, "nin_shortcut");
    return ok;
}

static bool walk_attn(walker *wk, vae_attn *a, int64_t C, const char *prefix)
{
    static const char *names[4] = {"q", "k", "v", "proj_out"};
    sdt_tensor *ws[4] = {&a->q_w, &a->k_w, &a->v_w, &a->o_w}, *bs[4] = {&a->q_b, &a->k_b, &a->v_b, &a->o_b};
    if (!walk_norm(wk, &a->n_w, &a->n_b, C, prefix, "norm")) return false;
    for (int i = 0; i < 4; i++)
        if (!put(wk, ws[i], SDT_INIT_NORMAL, conv_std(C, 1), 4, C, C, 1, 1, true, "%s.%s.weight", prefix, names[i]) ||
            !put(wk, bs[i], SDT_INIT_ZEROS, 0, 1, C, 0, 0, 0, false, "%s.%s.bias", prefix, names[i]))
            return false;
    return true;
}

static bool walk_mid(walker *wk, vae_mid *mid, int C, const char *prefix)
{
    char p[128];
    snprintf(p, sizeof(p), "%s.block_1", prefix);
    if (!walk_resblock(wk, &mid->b1, C, C, p)) return false;
    snprintf(p, sizeof(p), "%s.attn_1", prefix);
    if (!walk_attn(wk, &mid->attn, C, p)) return false;
    snprintf(p, sizeof(p), "%s.block_2", prefix);
    return walk_resblock(wk, &mid->b2, C, C, p);
}

static bool walk_encoder(walker *wk, const vae_config *c, vae_model *m)
{
    char p[128];
    int z2 = 2 * c->z_channels;
    if (!walk_conv(wk, &m->enc_in_w, &m->enc_in_b, c->ch, c->in_channels, 3, "encoder", "conv_in")) return false;
    int cin = c->ch;
    for (int i = 0; i < c->levels; i++) {
        int cout = c->ch * c->ch_mult[i];
        for (int j = 0; j < c->res_blocks; j++) {
            snprintf(p, sizeof(p), "encoder.down.%d.block.%d", i, j);
            if (!walk_resblock(wk, &m->enc_block[i][j], cin, cout, p)) return false;
            cin = cout;
        }
        if (i != c->levels - 1) {
            snprintf(p, sizeof(p), "encoder.down.%d.downsample", i);
            if (!walk_conv(wk, &m->down_w3[i], &m->down_b[i], cout, cout, 3, p, "conv")) return false;
        }
    }
    return walk_mid(wk, &m->enc_mid, cin, "encoder.mid") &&
           walk_norm(wk, &m->enc_norm_w, &m->enc_norm_b, cin, "encoder", "norm_out") &&
           walk_conv(wk, &m->enc_out_w, &m->enc_out_b, z2, cin, 3, "encoder", "conv_out") &&
           (!c->has_quant_conv || walk_top_conv(wk, &m->quant_w, &m->quant_b, z2, z2, "quant_conv"));
}

static bool walk_decoder(walker *wk, const vae_config *c, vae_model *m)
{
    char p[128];
    int z = c->z_channels, cin = c->ch * c->ch_mult[c->levels - 1];
    if ((c->has_quant_conv && !walk_top_conv(wk, &m->post_quant_w, &m->post_quant_b, z, z, "post_quant_conv")) ||
        !walk_conv(wk, &m->dec_in_w, &m->dec_in_b, cin, z, 3, "decoder", "conv_in") ||
        !walk_mid(wk, &m->dec_mid, cin, "decoder.mid"))
        return false;
    for (int i = c->levels - 1; i >= 0; i--) {
        int cout = c->ch * c->ch_mult[i];
        for (int j = 0; j <= c->res_blocks; j++) {
            snprintf(p, sizeof(p), "decoder.up.%d.block.%d", i, j);
            if (!walk_resblock(wk, &m->dec_block[i][j], cin, cout, p)) return false;
            cin = cout;
        }
        if (i != 0) {
            snprintf(p, sizeof(p), "decoder.up.%d.upsample", i);
            if (!walk_conv(wk, &m->up_w[i], &m->up_b[i], cout, cout, 3, p, "conv")) return false;
        }
    }
    return walk_norm(wk, &m->dec_norm_w, &m->dec_norm_b, cin, "decoder", "norm_out") &&
           walk_conv(wk, &m->dec_out_w, &m->dec_out_b, c->in_channels, cin, 3, "decoder", "conv_out");
}

/* The walk keeps quant_conv and post_quant_conv next to their users (LDM's
 * state dict lists them after the decoder); order does not matter to loaders. */
static bool walk_all(const vae_config *c, vae_model *m, const char *prefix, walk_fn fn, void *user)
{
    walker wk = {fn, user, prefix};
    return walk_encoder(&wk, c, m) && walk_decoder(&wk, c, m);
}

typedef struct enum_ctx {
    sdt_param_visitor visit;
    void *user;
} enum_ctx;

static bool enumerate_one(void *user, const walk_param *p)
{
    enum_ctx *e = user;
    return e->visit(e->user, &p->info);
}

bool vae_params_under(const vae_config *cfg, const char *prefix, sdt_param_visitor visit, void *user)
{
    vae_model *scratch = calloc(1, sizeof(*scratch));
    if (!scratch) return false;
    enum_ctx e = {visit, user};
    bool ok = walk_all(cfg, scratch, prefix, enumerate_one, &e);
    free(scratch);
    return ok;
}

bool vae_params(const vae_config *cfg, sdt_param_visitor visit, void *user)
{
    return vae_params_under(cfg, FS, visit, user);
}

/* ---------------------------------------------------------------- loading */

typedef struct load_ctx {
    const sdt_weights *w;
    sdt_error *error;
} load_ctx;

static bool load_one(void *user, const walk_param *p)
{
    load_ctx *l = user;
    if (p->as_linear) {
        int64_t lin[2] = {p->info.shape[0], p->info.shape[1]};
        return mu_require_either(l->w, p->dst, 4, p->info.shape, 2, lin, l->error, "%s", p->info.key);
    }
    return mu_require(l->w, p->dst, p->info.ndim, p->info.shape, l->error, "%s", p->info.key);
}

/* [OC, C, 3, 3] -> [OC, C, 4, 4] with w4[.., kh + 1, kw + 1] = w3[.., kh, kw], zeros elsewhere. */
static bool build_padded_down_kernel(sdt_backend *be, sdt_tensor *w4, const sdt_tensor *w3, sdt_error *error)
{
    int64_t OC = w3->shape[0], C = w3->shape[1], n3 = OC * C * 9, n4 = OC * C * 16;
    size_t raw_bytes = sdt_tensor_nbytes(w3);
    void *raw = malloc(raw_bytes);
    float *f3 = malloc((size_t)n3 * sizeof(float)), *f4 = calloc((size_t)n4, sizeof(float));
    void *dev = NULL;
    bool host_ok = raw && f3 && f4, ok = host_ok;
    if (ok) ok = be->download(be, raw, w3->data, raw_bytes) == 0;
    if (ok) {
        sdt_load_f32(raw, w3->dtype, f3, n3);
        for (int64_t oc = 0; oc < OC * C; oc++)
            for (int kh = 0; kh < 3; kh++)
                for (int kw = 0; kw < 3; kw++) f4[oc * 16 + (kh + 1) * 4 + (kw + 1)] = f3[oc * 9 + kh * 3 + kw];
        dev = be->alloc(be, (size_t)n4 * sizeof(float));
        ok = dev && be->upload(be, dev, f4, (size_t)n4 * sizeof(float)) == 0;
    }
    free(raw);
    free(f3);
    free(f4);
    if (!ok) {
        if (dev) be->free(be, dev);
        sdt_fail(error, host_ok ? be->error.code : SDT_ERR_OUT_OF_MEMORY,
                 "vae: cannot build the downsample kernel on the %s backend (%s)", be->name,
                 host_ok ? be->error.message : "out of host memory");
        return false;
    }
    int64_t shape[4] = {OC, C, 4, 4};
    *w4 = sdt_tensor_make(dev, SDT_F32, be->device, 4, shape);
    return true;
}

bool vae_load(vae_model *m, const vae_config *cfg, const sdt_weights *w, sdt_backend *be, sdt_error *error)
{
    if (!vae_config_check(cfg, error)) return false;
    memset(m, 0, sizeof(*m));
    m->cfg = *cfg;
    m->be = be;
    load_ctx l = {w, error};
    if (!walk_all(cfg, m, vae_key_prefix(w), load_one, &l)) return false;
    for (int i = 0; i < cfg->levels - 1; i++)
        if (!build_padded_down_kernel(be, &m->down_w4[i], &m->down_w3[i], error)) {
            vae_free(m);
            return false;
        }
    return true;
}

void vae_free(vae_model *m)
{
    for (int i = 0; i < VAE_MAX_LEVELS; i++)
        if (m->down_w4[i].data) {
            m->be->free(m->be, m->down_w4[i].data);
            m->down_w4[i].data = NULL;
        }
    m->be = NULL;
}

/* ---------------------------------------------------------------- forward machinery */

typedef struct vae_pass {
    sdt_backend *be;
    sdt_arena *ar;
    sdt_dtype dt;
    const vae_config *cfg;
    int64_t batch;
    bool sizing;       /* shape pass: only records the largest activation */
    int64_t max_elems; /* result of the shape pass */
    sdt_tensor buf[2]; /* ping-pong activation buffers */
    int cur;           /* buf[cur] holds x */
    sdt_tensor x;      /* the current activation [B, C, H, W] */
    sdt_error *error;
} vae_pass;

static bool op_failed(vae_pass *p)
{
    sdt_fail(p->error, p->be->error.code, "vae: the %s backend failed: %s", p->be->name, p->be->error.message);
    return false;
}

/* Runs an op unless this is a shape or measuring pass. */
#define OP(p, call)                                                                                                    \
    do {                                                                                                               \
        if (!(p)->sizing && !(p)->ar->measuring && (call) != 0) return op_failed(p);                                   \
    } while (0)

static sdt_tensor view4(void *data, sdt_dtype dt, sdt_device dev, int64_t B, int64_t C, int64_t H, int64_t W)
{
    int64_t s[4] = {B, C, H, W};
    return sdt_tensor_make(data, dt, dev, 4, s);
}

/* The next activation [B, C, H, W], in the buffer x is not in. */
static sdt_tensor next_out(vae_pass *p, int64_t C, int64_t H, int64_t W)
{
    int64_t n = p->batch * C * H * W;
    if (n > p->max_elems) p->max_elems = n;
    return view4(p->sizing ? NULL : p->buf[p->cur ^ 1].data, p->dt, p->be->device, p->batch, C, H, W);
}

static void advance(vae_pass *p, const sdt_tensor *out)
{
    p->cur ^= 1;
    p->x = *out;
}

/* Block-local scratch (given back by the block's rewind). */
static sdt_tensor scratch(vae_pass *p, sdt_dtype dt, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    if (p->sizing) {
        int64_t s[4] = {d0, d1, d2, d3};
        return sdt_tensor_make(NULL, dt, p->be->device, ndim, s);
    }
    return mu_alloc(p->ar, dt, ndim, d0, d1, d2, d3);
}

/* Same memory as t, another shape with no more elements (t is dead). */
static sdt_tensor reuse(const sdt_tensor *t, int64_t C, int64_t H, int64_t W)
{
    return view4(t->data, t->dtype, t->device, t->shape[0], C, H, W);
}

/* out = silu(groupnorm(x)) in one op. */
static bool norm_silu(vae_pass *p, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *g, const sdt_tensor *b)
{
    sdt_tensor mean = scratch(p, SDT_F32, 2, p->batch, p->cfg->groups, 0, 0);
    sdt_tensor rstd = scratch(p, SDT_F32, 2, p->batch, p->cfg->groups, 0, 0);
    OP(p, p->be->groupnorm_forward(p->be, out, &mean, &rstd, x, g, b, p->cfg->groups, p->cfg->eps, SDT_ACT_SILU));
    return true;
}

static bool resblock(vae_pass *p, const vae_resblock *r)
{
    sdt_backend *be = p->be;
    const sdt_tensor x = p->x;
    int64_t H = x.shape[2], W = x.shape[3];
    size_t mark = p->sizing ? 0 : sdt_arena_mark(p->ar);
    sdt_tensor t = scratch(p, p->dt, 4, p->batch, r->cin, H, W);
    if (!norm_silu(p, &t, &x, &r->n1_w, &r->n1_b)) return false;
    sdt_tensor h = scratch(p, p->dt, 4, p->batch, r->cout, H, W);
    OP(p, be->conv2d_forward(be, &h, &t, &r->c1_w, &r->c1_b, 1, 1));
    /* t is dead; reuse it when it is large enough. */
    sdt_tensor u = r->cout <= r->cin ? reuse(&t, r->cout, H, W) : scratch(p, p->dt, 4, p->batch, r->cout, H, W);
    if (!norm_silu(p, &u, &h, &r->n2_w, &r->n2_b)) return false;
    sdt_tensor out = next_out(p, r->cout, H, W);
    OP(p, be->conv2d_forward(be, &out, &u, &r->c2_w, &r->c2_b, 1, 1));
    if (r->cin != r->cout) {
        OP(p, be->conv2d_forward(be, &h, &x, &r->sc_w, &r->sc_b, 1, 0));
        OP(p, be->add_forward(be, &out, &out, &h));
    } else {
        OP(p, be->add_forward(be, &out, &out, &x));
    }
    if (!p->sizing) sdt_arena_rewind(p->ar, mark);
    advance(p, &out);
    return true;
}

/* Single-head self-attention over the H*W positions (LDM's AttnBlock). */
static bool attn_block(vae_pass *p, const vae_attn *a)
{
    sdt_backend *be = p->be;
    const sdt_tensor x = p->x;
    int64_t B = p->batch, C = x.shape[1], H = x.shape[2], W = x.shape[3], L = H * W;
    size_t mark = p->sizing ? 0 : sdt_arena_mark(p->ar);
    sdt_tensor mean = scratch(p, SDT_F32, 2, B, p->cfg->groups, 0, 0);
    sdt_tensor rstd = scratch(p, SDT_F32, 2, B, p->cfg->groups, 0, 0);
    sdt_tensor hn = scratch(p, p->dt, 4, B, C, H, W);
    OP(p, be->groupnorm_forward(be, &hn, &mean, &rstd, &x, &a->n_w, &a->n_b, p->cfg->groups, p->cfg->eps,
                                SDT_ACT_IDENTITY));
    sdt_tensor hn3 = mu_reshape3(&hn, B, C, L);
    sdt_tensor seq = scratch(p, p->dt, 3, B, L, C, 0);
    OP(p, be->transpose_forward(be, &seq, &hn3));
    sdt_tensor q = scratch(p, p->dt, 3, B, L, C, 0), k = scratch(p, p->dt, 3, B, L, C, 0);
    sdt_tensor v = scratch(p, p->dt, 3, B, L, C, 0);
    OP(p, be->linear_forward(be, &q, &seq, &a->q_w, &a->q_b));
    OP(p, be->linear_forward(be, &k, &seq, &a->k_w, &a->k_b));
    OP(p, be->linear_forward(be, &v, &seq, &a->v_w, &a->v_b));
    /* No saved probabilities: forward only, and [B, HW, HW] would be large. */
    OP(p, be->attention_forward(be, &seq, NULL, &q, &k, &v, 1, false));
    OP(p, be->linear_forward(be, &q, &seq, &a->o_w, &a->o_b));
    sdt_tensor out = next_out(p, C, H, W);
    sdt_tensor out3 = mu_reshape3(&out, B, C, L);
    OP(p, be->transpose_forward(be, &out3, &q));
    OP(p, be->add_forward(be, &out, &out, &x));
    if (!p->sizing) sdt_arena_rewind(p->ar, mark);
    advance(p, &out);
    return true;
}

static bool mid_block(vae_pass *p, const vae_mid *m)
{
    return resblock(p, &m->b1) && attn_block(p, &m->attn) && resblock(p, &m->b2);
}

static bool conv(vae_pass *p, const sdt_tensor *w, const sdt_tensor *b, int stride, int pad)
{
    int64_t k = w->shape[2], H = p->x.shape[2], W = p->x.shape[3];
    int64_t OH = (H + 2 * pad - k) / stride + 1, OW = (W + 2 * pad - k) / stride + 1;
    sdt_tensor out = next_out(p, w->shape[0], OH, OW);
    OP(p, p->be->conv2d_forward(p->be, &out, &p->x, w, b, stride, pad));
    advance(p, &out);
    return true;
}

static bool upsample(vae_pass *p, const sdt_tensor *w, const sdt_tensor *b)
{
    const sdt_tensor x = p->x;
    size_t mark = p->sizing ? 0 : sdt_arena_mark(p->ar);
    sdt_tensor up = scratch(p, p->dt, 4, p->batch, x.shape[1], 2 * x.shape[2], 2 * x.shape[3]);
    OP(p, p->be->upsample_nearest2x_forward(p->be, &up, &x));
    sdt_tensor out = next_out(p, w->shape[0], up.shape[2], up.shape[3]);
    OP(p, p->be->conv2d_forward(p->be, &out, &up, w, b, 1, 1));
    if (!p->sizing) sdt_arena_rewind(p->ar, mark);
    advance(p, &out);
    return true;
}

/* x = conv_out(silu(norm_out(x))), written to dst when given (the caller's output). */
static bool head(vae_pass *p, const sdt_tensor *nw, const sdt_tensor *nb, const sdt_tensor *cw, const sdt_tensor *cb,
                 sdt_tensor *dst)
{
    const sdt_tensor x = p->x;
    size_t mark = p->sizing ? 0 : sdt_arena_mark(p->ar);
    sdt_tensor t = scratch(p, p->dt, 4, p->batch, x.shape[1], x.shape[2], x.shape[3]);
    if (!norm_silu(p, &t, &x, nw, nb)) return false;
    /* in the model's dtype, then into dst: a conv with mixed operands runs on f32 copies (on the GPU, scratch
     * the size of its 128-channel input at full resolution) */
    sdt_tensor out = dst && dst->dtype == p->dt ? *dst : next_out(p, cw->shape[0], x.shape[2], x.shape[3]);
    OP(p, p->be->conv2d_forward(p->be, &out, &t, cw, cb, 1, 1));
    if (dst && dst->dtype != p->dt) OP(p, p->be->convert(p->be, dst, &out));
    if (!p->sizing) sdt_arena_rewind(p->ar, mark);
    if (!dst) advance(p, &out);
    return true;
}

static bool encoder_body(vae_pass *p, const vae_model *m, const sdt_tensor *image)
{
    const vae_config *c = &m->cfg;
    p->x = *image;
    p->cur = 1; /* the image is in neither buffer: the first output goes to buf[0] */
    if (image->dtype != p->dt) {
        /* the first conv in the model's dtype (mixed operands would run it on f32 copies: GPU scratch the
         * size of its 128-channel output at full resolution) */
        sdt_tensor x = next_out(p, image->shape[1], image->shape[2], image->shape[3]);
        OP(p, p->be->convert(p->be, &x, image));
        advance(p, &x);
    }
    if (!conv(p, &m->enc_in_w, &m->enc_in_b, 1, 1)) return false;
    for (int i = 0; i < c->levels; i++) {
        for (int j = 0; j < c->res_blocks; j++)
            if (!resblock(p, &m->enc_block[i][j])) return false;
        /* LDM pads (0, 1, 0, 1) then convolves 3x3 stride 2; the 4x4 kernel with pad 1 is the same sum. */
        if (i != c->levels - 1 && !conv(p, &m->down_w4[i], &m->down_b[i], 2, 1)) return false;
    }
    return mid_block(p, &m->enc_mid) && head(p, &m->enc_norm_w, &m->enc_norm_b, &m->enc_out_w, &m->enc_out_b, NULL) &&
           (!c->has_quant_conv || conv(p, &m->quant_w, &m->quant_b, 1, 0));
}

/* z += shift (SD3's and Flux's latent shift), through a tensor of the value: the backends have no
 * scalar add, and latents are small. */
static bool add_shift(vae_pass *p, sdt_tensor *z, float shift)
{
    if (shift == 0.0f) return true;
    size_t mark = sdt_arena_mark(p->ar);
    sdt_tensor s = scratch(p, z->dtype, 1, sdt_tensor_numel(z), 0, 0, 0);
    if (!p->sizing && !p->ar->measuring && s.data) {
        int64_t n = sdt_tensor_numel(z);
        float *f = malloc((size_t)n * sizeof(float));
        void *raw = malloc(sdt_tensor_nbytes(&s));
        bool ok = f && raw;
        if (ok) {
            for (int64_t i = 0; i < n; i++) f[i] = shift;
            sdt_store_f32(f, raw, s.dtype, n);
            ok = p->be->upload(p->be, s.data, raw, sdt_tensor_nbytes(&s)) == 0 && p->be->axpy(p->be, z, 1.0f, &s) == 0;
        }
        free(f);
        free(raw);
        if (!ok) {
            sdt_arena_rewind(p->ar, mark);
            return raw && f ? op_failed(p) : sdt_fail(p->error, SDT_ERR_OUT_OF_MEMORY, "vae: out of host memory");
        }
    }
    sdt_arena_rewind(p->ar, mark);
    return true;
}

static bool decoder_body(vae_pass *p, const vae_model *m, const sdt_tensor *latents, sdt_tensor *image)
{
    const vae_config *c = &m->cfg;
    sdt_backend *be = p->be;
    /* Unscale into buf[0], then continue the ping-pong from there. */
    p->cur = 1;
    sdt_tensor z = next_out(p, latents->shape[1], latents->shape[2], latents->shape[3]);
    OP(p, be->convert(be, &z, latents));
    OP(p, be->scale(be, &z, 1.0f / c->scaling));
    if (!add_shift(p, &z, c->shift)) return false;
    advance(p, &z);
    if ((c->has_quant_conv && !conv(p, &m->post_quant_w, &m->post_quant_b, 1, 0)) ||
        !conv(p, &m->dec_in_w, &m->dec_in_b, 1, 1) || !mid_block(p, &m->dec_mid))
        return false;
    for (int i = c->levels - 1; i >= 0; i--) {
        for (int j = 0; j <= c->res_blocks; j++)
            if (!resblock(p, &m->dec_block[i][j])) return false;
        if (i != 0 && !upsample(p, &m->up_w[i], &m->up_b[i])) return false;
    }
    return head(p, &m->dec_norm_w, &m->dec_norm_b, &m->dec_out_w, &m->dec_out_b, image);
}

typedef bool (*pass_body)(vae_pass *p, const vae_model *m, const void *in, sdt_tensor *out);

static bool enc_body_adapter(vae_pass *p, const vae_model *m, const void *in, sdt_tensor *out)
{
    (void)out;
    return encoder_body(p, m, in);
}

static bool dec_body_adapter(vae_pass *p, const vae_model *m, const void *in, sdt_tensor *out)
{
    return decoder_body(p, m, in, out);
}

/* Shape pass to size the two buffers, then the real (or measuring) pass. The
 * buffers stay allocated on return (the caller reads p->x, then rewinds). */
static bool run_pass(vae_pass *p, const vae_model *m, pass_body body, const void *in, sdt_tensor *out)
{
    p->sizing = true;
    p->max_elems = 0;
    if (!body(p, m, in, out)) return false;
    p->sizing = false;
    p->buf[0] = mu_alloc(p->ar, p->dt, 1, p->max_elems, 0, 0, 0);
    p->buf[1] = mu_alloc(p->ar, p->dt, 1, p->max_elems, 0, 0, 0);
    if (!body(p, m, in, out)) return false;
    if (!sdt_arena_fits(p->ar))
        return sdt_fail(p->error, p->ar->error.code, "vae, for this image size: %s", p->ar->error.message);
    return true;
}

static bool is_float(const sdt_tensor *t)
{
    return t->dtype != SDT_I32;
}

static bool same4(const sdt_tensor *t, int64_t B, int64_t C, int64_t H, int64_t W)
{
    return t->ndim == 4 && t->shape[0] == B && t->shape[1] == C && t->shape[2] == H && t->shape[3] == W;
}

bool vae_encode(const vae_model *m, sdt_backend *be, sdt_arena *arena, const sdt_tensor *image, sdt_dtype act_dtype,
                sdt_tensor *mean, sdt_tensor *logvar, sdt_error *error)
{
    const vae_config *c = &m->cfg;
    int f = vae_factor(c);
    if (!image || image->ndim != 4 || !is_float(image) || image->shape[1] != c->in_channels ||
        image->shape[2] % f != 0 || image->shape[3] % f != 0 || image->shape[2] < f || image->shape[3] < f) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "vae: the image must be a float tensor [batch, %d, H, W] with H and W multiples of %d", c->in_channels,
                 f);
        return false;
    }
    int64_t B = image->shape[0], h = image->shape[2] / f, w = image->shape[3] / f, Z = c->z_channels;
    if (!same4(mean, B, Z, h, w) || !same4(logvar, B, Z, h, w) || !is_float(mean) || !is_float(logvar) ||
        act_dtype == SDT_I32) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "vae: mean and logvar must be float tensors [%lld, %lld, %lld, %lld] for this image", (long long)B,
                 (long long)Z, (long long)h, (long long)w);
        return false;
    }
    vae_pass p = {.be = be, .ar = arena, .dt = act_dtype, .cfg = c, .batch = B, .error = error};
    size_t mark = sdt_arena_mark(arena);
    bool ok = run_pass(&p, m, enc_body_adapter, image, NULL);
    /* moments [B, 2Z, h, w]: the first Z channels are the mean, the next Z the log-variance. */
    sdt_tensor mom = mu_reshape2(&p.x, B * 2 * Z, h * w);
    sdt_tensor mean2 = mu_reshape2(mean, B * Z, h * w), logvar2 = mu_reshape2(logvar, B * Z, h * w);
    for (int64_t b = 0; ok && b < B && !arena->measuring; b++) {
        sdt_tensor src_m = mu_rows(&mom, b * 2 * Z, Z), src_v = mu_rows(&mom, b * 2 * Z + Z, Z);
        sdt_tensor dst_m = mu_rows(&mean2, b * Z, Z), dst_v = mu_rows(&logvar2, b * Z, Z);
        if (be->convert(be, &dst_m, &src_m) != 0 || be->convert(be, &dst_v, &src_v) != 0) ok = op_failed(&p);
    }
    sdt_arena_rewind(arena, mark);
    return ok;
}

bool vae_decode(const vae_model *m, sdt_backend *be, sdt_arena *arena, const sdt_tensor *latents, sdt_dtype act_dtype,
                sdt_tensor *image, sdt_error *error)
{
    const vae_config *c = &m->cfg;
    int f = vae_factor(c);
    if (!latents || latents->ndim != 4 || !is_float(latents) || latents->shape[1] != c->z_channels ||
        act_dtype == SDT_I32) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "vae: latents must be a float tensor [batch, %d, h, w]", c->z_channels);
        return false;
    }
    int64_t B = latents->shape[0], H = latents->shape[2] * f, W = latents->shape[3] * f;
    if (!image || !is_float(image) || !same4(image, B, c->in_channels, H, W)) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "vae: the decoded image must be a float tensor [%lld, %d, %lld, %lld]",
                 (long long)B, c->in_channels, (long long)H, (long long)W);
        return false;
    }
    vae_pass p = {.be = be, .ar = arena, .dt = act_dtype, .cfg = c, .batch = B, .error = error};
    size_t mark = sdt_arena_mark(arena);
    bool ok = run_pass(&p, m, dec_body_adapter, latents, image);
    sdt_arena_rewind(arena, mark);
    return ok;
}

/* ---------------------------------------------------------------- latents */

/* The failure of sampling latents: out of host memory, or the backend's error passed on. */
static bool sample_fail(sdt_backend *be, bool host_ok, sdt_error *error)
{
    return sdt_fail(error, host_ok ? be->error.code : SDT_ERR_OUT_OF_MEMORY,
                    "vae: sampling latents failed on the %s backend (%s)", be->name,
                    host_ok ? be->error.message : "out of host memory");
}

/* Downloads a tensor and widens it to f32 (host). */
static float *host_f32(sdt_backend *be, const sdt_tensor *t, sdt_error *error)
{
    size_t bytes = sdt_tensor_nbytes(t);
    int64_t n = sdt_tensor_numel(t);
    void *raw = malloc(bytes ? bytes : 1);
    float *f = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (raw && f && be->download(be, raw, t->data, bytes) == 0) {
        sdt_load_f32(raw, t->dtype, f, n);
        free(raw);
        return f;
    }
    sample_fail(be, raw && f, error);
    free(raw);
    free(f);
    return NULL;
}

static bool upload_f32(sdt_backend *be, sdt_tensor *t, const float *f, sdt_error *error)
{
    size_t bytes = sdt_tensor_nbytes(t);
    void *raw = malloc(bytes ? bytes : 1);
    bool ok = raw != NULL;
    if (ok) {
        sdt_store_f32(f, raw, t->dtype, sdt_tensor_numel(t));
        ok = be->upload(be, t->data, raw, bytes) == 0;
    }
    if (!ok) sample_fail(be, raw != NULL, error);
    free(raw);
    return ok;
}

bool vae_latents_sample(sdt_backend *be, sdt_tensor *latents, const sdt_tensor *mean, const sdt_tensor *logvar,
                        const sdt_tensor *noise, float scaling, sdt_error *error)
{
    return vae_latents_sample_shifted(be, latents, mean, logvar, noise, scaling, 0.0f, error);
}

bool vae_latents_sample_shifted(sdt_backend *be, sdt_tensor *latents, const sdt_tensor *mean, const sdt_tensor *logvar,
                                const sdt_tensor *noise, float scaling, float shift, sdt_error *error)
{
    if (!sdt_tensor_same_shape(latents, mean) || !sdt_tensor_same_shape(mean, logvar) ||
        !sdt_tensor_same_shape(mean, noise) || !is_float(latents) || !is_float(mean) || !is_float(logvar) ||
        !is_float(noise)) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "vae: latents, mean, logvar and noise must be float tensors of one shape");
        return false;
    }
    int64_t n = sdt_tensor_numel(mean);
    float *fm = host_f32(be, mean, error), *fv = fm ? host_f32(be, logvar, error) : NULL;
    float *fn = fv ? host_f32(be, noise, error) : NULL;
    bool ok = fm && fv && fn;
    if (ok) {
        for (int64_t i = 0; i < n; i++) {
            /* DiagonalGaussianDistribution clamps the log-variance to [-30, 20]. */
            float lv = fminf(fmaxf(fv[i], -30.0f), 20.0f);
            fm[i] = scaling * (fm[i] + expf(0.5f * lv) * fn[i] - shift);
        }
        ok = upload_f32(be, latents, fm, error);
    }
    free(fm);
    free(fv);
    free(fn);
    return ok;
}

bool vae_latents_mean(sdt_backend *be, sdt_tensor *latents, const sdt_tensor *mean, float scaling, sdt_error *error)
{
    if (!sdt_tensor_same_shape(latents, mean) || !is_float(latents) || !is_float(mean)) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "vae: latents and mean must be float tensors of one shape");
        return false;
    }
    MU_TRY(be, error, MODULE, be->convert(be, latents, mean));
    MU_TRY(be, error, MODULE, be->scale(be, latents, scaling));
    return true;
}

bool vae_latents_mean_shifted(sdt_backend *be, sdt_tensor *latents, const sdt_tensor *mean, float scaling, float shift,
                              sdt_error *error)
{
    if (shift == 0.0f) return vae_latents_mean(be, latents, mean, scaling, error);
    if (!sdt_tensor_same_shape(latents, mean) || !is_float(latents) || !is_float(mean)) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "vae: latents and mean must be float tensors of one shape");
        return false;
    }
    /* On the host, as vae_latents_sample: the backends have no scalar add. */
    int64_t n = sdt_tensor_numel(mean);
    float *fm = host_f32(be, mean, error);
    if (!fm) return false;
    for (int64_t i = 0; i < n; i++) fm[i] = scaling * (fm[i] - shift);
    bool ok = upload_f32(be, latents, fm, error);
    free(fm);
    return ok;
}
