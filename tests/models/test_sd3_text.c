/* test_sd3_text.c - SD3's text conditioning from CLIP-L, bigG and T5 (tiny random encoders).
 *
 * Two prompts with placeholder slots in CLIP's and T5's sequences: the context is [B, 77 + L5, D] with,
 * per prompt, 77 rows of [CLIP-L's penultimate hidden state, bigG's, exact zeros to D] and then T5's
 * last hidden state, each equal to the encoder run alone; the pooled vector is [CLIP-L's projected
 * pooled output, bigG's]. The three tables' gradients agree with central differences of the whole
 * conditioning (f32, random direction); a frozen table (NULL drows) leaves the others' gradients
 * unchanged and its encoder's backward does not run (layer norms of its width and T5's RMS norms
 * counted through the backend table). T5 absent: 77 zero rows (the pipeline's zeros). T5 cached: the
 * same context, and T5's rows refused from it. bf16 activations: within bf16's precision of f32, the
 * padding still exact zeros. Torch parity: tests/parity/sd3_text_parity.py. */
#include <math.h>

#include "model_test_util.h"
#include "row_gradient_check.h"
#include "sd3_text.h"
#include "text3_test_fixture.h"

enum { B = 2, T = 77, L5 = 12, R = 2, NOV = 3 };

typedef struct problem {
    int32_t tl[B * T], tg[B * T], t5[B * L5];
    clip_override ov[NOV];
    t5_override ov5[NOV];
    float *rows_l, *rows_g, *rows_t5;
    float *dctx, *dpool; /* [B, T + L5, D], [B, Pl + Pg] */
} problem;

typedef struct variant {
    bool no_t5;             /* T5 absent: the pipeline's zeros */
    const float *t5_hidden; /* cached T5 output [B, L5, D] */
    bool tl, tg, tt;        /* which tables train */
    bool grads;
    bool bf16; /* bf16 activations (d(context) and d(pooled) given in bf16 too) */
} variant;

typedef struct outputs {
    float *ctx, *pooled, *drl, *drg, *drt;
    int ctx_rows;
} outputs;

static void free_outputs(outputs *o)
{
    free(o->ctx), free(o->pooled), free(o->drl), free(o->drg), free(o->drt);
    memset(o, 0, sizeof(*o));
}

