/* test_clip_text.c - the CLIP text encoder against a float64 reference written here.
 *
 * Tiny config, every parameter random (norms and biases too): forward with
 * overrides, CLIP skip, backward to the override rows against central finite
 * differences of the reference, override equivalence, the OpenCLIP layout (fused
 * in_proj, GELU, penultimate default) from the same weights repacked, measuring
 * arena, and bad inputs. SDXL's two encoders from a tiny SDXL checkpoint: the
 * context of the penultimate layer without the final layernorm, bigG's pooled
 * output (ln_final at the first end-of-text token, text_projection stored [in,
 * out]) and the row gradient from d(context) and d(pooled) against finite
 * differences.
 */
#include <math.h>

#include "clip_text.h"
#include "model_test_util.h"
#include "safetensors.h"

/* ---------------------------------------------------------------- float64 reference */

typedef struct ref_layer {
    double *ln1_w, *ln1_b, *q_w, *q_b, *k_w, *k_b, *v_w, *v_b, *o_w, *o_b, *ln2_w, *ln2_b, *fc1_w, *fc1_b, *fc2_w,
        *fc2_b;
} ref_layer;

typedef struct ref_clip {
    int C, M, H, layers, vocab;
    sdt_activation act;
    double eps;
    double *tok, *pos, *lnf_w, *lnf_b;
    double *proj; /* P > 0: text_projection as OpenCLIP stores it, [C, P] */
    int P;
    ref_layer L[CLIP_MAX_LAYERS];
} ref_clip;

static void ref_from_model(ref_clip *r, const clip_text_model *m)
{
    const clip_config *c = &m->cfg;
    r->C = c->width;
    r->M = c->mlp_width;
    r->H = c->heads;
    r->layers = c->layers;
    r->vocab = c->vocab;
    r->act = c->act;
    r->eps = c->ln_eps;
    r->tok = mt_to_double(&m->tok_emb);
    r->pos = mt_to_double(&m->pos_emb);
    r->lnf_w = mt_to_double(&m->lnf_w);
    r->lnf_b = mt_to_double(&m->lnf_b);
    r->P = c->projection_dim;
    r->proj = NULL;
    if (r->P > 0) {
        double *p = mt_to_double(&m->proj);
        if (c->layout == CLIP_LAYOUT_HF) { /* [P, C] -> [C, P] */
            r->proj = mt_alloc((size_t)r->C * r->P * sizeof(double));
            for (int i = 0; i < r->P; i++)
                for (int k = 0; k < r->C; k++) r->proj[(size_t)k * r->P + i] = p[(size_t)i * r->C + k];
            free(p);
        } else {
            r->proj = p;
        }
    }
    for (int i = 0; i < c->layers; i++) {
        const clip_layer_weights *w = &m->layer[i];
        ref_layer *l = &r->L[i];
        l->ln1_w = mt_to_double(&w->ln1_w), l->ln1_b = mt_to_double(&w->ln1_b);
        l->q_w = mt_to_double(&w->q_w), l->q_b = mt_to_double(&w->q_b);
        l->k_w = mt_to_double(&w->k_w), l->k_b = mt_to_double(&w->k_b);
        l->v_w = mt_to_double(&w->v_w), l->v_b = mt_to_double(&w->v_b);
        l->o_w = mt_to_double(&w->o_w), l->o_b = mt_to_double(&w->o_b);
        l->ln2_w = mt_to_double(&w->ln2_w), l->ln2_b = mt_to_double(&w->ln2_b);
        l->fc1_w = mt_to_double(&w->fc1_w), l->fc1_b = mt_to_double(&w->fc1_b);
        l->fc2_w = mt_to_double(&w->fc2_w), l->fc2_b = mt_to_double(&w->fc2_b);
    }
}

static void ref_free(ref_clip *r)
{
    free(r->tok), free(r->pos), free(r->lnf_w), free(r->lnf_b), free(r->proj);
    for (int i = 0; i < r->layers; i++) {
        ref_layer *l = &r->L[i];
        double *all[16] = {l->ln1_w, l->ln1_b, l->q_w,   l->q_b,   l->k_w,   l->k_b,   l->v_w,   l->v_b,
                           l->o_w,   l->o_b,   l->ln2_w, l->ln2_b, l->fc1_w, l->fc1_b, l->fc2_w, l->fc2_b};
        for (int j = 0; j < 16; j++) free(all[j]);
    }
}

static void ref_layernorm(double *y, const double *x, const double *w, const double *b, int n, int C, double eps)
{
    for (int i = 0; i < n; i++) {
        const double *xi = x + (size_t)i * C;
        double mean = 0, var = 0;
        for (int c = 0; c < C; c++) mean += xi[c];
        mean /= C;
        for (int c = 0; c < C; c++) var += (xi[c] - mean) * (xi[c] - mean);
        var /= C;
        double rstd = 1.0 / sqrt(var + eps);
        for (int c = 0; c < C; c++) y[(size_t)i * C + c] = (xi[c] - mean) * rstd * w[c] + b[c];
    }
}

/* y[n, O] = x[n, I] w[O, I]^T + b */
static void ref_linear(double *y, const double *x, const double *w, const double *b, int n, int I, int O)
{
    for (int i = 0; i < n; i++)
        for (int o = 0; o < O; o++) {
            double s = b ? b[o] : 0;
            for (int k = 0; k < I; k++) s += x[(size_t)i * I + k] * w[(size_t)o * I + k];
            y[(size_t)i * O + o] = s;
        }
}

