/* hn_module.c - hypernetwork parameters, init, and one module's forward/backward on
 * the kernel table; see hn_module.h. */
#include "hn/hn_module.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/rng.h"

#define HN_NO_PARAM (-1)
#define HN_WORK_ALIGN 256 /* bytes; every workspace tensor starts aligned for the GPU */

typedef struct hn_layer {
    sdt_hn_layer_plan plan;
    int weight, bias; /* Linear parameters (indices) */
    int gamma, beta;  /* LayerNorm parameters, HN_NO_PARAM without layer norm */
    size_t weight16;  /* byte offset of the weight's 16-bit copy in a weights16 block */
} hn_layer;

typedef struct hn_mlp {
    int width;
    sdt_unet_kv kind;
    int layer_count;
    hn_layer layers[SDT_HN_MAX_ENTRIES];
} hn_mlp;

struct sdt_hn {
    sdt_hn_config config;
    sdt_hn_info info;
    sdt_backend *be;
    sdt_activation act;
    int mlp_count;
    hn_mlp mlps[2 * SDT_HN_MAX_WIDTHS];
    int param_count;
    sdt_hn_param *params;
    int64_t numel;
    size_t weights16_bytes; /* sdt_hn_weights16_bytes */
    void *values;           /* one device block for every value ... */
    void *grads;            /* ... and one for every gradient */
};

/* ---- layout of parameters ---- */

static int hn_add_param(sdt_hn *hn, int width, sdt_unet_kv kind, int position, bool is_norm, bool is_bias, int64_t rows,
                        int64_t cols)
{
    sdt_hn_param *p = &hn->params[hn->param_count];
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "%d.%d.linear.%d.%s", width, (int)kind, position, is_bias ? "bias" : "weight");
    p->width = width, p->kind = kind, p->position = position, p->is_norm = is_norm, p->is_bias = is_bias;
    int64_t shape[2] = {rows, cols};
    p->value = sdt_tensor_make(NULL, SDT_F32, hn->be->device, cols ? 2 : 1, shape);
    p->grad = p->value;
    hn->numel += sdt_tensor_numel(&p->value);
    return hn->param_count++;
}

/* Builds the module table and parameter list (no memory behind them yet). */
static bool hn_layout(sdt_hn *hn, sdt_error *error)
{
    const sdt_hn_config *c = &hn->config;
    int per_module = 4 * (c->entry_count - 1);
    hn->params = calloc((size_t)(2 * c->width_count * per_module), sizeof(sdt_hn_param));
    if (!hn->params)
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY,
                        "hypernetwork \"%s\": out of host memory for its "
                        "parameter list",
                        c->name);
    for (int w = 0; w < c->width_count; w++)
        for (int k = 0; k < 2; k++) {
            hn_mlp *m = &hn->mlps[hn->mlp_count++];
            m->width = c->widths[w];
            m->kind = (sdt_unet_kv)k;
            sdt_hn_layer_plan plan[SDT_HN_MAX_ENTRIES];
            m->layer_count = sdt_hn_config_plan(c, m->width, plan);
            for (int i = 0; i < m->layer_count; i++) {
                hn_layer *l = &m->layers[i];
                l->plan = plan[i];
                l->weight = hn_add_param(hn, m->width, m->kind, plan[i].linear_position, false, false, plan[i].out_size,
                                         plan[i].in_size);
                l->bias =
                    hn_add_param(hn, m->width, m->kind, plan[i].linear_position, false, true, plan[i].out_size, 0);
                l->gamma = l->beta = HN_NO_PARAM;
                l->weight16 = hn->weights16_bytes;
                hn->weights16_bytes += ((size_t)plan[i].out_size * (size_t)plan[i].in_size * 2 + HN_WORK_ALIGN - 1) /
                                       HN_WORK_ALIGN * HN_WORK_ALIGN;
                if (plan[i].norm_position >= 0) {
                    l->gamma =
                        hn_add_param(hn, m->width, m->kind, plan[i].norm_position, true, false, plan[i].out_size, 0);
                    l->beta =
                        hn_add_param(hn, m->width, m->kind, plan[i].norm_position, true, true, plan[i].out_size, 0);
                }
            }
        }
    return true;
}