static bool run(const text3_models *m, sdt_backend *be, const problem *p, const float *rl, const float *rg,
                const float *rt, const variant *v, outputs *o, sdt_error *error)
{
    int Cl = m->l.cfg.width, Cg = m->g.cfg.width, D = m->t5.cfg.d_model;
    int P = m->l.cfg.projection_dim + m->g.cfg.projection_dim;
    int rows = T + (v->no_t5 ? T : L5);
    memset(o, 0, sizeof(*o));
    o->ctx_rows = rows;
    sdt_tensor tl = mt_tensor((void *)p->tl, SDT_I32, 2, B, T, 0, 0),
               tg = mt_tensor((void *)p->tg, SDT_I32, 2, B, T, 0, 0);
    sdt_tensor t5t = mt_tensor((void *)p->t5, SDT_I32, 2, B, L5, 0, 0);
    sdt_tensor hid = mt_tensor((void *)v->t5_hidden, SDT_F32, 3, B, L5, D, 0);
    sdt_tensor trl = mt_tensor((void *)rl, SDT_F32, 2, R, Cl, 0, 0),
               trg = mt_tensor((void *)rg, SDT_F32, 2, R, Cg, 0, 0),
               trt = mt_tensor((void *)rt, SDT_F32, 2, R, D, 0, 0);
    sdt_sd3_text_inputs in = {.tokens_l = &tl,
                              .tokens_g = &tg,
                              .rows_l = &trl,
                              .rows_g = &trg,
                              .overrides = p->ov,
                              .n_overrides = NOV,
                              .t5 = {.tokens = v->t5_hidden ? NULL : &t5t,
                                     .hidden = v->t5_hidden ? &hid : NULL,
                                     .rows = &trt,
                                     .overrides = p->ov5,
                                     .n_overrides = NOV},
                              .joint_dim = D,
                              .act_dtype = SDT_F32};
    const t5_encoder *t5 = v->no_t5 || v->t5_hidden ? NULL : &m->t5;
    if (v->no_t5) in.t5 = (t5_context_inputs){0};
    sdt_dtype adt = v->bf16 ? SDT_BF16 : SDT_F32;
    in.act_dtype = adt;
    size_t nc = (size_t)B * rows * D, np = (size_t)B * P;
    void *dctx = p->dctx, *dpool = p->dpool;
    if (v->bf16) { /* what a bf16 transformer's backward hands over */
        dctx = mt_alloc(nc * 2), dpool = mt_alloc(np * 2);
        sdt_store_f32(p->dctx, dctx, SDT_BF16, (int64_t)nc);
        sdt_store_f32(p->dpool, dpool, SDT_BF16, (int64_t)np);
    }
    sdt_tensor dc = mt_tensor(dctx, adt, 3, B, rows, D, 0), dp = mt_tensor(dpool, adt, 2, B, P, 0, 0);
    o->drl = mt_alloc((size_t)R * Cl * sizeof(float));
    o->drg = mt_alloc((size_t)R * Cg * sizeof(float));
    o->drt = mt_alloc((size_t)R * D * sizeof(float));
    sdt_tensor dl = mt_tensor(o->drl, SDT_F32, 2, R, Cl, 0, 0), dg = mt_tensor(o->drg, SDT_F32, 2, R, Cg, 0, 0),
               dt = mt_tensor(o->drt, SDT_F32, 2, R, D, 0, 0);
    sdt_tensor *pdl = v->tl ? &dl : NULL, *pdg = v->tg ? &dg : NULL, *pdt = v->tt ? &dt : NULL;
    sdt_arena meas, arena;
    sdt_sd3_text_acts acts;
    sdt_arena_init_measure(&meas, be);
    bool ok = sdt_sd3_text_forward(&m->l, &m->g, t5, be, &meas, &in, &acts, error) &&
              (!v->grads || sdt_sd3_text_backward(&m->l, &m->g, t5, be, &meas, &acts, &dc, &dp, pdl, pdg, pdt, error));
    if (ok && !sdt_arena_init(&arena, be, meas.peak))
        ok = sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "arena of %zu bytes", meas.peak);
    if (!ok) {
        if (v->bf16) free(dctx), free(dpool);
        return false;
    }
    ok = sdt_sd3_text_forward(&m->l, &m->g, t5, be, &arena, &in, &acts, error);
    if (ok) {
        CHECK(acts.context.ndim == 3 && acts.context.shape[0] == B && acts.context.shape[1] == rows &&
                  acts.context.shape[2] == D && acts.pooled.shape[0] == B && acts.pooled.shape[1] == P,
              "context [%lld, %lld, %lld] / pooled [%lld, %lld], expected [%d, %d, %d] / [%d, %d]",
              (long long)acts.context.shape[0], (long long)acts.context.shape[1], (long long)acts.context.shape[2],
              (long long)acts.pooled.shape[0], (long long)acts.pooled.shape[1], B, rows, D, B, P);
        o->ctx = mt_alloc(nc * sizeof(float));
        o->pooled = mt_alloc(np * sizeof(float));
        sdt_load_f32(acts.context.data, adt, o->ctx, (int64_t)nc);
        sdt_load_f32(acts.pooled.data, adt, o->pooled, (int64_t)np);
    }
    ok =
        ok && (!v->grads || sdt_sd3_text_backward(&m->l, &m->g, t5, be, &arena, &acts, &dc, &dp, pdl, pdg, pdt, error));
    ok = ok && (sdt_arena_fits(&arena) || sdt_fail(error, SDT_ERR_INTERNAL, "the measured arena overflowed"));
    sdt_arena_release(&arena);
    if (v->bf16) free(dctx), free(dpool);
    return ok;
}