static double ref_act(double x, sdt_activation act)
{
    if (act == SDT_ACT_QUICK_GELU) return x / (1.0 + exp(-1.702 * x));
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

static void ref_causal_attention(double *out, const double *q, const double *k, const double *v, int B, int T, int C,
                                 int H)
{
    int D = C / H;
    double *p = mt_alloc((size_t)T * sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                const double *qi = q + ((size_t)b * T + i) * C + h * D;
                double mx = -1e300, sum = 0;
                for (int j = 0; j <= i; j++) {
                    const double *kj = k + ((size_t)b * T + j) * C + h * D;
                    double s = 0;
                    for (int d = 0; d < D; d++) s += qi[d] * kj[d];
                    p[j] = s / sqrt((double)D);
                    if (p[j] > mx) mx = p[j];
                }
                for (int j = 0; j <= i; j++) sum += (p[j] = exp(p[j] - mx));
                double *oi = out + ((size_t)b * T + i) * C + h * D;
                for (int d = 0; d < D; d++) {
                    double s = 0;
                    for (int j = 0; j <= i; j++) s += p[j] / sum * v[((size_t)b * T + j) * C + h * D + d];
                    oi[d] = s;
                }
            }
    free(p);
}

/* out [B, T, C] after layers_run layers (then the final layernorm unless final_norm is false); rows [R, C]
 * replace token rows at the overridden positions. pooled [B, P] (when given): OpenCLIP's pool, the final
 * layernorm of the last layer at the first largest token id, times the projection [C, P]. */
static void ref_forward_full(const ref_clip *r, const int32_t *tokens, int B, int T, const double *rows,
                             const clip_override *ov, int n_ov, int layers_run, bool final_norm, double *out,
                             double *pooled)
{
    int C = r->C, M = r->M, N = B * T;
    double *x = mt_alloc((size_t)N * C * sizeof(double)), *h = mt_alloc((size_t)N * C * sizeof(double));
    double *q = mt_alloc((size_t)N * C * sizeof(double)), *k = mt_alloc((size_t)N * C * sizeof(double));
    double *v = mt_alloc((size_t)N * C * sizeof(double)), *a = mt_alloc((size_t)N * C * sizeof(double));
    double *f = mt_alloc((size_t)N * M * sizeof(double));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const double *src = r->tok + (size_t)tokens[b * T + t] * C;
            for (int i = 0; i < n_ov; i++)
                if (ov[i].batch == b && ov[i].position == t) src = rows + (size_t)ov[i].row * C;
            for (int c = 0; c < C; c++) x[((size_t)b * T + t) * C + c] = src[c] + r->pos[(size_t)t * C + c];
        }
    int all = pooled ? r->layers : layers_run;
    for (int l = 0; l <= all; l++) {
        if (l == layers_run) {
            if (final_norm)
                ref_layernorm(out, x, r->lnf_w, r->lnf_b, N, C, r->eps);
            else
                memcpy(out, x, (size_t)N * C * sizeof(double));
        }
        if (l == all) break;
        const ref_layer *L = &r->L[l];
        ref_layernorm(h, x, L->ln1_w, L->ln1_b, N, C, r->eps);
        ref_linear(q, h, L->q_w, L->q_b, N, C, C);
        ref_linear(k, h, L->k_w, L->k_b, N, C, C);
        ref_linear(v, h, L->v_w, L->v_b, N, C, C);
        ref_causal_attention(a, q, k, v, B, T, C, r->H);
        ref_linear(h, a, L->o_w, L->o_b, N, C, C);
        for (size_t i = 0; i < (size_t)N * C; i++) x[i] += h[i];
        ref_layernorm(h, x, L->ln2_w, L->ln2_b, N, C, r->eps);
        ref_linear(f, h, L->fc1_w, L->fc1_b, N, C, M);
        for (size_t i = 0; i < (size_t)N * M; i++) f[i] = ref_act(f[i], r->act);
        ref_linear(h, f, L->fc2_w, L->fc2_b, N, M, C);
        for (size_t i = 0; i < (size_t)N * C; i++) x[i] += h[i];
    }
    for (int b = 0; pooled && b < B; b++) {
        int end = 0;
        for (int t = 1; t < T; t++)
            if (tokens[b * T + t] > tokens[b * T + end]) end = t;
        ref_layernorm(h, x + ((size_t)b * T + end) * C, r->lnf_w, r->lnf_b, 1, C, r->eps);
        for (int j = 0; j < r->P; j++) {
            double s = 0;
            for (int k = 0; k < C; k++) s += h[k] * r->proj[(size_t)k * r->P + j];
            pooled[(size_t)b * r->P + j] = s;
        }
    }
    free(x), free(h), free(q), free(k), free(v), free(a), free(f);
}

static void ref_forward(const ref_clip *r, const int32_t *tokens, int B, int T, const double *rows,
                        const clip_override *ov, int n_ov, int layers_run, double *out)
{
    ref_forward_full(r, tokens, B, T, rows, ov, n_ov, layers_run, true, out, NULL);
}

/* ---------------------------------------------------------------- running the C model */

/* Activation storage of run_model (the f16 check switches it). */
static sdt_dtype g_act_dtype = SDT_F32;

typedef struct run_result {
    float *out;    /* [B, T, C] */
    float *pooled; /* [B, P] when the encoder has a projection */
    float *drows;  /* [R, C] when dout or dpooled was given */
    size_t peak;
} run_result;