/* Points every parameter's value (or grad) view into one device block. */
static void hn_bind(sdt_hn *hn, void *block, bool grads)
{
    int64_t offset = 0;
    for (int i = 0; i < hn->param_count; i++) {
        sdt_tensor *t = grads ? &hn->params[i].grad : &hn->params[i].value;
        t->data = (char *)block + offset * (int64_t)sizeof(float);
        offset += sdt_tensor_numel(t);
    }
}

static bool hn_backend_fail(const sdt_hn *hn, sdt_error *error, const char *what)
{
    return sdt_fail(error, hn->be->error.code,
                    "hypernetwork \"%s\": %s failed on the %s backend: "
                    "%s",
                    hn->config.name, what, hn->be->name, hn->be->error.message);
}

sdt_hn *sdt_hn_alloc(const sdt_hn_config *c, sdt_backend *be, sdt_error *error)
{
    if (!be) {
        sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                 "no backend given for the hypernetwork; pass the CPU or CUDA "
                 "backend");
        return NULL;
    }
    if (!sdt_hn_config_validate(c, false, error)) return NULL;
    sdt_hn *hn = calloc(1, sizeof(*hn));
    if (!hn) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "hypernetwork \"%s\": out of host memory", c->name);
        return NULL;
    }
    hn->config = *c;
    hn->be = be;
    sdt_hn_activation_lookup(c->activation, &hn->act, NULL);
    if (!hn_layout(hn, error)) {
        sdt_hn_free(hn);
        return NULL;
    }
    size_t bytes = (size_t)hn->numel * sizeof(float);
    hn->values = be->alloc(be, bytes);
    if (!hn->values) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY,
                 "hypernetwork \"%s\": %.1f MiB for %lld parameters could not be "
                 "allocated on the %s "
                 "backend; choose fewer widths or a smaller layer structure",
                 c->name, (double)bytes / 1048576.0, (long long)hn->numel, be->name);
        sdt_hn_free(hn);
        return NULL;
    }
    hn_bind(hn, hn->values, false);
    for (int i = 0; i < hn->param_count; i++)
        if (be->zero(be, &hn->params[i].value) != 0) {
            hn_backend_fail(hn, error, "zeroing the parameters");
            sdt_hn_free(hn);
            return NULL;
        }
    return hn;
}

/* ---- init (A1111's HypernetworkModule.__init__) ---- */

static void hn_init_uniform(uint64_t seed, uint64_t base, float *out, int64_t n, double bound)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = (float)((2.0 * sdt_rng_uniform(seed, SDT_RNG_HN_INIT, (base + (uint64_t)i) * 2) - 1.0) * bound);
}

static void hn_init_normal(uint64_t seed, uint64_t base, float *out, int64_t n, double std)
{
    sdt_rng_normal_fill(seed, SDT_RNG_HN_INIT, base, out, n);
    for (int64_t i = 0; i < n; i++) out[i] = (float)(out[i] * std);
}

/* One weight per torch.nn.init: fan_in = columns, fan_out = rows; Kaiming's gain is
 * sqrt(2) for both of A1111's nonlinearity choices (relu, and leaky_relu with a = 0). */
static void hn_init_weight(sdt_hn_init init, uint64_t seed, uint64_t base, float *w, int64_t rows, int64_t cols)
{
    double fan_in = (double)cols, fan_out = (double)rows, n = (double)(rows * cols);
    switch (init) {
        case SDT_HN_INIT_XAVIER_UNIFORM:
            hn_init_uniform(seed, base, w, (int64_t)n, sqrt(6.0 / (fan_in + fan_out)));
            break;
        case SDT_HN_INIT_XAVIER_NORMAL:
            hn_init_normal(seed, base, w, (int64_t)n, sqrt(2.0 / (fan_in + fan_out)));
            break;
        case SDT_HN_INIT_KAIMING_UNIFORM:
            hn_init_uniform(seed, base, w, (int64_t)n, sqrt(2.0) * sqrt(3.0 / fan_in));
            break;
        case SDT_HN_INIT_KAIMING_NORMAL:
            hn_init_normal(seed, base, w, (int64_t)n, sqrt(2.0) / sqrt(fan_in));
            break;
        default:
            hn_init_normal(seed, base, w, (int64_t)n, 0.01);
            break;
    }
}

