/* test_flux_text.c - Flux.1's text conditioning from CLIP-L and T5 (tiny random encoders).
 *
 * Two prompts with placeholder slots in CLIP-L's and T5's sequences: the context is T5's last hidden
 * state (equal to T5 run alone), the pooled vector CLIP-L's pooler_output (the final layer norm of the
 * last layer at the end token, no projection: equal to the final-normed last hidden state's row at the
 * end token of the same encoder configured to return it). Both tables' gradients agree with central
 * differences; a frozen table's encoder runs no backward (layer norms and T5's RMS norms counted
 * through the backend table); a cached T5 output gives the same context and refuses T5's rows. */
#include <math.h>

#include "flux_text.h"
#include "model_test_util.h"
#include "row_gradient_check.h"
#include "text3_test_fixture.h"

enum { B = 2, T = 77, L5 = 10, R = 2, NOV = 3 };

typedef struct problem {
    int32_t tl[B * T], t5[B * L5];
    int end[B];
    clip_override ov[NOV];
    t5_override ov5[NOV];
    float *rows_l, *rows_t5, *dctx, *dpool;
} problem;

typedef struct outputs {
    float *ctx, *pooled, *drl, *drt;
} outputs;

static void free_outputs(outputs *o)
{
    free(o->ctx), free(o->pooled), free(o->drl), free(o->drt);
    memset(o, 0, sizeof(*o));
}

static bool run(const text3_models *m, sdt_backend *be, const problem *p, const float *rl, const float *rt,
                const float *t5_hidden, bool tl_trains, bool tt_trains, bool grads, outputs *o, sdt_error *error)
{
    int C = m->l.cfg.width, D = m->t5.cfg.d_model;
    memset(o, 0, sizeof(*o));
    sdt_tensor tl = mt_tensor((void *)p->tl, SDT_I32, 2, B, T, 0, 0),
               t5t = mt_tensor((void *)p->t5, SDT_I32, 2, B, L5, 0, 0);
    sdt_tensor hid = mt_tensor((void *)t5_hidden, SDT_F32, 3, B, L5, D, 0);
    sdt_tensor trl = mt_tensor((void *)rl, SDT_F32, 2, R, C, 0, 0), trt = mt_tensor((void *)rt, SDT_F32, 2, R, D, 0, 0);
    sdt_flux_text_inputs in = {.tokens_l = &tl,
                               .rows_l = &trl,
                               .overrides = p->ov,
                               .n_overrides = NOV,
                               .t5 = {.tokens = t5_hidden ? NULL : &t5t,
                                      .hidden = t5_hidden ? &hid : NULL,
                                      .rows = &trt,
                                      .overrides = p->ov5,
                                      .n_overrides = NOV},
                               .act_dtype = SDT_F32};
    const t5_encoder *t5 = t5_hidden ? NULL : &m->t5;
    sdt_tensor dc = mt_tensor(p->dctx, SDT_F32, 3, B, L5, D, 0), dp = mt_tensor(p->dpool, SDT_F32, 2, B, C, 0, 0);
    o->drl = mt_alloc((size_t)R * C * sizeof(float));
    o->drt = mt_alloc((size_t)R * D * sizeof(float));
    sdt_tensor dl = mt_tensor(o->drl, SDT_F32, 2, R, C, 0, 0), dt = mt_tensor(o->drt, SDT_F32, 2, R, D, 0, 0);
    sdt_tensor *pdl = tl_trains ? &dl : NULL, *pdt = tt_trains ? &dt : NULL;
    sdt_arena meas, arena;
    sdt_flux_text_acts acts;
    sdt_arena_init_measure(&meas, be);
    if (!sdt_flux_text_forward(&m->l, t5, be, &meas, &in, &acts, error) ||
        (grads && !sdt_flux_text_backward(&m->l, t5, be, &meas, &acts, &dc, &dp, pdl, pdt, error)))
        return false;
    if (!sdt_arena_init(&arena, be, meas.peak)) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "arena");
    bool ok = sdt_flux_text_forward(&m->l, t5, be, &arena, &in, &acts, error);
    if (ok) {
        CHECK(acts.context.shape[0] == B && acts.context.shape[1] == L5 && acts.context.shape[2] == D &&
                  acts.pooled.ndim == 2 && acts.pooled.shape[0] == B && acts.pooled.shape[1] == C,
              "context or pooled misshaped");
        o->ctx = mt_alloc((size_t)B * L5 * D * sizeof(float));
        o->pooled = mt_alloc((size_t)B * C * sizeof(float));
        memcpy(o->ctx, acts.context.data, (size_t)B * L5 * D * sizeof(float));
        memcpy(o->pooled, acts.pooled.data, (size_t)B * C * sizeof(float));
    }
    ok = ok && (!grads || sdt_flux_text_backward(&m->l, t5, be, &arena, &acts, &dc, &dp, pdl, pdt, error));
    ok = ok && (sdt_arena_fits(&arena) || sdt_fail(error, SDT_ERR_INTERNAL, "the measured arena overflowed"));
    sdt_arena_release(&arena);
    return ok;
}