/* Forward, then backward from dout and/or dpooled [B, P] when either is given. */
static bool run_model_pooled(const clip_text_model *m, sdt_backend *be, const int32_t *tokens, int B, int T,
                             float *rows, int R, const clip_override *ov, int n_ov, int clip_skip, const float *dout,
                             const float *dpooled, run_result *res, sdt_error *error)
{
    int C = m->cfg.width;
    sdt_tensor tok = mt_tensor((void *)tokens, SDT_I32, 2, B, T, 0, 0);
    sdt_tensor rows_t = mt_tensor(rows, SDT_F32, 2, R, C, 0, 0);
    clip_text_inputs in = {.tokens = &tok,
                           .rows = R ? &rows_t : NULL,
                           .overrides = ov,
                           .n_overrides = n_ov,
                           .clip_skip = clip_skip,
                           .act_dtype = g_act_dtype};
    sdt_tensor dout_t = mt_tensor((void *)dout, SDT_F32, 3, B, T, C, 0);
    int P = m->cfg.projection_dim;
    sdt_tensor dpooled_t = mt_tensor((void *)dpooled, SDT_F32, 2, B, P, 0, 0);
    bool backward = dout || dpooled;
    const sdt_tensor *dout_p = dout ? &dout_t : NULL, *dpooled_p = dpooled ? &dpooled_t : NULL;
    float *drows = mt_alloc((size_t)(R ? R : 1) * C * sizeof(float));
    sdt_tensor drows_t = mt_tensor(drows, SDT_F32, 2, R, C, 0, 0);

    /* Measure first, then run in an arena of exactly that size. */
    sdt_arena meas;
    sdt_arena_init_measure(&meas, be);
    clip_text_acts acts;
    if (!clip_text_forward(m, be, &meas, &in, &acts, error)) return free(drows), false;
    if (backward && !clip_text_backward_pooled(m, be, &meas, &acts, dout_p, dpooled_p, &drows_t, error))
        return free(drows), false;
    sdt_arena arena;
    if (!sdt_arena_init(&arena, be, meas.peak)) {
        sdt_fail(error, SDT_ERR_DEVICE, "arena of %zu bytes: %s", meas.peak, be->error.message);
        free(drows);
        return false;
    }
    bool ok = clip_text_forward(m, be, &arena, &in, &acts, error);
    if (ok && backward) ok = clip_text_backward_pooled(m, be, &arena, &acts, dout_p, dpooled_p, &drows_t, error);
    if (ok) {
        res->out = mt_alloc((size_t)B * T * C * sizeof(float));
        sdt_load_f32(acts.out.data, acts.out.dtype, res->out, (int64_t)B * T * C);
        res->pooled = NULL;
        if (P > 0) {
            res->pooled = mt_alloc((size_t)B * P * sizeof(float));
            sdt_load_f32(acts.pooled.data, acts.pooled.dtype, res->pooled, (int64_t)B * P);
        }
        res->drows = drows;
        res->peak = meas.peak;
        if (!sdt_arena_fits(&arena)) {
            sdt_fail(error, SDT_ERR_INTERNAL, "measured arena overflowed");
            ok = false;
        }
    } else {
        free(drows);
    }
    sdt_arena_release(&arena);
    return ok;
}

static bool run_model(const clip_text_model *m, sdt_backend *be, const int32_t *tokens, int B, int T, float *rows,
                      int R, const clip_override *ov, int n_ov, int clip_skip, const float *dout, run_result *res,
                      sdt_error *error)
{
    return run_model_pooled(m, be, tokens, B, T, rows, R, ov, n_ov, clip_skip, dout, NULL, res, error);
}

static void random_tokens(sdt_test_rng *rng, int32_t *tokens, int n, int vocab)
{
    for (int i = 0; i < n; i++) tokens[i] = (int32_t)(sdt_test_next(rng) % (uint64_t)vocab);
}

/* ---------------------------------------------------------------- tests */

typedef struct fd_ctx {
    const ref_clip *r;
    const int32_t *tokens;
    int B, T, R, layers_run, n_ov;
    const clip_override *ov;
    const double *dout;    /* NULL: the context is not in the loss */
    bool skip_final_norm;  /* SDXL's context */
    const double *dpooled; /* [B, P]: the pooled output is in the loss too */
} fd_ctx;

/* L(rows) = sum(dout * f(rows)) + sum(dpooled * pooled(rows)) */
static double fd_loss(const fd_ctx *c, const double *rows)
{
    size_t n = (size_t)c->B * c->T * c->r->C, np = (size_t)c->B * (size_t)c->r->P;
    double *out = mt_alloc(n * sizeof(double)), *pooled = c->dpooled ? mt_alloc(np * sizeof(double)) : NULL, s = 0;
    ref_forward_full(c->r, c->tokens, c->B, c->T, rows, c->ov, c->n_ov, c->layers_run, !c->skip_final_norm, out,
                     pooled);
    for (size_t i = 0; c->dout && i < n; i++) s += c->dout[i] * out[i];
    for (size_t i = 0; pooled && i < np; i++) s += c->dpooled[i] * pooled[i];
    free(out), free(pooled);
    return s;
}

/* The row gradient against central differences of the reference: along a random direction and on a few
 * single coordinates. */
static void check_row_gradient(sdt_test_rng *rng, const fd_ctx *fc, const double *rows_d, const float *drows,
                               const char *what)
{
    int n = fc->R * fc->r->C;
    double *dir = mt_alloc((size_t)n * sizeof(double)), *pr = mt_alloc((size_t)n * sizeof(double));
    for (int i = 0; i < n; i++) dir[i] = sdt_test_normal(rng);
    const double h = 1e-4;
    for (int i = 0; i < n; i++) pr[i] = rows_d[i] + h * dir[i];
    double lp = fd_loss(fc, pr);
    for (int i = 0; i < n; i++) pr[i] = rows_d[i] - h * dir[i];
    double lm = fd_loss(fc, pr);
    double fd_dir = (lp - lm) / (2 * h), an_dir = 0, scale = 0, gmax = 0;
    for (int i = 0; i < n; i++) an_dir += drows[i] * dir[i], scale += fabs(drows[i] * dir[i]);
    for (int i = 0; i < n; i++) gmax = fmax(gmax, fabs(drows[i]));
    double de = fabs(an_dir - fd_dir) / fmax(scale, 1e-12);
    printf("%s: directional analytic %.6g fd %.6g (rel error %.3g)\n", what, an_dir, fd_dir, de);
    CHECK(de <= 1e-3, "%s: directional derivative differs from finite differences: %.6g vs %.6g", what, an_dir, fd_dir);
    CHECK(gmax > 0, "%s: the row gradient is all zero", what);
    for (int s = 0; s < 6; s++) {
        int i = (int)(sdt_test_next(rng) % (uint64_t)n);
        memcpy(pr, rows_d, (size_t)n * sizeof(double));
        pr[i] += h;
        double a = fd_loss(fc, pr);
        pr[i] -= 2 * h;
        double b = fd_loss(fc, pr);
        double fd = (a - b) / (2 * h);
        CHECK(fabs(drows[i] - fd) <= 1e-3 * gmax, "%s: d row element %d: analytic %.6g fd %.6g (max |grad| %.3g)", what,
              i, drows[i], fd, gmax);
    }
    free(dir), free(pr);
}