sdt_hn *sdt_hn_create(const sdt_hn_config *c, sdt_backend *be, uint64_t init_seed, sdt_error *error)
{
    if (!sdt_hn_config_validate(c, true, error)) return NULL;
    sdt_hn *hn = sdt_hn_alloc(c, be, error);
    if (!hn) return NULL;
    float *host = calloc((size_t)hn->numel, sizeof(float));
    if (!host) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY,
                 "hypernetwork \"%s\": out of host memory for its initial "
                 "weights",
                 c->name);
        sdt_hn_free(hn);
        return NULL;
    }
    int64_t offset = 0;
    for (int i = 0; i < hn->param_count; i++) {
        const sdt_hn_param *p = &hn->params[i];
        int64_t n = sdt_tensor_numel(&p->value);
        if (p->is_norm && !p->is_bias)
            hn_init_normal(init_seed, (uint64_t)offset, host + offset, n, 0.01);
        else if (!p->is_bias)
            hn_init_weight(c->init, init_seed, (uint64_t)offset, host + offset, p->value.shape[0], p->value.shape[1]);
        offset += n; /* biases stay 0 (normal_(std=0) / zeros_ in A1111) */
    }
    bool ok = sdt_hn_upload(hn, host, error);
    free(host);
    if (!ok) {
        sdt_hn_free(hn);
        return NULL;
    }
    return hn;
}

void sdt_hn_free(sdt_hn *hn)
{
    if (!hn) return;
    if (hn->values) hn->be->free(hn->be, hn->values);
    if (hn->grads) hn->be->free(hn->be, hn->grads);
    free(hn->params);
    free(hn);
}

/* ---- accessors ---- */

const sdt_hn_config *sdt_hn_get_config(const sdt_hn *hn)
{
    return &hn->config;
}
sdt_backend *sdt_hn_backend(const sdt_hn *hn)
{
    return hn->be;
}
sdt_hn_info *sdt_hn_get_info(sdt_hn *hn)
{
    return &hn->info;
}
const sdt_hn_info *sdt_hn_get_info_const(const sdt_hn *hn)
{
    return &hn->info;
}
int sdt_hn_param_count(const sdt_hn *hn)
{
    return hn->param_count;
}
int64_t sdt_hn_param_numel(const sdt_hn *hn)
{
    return hn->numel;
}

sdt_hn_param *sdt_hn_param_at(sdt_hn *hn, int index)
{
    return index >= 0 && index < hn->param_count ? &hn->params[index] : NULL;
}

const sdt_hn_param *sdt_hn_param_at_const(const sdt_hn *hn, int index)
{
    return index >= 0 && index < hn->param_count ? &hn->params[index] : NULL;
}

sdt_hn_param *sdt_hn_param_find(sdt_hn *hn, const char *name)
{
    for (int i = 0; name && i < hn->param_count; i++)
        if (strcmp(hn->params[i].name, name) == 0) return &hn->params[i];
    return NULL;
}

bool sdt_hn_has_width(const sdt_hn *hn, int width)
{
    return sdt_hn_config_has_width(&hn->config, width);
}

/* ---- gradients and host copies ---- */

bool sdt_hn_enable_grads(sdt_hn *hn, sdt_error *error)
{
    if (hn->grads) return true;
    size_t bytes = (size_t)hn->numel * sizeof(float);
    hn->grads = hn->be->alloc(hn->be, bytes);
    if (!hn->grads)
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY,
                        "hypernetwork \"%s\": %.1f MiB for its gradients could not be "
                        "allocated on the %s backend",
                        hn->config.name, (double)bytes / 1048576.0, hn->be->name);
    hn_bind(hn, hn->grads, true);
    return sdt_hn_zero_grads(hn, error);
}

