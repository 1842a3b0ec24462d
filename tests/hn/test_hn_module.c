/* test_hn_module - one hypernetwork module (K or V MLP) on the CPU backend against a
 * float64 reference of A1111's Sequential, for every activation, with and without
 * layer norm and dropout (training masks redrawn from the documented key):
 * forward values; d(input) and every weight gradient against central finite
 * differences of the reference; backward accumulates; eval mode has no dropout;
 * the same run key gives the same masks, another key other masks. 16-bit inputs (the
 * autocast-style path: 16-bit GEMM operands and activations, f32 weights and weight
 * gradients) against the f32 path on the same rounded inputs, within 16-bit tolerances. */
#include <string.h>

#include "act_ref.h"
#include "fd_check.h"
#include "hn/hn_module.h"
#include "kernel_test.h"

#define WIDTH 4
#define ROWS 6 /* [2, 3, WIDTH] inputs */

typedef struct ref_model {
    const sdt_hn_config *c;
    sdt_activation act;
    sdt_hn_layer_plan plan[SDT_HN_MAX_ENTRIES];
    int layers;
    int64_t w_off[SDT_HN_MAX_ENTRIES], b_off[SDT_HN_MAX_ENTRIES], g_off[SDT_HN_MAX_ENTRIES],
        beta_off[SDT_HN_MAX_ENTRIES];
    int64_t n_params;                       /* of this module */
    const float *masks[SDT_HN_MAX_ENTRIES]; /* [ROWS, out] or NULL */
    double strength;
    const double *d_out; /* [ROWS, WIDTH] */
} ref_model;

/* Packed vector: the module's parameters, then the input. *near_kink (optional) is set
 * when a pre-activation lies within 1e-3 of a kink, where finite differences would
 * straddle a jump in the derivative. */
static void ref_forward(const ref_model *m, const double *v, double *out, bool *near_kink)
{
    const double *params = v, *x = v + m->n_params;
    double h[ROWS * 64], next[ROWS * 64];
    memcpy(h, x, sizeof(double) * ROWS * WIDTH);
    for (int i = 0; i < m->layers; i++) {
        const sdt_hn_layer_plan *l = &m->plan[i];
        int in = l->in_size, o = l->out_size;
        for (int r = 0; r < ROWS; r++)
            for (int j = 0; j < o; j++) {
                double s = params[m->b_off[i] + j];
                for (int k = 0; k < in; k++) s += h[r * in + k] * params[m->w_off[i] + j * in + k];
                if (l->activation_position >= 0 && near_kink && act_ref_near_kink((float)s)) *near_kink = true;
                next[r * o + j] = l->activation_position >= 0 ? act_ref_value(m->act, s) : s;
            }
        if (l->norm_position >= 0)
            for (int r = 0; r < ROWS; r++) {
                double mean = 0, var = 0;
                for (int j = 0; j < o; j++) mean += next[r * o + j];
                mean /= o;
                for (int j = 0; j < o; j++) var += (next[r * o + j] - mean) * (next[r * o + j] - mean);
                var /= o;
                double rstd = 1.0 / sqrt(var + SDT_HN_LAYERNORM_EPS);
                for (int j = 0; j < o; j++) {
                    double normed = (next[r * o + j] - mean) * rstd;
                    next[r * o + j] = normed * params[m->g_off[i] + j] + params[m->beta_off[i] + j];
                }
            }
        if (m->masks[i])
            for (int e = 0; e < ROWS * o; e++) next[e] *= m->masks[i][e];
        memcpy(h, next, sizeof(double) * ROWS * o);
    }
    for (int e = 0; e < ROWS * WIDTH; e++) out[e] = x[e] + m->strength * h[e];
}

static double ref_loss(const double *v, void *ctx)
{
    const ref_model *m = ctx;
    double out[ROWS * WIDTH];
    ref_forward(m, v, out, NULL);
    return sdt_fd_dot(out, m->d_out, ROWS * WIDTH);
}