static void test_hf_model(sdt_test_rng *rng, sdt_backend *be, const sdt_weights *w)
{
    sdt_error error = {0};
    clip_config cfg;
    CHECK(clip_config_detect(w, &cfg, &error), "detect: %s", error.message);
    clip_config tiny = clip_config_tiny();
    CHECK(cfg.width == tiny.width && cfg.layers == tiny.layers && cfg.heads == tiny.heads && cfg.vocab == tiny.vocab &&
              cfg.positions == tiny.positions && cfg.act == SDT_ACT_QUICK_GELU && cfg.layout == CLIP_LAYOUT_HF &&
              cfg.default_skip == 1,
          "detected config differs from the tiny preset (width %d layers %d heads %d)", cfg.width, cfg.layers,
          cfg.heads);
    clip_text_model m;
    if (!clip_text_load(&m, &cfg, w, &error)) {
        CHECK(false, "load: %s", error.message);
        return;
    }
    ref_clip r;
    ref_from_model(&r, &m);
    const int B = 2, T = 77, C = cfg.width, R = 2;
    int32_t tokens[2 * 77];
    random_tokens(rng, tokens, B * T, cfg.vocab);
    float *rows = mt_alloc((size_t)R * C * sizeof(float));
    sdt_test_fill_normal(rng, rows, R * C, 0.05);
    /* Row 0 at two places (a placeholder used twice), row 1 once; positions inside the prompt. */
    clip_override ov[3] = {
        {0, 1 + (int)(sdt_test_next(rng) % 5), 0}, {1, 3, 0}, {1, 4 + (int)(sdt_test_next(rng) % 60), 1}};
    double *rows_d = mt_alloc((size_t)R * C * sizeof(double));
    for (int i = 0; i < R * C; i++) rows_d[i] = rows[i];
    size_t n_out = (size_t)B * T * C;
    float *dout = mt_alloc(n_out * sizeof(float));
    sdt_test_fill_normal(rng, dout, (int64_t)n_out, 1.0);
    double *dout_d = mt_alloc(n_out * sizeof(double));
    for (size_t i = 0; i < n_out; i++) dout_d[i] = dout[i];
    double *ref_out = mt_alloc(n_out * sizeof(double));

    /* Forward, default skip. */
    run_result res;
    if (!run_model(&m, be, tokens, B, T, rows, R, ov, 3, 0, dout, &res, &error)) {
        CHECK(false, "forward/backward: %s", error.message);
        return;
    }
    ref_forward(&r, tokens, B, T, rows_d, ov, 3, cfg.layers, ref_out);
    double e = sdt_rel_err_fd(res.out, ref_out, (int64_t)n_out);
    printf("forward rel error.message %.3g (measured arena %zu bytes)\n", e, res.peak);
    CHECK(e <= 1e-4, "forward differs from the float64 reference: rel error.message %.3g", e);

    /* Backward against central differences of the reference along a random
     * direction and on a few single coordinates of each row. */
    fd_ctx fc = {&r, tokens, B, T, R, cfg.layers, 3, ov, dout_d, false, NULL};
    check_row_gradient(rng, &fc, rows_d, res.drows, "backward");

    /* f16 activations (the mixed-precision path): close to the reference at f16 accuracy. */
    run_result half;
    g_act_dtype = SDT_F16;
    if (run_model(&m, be, tokens, B, T, rows, R, ov, 3, 0, dout, &half, &error)) {
        double eh = sdt_rel_err_fd(half.out, ref_out, (int64_t)n_out);
        double *g32 = mt_alloc((size_t)R * C * sizeof(double));
        for (int i = 0; i < R * C; i++) g32[i] = res.drows[i];
        double gh = sdt_rel_err_fd(half.drows, g32, (int64_t)R * C);
        printf("f16 activations: forward rel error.message %.3g, row gradient rel error.message %.3g (vs f32)\n", eh,
               gh);
        CHECK(eh <= 1e-2, "f16-activation forward rel error.message %.3g", eh);
        CHECK(gh <= 3e-2, "f16-activation row gradient rel error.message %.3g against f32", gh);
        CHECK(half.peak < res.peak, "f16 activations should need less memory (%zu vs %zu bytes)", half.peak, res.peak);
        free(g32), free(half.out), free(half.drows);
    } else {
        CHECK(false, "f16 activations: %s", error.message);
    }
    g_act_dtype = SDT_F32;
    free(res.out), free(res.drows);

    /* CLIP skip 2: the penultimate layer, then the final layernorm. */
    if (run_model(&m, be, tokens, B, T, rows, R, ov, 3, 2, NULL, &res, &error)) {
        double *ref_skip = mt_alloc(n_out * sizeof(double));
        ref_forward(&r, tokens, B, T, rows_d, ov, 3, cfg.layers - 1, ref_skip);
        double es = sdt_rel_err_fd(res.out, ref_skip, (int64_t)n_out);
        double diff = sdt_rel_err_fd(res.out, ref_out, (int64_t)n_out);
        CHECK(es <= 1e-4, "CLIP skip 2 differs from the reference: rel error.message %.3g", es);
        CHECK(diff > 1e-3, "CLIP skip 2 gives the same output as skip 1 (rel diff %.3g)", diff);
        free(ref_skip), free(res.out), free(res.drows);
    } else {
        CHECK(false, "clip skip 2: %s", error.message);
    }

    /* Override equivalence: a position overridden with its own token row changes nothing. */
    run_result plain, same;
    float *own = mt_alloc((size_t)C * sizeof(float));
    int pos = 5;
    for (int c = 0; c < C; c++) own[c] = (float)r.tok[(size_t)tokens[1 * T + pos] * C + c];
    clip_override self_ov = {1, pos, 0};
    if (run_model(&m, be, tokens, B, T, NULL, 0, NULL, 0, 0, NULL, &plain, &error) &&
        run_model(&m, be, tokens, B, T, own, 1, &self_ov, 1, 0, NULL, &same, &error)) {
        double d = mt_max_abs_diff(plain.out, same.out, (int64_t)n_out);
        CHECK(d <= 1e-6, "overriding a position with its own token row changed the output by %.3g", d);
        /* And a different row does change later positions, but never earlier ones (causal). */
        run_result other;
        clip_override ov2 = {1, pos, 0};
        if (run_model(&m, be, tokens, B, T, rows, R, &ov2, 1, 0, NULL, &other, &error)) {
            double before = mt_max_abs_diff(plain.out + (size_t)T * C, other.out + (size_t)T * C, (int64_t)pos * C);
            double after = mt_max_abs_diff(plain.out + ((size_t)T + pos) * C, other.out + ((size_t)T + pos) * C,
                                           (int64_t)(T - pos) * C);
            double batch0 = mt_max_abs_diff(plain.out, other.out, (int64_t)T * C);
            CHECK(before == 0 && batch0 == 0,
                  "an override leaked to earlier positions (%.3g) or another batch item (%.3g)", before, batch0);
            CHECK(after > 1e-4, "an override did not change its own and later positions");
            free(other.out), free(other.drows);
        }
        free(plain.out), free(plain.drows), free(same.out), free(same.drows);
    } else {
        CHECK(false, "override equivalence: %s", error.message);
    }
    free(own);

    /* Token rows for initialising an embedding are the table's rows. */
    int32_t ids[3] = {tokens[0], tokens[7], (int32_t)cfg.vocab - 1};
    float *tr = mt_alloc((size_t)3 * C * sizeof(float));
    sdt_tensor tr_t = mt_tensor(tr, SDT_F32, 2, 3, C, 0, 0);
    CHECK(clip_text_token_rows(&m, be, ids, 3, &tr_t, &error), "token rows: %s", error.message);
    double tdiff = 0;
    for (int i = 0; i < 3; i++)
        for (int c = 0; c < C; c++) tdiff = fmax(tdiff, fabs(tr[i * C + c] - r.tok[(size_t)ids[i] * C + c]));
    CHECK(tdiff == 0, "token rows differ from the embedding table by %.3g", tdiff);
    ids[1] = cfg.vocab;
    error.message[0] = 0;
    CHECK(!clip_text_token_rows(&m, be, ids, 3, &tr_t, &error) && strstr(error.message, "vocabulary"),
          "an out-of-vocabulary id was accepted (%s)", error.message);
    free(tr);

    /* Bad inputs: clear errors, no crash. */
    sdt_arena meas;
    sdt_arena_init_measure(&meas, be);
    clip_text_acts acts;
    sdt_tensor tok = mt_tensor(tokens, SDT_I32, 2, B, T, 0, 0), rows_t = mt_tensor(rows, SDT_F32, 2, R, C, 0, 0);
    clip_override bad = {0, T, 0};
    clip_text_inputs in = {.tokens = &tok, .rows = &rows_t, .overrides = &bad, .n_overrides = 1, .act_dtype = SDT_F32};
    error.message[0] = 0;
    CHECK(!clip_text_forward(&m, be, &meas, &in, &acts, &error) && strstr(error.message, "override"),
          "an override past the sequence was accepted (%s)", error.message);
    in.n_overrides = 0;
    in.clip_skip = cfg.layers + 1;
    error.message[0] = 0;
    CHECK(!clip_text_forward(&m, be, &meas, &in, &acts, &error) && strstr(error.message, "CLIP skip"),
          "CLIP skip past the first layer was accepted (%s)", error.message);
    in.clip_skip = 0;
    sdt_arena small;
    if (sdt_arena_init(&small, be, 4096)) {
        error.message[0] = 0;
        CHECK(!clip_text_forward(&m, be, &small, &in, &acts, &error) && strstr(error.message, "arena"),
              "a too-small arena was not reported (%s)", error.message);
        /* the arena decides the kind where the allocation failed; the model passes it on */
        CHECK(error.code == SDT_ERR_OUT_OF_MEMORY, "a too-small arena must be OUT_OF_MEMORY, got %s",
              sdt_error_code_name(error.code));
        sdt_arena_release(&small);
    }

    free(rows), free(rows_d), free(dout), free(dout_d), free(ref_out);
    ref_free(&r);
}