bool sdt_hn_zero_grads(sdt_hn *hn, sdt_error *error)
{
    if (!hn->grads)
        return sdt_fail(error, SDT_ERR_BAD_STATE,
                        "hypernetwork \"%s\": no gradients to zero; call "
                        "sdt_hn_enable_grads first",
                        hn->config.name);
    int64_t shape[1] = {hn->numel};
    sdt_tensor all = sdt_tensor_make(hn->grads, SDT_F32, hn->be->device, 1, shape);
    if (hn->be->zero(hn->be, &all) != 0) return hn_backend_fail(hn, error, "zeroing the gradients");
    return true;
}

bool sdt_hn_download(const sdt_hn *hn, float *host, sdt_error *error)
{
    if (hn->be->download(hn->be, host, hn->values, (size_t)hn->numel * sizeof(float)) != 0)
        return hn_backend_fail(hn, error, "reading the weights back");
    return true;
}

bool sdt_hn_upload(sdt_hn *hn, const float *host, sdt_error *error)
{
    if (hn->be->upload(hn->be, hn->values, host, (size_t)hn->numel * sizeof(float)) != 0)
        return hn_backend_fail(hn, error, "uploading the weights");
    return true;
}

/* ---- workspace ---- */

/* Where one layer's saved tensors sit in the workspace (byte offsets, SIZE_MAX: absent). */
typedef struct hn_layer_work {
    size_t z, act, norm, mean, rstd, mask, drop;
} hn_layer_work;

typedef struct hn_work_layout {
    hn_layer_work layers[SDT_HN_MAX_ENTRIES];
    size_t grad_a, grad_b;                /* two gradient buffers of rows x the widest layer */
    size_t weights16[SDT_HN_MAX_ENTRIES]; /* 16-bit copies of the Linear weights (16-bit calls) */
    size_t total;
} hn_work_layout;

static size_t hn_take(size_t *used, int64_t floats)
{
    size_t at = *used;
    *used += ((size_t)floats * sizeof(float) + HN_WORK_ALIGN - 1) / HN_WORK_ALIGN * HN_WORK_ALIGN;
    return at;
}

static hn_work_layout hn_work_plan(const sdt_hn_layer_plan *plan, int layers, int64_t rows)
{
    hn_work_layout w;
    size_t used = 0;
    int widest = 0;
    for (int i = 0; i < layers; i++) {
        hn_layer_work *l = &w.layers[i];
        int64_t n = rows * plan[i].out_size;
        l->z = hn_take(&used, n);
        l->act = plan[i].activation_position >= 0 ? hn_take(&used, n) : SIZE_MAX;
        l->norm = l->mean = l->rstd = SIZE_MAX;
        if (plan[i].norm_position >= 0) {
            l->norm = hn_take(&used, n);
            l->mean = hn_take(&used, rows);
            l->rstd = hn_take(&used, rows);
        }
        l->mask = l->drop = SIZE_MAX;
        if (plan[i].dropout_position >= 0) {
            l->mask = hn_take(&used, n);
            l->drop = hn_take(&used, n);
        }
        if (plan[i].out_size > widest) widest = plan[i].out_size;
        if (plan[i].in_size > widest) widest = plan[i].in_size;
    }
    w.grad_a = hn_take(&used, rows * widest);
    w.grad_b = hn_take(&used, rows * widest);
    /* two 16-bit values per float slot */
    for (int i = 0; i < layers; i++)
        w.weights16[i] = hn_take(&used, ((int64_t)plan[i].out_size * plan[i].in_size + 1) / 2);
    w.total = used;
    return w;
}

size_t sdt_hn_module_workspace_bytes(const sdt_hn_config *c, int width, int64_t rows)
{
    sdt_hn_layer_plan plan[SDT_HN_MAX_ENTRIES];
    int layers = sdt_hn_config_plan(c, width, plan);
    return hn_work_plan(plan, layers, rows).total;
}

/* ---- forward / backward ---- */

static const hn_mlp *hn_find_mlp(const sdt_hn *hn, int width, sdt_unet_kv kind)
{
    for (int i = 0; i < hn->mlp_count; i++)
        if (hn->mlps[i].width == width && hn->mlps[i].kind == kind) return &hn->mlps[i];
    return NULL;
}