/* Each encoder alone on the same inputs: CLIP outputs [B, T, C], pooled [B, P], T5's [B, L5, D]. */
static bool encoders_alone(const text3_models *m, sdt_backend *be, const problem *p, float *out_l, float *pool_l,
                           float *out_g, float *pool_g, float *out_t5, sdt_error *error)
{
    const clip_text_model *enc[2] = {&m->l, &m->g};
    const int32_t *tok[2] = {p->tl, p->tg};
    const float *rows[2] = {p->rows_l, p->rows_g};
    float *outs[2] = {out_l, out_g}, *pools[2] = {pool_l, pool_g};
    for (int e = 0; e < 2; e++) {
        int C = enc[e]->cfg.width;
        sdt_tensor tt = mt_tensor((void *)tok[e], SDT_I32, 2, B, T, 0, 0),
                   tr = mt_tensor((void *)rows[e], SDT_F32, 2, R, C, 0, 0);
        clip_text_inputs in = {
            .tokens = &tt, .rows = &tr, .overrides = p->ov, .n_overrides = NOV, .act_dtype = SDT_F32};
        sdt_arena meas, arena;
        clip_text_acts a;
        sdt_arena_init_measure(&meas, be);
        if (!clip_text_forward(enc[e], be, &meas, &in, &a, error)) return false;
        if (!sdt_arena_init(&arena, be, meas.peak)) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "arena");
        bool ok = clip_text_forward(enc[e], be, &arena, &in, &a, error);
        if (ok) memcpy(outs[e], a.out.data, (size_t)B * T * C * sizeof(float));
        if (ok) memcpy(pools[e], a.pooled.data, (size_t)B * enc[e]->cfg.projection_dim * sizeof(float));
        sdt_arena_release(&arena);
        if (!ok) return false;
    }
    int D = m->t5.cfg.d_model;
    sdt_tensor tt = mt_tensor((void *)p->t5, SDT_I32, 2, B, L5, 0, 0),
               tr = mt_tensor(p->rows_t5, SDT_F32, 2, R, D, 0, 0);
    t5_inputs in = {.tokens = &tt, .rows = &tr, .overrides = p->ov5, .n_overrides = NOV, .act_dtype = SDT_F32};
    sdt_arena meas, arena;
    t5_acts a;
    sdt_arena_init_measure(&meas, be);
    if (!t5_encoder_forward(&m->t5, be, &meas, &in, &a, error)) return false;
    if (!sdt_arena_init(&arena, be, meas.peak)) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "arena");
    bool ok = t5_encoder_forward(&m->t5, be, &arena, &in, &a, error);
    if (ok) memcpy(out_t5, a.out.data, (size_t)B * L5 * D * sizeof(float));
    sdt_arena_release(&arena);
    return ok;
}