/* Anomaly mode: a NaN in layer 1's fc1 weight passes silently without it and is named with it;
 * a NaN in d(output) is named at the last layer's input gradient in backward. */
static void test_anomaly(sdt_test_rng *rng, sdt_backend *be, const sdt_weights *w)
{
    sdt_error error = {0};
    clip_config cfg;
    clip_text_model m;
    if (!clip_config_detect(w, &cfg, &error) || !clip_text_load(&m, &cfg, w, &error)) {
        CHECK(false, "load: %s", error.message);
        return;
    }
    const int T = 16, C = cfg.width;
    int32_t tokens[16];
    random_tokens(rng, tokens, T, cfg.vocab);
    float *rows = mt_alloc((size_t)C * sizeof(float)), *drows = mt_alloc((size_t)C * sizeof(float));
    float *dout = mt_alloc((size_t)T * C * sizeof(float));
    sdt_test_fill_normal(rng, rows, C, 0.05);
    sdt_test_fill_normal(rng, dout, (int64_t)T * C, 1.0);
    memset(drows, 0, (size_t)C * sizeof(float));
    clip_override ov = {0, 1, 0};
    sdt_tensor tok = mt_tensor(tokens, SDT_I32, 2, 1, T, 0, 0), rows_t = mt_tensor(rows, SDT_F32, 2, 1, C, 0, 0);
    sdt_tensor drows_t = mt_tensor(drows, SDT_F32, 2, 1, C, 0, 0), dout_t = mt_tensor(dout, SDT_F32, 3, 1, T, C, 0);
    clip_text_inputs in = {.tokens = &tok,
                           .rows = &rows_t,
                           .overrides = &ov,
                           .n_overrides = 1,
                           .act_dtype = SDT_F32,
                           .anomaly_check = true};
    sdt_arena meas, arena;
    sdt_arena_init_measure(&meas, be);
    clip_text_acts acts;
    CHECK(clip_text_forward(&m, be, &meas, &in, &acts, &error) &&
              clip_text_backward(&m, be, &meas, &acts, &dout_t, &drows_t, &error),
          "measure: %s", error.message);
    if (!sdt_arena_init(&arena, be, meas.peak)) return;
    CHECK(clip_text_forward(&m, be, &arena, &in, &acts, &error) &&
              clip_text_backward(&m, be, &arena, &acts, &dout_t, &drows_t, &error),
          "finite inputs pass anomaly mode: %s", error.message);

    /* A NaN in one weight of layer 1's fc1 (a private copy: the weights are a read-only mapping). */
    int64_t n = sdt_tensor_numel(&m.layer[1].fc1_w);
    float *bad_w = mt_alloc((size_t)n * sizeof(float));
    memcpy(bad_w, m.layer[1].fc1_w.data, (size_t)n * sizeof(float));
    bad_w[sdt_test_next(rng) % (uint64_t)n] = NAN;
    const void *good_w = m.layer[1].fc1_w.data;
    m.layer[1].fc1_w.data = bad_w;
    in.anomaly_check = false;
    sdt_arena_rewind(&arena, 0);
    CHECK(clip_text_forward(&m, be, &arena, &in, &acts, &error), "without anomaly mode NaN passes: %s", error.message);
    in.anomaly_check = true;
    sdt_arena_rewind(&arena, 0);
    error.message[0] = 0;
    CHECK(!clip_text_forward(&m, be, &arena, &in, &acts, &error) && strstr(error.message, "clip_text anomaly: ") &&
              strstr(error.message, "text_model.encoder.layers.1.mlp.fc1 output"),
          "anomaly mode names layer 1's fc1: %s", error.message);
    m.layer[1].fc1_w.data = (void *)good_w;

    /* A NaN arriving from the UNet in d(output): the last layer's input gradient is named. */
    dout[sdt_test_next(rng) % (uint64_t)(T * C)] = NAN;
    sdt_arena_rewind(&arena, 0);
    error.message[0] = 0;
    char want[96];
    snprintf(want, sizeof want, "text_model.encoder.layers.%d.input gradient", cfg.layers - 1);
    CHECK(clip_text_forward(&m, be, &arena, &in, &acts, &error) &&
              !clip_text_backward(&m, be, &arena, &acts, &dout_t, &drows_t, &error) && strstr(error.message, want),
          "backward names %s: %s", want, error.message);
    sdt_arena_release(&arena);
    free(bad_w), free(rows), free(drows), free(dout);
}