/* The dropout mask after layer i of this run, redrawn from the documented key. */
static float *draw_mask(sdt_backend *be, const sdt_hn_run *run, int layer, double p, int64_t n)
{
    float *ones = kt_alloc((size_t)n * sizeof(float)), *mask = kt_alloc((size_t)n * sizeof(float));
    float *out = kt_alloc((size_t)n * sizeof(float));
    for (int64_t e = 0; e < n; e++) ones[e] = 1.0f;
    sdt_tensor t1 = kt_f32(ones, 1, n, 0, 0, 0), tm = kt_f32(mask, 1, n, 0, 0, 0), to = kt_f32(out, 1, n, 0, 0, 0);
    CHECK(be->dropout_forward(be, &to, &tm, &t1, (float)p, sdt_hn_dropout_seed(run, layer)) == 0, "mask: %s",
          be->error.message);
    free(ones), free(out);
    return mask;
}

static sdt_hn_config make_config(const char *activation, bool layer_norm, bool dropout, bool activate_output)
{
    sdt_hn_config c = sdt_hn_config_default();
    snprintf(c.name, sizeof(c.name), "module-test");
    c.width_count = 1;
    c.widths[0] = WIDTH;
    c.entry_count = 4;
    double ls[4] = {1, 2, 1.5, 1}, ds[4] = {0, 0.3, 0.25, 0.2}; /* 4 -> 8 -> 6 -> 4, dropout after every layer */
    memcpy(c.layer_structure, ls, sizeof(ls));
    memcpy(c.dropout_structure, ds, sizeof(ds));
    snprintf(c.activation, sizeof(c.activation), "%s", activation);
    c.layer_norm = layer_norm;
    c.use_dropout = dropout;
    c.activate_output = activate_output;
    return c;
}

/* The module's parameter offsets in parameter order (K's come first, then V's). */
static void locate_params(sdt_hn *hn, sdt_unet_kv kind, ref_model *m, int64_t *first)
{
    int64_t offset = 0, module_start = -1;
    int layer = 0;
    for (int i = 0; i < sdt_hn_param_count(hn); i++) {
        const sdt_hn_param *p = sdt_hn_param_at(hn, i);
        int64_t n = sdt_tensor_numel(&p->value);
        if (p->kind == kind) {
            if (module_start < 0) module_start = offset;
            int64_t rel = offset - module_start;
            if (!p->is_norm && !p->is_bias)
                m->w_off[layer] = rel;
            else if (!p->is_norm)
                m->b_off[layer] = rel, layer += m->plan[layer].norm_position < 0;
            else if (!p->is_bias)
                m->g_off[layer] = rel;
            else
                m->beta_off[layer++] = rel;
        }
        offset += n;
    }
    m->n_params = sdt_hn_module_param_count(m->c, WIDTH);
    *first = module_start;
}