static void make_problem(sdt_test_rng *rng, const text3_models *m, problem *p)
{
    int V = m->l.cfg.vocab, end = V - 1, D = m->t5.cfg.d_model;
    int P = m->l.cfg.projection_dim + m->g.cfg.projection_dim;
    for (int b = 0; b < B; b++) {
        int len = 9 + 4 * b; /* start, text, end */
        for (int t = 0; t < T; t++) {
            int32_t id = t == 0 ? V - 2 : t < len - 1 ? (int32_t)(1 + sdt_test_next(rng) % (uint64_t)(V - 3)) : end;
            p->tl[b * T + t] = id;
            p->tg[b * T + t] = t >= len ? clip_pad_id(&m->g.cfg, end) : id;
        }
        int len5 = 7 + 3 * b; /* text, </s>, <pad> */
        for (int t = 0; t < L5; t++)
            p->t5[b * L5 + t] = t < len5 - 1 ? (int32_t)(2 + sdt_test_next(rng) % 90u) : t == len5 - 1 ? 1 : 0;
    }
    clip_override ov[NOV] = {{0, 2, 0}, {1, 3, 0}, {1, 4, 1}};
    t5_override ov5[NOV] = {{0, 1, 0}, {1, 4, 0}, {1, 5, 1}};
    memcpy(p->ov, ov, sizeof ov);
    memcpy(p->ov5, ov5, sizeof ov5);
    for (int i = 0; i < NOV; i++) p->tl[ov[i].batch * T + ov[i].position] = p->tg[ov[i].batch * T + ov[i].position] = 0;
    p->rows_l = mt_alloc((size_t)R * m->l.cfg.width * sizeof(float));
    p->rows_g = mt_alloc((size_t)R * m->g.cfg.width * sizeof(float));
    p->rows_t5 = mt_alloc((size_t)R * D * sizeof(float));
    sdt_test_fill_normal(rng, p->rows_l, (int64_t)R * m->l.cfg.width, 0.05);
    sdt_test_fill_normal(rng, p->rows_g, (int64_t)R * m->g.cfg.width, 0.05);
    sdt_test_fill_normal(rng, p->rows_t5, (int64_t)R * D, 1.0);
    size_t nc = (size_t)B * (T + T) * D; /* room for the T5-less context too */
    p->dctx = mt_alloc(nc * sizeof(float));
    p->dpool = mt_alloc((size_t)B * P * sizeof(float));
    sdt_test_fill_normal(rng, p->dctx, (int64_t)nc, 1.0);
    sdt_test_fill_normal(rng, p->dpool, (int64_t)B * P, 1.0);
}

static void check_layout(const text3_models *m, sdt_backend *be, const problem *p, const outputs *o)
{
    sdt_error error = {0};
    int Cl = m->l.cfg.width, Cg = m->g.cfg.width, D = m->t5.cfg.d_model;
    int Pl = m->l.cfg.projection_dim, Pg = m->g.cfg.projection_dim, rows = T + L5;
    float *ol = mt_alloc((size_t)B * T * Cl * 4), *og = mt_alloc((size_t)B * T * Cg * 4),
          *ot = mt_alloc((size_t)B * L5 * D * 4);
    float *pl = mt_alloc((size_t)B * Pl * 4), *pg = mt_alloc((size_t)B * Pg * 4);
    if (!encoders_alone(m, be, p, ol, pl, og, pg, ot, &error)) {
        CHECK(false, "the encoders alone: %s", error.message);
    } else {
        double dl = 0, dg = 0, dt = 0, dp = 0, pad_max = 0;
        for (int b = 0; b < B; b++) {
            const float *c = o->ctx + (size_t)b * rows * D;
            for (int t = 0; t < T; t++) {
                dl = fmax(dl, mt_max_abs_diff(c + (size_t)t * D, ol + ((size_t)b * T + t) * Cl, Cl));
                dg = fmax(dg, mt_max_abs_diff(c + (size_t)t * D + Cl, og + ((size_t)b * T + t) * Cg, Cg));
                for (int k = Cl + Cg; k < D; k++) pad_max = fmax(pad_max, fabs(c[(size_t)t * D + k]));
            }
            dt = fmax(dt, mt_max_abs_diff(c + (size_t)T * D, ot + (size_t)b * L5 * D, (int64_t)L5 * D));
            dp = fmax(dp, mt_max_abs_diff(o->pooled + (size_t)b * (Pl + Pg), pl + (size_t)b * Pl, Pl));
            dp = fmax(dp, mt_max_abs_diff(o->pooled + (size_t)b * (Pl + Pg) + Pl, pg + (size_t)b * Pg, Pg));
        }
        printf("layout: CLIP-L %.3g, bigG %.3g, padding %.3g, T5 %.3g, pooled %.3g\n", dl, dg, pad_max, dt, dp);
        CHECK(dl == 0 && dg == 0, "CLIP's 77 rows are not [CLIP-L, bigG] (%.3g, %.3g)", dl, dg);
        CHECK(pad_max == 0, "the zero padding to the context width is not exactly zero");
        CHECK(dt == 0, "the rows after CLIP's 77 are not T5's output (%.3g)", dt);
        CHECK(dp == 0, "pooled is not [CLIP-L's pooled, bigG's pooled] (%.3g)", dp);
    }
    free(ol), free(og), free(ot), free(pl), free(pg);
}