/* Repacks the HF-layout tiny weights as OpenCLIP keys (fused in_proj), the way SD 2.x LDM files store them. */
static bool write_openclip_copy(const char *path, const clip_text_model *m, sdt_error *error)
{
    const clip_config *c = &m->cfg;
    int64_t C = c->width;
    int n_items = 4 + c->layers * 12;
    sdt_st_write_item *items = mt_alloc((size_t)n_items * sizeof(*items));
    char(*names)[128] = mt_alloc((size_t)n_items * 128);
    float **packed = mt_alloc((size_t)c->layers * 2 * sizeof(float *));
    int64_t(*shapes)[2] = mt_alloc((size_t)c->layers * 2 * sizeof(*shapes));
    int k = 0;
#define ITEM(tensor, fmt, ...)                                                                                         \
    do {                                                                                                               \
        snprintf(names[k], 128, fmt, __VA_ARGS__);                                                                     \
        items[k] = sdt_st_item_from_tensor(names[k], (tensor));                                                        \
        items[k].name = names[k];                                                                                      \
        k++;                                                                                                           \
    } while (0)
    ITEM(&m->tok_emb, "%s", "cond_stage_model.model.token_embedding.weight");
    ITEM(&m->pos_emb, "%s", "cond_stage_model.model.positional_embedding");
    ITEM(&m->lnf_w, "%s", "cond_stage_model.model.ln_final.weight");
    ITEM(&m->lnf_b, "%s", "cond_stage_model.model.ln_final.bias");
    for (int i = 0; i < c->layers; i++) {
        const clip_layer_weights *L = &m->layer[i];
        float *w = packed[2 * i] = mt_alloc((size_t)3 * C * C * sizeof(float));
        float *b = packed[2 * i + 1] = mt_alloc((size_t)3 * C * sizeof(float));
        memcpy(w, L->q_w.data, (size_t)C * C * 4), memcpy(w + C * C, L->k_w.data, (size_t)C * C * 4);
        memcpy(w + 2 * C * C, L->v_w.data, (size_t)C * C * 4);
        memcpy(b, L->q_b.data, (size_t)C * 4), memcpy(b + C, L->k_b.data, (size_t)C * 4);
        memcpy(b + 2 * C, L->v_b.data, (size_t)C * 4);
        shapes[2 * i][0] = 3 * C, shapes[2 * i][1] = C, shapes[2 * i + 1][0] = 3 * C;
        sdt_tensor wt = sdt_tensor_make(w, SDT_F32, SDT_DEVICE_CPU, 2, shapes[2 * i]);
        sdt_tensor bt = sdt_tensor_make(b, SDT_F32, SDT_DEVICE_CPU, 1, shapes[2 * i + 1]);
        const char *p = "cond_stage_model.model.transformer.resblocks";
        ITEM(&L->ln1_w, "%s.%d.ln_1.weight", p, i);
        ITEM(&L->ln1_b, "%s.%d.ln_1.bias", p, i);
        /* Items keep shape pointers: point them at the arrays that outlive this loop. */
        ITEM(&wt, "%s.%d.attn.in_proj_weight", p, i);
        items[k - 1].shape = shapes[2 * i];
        ITEM(&bt, "%s.%d.attn.in_proj_bias", p, i);
        items[k - 1].shape = shapes[2 * i + 1];
        ITEM(&L->o_w, "%s.%d.attn.out_proj.weight", p, i);
        ITEM(&L->o_b, "%s.%d.attn.out_proj.bias", p, i);
        ITEM(&L->ln2_w, "%s.%d.ln_2.weight", p, i);
        ITEM(&L->ln2_b, "%s.%d.ln_2.bias", p, i);
        ITEM(&L->fc1_w, "%s.%d.mlp.c_fc.weight", p, i);
        ITEM(&L->fc1_b, "%s.%d.mlp.c_fc.bias", p, i);
        ITEM(&L->fc2_w, "%s.%d.mlp.c_proj.weight", p, i);
        ITEM(&L->fc2_b, "%s.%d.mlp.c_proj.bias", p, i);
    }
#undef ITEM
    bool ok = sdt_st_write(path, items, (size_t)k, NULL, 0, error);
    for (int i = 0; i < 2 * c->layers; i++) free(packed[i]);
    free(packed), free(shapes), free(names), free(items);
    return ok;
}