static sdt_tensor hn_rows(const sdt_hn *hn, void *work, size_t offset, sdt_dtype dtype, int64_t rows, int64_t cols)
{
    int64_t shape[2] = {rows, cols};
    return sdt_tensor_make((char *)work + offset, dtype, hn->be->device, cols ? 2 : 1, shape);
}

/* The dtype of a call's GEMMs and activations: a 16-bit input's own (16-bit operands, f32
 * accumulation, f32 master weights, gradients and LayerNorm statistics, as A1111's
 * autocast), f32 for every other input (the fp32 path, unchanged). */
static sdt_dtype hn_compute_dtype(const sdt_tensor *in)
{
    return in->dtype == SDT_F16 || in->dtype == SDT_BF16 ? in->dtype : SDT_F32;
}

/* The saved tensors of one module call, as views into the workspace. */
typedef struct hn_pass {
    int64_t rows;
    sdt_tensor in; /* [rows, width] view of the caller's input */
    sdt_tensor z[SDT_HN_MAX_ENTRIES], act[SDT_HN_MAX_ENTRIES], norm[SDT_HN_MAX_ENTRIES];
    sdt_tensor mean[SDT_HN_MAX_ENTRIES], rstd[SDT_HN_MAX_ENTRIES], mask[SDT_HN_MAX_ENTRIES], drop[SDT_HN_MAX_ENTRIES];
    sdt_tensor out[SDT_HN_MAX_ENTRIES];    /* each layer's final stage (one of the above) */
    sdt_tensor weight[SDT_HN_MAX_ENTRIES]; /* each Linear's weight in the compute dtype */
    sdt_tensor grad_a, grad_b;
    sdt_dtype dtype; /* hn_compute_dtype of the input */
} hn_pass;

static bool hn_pass_setup(const sdt_hn *hn, const hn_mlp *m, const sdt_hn_run *run, const sdt_tensor *in, void *work,
                          hn_pass *p, sdt_error *error)
{
    if (in->ndim < 1 || in->shape[in->ndim - 1] != m->width)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "hypernetwork \"%s\": the input's last dimension is %lld, "
                        "not the module's width "
                        "%d",
                        hn->config.name, (long long)(in->ndim ? in->shape[in->ndim - 1] : 0), m->width);
    if (in->device != hn->be->device)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "hypernetwork \"%s\": the input lives on another device "
                        "than the %s backend's",
                        hn->config.name, hn->be->name);
    sdt_hn_layer_plan plan[SDT_HN_MAX_ENTRIES];
    for (int i = 0; i < m->layer_count; i++) plan[i] = m->layers[i].plan;
    p->rows = sdt_tensor_numel(in) / m->width;
    p->dtype = hn_compute_dtype(in);
    sdt_dtype dt = p->dtype;
    hn_work_layout w = hn_work_plan(plan, m->layer_count, p->rows);
    int64_t shape[2] = {p->rows, m->width};
    p->in = sdt_tensor_make(in->data, in->dtype, in->device, 2, shape);
    int widest = 0;
    for (int i = 0; i < m->layer_count; i++) {
        const hn_layer_work *l = &w.layers[i];
        int64_t o = plan[i].out_size;
        p->z[i] = hn_rows(hn, work, l->z, dt, p->rows, o);
        p->out[i] = p->z[i];
        if (l->act != SIZE_MAX) p->out[i] = p->act[i] = hn_rows(hn, work, l->act, dt, p->rows, o);
        if (l->norm != SIZE_MAX) {
            p->out[i] = p->norm[i] = hn_rows(hn, work, l->norm, dt, p->rows, o);
            p->mean[i] = hn_rows(hn, work, l->mean, SDT_F32, p->rows, 0);
            p->rstd[i] = hn_rows(hn, work, l->rstd, SDT_F32, p->rows, 0);
        }
        if (l->drop != SIZE_MAX) {
            p->mask[i] = hn_rows(hn, work, l->mask, SDT_F32, p->rows, o);
            p->out[i] = p->drop[i] = hn_rows(hn, work, l->drop, dt, p->rows, o);
        }
        p->weight[i] = hn->params[m->layers[i].weight].value;
        if (dt != SDT_F32 && run && run->weights16) { /* the caller's copies, made once per UNet pass */
            p->weight[i].data = (char *)run->weights16 + m->layers[i].weight16;
            p->weight[i].dtype = dt;
        } else if (dt != SDT_F32) {
            /* one 16-bit copy per call: the forward and the backward's recompute share it */
            p->weight[i].data = (char *)work + w.weights16[i];
            p->weight[i].dtype = dt;
            if (hn->be->convert(hn->be, &p->weight[i], &hn->params[m->layers[i].weight].value) != 0)
                return hn_backend_fail(hn, error, "copying a Linear weight to 16 bits");
        }
        if (plan[i].out_size > widest) widest = plan[i].out_size;
        if (plan[i].in_size > widest) widest = plan[i].in_size;
    }
    p->grad_a = hn_rows(hn, work, w.grad_a, dt, p->rows, widest);
    p->grad_b = hn_rows(hn, work, w.grad_b, dt, p->rows, widest);
    return true;
}