static void make_problem(sdt_test_rng *rng, const text3_models *m, problem *p)
{
    int V = m->l.cfg.vocab, D = m->t5.cfg.d_model, C = m->l.cfg.width;
    for (int b = 0; b < B; b++) {
        int len = 8 + 5 * b;
        p->end[b] = len - 1;
        for (int t = 0; t < T; t++) /* padded with the end token, as CLIP-L's tokenizer does */
            p->tl[b * T + t] = t == 0        ? V - 2
                               : t < len - 1 ? (int32_t)(1 + sdt_test_next(rng) % (uint64_t)(V - 3))
                                             : V - 1;
        int len5 = 6 + 2 * b;
        for (int t = 0; t < L5; t++)
            p->t5[b * L5 + t] = t < len5 - 1 ? (int32_t)(2 + sdt_test_next(rng) % 90u) : t == len5 - 1 ? 1 : 0;
    }
    clip_override ov[NOV] = {{0, 2, 0}, {1, 5, 0}, {1, 6, 1}};
    t5_override ov5[NOV] = {{0, 0, 0}, {1, 2, 0}, {1, 3, 1}};
    memcpy(p->ov, ov, sizeof ov);
    memcpy(p->ov5, ov5, sizeof ov5);
    for (int i = 0; i < NOV; i++) p->tl[ov[i].batch * T + ov[i].position] = 0;
    p->rows_l = mt_alloc((size_t)R * C * sizeof(float));
    p->rows_t5 = mt_alloc((size_t)R * D * sizeof(float));
    sdt_test_fill_normal(rng, p->rows_l, (int64_t)R * C, 0.05);
    sdt_test_fill_normal(rng, p->rows_t5, (int64_t)R * D, 1.0);
    p->dctx = mt_alloc((size_t)B * L5 * D * sizeof(float));
    p->dpool = mt_alloc((size_t)B * C * sizeof(float));
    sdt_test_fill_normal(rng, p->dctx, (int64_t)B * L5 * D, 1.0);
    sdt_test_fill_normal(rng, p->dpool, (int64_t)B * C, 1.0);
}