static void check_variant(sdt_backend *be, sdt_test_rng *r, const char *activation, bool layer_norm, bool dropout,
                          bool activate_output, sdt_unet_kv kind)
{
    sdt_error err;
    sdt_error_clear(&err);
    char what[512];
    snprintf(what, sizeof(what), "%s%s%s%s %s", activation, layer_norm ? " +norm" : "", dropout ? " +dropout" : "",
             activate_output ? " +activate_output" : "", kind == SDT_UNET_K ? "K" : "V");
    sdt_hn_config c = make_config(activation, layer_norm, dropout, activate_output);
    sdt_hn *hn = sdt_hn_alloc(&c, be, &err);
    CHECK(hn != NULL, "%s: alloc failed: %s", what, err.message);
    if (!hn) return;
    CHECK(sdt_hn_enable_grads(hn, &err), "%s: grads: %s", what, err.message);
    ref_model m = {.c = &c, .strength = 0.75};
    sdt_hn_activation_lookup(activation, &m.act, NULL);
    m.layers = sdt_hn_config_plan(&c, WIDTH, m.plan);
    int64_t first;
    locate_params(hn, kind, &m, &first);
    int64_t total = sdt_hn_param_numel(hn), nv = m.n_params + ROWS * WIDTH;

    sdt_hn_run run = {.training = dropout, .dropout_seed = sdt_test_next(r)};
    for (int i = 0; i < m.layers; i++)
        m.masks[i] = m.plan[i].dropout_position >= 0 && dropout
                         ? draw_mask(be, &run, i, m.plan[i].dropout_p, (int64_t)ROWS * m.plan[i].out_size)
                         : NULL;
    /* random weights (the Normal init's 0.01 would hide every nonlinearity), redrawn off the kinks */
    float *host = kt_alloc((size_t)total * sizeof(float));
    double *v = kt_alloc((size_t)nv * sizeof(double));
    float *x = kt_alloc(ROWS * WIDTH * sizeof(float));
    bool kinked = true;
    for (int attempt = 0; kinked && attempt < 100; attempt++) {
        sdt_test_fill_normal(r, host, total, 0.6);
        sdt_test_fill_normal(r, x, ROWS * WIDTH, 1.0);
        for (int64_t i = 0; i < m.n_params; i++) v[i] = host[first + i];
        for (int e = 0; e < ROWS * WIDTH; e++) v[m.n_params + e] = x[e];
        double probe[ROWS * WIDTH];
        kinked = false;
        ref_forward(&m, v, probe, &kinked);
    }
    CHECK(!kinked, "%s: could not draw inputs away from the kinks", what);
    CHECK(sdt_hn_upload(hn, host, &err), "%s: upload: %s", what, err.message);

    int64_t shape[3] = {2, 3, WIDTH};
    float out[ROWS * WIDTH], dy[ROWS * WIDTH];
    sdt_tensor tx = sdt_tensor_make(x, SDT_F32, SDT_DEVICE_CPU, 3, shape), tout = tx, tdy = tx;
    tout.data = out, tdy.data = dy;
    void *work = kt_alloc(sdt_hn_module_workspace_bytes(&c, WIDTH, ROWS));
    double ref_out[ROWS * WIDTH], d_out[ROWS * WIDTH];
    ref_forward(&m, v, ref_out, NULL);
    CHECK(sdt_hn_module_forward(hn, WIDTH, kind, &run, (float)m.strength, &tx, &tout, work, &err), "%s: forward: %s",
          what, err.message);
    double fwd = sdt_rel_err_fd(out, ref_out, ROWS * WIDTH);
    CHECK(fwd < 1e-5, "%s: forward vs float64 reference rel err %.3g", what, fwd);

    /* backward: d_in from zeros and on top of random values (accumulation), weight grads */
    sdt_test_fill_normal(r, dy, ROWS * WIDTH, 1.0);
    for (int e = 0; e < ROWS * WIDTH; e++) d_out[e] = dy[e];
    m.d_out = d_out;
    kt_grad dx = kt_grad_make(r, ROWS * WIDTH);
    sdt_tensor tdx = tx, tacc = tx;
    tdx.data = dx.fresh, tacc.data = dx.acc;
    CHECK(sdt_hn_module_backward(hn, WIDTH, kind, &run, (float)m.strength, &tx, &tdy, &tdx, true, work, &err),
          "%s: backward: %s", what, err.message);
    float *grads = kt_alloc((size_t)total * sizeof(float));
    /* the gradients of the whole hypernetwork, read through the parameter list */
    int64_t offset = 0;
    for (int i = 0; i < sdt_hn_param_count(hn); i++) {
        const sdt_hn_param *p = sdt_hn_param_at(hn, i);
        memcpy(grads + offset, p->grad.data, sdt_tensor_nbytes(&p->grad));
        offset += sdt_tensor_numel(&p->grad);
    }
    CHECK(sdt_hn_module_backward(hn, WIDTH, kind, &run, (float)m.strength, &tx, &tdy, &tacc, false, work, &err),
          "%s: second backward: %s", what, err.message);
    /* d_in takes two adds (the MLP's part t = fresh - d_out, then the residual d_out), so allow
     * two roundings of sums as large as |base| + |t| + |d_out| */
    double worst = 0;
    for (int e = 0; e < ROWS * WIDTH; e++) {
        double want = (double)dx.base[e] + dx.fresh[e];
        double scale = fabs(dx.base[e]) + fabs(dx.fresh[e]) + 2 * fabs(dy[e]) + 1e-30;
        if (fabs(dx.acc[e] - want) / scale > worst) worst = fabs(dx.acc[e] - want) / scale;
    }
    CHECK(worst < 5e-7, "%s: backward must accumulate into d_in (off by %.3g relative)", what, worst);
    int64_t unchanged = 0;
    offset = 0;
    for (int i = 0; i < sdt_hn_param_count(hn); i++) {
        const sdt_hn_param *p = sdt_hn_param_at(hn, i);
        unchanged += memcmp(grads + offset, p->grad.data, sdt_tensor_nbytes(&p->grad)) == 0;
        offset += sdt_tensor_numel(&p->grad);
    }
    CHECK(unchanged == sdt_hn_param_count(hn),
          "%s: with_weight_grads false must leave the weight gradients "
          "alone",
          what);

    double *fd = kt_alloc((size_t)nv * sizeof(double));
    sdt_fd_gradient(ref_loss, &m, v, nv, SDT_FD_STEP, fd);
    double din = sdt_rel_err_fd(dx.fresh, fd + m.n_params, ROWS * WIDTH);
    CHECK(din < 1e-4, "%s: d_input vs finite differences rel err %.3g", what, din);
    double dw = sdt_rel_err_fd(grads + first, fd, m.n_params);
    CHECK(dw < 1e-4, "%s: weight gradients vs finite differences rel err %.3g", what, dw);
    int64_t other_nonzero = 0;
    for (int64_t i = 0; i < total; i++)
        if ((i < first || i >= first + m.n_params) && grads[i] != 0.0f) other_nonzero++;
    CHECK(other_nonzero == 0, "%s: %lld gradients of the other module moved", what, (long long)other_nonzero);

    /* eval: no dropout (every mask one), same weights */
    if (dropout) {
        sdt_hn_run eval = {.training = false, .dropout_seed = run.dropout_seed};
        ref_model plain = m;
        for (int i = 0; i < m.layers; i++) plain.masks[i] = NULL;
        ref_forward(&plain, v, ref_out, NULL);
        CHECK(sdt_hn_module_forward(hn, WIDTH, kind, &eval, (float)m.strength, &tx, &tout, work, &err),
              "%s: eval forward: %s", what, err.message);
        double e = sdt_rel_err_fd(out, ref_out, ROWS * WIDTH);
        CHECK(e < 1e-5, "%s: eval forward (no dropout) rel err %.3g", what, e);
        /* another key draws other masks */
        sdt_hn_run other = {.training = true, .dropout_seed = run.dropout_seed + 1};
        float *again = draw_mask(be, &other, 0, m.plan[0].dropout_p, (int64_t)ROWS * m.plan[0].out_size);
        CHECK(memcmp(again, m.masks[0], sizeof(float) * ROWS * (size_t)m.plan[0].out_size) != 0,
              "%s: two run keys gave the same mask", what);
        free(again);
    }

    for (int i = 0; i < m.layers; i++) free((void *)m.masks[i]);
    free(host), free(v), free(x), free(work), free(grads), free(fd);
    kt_grad_free(&dx);
    sdt_hn_free(hn);
}