bool sdt_hn_has_dropout(const sdt_hn *hn)
{
    for (int i = 0; i < hn->mlp_count; i++)
        for (int k = 0; k < hn->mlps[i].layer_count; k++)
            if (hn->mlps[i].layers[k].plan.dropout_position >= 0 && hn->mlps[i].layers[k].plan.dropout_p > 0)
                return true;
    return false;
}

int sdt_hn_module_index(const sdt_hn *hn, int width, sdt_unet_kv kind)
{
    const hn_mlp *m = hn_find_mlp(hn, width, kind);
    return m ? (int)(m - hn->mlps) : -1;
}

size_t sdt_hn_weights16_bytes(const sdt_hn *hn)
{
    return hn->weights16_bytes;
}

bool sdt_hn_module_copy_weights16(const sdt_hn *hn, int width, sdt_unet_kv kind, sdt_dtype dtype, void *block,
                                  sdt_error *error)
{
    const hn_mlp *m = hn_find_mlp(hn, width, kind);
    if (!m || (dtype != SDT_F16 && dtype != SDT_BF16) || !block)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "hypernetwork \"%s\": no module of width %d to copy to 16 bits, "
                        "or not a 16-bit dtype",
                        hn->config.name, width);
    for (int i = 0; i < m->layer_count; i++) {
        const sdt_tensor *w = &hn->params[m->layers[i].weight].value;
        sdt_tensor w16 = *w;
        w16.data = (char *)block + m->layers[i].weight16;
        w16.dtype = dtype;
        if (hn->be->convert(hn->be, &w16, w) != 0)
            return hn_backend_fail(hn, error, "copying a Linear weight to 16 bits");
    }
    return true;
}

uint64_t sdt_hn_dropout_seed(const sdt_hn_run *run, int layer)
{
    return sdt_rng_derive(run->dropout_seed, (uint64_t)layer);
}

/* Runs f(in)'s first `layers` layers into the workspace; the last layer's output is p->out[L-1]. */
static bool hn_run_layers(const sdt_hn *hn, const hn_mlp *m, const sdt_hn_run *run, hn_pass *p, int layers,
                          sdt_error *error)
{
    sdt_backend *be = hn->be;
    const sdt_tensor *x = &p->in;
    for (int i = 0; i < layers; i++) {
        const hn_layer *l = &m->layers[i];
        if (be->linear_forward(be, &p->z[i], x, &p->weight[i], &hn->params[l->bias].value) != 0)
            return hn_backend_fail(hn, error, "a Linear layer's forward");
        const sdt_tensor *cur = &p->z[i];
        if (l->plan.activation_position >= 0) {
            if (be->activation_forward(be, &p->act[i], cur, hn->act) != 0)
                return hn_backend_fail(hn, error, "the activation's forward");
            cur = &p->act[i];
        }
        if (l->plan.norm_position >= 0) {
            if (be->layernorm_forward(be, &p->norm[i], &p->mean[i], &p->rstd[i], cur, &hn->params[l->gamma].value,
                                      &hn->params[l->beta].value, SDT_HN_LAYERNORM_EPS) != 0)
                return hn_backend_fail(hn, error, "the LayerNorm's forward");
            cur = &p->norm[i];
        }
        if (l->plan.dropout_position >= 0) {
            /* eval mode (A1111's previews and generation) passes values through: a mask of ones */
            float drop_p = run && run->training ? (float)l->plan.dropout_p : 0.0f;
            if (be->dropout_forward(be, &p->drop[i], &p->mask[i], cur, drop_p, run ? sdt_hn_dropout_seed(run, i) : 0) !=
                0)
                return hn_backend_fail(hn, error, "a Dropout's forward");
        }
        x = &p->out[i];
    }
    return true;
}