/* pooled against the final-normed last hidden state at the end token; context against T5 alone. */
static void check_outputs(const text3_models *m, sdt_backend *be, const problem *p, const outputs *o)
{
    sdt_error error = {0};
    int C = m->l.cfg.width, D = m->t5.cfg.d_model;
    clip_text_model normed = m->l;
    normed.cfg.pooled_without_projection = false, normed.cfg.context_without_final_norm = false;
    sdt_tensor tt = mt_tensor((void *)p->tl, SDT_I32, 2, B, T, 0, 0), tr = mt_tensor(p->rows_l, SDT_F32, 2, R, C, 0, 0);
    clip_text_inputs in = {.tokens = &tt, .rows = &tr, .overrides = p->ov, .n_overrides = NOV, .act_dtype = SDT_F32};
    sdt_arena meas, arena;
    clip_text_acts a;
    sdt_arena_init_measure(&meas, be);
    bool ok = clip_text_forward(&normed, be, &meas, &in, &a, &error) && sdt_arena_init(&arena, be, meas.peak);
    if (ok && clip_text_forward(&normed, be, &arena, &in, &a, &error)) {
        double d = 0;
        for (int b = 0; b < B; b++)
            d = fmax(d, mt_max_abs_diff(o->pooled + (size_t)b * C,
                                        (const float *)a.out.data + ((size_t)b * T + p->end[b]) * C, C));
        printf("pooled against the final-normed last layer at the end token: %.3g\n", d);
        CHECK(d <= 1e-6, "the pooled vector is not CLIP-L's pooler_output (%.3g)", d);
        CHECK(a.layers_run == m->l.cfg.layers, "the reference did not run every layer");
    } else {
        CHECK(false, "CLIP-L alone: %s", error.message);
    }
    if (ok) sdt_arena_release(&arena);
    sdt_tensor t5t = mt_tensor((void *)p->t5, SDT_I32, 2, B, L5, 0, 0),
               t5r = mt_tensor(p->rows_t5, SDT_F32, 2, R, D, 0, 0);
    t5_inputs ti = {.tokens = &t5t, .rows = &t5r, .overrides = p->ov5, .n_overrides = NOV, .act_dtype = SDT_F32};
    t5_acts ta;
    sdt_arena_init_measure(&meas, be);
    ok = t5_encoder_forward(&m->t5, be, &meas, &ti, &ta, &error) && sdt_arena_init(&arena, be, meas.peak);
    if (ok && t5_encoder_forward(&m->t5, be, &arena, &ti, &ta, &error)) {
        double d = mt_max_abs_diff(o->ctx, ta.out.data, (int64_t)B * L5 * D);
        CHECK(d == 0, "the context is not T5's output (%.3g)", d);
    } else {
        CHECK(false, "T5 alone: %s", error.message);
    }
    if (ok) sdt_arena_release(&arena);
}

static double loss_of(const text3_models *m, const problem *p, const outputs *o)
{
    return text3_seeded_loss(p->dctx, o->ctx, (size_t)B * L5 * m->t5.cfg.d_model, p->dpool, o->pooled,
                             (size_t)B * m->l.cfg.width);
}

static bool loss_with_rows(void *vctx, int table, const float *rows, double *loss, sdt_error *error)
{
    const text3_fd_context *c = vctx;
    const problem *p = c->problem;
    outputs q;
    bool ok = run(c->m, c->be, p, table == 0 ? rows : p->rows_l, table == 1 ? rows : p->rows_t5, NULL, false, false,
                  false, &q, error);
    if (ok) *loss = loss_of(c->m, p, &q);
    free_outputs(&q);
    return ok;
}