static double loss_of(const text3_models *m, const problem *p, const outputs *o)
{
    int D = m->t5.cfg.d_model, P = m->l.cfg.projection_dim + m->g.cfg.projection_dim;
    return text3_seeded_loss(p->dctx, o->ctx, (size_t)B * o->ctx_rows * D, p->dpool, o->pooled, (size_t)B * P);
}

static bool loss_with_rows(void *vctx, int table, const float *rows, double *loss, sdt_error *error)
{
    const text3_fd_context *c = vctx;
    const problem *p = c->problem;
    const float *rl = table == 0 ? rows : p->rows_l, *rg = table == 1 ? rows : p->rows_g,
                *rt = table == 2 ? rows : p->rows_t5;
    variant v = {0};
    outputs q;
    bool ok = run(c->m, c->be, p, rl, rg, rt, &v, &q, error);
    if (ok) *loss = loss_of(c->m, p, &q);
    free_outputs(&q);
    return ok;
}

/* d(loss)/d(rows) of each of the three tables by central differences (row_gradient_check.h). */
static void check_finite_differences(sdt_test_rng *rng, const text3_models *m, sdt_backend *be, const problem *p,
                                     const outputs *o)
{
    text3_fd_context c = {m, be, p};
    int n[3] = {R * m->l.cfg.width, R * m->g.cfg.width, R * m->t5.cfg.d_model};
    const float *base[3] = {p->rows_l, p->rows_g, p->rows_t5}, *grad[3] = {o->drl, o->drg, o->drt};
    const char *names[3] = {"clip_l", "clip_g", "t5xxl"};
    rg_check_tables(rng, 3, n, base, grad, names, loss_with_rows, &c);
}

/* Frozen tables: the others' gradients unchanged, the frozen encoder's backward not run. */
static void check_frozen(const text3_models *m, sdt_backend *be, const problem *p, const outputs *all)
{
    sdt_error error = {0};
    int nl = R * m->l.cfg.width, ng = R * m->g.cfg.width, nt = R * m->t5.cfg.d_model;
    int base_ln[2] = {0, 0}, base_rms = 0; /* set by case 0; a failing case 0 leaves them 0 */
    struct {
        bool tl, tg, tt;
    } cases[4] = {{true, true, true}, {true, true, false}, {false, true, true}, {true, false, false}};
    for (int c = 0; c < 4; c++) {
        text3_counts_reset();
        variant v = {.tl = cases[c].tl, .tg = cases[c].tg, .tt = cases[c].tt, .grads = true};
        outputs o;
        if (!run(m, be, p, p->rows_l, p->rows_g, p->rows_t5, &v, &o, &error)) {
            CHECK(false, "case %d: %s", c, error.message);
            free_outputs(&o);
            continue;
        }
        printf("trains clip_l %d clip_g %d t5xxl %d: layer-norm backwards %d (L) %d (G), RMS-norm backwards %d\n", v.tl,
               v.tg, v.tt, text3_counts.ln[0], text3_counts.ln[1], text3_counts.rms);
        if (c == 0) {
            base_ln[0] = text3_counts.ln[0], base_ln[1] = text3_counts.ln[1], base_rms = text3_counts.rms;
            CHECK(base_ln[0] > 0 && base_ln[1] > 0 && base_rms > 0, "training every table ran no backward somewhere");
        } else {
            CHECK(text3_counts.ln[0] == (v.tl ? base_ln[0] : 0), "CLIP-L's backward %s",
                  v.tl ? "changed" : "ran frozen");
            CHECK(text3_counts.ln[1] == (v.tg ? base_ln[1] : 0), "bigG's backward %s", v.tg ? "changed" : "ran frozen");
            CHECK(text3_counts.rms == (v.tt ? base_rms : 0), "T5's backward %s", v.tt ? "changed" : "ran frozen");
        }
        if (v.tl) CHECK(mt_max_abs_diff(o.drl, all->drl, nl) <= 1e-6, "case %d: clip_l's gradient changed", c);
        if (v.tg) CHECK(mt_max_abs_diff(o.drg, all->drg, ng) <= 1e-6, "case %d: clip_g's gradient changed", c);
        if (v.tt) CHECK(mt_max_abs_diff(o.drt, all->drt, nt) <= 1e-6, "case %d: t5xxl's gradient changed", c);
        free_outputs(&o);
    }
}