/* The module of width and kind, or NULL and a sentence naming the hypernetwork. */
static const hn_mlp *hn_mlp_of(const sdt_hn *hn, int width, sdt_unet_kv kind, sdt_error *error)
{
    const hn_mlp *m = hn_find_mlp(hn, width, kind);
    if (!m)
        sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "hypernetwork \"%s\" has no module of width %d", hn->config.name,
                 width);
    return m;
}

bool sdt_hn_module_forward(const sdt_hn *hn, int width, sdt_unet_kv kind, const sdt_hn_run *run, float strength,
                           const sdt_tensor *in, sdt_tensor *out, void *work, sdt_error *error)
{
    const hn_mlp *m = hn_mlp_of(hn, width, kind, error);
    if (!m) return false;
    if (sdt_tensor_numel(out) != sdt_tensor_numel(in))
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "hypernetwork \"%s\": output and input sizes "
                        "differ",
                        hn->config.name);
    hn_pass p;
    if (!hn_pass_setup(hn, m, run, in, work, &p, error) || !hn_run_layers(hn, m, run, &p, m->layer_count, error))
        return false;
    sdt_backend *be = hn->be;
    const sdt_tensor *f = &p.out[m->layer_count - 1];
    /* at strength 1 (training) one pass: in + f rounds as the copy and the axpy would */
    sdt_tensor out2 = *out;
    out2.ndim = 2, out2.shape[0] = p.rows, out2.shape[1] = width;
    bool ok = strength == 1.0f ? be->add_forward(be, &out2, &p.in, f) == 0
                               : be->convert(be, out, in) == 0 && be->axpy(be, out, strength, f) == 0;
    if (!ok) return hn_backend_fail(hn, error, "the residual sum");
    return true;
}

/* g_next = 0 (in the pass's compute dtype), then the stage's backward accumulates into
 * it; the buffers swap. */
static sdt_tensor hn_fresh(sdt_backend *be, const sdt_tensor *buffer, const sdt_tensor *like)
{
    sdt_tensor t = *like;
    t.data = buffer->data;
    t.dtype = buffer->dtype;
    if (be->zero(be, &t) != 0) t.data = NULL;
    return t;
}

bool sdt_hn_module_backward(sdt_hn *hn, int width, sdt_unet_kv kind, const sdt_hn_run *run, float strength,
                            const sdt_tensor *in, const sdt_tensor *d_out, sdt_tensor *d_in, bool with_weight_grads,
                            void *work, sdt_error *error)
{
    const hn_mlp *m = hn_mlp_of(hn, width, kind, error);
    if (!m) return false;
    if (sdt_tensor_numel(d_out) != sdt_tensor_numel(in) || (d_in && sdt_tensor_numel(d_in) != sdt_tensor_numel(in)))
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "hypernetwork \"%s\": gradient and input sizes "
                        "differ",
                        hn->config.name);
    /* The backward reads each layer's input and its stages' saved values, never f's output: a last
     * layer that is a bare Linear (A1111's default: no activation, norm or dropout after it) needs
     * no recompute. */
    const hn_layer *last = &m->layers[m->layer_count - 1];
    bool last_bare =
        last->plan.activation_position < 0 && last->plan.norm_position < 0 && last->plan.dropout_position < 0;
    hn_pass p;
    if (!hn_pass_setup(hn, m, run, in, work, &p, error) ||
        !hn_run_layers(hn, m, run, &p, last_bare ? m->layer_count - 1 : m->layer_count, error))
        return false;
    sdt_backend *be = hn->be;
    bool weights = with_weight_grads && hn->grads;
    sdt_tensor *buf_cur = &p.grad_a, *buf_next = &p.grad_b;
    /* g = strength * d_out, the gradient at f's output (at strength 1 a copy) */
    int64_t shape[2] = {p.rows, width};
    sdt_tensor d_out2 = sdt_tensor_make(d_out->data, d_out->dtype, d_out->device, 2, shape);
    sdt_tensor g = p.out[m->layer_count - 1];
    g.data = buf_cur->data;
    g.dtype = buf_cur->dtype;
    bool scaled = strength == 1.0f
                      ? be->convert(be, &g, &d_out2) == 0
                      : (g = hn_fresh(be, buf_cur, &g), g.data && be->axpy(be, &g, strength, &d_out2) == 0);
    if (!scaled) return hn_backend_fail(hn, error, "scaling the output gradient");