static void check_finite_differences(sdt_test_rng *rng, const text3_models *m, sdt_backend *be, const problem *p,
                                     const outputs *o)
{
    text3_fd_context c = {m, be, p};
    int n[2] = {R * m->l.cfg.width, R * m->t5.cfg.d_model};
    const float *base[2] = {p->rows_l, p->rows_t5}, *grad[2] = {o->drl, o->drt};
    const char *names[2] = {"clip_l", "t5xxl"};
    rg_check_tables(rng, 2, n, base, grad, names, loss_with_rows, &c);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("models_test_flux_text");
    text3_fixture f;
    if (text3_fixture_open(&f, &rng, true, "Flux")) {
        const text3_models m = f.m;
        sdt_backend *be = f.be;
        sdt_error error = {0};
        problem p;
        make_problem(&rng, &m, &p);
        int C = m.l.cfg.width, D = m.t5.cfg.d_model;
        outputs all;
        if (run(&m, be, &p, p.rows_l, p.rows_t5, NULL, true, true, true, &all, &error)) {
            check_outputs(&m, be, &p, &all);
            check_finite_differences(&rng, &m, be, &p, &all);
            /* frozen tables: the other's gradient unchanged, the frozen encoder's backward not run */
            bool cases[3][2] = {{true, true}, {true, false}, {false, true}};
            int base_ln = 0, base_rms = 0;
            for (int c = 0; c < 3; c++) {
                text3_counts_reset();
                outputs o;
                if (!run(&m, be, &p, p.rows_l, p.rows_t5, NULL, cases[c][0], cases[c][1], true, &o, &error)) {
                    CHECK(false, "case %d: %s", c, error.message);
                    free_outputs(&o);
                    continue;
                }
                printf("trains clip_l %d t5xxl %d: layer-norm backwards %d, RMS-norm backwards %d\n", cases[c][0],
                       cases[c][1], text3_counts.ln[0], text3_counts.rms);
                if (c == 0) {
                    base_ln = text3_counts.ln[0], base_rms = text3_counts.rms;
                    CHECK(base_ln > 0 && base_rms > 0, "training both tables ran no backward somewhere");
                }
                CHECK(text3_counts.ln[0] == (cases[c][0] ? base_ln : 0), "case %d: CLIP-L's backward count is wrong",
                      c);
                CHECK(text3_counts.rms == (cases[c][1] ? base_rms : 0), "case %d: T5's backward count is wrong", c);
                if (cases[c][0]) CHECK(mt_max_abs_diff(o.drl, all.drl, R * C) <= 1e-6, "case %d: clip_l changed", c);
                if (cases[c][1]) CHECK(mt_max_abs_diff(o.drt, all.drt, R * D) <= 1e-6, "case %d: t5xxl changed", c);
                free_outputs(&o);
            }
            /* a cached T5 output: the same context, T5 not run backward, its rows refused */
            outputs o;
            text3_counts_reset();
            if (run(&m, be, &p, p.rows_l, p.rows_t5, all.ctx, true, false, true, &o, &error)) {
                CHECK(mt_max_abs_diff(o.ctx, all.ctx, (int64_t)B * L5 * D) == 0 &&
                          mt_max_abs_diff(o.drl, all.drl, R * C) <= 1e-6 && text3_counts.rms == 0,
                      "a cached T5 output changed the result or ran T5's backward");
            } else {
                CHECK(false, "a cached T5 output: %s", error.message);
            }
            free_outputs(&o);
            error.message[0] = 0;
            CHECK(!run(&m, be, &p, p.rows_l, p.rows_t5, all.ctx, true, true, true, &o, &error) &&
                      strstr(error.message, "cached"),
                  "t5xxl rows trained from a cached T5 output (%s)", error.message);
            free_outputs(&o);
        } else {
            CHECK(false, "the Flux conditioning: %s", error.message);
        }
        free_outputs(&all);
        /* SD3's CLIP-L (with a projection) and a missing T5 are refused with sentences */
        clip_text_model projected = m.l;
        projected.cfg.projection_dim = C, projected.cfg.pooled_without_projection = false;
        sdt_tensor tl = mt_tensor(p.tl, SDT_I32, 2, B, T, 0, 0);
        sdt_flux_text_inputs in = {.tokens_l = &tl, .act_dtype = SDT_F32};
        sdt_flux_text_acts acts;
        sdt_arena meas;
        sdt_arena_init_measure(&meas, be);
        error.message[0] = 0;
        CHECK(!sdt_flux_text_forward(&projected, &m.t5, be, &meas, &in, &acts, &error) &&
                  strstr(error.message, "pooler_output"),
              "a projected CLIP-L was accepted (%s)", error.message);
        error.message[0] = 0;
        CHECK(!sdt_flux_text_forward(&m.l, NULL, be, &meas, &in, &acts, &error) && strstr(error.message, "T5"),
              "Flux without T5 was accepted (%s)", error.message);
        free(p.rows_l), free(p.rows_t5), free(p.dctx), free(p.dpool);
    }
    text3_fixture_close(&f);
    return sdt_test_finish("models_test_flux_text");
}