static void check_no_t5_and_cache(const text3_models *m, sdt_backend *be, const problem *p, const outputs *all)
{
    sdt_error error = {0};
    int Cl = m->l.cfg.width, Cg = m->g.cfg.width, D = m->t5.cfg.d_model, rows = T + L5;
    /* no T5: 77 rows of exact zeros after CLIP's, CLIP's rows as before */
    variant v = {.no_t5 = true, .tl = true, .tg = true, .grads = true};
    outputs o;
    if (run(m, be, p, p->rows_l, p->rows_g, p->rows_t5, &v, &o, &error)) {
        double zero_max = 0, clip_diff = 0;
        for (int b = 0; b < B; b++) {
            clip_diff = fmax(clip_diff, mt_max_abs_diff(o.ctx + (size_t)b * 2 * T * D, all->ctx + (size_t)b * rows * D,
                                                        (int64_t)T * D));
            for (size_t i = 0; i < (size_t)T * D; i++)
                zero_max = fmax(zero_max, fabs(o.ctx[((size_t)b * 2 + 1) * T * D + i]));
        }
        CHECK(o.ctx_rows == 2 * T && zero_max == 0, "without T5 the context's last 77 rows are not zeros (%.3g)",
              zero_max);
        CHECK(clip_diff == 0, "without T5 CLIP's rows changed (%.3g)", clip_diff);
        (void)Cl, (void)Cg;
    } else {
        CHECK(false, "the conditioning without T5: %s", error.message);
    }
    free_outputs(&o);
    v.tt = true;
    error.message[0] = 0;
    CHECK(!run(m, be, p, p->rows_l, p->rows_g, p->rows_t5, &v, &o, &error) && strstr(error.message, "without T5"),
          "t5xxl rows trained without T5 (%s)", error.message);
    free_outputs(&o);
    /* T5 cached: its output given, T5 not run; the same context and CLIP gradients */
    float *hidden = mt_alloc((size_t)B * L5 * D * sizeof(float));
    for (int b = 0; b < B; b++)
        memcpy(hidden + (size_t)b * L5 * D, all->ctx + ((size_t)b * rows + T) * D, (size_t)L5 * D * sizeof(float));
    variant vc = {.t5_hidden = hidden, .tl = true, .tg = true, .grads = true};
    text3_counts_reset();
    if (run(m, be, p, p->rows_l, p->rows_g, p->rows_t5, &vc, &o, &error)) {
        CHECK(mt_max_abs_diff(o.ctx, all->ctx, (int64_t)B * rows * D) == 0, "the cached T5 output changed the context");
        CHECK(mt_max_abs_diff(o.drl, all->drl, R * Cl) <= 1e-6 && mt_max_abs_diff(o.drg, all->drg, R * Cg) <= 1e-6,
              "the cached T5 output changed CLIP's gradients");
        CHECK(text3_counts.rms == 0, "T5's backward ran on a cached output");
    } else {
        CHECK(false, "the conditioning with a cached T5 output: %s", error.message);
    }
    free_outputs(&o);
    vc.tt = true;
    error.message[0] = 0;
    CHECK(!run(m, be, p, p->rows_l, p->rows_g, p->rows_t5, &vc, &o, &error) && strstr(error.message, "cached"),
          "t5xxl rows trained from a cached T5 output (%s)", error.message);
    free_outputs(&o);
    free(hidden);
}