#define HN_STEP(call, what)                                                                                            \
    do {                                                                                                               \
        sdt_tensor *t_ = buf_cur;                                                                                      \
        buf_cur = buf_next, buf_next = t_;                                                                             \
        if (!next.data || (call) != 0) return hn_backend_fail(hn, error, what);                                        \
        g = next;                                                                                                      \
    } while (0)
    for (int i = m->layer_count - 1; i >= 0; i--) {
        const hn_layer *l = &m->layers[i];
        sdt_tensor *gw = weights ? &hn->params[l->weight].grad : NULL, *gb = weights ? &hn->params[l->bias].grad : NULL;
        const sdt_tensor *pre_norm = l->plan.activation_position >= 0 ? &p.act[i] : &p.z[i];
        if (l->plan.dropout_position >= 0) {
            sdt_tensor next = hn_fresh(be, buf_next, &p.z[i]);
            HN_STEP(be->dropout_backward(be, &next, &g, &p.mask[i]), "a Dropout's backward");
        }
        if (l->plan.norm_position >= 0) {
            sdt_tensor next = hn_fresh(be, buf_next, &p.z[i]);
            sdt_tensor *gg = weights ? &hn->params[l->gamma].grad : NULL;
            sdt_tensor *gbeta = weights ? &hn->params[l->beta].grad : NULL;
            HN_STEP(be->layernorm_backward(be, &next, gg, gbeta, &g, pre_norm, &hn->params[l->gamma].value, &p.mean[i],
                                           &p.rstd[i]),
                    "the LayerNorm's backward");
        }
        if (l->plan.activation_position >= 0) {
            sdt_tensor next = hn_fresh(be, buf_next, &p.z[i]);
            HN_STEP(be->activation_backward(be, &next, &g, &p.z[i], hn->act), "the activation's backward");
        }
        if (i > 0) {
            /* the weights' gradients, then the input's written rather than accumulated: no zeroing pass */
            sdt_tensor next = p.out[i - 1];
            next.data = buf_next->data;
            next.dtype = buf_next->dtype;
            if (weights && be->linear_backward(be, NULL, gw, gb, &g, &p.out[i - 1], &p.weight[i]) != 0)
                return hn_backend_fail(hn, error, "a Linear layer's backward");
            HN_STEP(be->linear_input_grad(be, &next, &g, &p.weight[i]), "a Linear layer's input gradient");
        } else {
            sdt_tensor d_in2;
            if (d_in) d_in2 = sdt_tensor_make(d_in->data, d_in->dtype, d_in->device, 2, shape);
            if (be->linear_backward(be, d_in ? &d_in2 : NULL, gw, gb, &g, &p.in, &p.weight[0]) != 0)
                return hn_backend_fail(hn, error, "the first Linear layer's backward");
            /* the residual path: d_in += d_out */
            if (d_in && be->axpy(be, &d_in2, 1.0f, &d_out2) != 0)
                return hn_backend_fail(hn, error, "the residual gradient");
        }
    }
#undef HN_STEP
    return true;
}