/* The module's weight gradients, read back as floats. */
static void read_grads(sdt_hn *hn, float *out)
{
    int64_t offset = 0;
    for (int i = 0; i < sdt_hn_param_count(hn); i++) {
        const sdt_hn_param *p = sdt_hn_param_at(hn, i);
        memcpy(out + offset, p->grad.data, sdt_tensor_nbytes(&p->grad));
        offset += sdt_tensor_numel(&p->grad);
    }
}

/* A 16-bit input runs the 16-bit path: the same module on the same (rounded) input and
 * output gradient as an f32 call agrees within the dtype's rounding, and the f32 master
 * weights are left as they were. */
static void check_16bit(sdt_backend *be, sdt_test_rng *r, sdt_dtype dt, const char *activation, bool layer_norm,
                        bool dropout)
{
    sdt_error err;
    sdt_error_clear(&err);
    char what[256];
    snprintf(what, sizeof(what), "16-bit %s %s%s%s", sdt_dtype_name(dt), activation, layer_norm ? " +norm" : "",
             dropout ? " +dropout" : "");
    sdt_hn_config c = make_config(activation, layer_norm, dropout, true);
    sdt_hn *hn = sdt_hn_alloc(&c, be, &err);
    CHECK(hn && sdt_hn_enable_grads(hn, &err), "%s: alloc: %s", what, err.message);
    if (!hn) return;
    int64_t total = sdt_hn_param_numel(hn), n = ROWS * WIDTH;
    float *host = kt_alloc((size_t)total * sizeof(float)), *again = kt_alloc((size_t)total * sizeof(float));
    sdt_test_fill_normal(r, host, total, 0.6);
    CHECK(sdt_hn_upload(hn, host, &err), "%s: upload: %s", what, err.message);
    float x[ROWS * WIDTH], dy[ROWS * WIDTH], out32[ROWS * WIDTH], out16f[ROWS * WIDTH];
    float dx32[ROWS * WIDTH] = {0}, dx16[ROWS * WIDTH] = {0};
    uint16_t x16[ROWS * WIDTH], dy16[ROWS * WIDTH], out16[ROWS * WIDTH];
    sdt_test_fill_normal(r, x, n, 1.0);
    sdt_test_fill_normal(r, dy, n, 1.0);
    /* both paths see the same values: the 16-bit ones */
    sdt_store_f32(x, x16, dt, n), sdt_load_f32(x16, dt, x, n);
    sdt_store_f32(dy, dy16, dt, n), sdt_load_f32(dy16, dt, dy, n);
    int64_t shape[2] = {ROWS, WIDTH};
    sdt_tensor tx = sdt_tensor_make(x, SDT_F32, SDT_DEVICE_CPU, 2, shape), tdy = tx, tout = tx, tdx = tx;
    tdy.data = dy, tout.data = out32, tdx.data = dx32;
    sdt_tensor hx = sdt_tensor_make(x16, dt, SDT_DEVICE_CPU, 2, shape), hdy = hx, hout = hx, hdx = tdx;
    hdy.data = dy16, hout.data = out16, hdx.data = dx16;
    void *work = kt_alloc(sdt_hn_module_workspace_bytes(&c, WIDTH, ROWS));
    sdt_hn_run run = {.training = dropout, .dropout_seed = sdt_test_next(r)};
    float *g32 = kt_alloc((size_t)total * sizeof(float)), *g16 = kt_alloc((size_t)total * sizeof(float));
    bool ok = sdt_hn_module_forward(hn, WIDTH, SDT_UNET_K, &run, 0.8f, &tx, &tout, work, &err) &&
              sdt_hn_module_backward(hn, WIDTH, SDT_UNET_K, &run, 0.8f, &tx, &tdy, &tdx, true, work, &err);
    read_grads(hn, g32);
    ok = ok && sdt_hn_zero_grads(hn, &err) &&
         sdt_hn_module_forward(hn, WIDTH, SDT_UNET_K, &run, 0.8f, &hx, &hout, work, &err) &&
         sdt_hn_module_backward(hn, WIDTH, SDT_UNET_K, &run, 0.8f, &hx, &hdy, &hdx, true, work, &err);
    CHECK(ok, "%s: run: %s", what, err.message);
    read_grads(hn, g16);
    sdt_load_f32(out16, dt, out16f, n);
    /* a few roundings to the dtype (2^-8 for bf16, 2^-11 for f16) through three layers */
    double tol = dt == SDT_BF16 ? 4e-2 : 6e-3;
    double e_out = sdt_rel_err_ff(out16f, out32, n), e_dx = sdt_rel_err_ff(dx16, dx32, n),
           e_g = sdt_rel_err_ff(g16, g32, total);
    printf("%s: rel err out %.2g d_in %.2g grads %.2g (tol %.0e)\n", what, e_out, e_dx, e_g, tol);
    CHECK(e_out < tol && e_dx < tol && e_g < tol, "%s: 16-bit vs f32 path: out %.3g, d_in %.3g, grads %.3g > %.3g",
          what, e_out, e_dx, e_g, tol);
    CHECK(sdt_hn_download(hn, again, &err) && memcmp(again, host, (size_t)total * sizeof(float)) == 0,
          "%s: the f32 master weights changed", what);
    free(host), free(again), free(work), free(g32), free(g16);
    sdt_hn_free(hn);
}