/* bf16 activations: the same conditioning within bf16's precision, the padding still exactly zero. */
static void check_bf16(const text3_models *m, sdt_backend *be, const problem *p, const outputs *all)
{
    sdt_error error = {0};
    int Cl = m->l.cfg.width, Cg = m->g.cfg.width, D = m->t5.cfg.d_model, rows = T + L5;
    variant v = {.tl = true, .tg = true, .tt = true, .grads = true, .bf16 = true};
    outputs o;
    if (run(m, be, p, p->rows_l, p->rows_g, p->rows_t5, &v, &o, &error)) {
        double pad_max = 0;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int k = Cl + Cg; k < D; k++) pad_max = fmax(pad_max, fabs(o.ctx[((size_t)b * rows + t) * D + k]));
        double ec = sdt_rel_err_ff(o.ctx, all->ctx, (int64_t)B * rows * D);
        double el = sdt_rel_err_ff(o.drl, all->drl, R * Cl), eg = sdt_rel_err_ff(o.drg, all->drg, R * Cg);
        double et = sdt_rel_err_ff(o.drt, all->drt, R * D);
        printf("bf16 against f32: context %.3g, clip_l %.3g, clip_g %.3g, t5xxl %.3g\n", ec, el, eg, et);
        CHECK(pad_max == 0, "bf16: the zero padding is not exactly zero");
        CHECK(ec <= 3e-2 && el <= 1e-1 && eg <= 1e-1 && et <= 1e-1, "bf16 strays from f32 (%.3g %.3g %.3g %.3g)", ec,
              el, eg, et);
    } else {
        CHECK(false, "the conditioning in bf16: %s", error.message);
    }
    free_outputs(&o);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("models_test_sd3_text");
    text3_fixture f;
    if (text3_fixture_open(&f, &rng, false, "SD3")) {
        const text3_models m = f.m;
        sdt_backend *be = f.be;
        sdt_error error = {0};
        problem p;
        make_problem(&rng, &m, &p);
        variant all = {.tl = true, .tg = true, .tt = true, .grads = true};
        outputs o;
        if (run(&m, be, &p, p.rows_l, p.rows_g, p.rows_t5, &all, &o, &error)) {
            check_layout(&m, be, &p, &o);
            check_finite_differences(&rng, &m, be, &p, &o);
            check_frozen(&m, be, &p, &o);
            check_no_t5_and_cache(&m, be, &p, &o);
            check_bf16(&m, be, &p, &o);
        } else {
            CHECK(false, "the SD3 conditioning: %s", error.message);
        }
        free_outputs(&o);
        /* bigG without its projection (SDXL's CLIP-L in its place) is refused with a sentence */
        clip_text_model no_proj = m.g;
        no_proj.cfg.projection_dim = 0;
        sdt_tensor tl = mt_tensor(p.tl, SDT_I32, 2, B, T, 0, 0);
        sdt_sd3_text_inputs in = {.tokens_l = &tl, .tokens_g = &tl, .act_dtype = SDT_F32};
        sdt_sd3_text_acts acts;
        sdt_arena meas;
        sdt_arena_init_measure(&meas, be);
        error.message[0] = 0;
        CHECK(!sdt_sd3_text_forward(&m.l, &no_proj, &m.t5, be, &meas, &in, &acts, &error) &&
                  strstr(error.message, "text_projection"),
              "an encoder without its projection was accepted (%s)", error.message);
        in.joint_dim = 64; /* narrower than CLIP-L + bigG and than T5 */
        error.message[0] = 0;
        CHECK(!sdt_sd3_text_forward(&m.l, &m.g, &m.t5, be, &meas, &in, &acts, &error) &&
                  strstr(error.message, "joint_attention_dim"),
              "a context narrower than CLIP's was accepted (%s)", error.message);
        free(p.rows_l), free(p.rows_g), free(p.rows_t5), free(p.dctx), free(p.dpool);
    }
    text3_fixture_close(&f);
    return sdt_test_finish("models_test_sd3_text");
}