static void test_openclip_layout(sdt_test_rng *rng, sdt_backend *be, const sdt_weights *hf_w)
{
    sdt_error error = {0};
    char path[512];
    clip_config cfg;
    clip_text_model hf;
    if (!clip_config_detect(hf_w, &cfg, &error) || !clip_text_load(&hf, &cfg, hf_w, &error)) {
        CHECK(false, "%s", error.message);
        return;
    }
    mt_temp_path(path, sizeof(path), "openclip");
    if (!write_openclip_copy(path, &hf, &error)) {
        CHECK(false, "writing the OpenCLIP copy: %s", error.message);
        return;
    }
    sdt_weights *w = sdt_weights_open(path, &error);
    CHECK(w != NULL, "opening the OpenCLIP copy: %s", error.message);
    clip_config oc;
    clip_text_model m;
    if (w && clip_config_detect(w, &oc, &error) && clip_text_load(&m, &oc, w, &error)) {
        CHECK(oc.layout == CLIP_LAYOUT_OPENCLIP && oc.act == SDT_ACT_GELU && oc.default_skip == 2 &&
                  oc.layers == cfg.layers && oc.width == cfg.width,
              "OpenCLIP detection: layout %d act %d skip %d layers %d", oc.layout, oc.act, oc.default_skip, oc.layers);
        ref_clip r;
        ref_from_model(&r, &m);
        const int B = 1, T = 77;
        int32_t tokens[77];
        random_tokens(rng, tokens, B * T, oc.vocab);
        run_result res;
        if (run_model(&m, be, tokens, B, T, NULL, 0, NULL, 0, 0, NULL, &res, &error)) {
            size_t n = (size_t)B * T * oc.width;
            double *ref = mt_alloc(n * sizeof(double));
            ref_forward(&r, tokens, B, T, NULL, NULL, 0, oc.layers - 1, ref); /* penultimate by default */
            double e = sdt_rel_err_fd(res.out, ref, (int64_t)n);
            printf("OpenCLIP layout forward rel error.message %.3g\n", e);
            CHECK(e <= 1e-4, "OpenCLIP-layout forward (fused in_proj, GELU, penultimate) rel error.message %.3g", e);
            free(ref), free(res.out), free(res.drows);
        } else {
            CHECK(false, "OpenCLIP forward: %s", error.message);
        }
        ref_free(&r);
        /* The generator's enumeration of an OpenCLIP config names the same keys the loader wants. */
    } else {
        CHECK(false, "OpenCLIP load: %s", error.message);
    }
    if (w) sdt_weights_close(w);
    unlink(path);
}