/* A backend whose linear runs out of memory, as a GPU's would: the module passes the backend's
 * error value on, so the caller sees OUT_OF_MEMORY with the backend's sentence (it once said
 * DEVICE whatever the backend had found). */
#define OOM_SENTENCE "linear_forward: could not allocate 4096 bytes of workspace"
static int linear_out_of_memory(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w,
                                const sdt_tensor *b)
{
    (void)out, (void)x, (void)w, (void)b;
    sdt_fail(&be->error, SDT_ERR_OUT_OF_MEMORY, OOM_SENTENCE);
    return -1;
}

static void check_backend_error_passed_on(sdt_backend *be)
{
    sdt_error err;
    sdt_error_clear(&err);
    sdt_hn_config c = make_config("relu", false, false, true);
    sdt_hn *hn = sdt_hn_alloc(&c, be, &err);
    CHECK(hn != NULL, "alloc: %s", err.message);
    if (!hn) return;
    float x[ROWS * WIDTH] = {0}, out[ROWS * WIDTH];
    int64_t shape[2] = {ROWS, WIDTH};
    sdt_tensor tx = sdt_tensor_make(x, SDT_F32, SDT_DEVICE_CPU, 2, shape), tout = tx;
    tout.data = out;
    void *work = kt_alloc(sdt_hn_module_workspace_bytes(&c, WIDTH, ROWS));
    sdt_hn_run run = {.training = false};
    int (*linear)(sdt_backend *, sdt_tensor *, const sdt_tensor *, const sdt_tensor *, const sdt_tensor *) =
        be->linear_forward;
    be->linear_forward = linear_out_of_memory;
    bool ok = sdt_hn_module_forward(hn, WIDTH, SDT_UNET_K, &run, 1.0f, &tx, &tout, work, &err);
    be->linear_forward = linear;
    CHECK(!ok && err.code == SDT_ERR_OUT_OF_MEMORY && strstr(err.message, OOM_SENTENCE),
          "a backend out of memory must reach the caller as OUT_OF_MEMORY with its sentence, got %s: %s",
          sdt_error_code_name(err.code), err.message);
    free(work);
    sdt_hn_free(hn);
}

int main(void)
{
    sdt_test_rng r = sdt_test_rng_from_env("hn_module");
    sdt_backend *be = kt_backend();
    int count = 0;
    for (int a = 0; sdt_hn_activation_name_at(a); a++, count++)
        for (int variant = 0; variant < 4; variant++) {
            bool layer_norm = variant & 1, dropout = variant & 2;
            check_variant(be, &r, sdt_hn_activation_name_at(a), layer_norm, dropout, variant == 1 || variant == 2,
                          (a + variant) % 2 ? SDT_UNET_V : SDT_UNET_K);
        }
    for (int variant = 0; variant < 4; variant++) {
        check_16bit(be, &r, SDT_BF16, "tanh", variant & 1, variant & 2);
        check_16bit(be, &r, SDT_F16, "gelu", variant & 1, variant & 2);
    }
    check_backend_error_passed_on(be);
    be->destroy(be);
    char name[64];
    snprintf(name, sizeof(name), "hn_module (%d activations x norm x dropout)", count);
    return sdt_test_finish(name);
}