/* SDXL's encoders from a tiny SDXL checkpoint (LDM keys under conditioner.embedders.0/1). */
static void test_sdxl_encoders(sdt_test_rng *rng, sdt_backend *be, const sdt_weights *w)
{
    sdt_error error = {0};
    clip_config l_cfg, g_cfg;
    clip_text_model l_model, g_model;
    if (!clip_config_detect_at(w, CLIP_SLOT_SDXL_L, &l_cfg, &error) || !clip_text_load(&l_model, &l_cfg, w, &error) ||
        !clip_config_detect_at(w, CLIP_SLOT_SDXL_G, &g_cfg, &error) || !clip_text_load(&g_model, &g_cfg, w, &error)) {
        CHECK(false, "SDXL encoders: %s", error.message);
        return;
    }
    clip_config want_l = clip_config_tiny_sdxl_l(), want_g = clip_config_tiny_sdxl_g();
    CHECK(l_cfg.width == want_l.width && l_cfg.layers == want_l.layers && l_cfg.act == SDT_ACT_QUICK_GELU &&
              l_cfg.default_skip == 2 && l_cfg.context_without_final_norm && l_cfg.projection_dim == 0 &&
              !l_cfg.pad_zero && l_cfg.layout == CLIP_LAYOUT_HF,
          "SDXL CLIP-L detection: width %d layers %d act %d skip %d projection %d", l_cfg.width, l_cfg.layers,
          l_cfg.act, l_cfg.default_skip, l_cfg.projection_dim);
    CHECK(g_cfg.width == want_g.width && g_cfg.layers == want_g.layers && g_cfg.act == SDT_ACT_GELU &&
              g_cfg.default_skip == 2 && g_cfg.context_without_final_norm &&
              g_cfg.projection_dim == want_g.projection_dim && g_cfg.pad_zero && g_cfg.layout == CLIP_LAYOUT_OPENCLIP,
          "SDXL bigG detection: width %d layers %d act %d skip %d projection %d", g_cfg.width, g_cfg.layers, g_cfg.act,
          g_cfg.default_skip, g_cfg.projection_dim);
    CHECK(clip_pad_id(&l_cfg, 49407) == 49407 && clip_pad_id(&g_cfg, 49407) == 0,
          "padding: CLIP-L pads with the end token, bigG with 0");

    /* Prompts as SDXL's bigG sees them: start token, text, the end token (the vocabulary's last id), zeros;
     * row 1 holds a second end token later, which must not be the pooled position. */
    const int B = 2, T = 77, R = 2, end_id = g_cfg.vocab - 1;
    int32_t tokens[2 * 77];
    const int ends[2] = {9 + (int)(sdt_test_next(rng) % 20), 30 + (int)(sdt_test_next(rng) % 20)};
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            tokens[b * T + t] = t == 0         ? end_id - 1
                                : t < ends[b]  ? 1 + (int32_t)(sdt_test_next(rng) % (uint64_t)(end_id - 2))
                                : t == ends[b] ? end_id
                                               : 0;
    tokens[1 * T + 60] = end_id;
    clip_override ov[3] = {{0, 2, 0}, {1, 3, 0}, {1, 5 + (int)(sdt_test_next(rng) % 20), 1}};
    const clip_text_model *models[2] = {&l_model, &g_model};
    for (int e = 0; e < 2; e++) {
        const clip_text_model *m = models[e];
        const char *name = e == 0 ? "SDXL CLIP-L" : "SDXL bigG";
        int C = m->cfg.width, P = m->cfg.projection_dim;
        ref_clip r;
        ref_from_model(&r, m);
        float *rows = mt_alloc((size_t)R * C * sizeof(float));
        sdt_test_fill_normal(rng, rows, R * C, 0.05);
        double *rows_d = mt_alloc((size_t)R * C * sizeof(double));
        for (int i = 0; i < R * C; i++) rows_d[i] = rows[i];
        size_t n_out = (size_t)B * T * C, n_pooled = (size_t)B * (P > 0 ? P : 1);
        float *dout = mt_alloc(n_out * sizeof(float)), *dpooled = mt_alloc(n_pooled * sizeof(float));
        sdt_test_fill_normal(rng, dout, (int64_t)n_out, 1.0);
        sdt_test_fill_normal(rng, dpooled, (int64_t)n_pooled, 1.0);
        double *dout_d = mt_alloc(n_out * sizeof(double)), *dpooled_d = mt_alloc(n_pooled * sizeof(double));
        for (size_t i = 0; i < n_out; i++) dout_d[i] = dout[i];
        for (size_t i = 0; i < n_pooled; i++) dpooled_d[i] = dpooled[i];
        double *ref_out = mt_alloc(n_out * sizeof(double)), *ref_pooled = mt_alloc(n_pooled * sizeof(double));
        /* The context: the penultimate layer's hidden state, no final layernorm. */
        ref_forward_full(&r, tokens, B, T, rows_d, ov, 3, m->cfg.layers - 1, false, ref_out, P > 0 ? ref_pooled : NULL);
        run_result res;
        if (!run_model_pooled(m, be, tokens, B, T, rows, R, ov, 3, 0, dout, P > 0 ? dpooled : NULL, &res, &error)) {
            CHECK(false, "%s: %s", name, error.message);
        } else {
            double ec = sdt_rel_err_fd(res.out, ref_out, (int64_t)n_out);
            printf("%s: context rel error %.3g\n", name, ec);
            CHECK(ec <= 1e-4,
                  "%s: the context (penultimate layer, no final layernorm) differs from the reference: rel "
                  "error %.3g",
                  name, ec);
            if (P > 0) {
                double ep = sdt_rel_err_fd(res.pooled, ref_pooled, (int64_t)n_pooled);
                printf("%s: pooled rel error %.3g\n", name, ep);
                CHECK(ep <= 1e-4, "%s: the pooled output differs from the reference: rel error %.3g", name, ep);
            }
            fd_ctx fc = {&r, tokens, B, T, R, m->cfg.layers - 1, 3, ov, dout_d, true, P > 0 ? dpooled_d : NULL};
            check_row_gradient(rng, &fc, rows_d, res.drows,
                               e == 0 ? "SDXL CLIP-L d(context)" : "SDXL bigG d(context) + d(pooled)");
            free(res.out), free(res.pooled), free(res.drows);
        }
        run_result half;
        g_act_dtype = SDT_F16; /* the mixed-precision path: pooled forward and backward in f16 storage */
        if (P > 0 && run_model_pooled(m, be, tokens, B, T, rows, R, ov, 3, 0, dout, dpooled, &half, &error)) {
            double ep = sdt_rel_err_fd(half.pooled, ref_pooled, (int64_t)n_pooled);
            printf("%s: f16 activations, pooled rel error %.3g\n", name, ep);
            CHECK(ep <= 1e-2, "%s: f16-activation pooled output rel error %.3g", name, ep);
            free(half.out), free(half.pooled), free(half.drows);
        } else if (P > 0) {
            CHECK(false, "%s, f16 activations: %s", name, error.message);
        }
        g_act_dtype = SDT_F32;
        if (P > 0 && run_model_pooled(m, be, tokens, B, T, rows, R, ov, 3, 0, NULL, dpooled, &res, &error)) {
            /* d(pooled) alone: the gradient runs through the last layer, which the context does not use. */
            fd_ctx fc = {&r, tokens, B, T, R, m->cfg.layers - 1, 3, ov, NULL, true, dpooled_d};
            check_row_gradient(rng, &fc, rows_d, res.drows, "SDXL bigG d(pooled) alone");
            free(res.out), free(res.pooled), free(res.drows);
        } else if (P > 0) {
            CHECK(false, "%s, d(pooled) alone: %s", name, error.message);
        }
        free(rows), free(rows_d), free(dout), free(dpooled), free(dout_d), free(dpooled_d), free(ref_out),
            free(ref_pooled);
        ref_free(&r);
    }
    /* d(pooled) for an encoder without a projection is refused with a sentence. */
    sdt_arena meas;
    sdt_arena_init_measure(&meas, be);
    clip_text_acts acts;
    sdt_tensor tok = mt_tensor(tokens, SDT_I32, 2, B, T, 0, 0), dp = mt_tensor(NULL, SDT_F32, 2, B, 48, 0, 0);
    clip_text_inputs in = {.tokens = &tok, .act_dtype = SDT_F32};
    error.message[0] = 0;
    CHECK(clip_text_forward(&l_model, be, &meas, &in, &acts, &error) &&
              !clip_text_backward_pooled(&l_model, be, &meas, &acts, NULL, &dp, NULL, &error) &&
              strstr(error.message, "pooled"),
          "d(pooled) for CLIP-L was accepted (%s)", error.message);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("models_test_clip_text");
    sdt_backend *be = mt_backend();
    char path[512];
    mt_temp_path(path, sizeof(path), "clip");
    sdt_weights *w = mt_make_weights(path, SD_FAMILY_TINY, sdt_test_next(&rng), true, false);
    test_hf_model(&rng, be, w);
    test_openclip_layout(&rng, be, w);
    test_anomaly(&rng, be, w);
    sdt_weights_close(w);
    unlink(path);
    mt_temp_path(path, sizeof(path), "clip-sdxl");
    w = mt_make_weights(path, SD_FAMILY_TINY_SDXL, sdt_test_next(&rng), true, false);
    test_sdxl_encoders(&rng, be, w);
    sdt_weights_close(w);
    unlink(path);
    be->destroy(be);
    return sdt_test_finish("models_test_clip_text");
}
