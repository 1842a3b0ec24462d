/* dit_test_fixture.h - what test_dit_checkpointing.c and test_dit_act_dtype.c share (header only): a tiny SD3.5
 * MMDiT or Flux model behind one reference, one problem of fixed sizes (random latent, context, pooled vector and
 * d(out)), a forward and backward with the inputs in a given dtype on an arena of exactly the measuring arena's
 * peak, and the bytes of RoPE tables a real Flux forward finds cached where the measuring one counts them. */
#ifndef SDT_TESTS_DIT_TEST_FIXTURE_H
#define SDT_TESTS_DIT_TEST_FIXTURE_H

#include "flux.h"
#include "mmdit.h"
#include "model_test_util.h"

/* Batch, context tokens, latent height and width. */
enum { DIT_B = 2, DIT_T = 3, DIT_LH = 8, DIT_LW = 6 };

typedef struct dit_model_ref {
    const mmdit_model *mmdit; /* one of the two */
    const flux_model *flux;
} dit_model_ref;

/* The model's sizes and the host f32 inputs of one step. */
typedef struct dit_problem {
    int C, cd, pd;
    size_t n_out, nc, np;
    float *latent, *ctx, *pooled, *dout;
} dit_problem;

typedef struct dit_step_result {
    float *out, *dctx, *dpooled;
    size_t measured, real_peak;
} dit_step_result;

/* The model's sizes and its inputs drawn N(0, 1) from rng: latent, context, pooled, d(out), in that order. */
static inline dit_problem dit_problem_new(dit_model_ref mr, sdt_test_rng *rng)
{
    dit_problem p;
    p.C = mr.mmdit ? mr.mmdit->cfg.in_channels : mr.flux->cfg.in_channels;
    p.cd = mr.mmdit ? mr.mmdit->cfg.context_dim : mr.flux->cfg.context_dim;
    p.pd = mr.mmdit ? mr.mmdit->cfg.pooled_dim : mr.flux->cfg.pooled_dim;
    p.n_out = (size_t)DIT_B * p.C * DIT_LH * DIT_LW, p.nc = (size_t)DIT_B * DIT_T * p.cd, p.np = (size_t)DIT_B * p.pd;
    float **bufs[4] = {&p.latent, &p.ctx, &p.pooled, &p.dout};
    const size_t ns[4] = {p.n_out, p.nc, p.np, p.n_out};
    for (int i = 0; i < 4; i++) {
        *bufs[i] = mt_alloc(sizeof(float) * ns[i]);
        sdt_test_fill_normal(rng, *bufs[i], (int)ns[i], 1.0);
    }
    return p;
}

static inline void dit_problem_free(dit_problem *p)
{
    free(p->latent), free(p->ctx), free(p->pooled), free(p->dout);
}

static inline void dit_result_free(dit_step_result *r)
{
    free(r->out), free(r->dctx), free(r->dpooled);
}

/* Host f32 values as a tensor of dtype dt (a buffer the caller frees). */
static inline sdt_tensor dit_as_dtype(const float *v, size_t n, sdt_dtype dt, void **buf, int ndim, int64_t d0,
                                      int64_t d1, int64_t d2, int64_t d3)
{
    *buf = mt_alloc(n * sdt_dtype_size(dt));
    sdt_store_f32(v, *buf, dt, (int64_t)n);
    return mt_tensor(*buf, dt, ndim, d0, d1, d2, d3);
}

/* A forward and backward from d(out), the inputs in dt (also the activations' dtype), first on a measuring arena,
 * then on an arena of exactly the measured peak; false (checked) when either failed. r's buffers are the caller's
 * to free (dit_result_free) either way. */
static inline bool dit_run_step(dit_model_ref mr, sdt_backend *be, const dit_problem *p, sdt_dtype dt,
                                bool checkpointing, dit_step_result *r)
{
    memset(r, 0, sizeof *r);
    r->out = mt_alloc(sizeof(float) * p->n_out), r->dctx = mt_alloc(sizeof(float) * p->nc);
    r->dpooled = mt_alloc(sizeof(float) * p->np);
    memset(r->dctx, 0, sizeof(float) * p->nc);
    memset(r->dpooled, 0, sizeof(float) * p->np);
    void *bl, *bc, *bp;
    sdt_tensor tl = dit_as_dtype(p->latent, p->n_out, dt, &bl, 4, DIT_B, p->C, DIT_LH, DIT_LW),
               tc = dit_as_dtype(p->ctx, p->nc, dt, &bc, 3, DIT_B, DIT_T, p->cd, 0),
               tp = dit_as_dtype(p->pooled, p->np, dt, &bp, 2, DIT_B, p->pd, 0, 0),
               td = mt_tensor(p->dout, SDT_F32, 4, DIT_B, p->C, DIT_LH, DIT_LW),
               tdc = mt_tensor(r->dctx, SDT_F32, 3, DIT_B, DIT_T, p->cd, 0),
               tdp = mt_tensor(r->dpooled, SDT_F32, 2, DIT_B, p->pd, 0, 0);
    float ts[DIT_B] = {0.25f, 0.8f}, ts1000[DIT_B] = {250.0f, 800.0f}, gs[DIT_B] = {3.5f, 1.0f};
    static mmdit_acts ma;
    static flux_acts fa;
    mmdit_inputs mi = {&tl, ts1000, &tc, &tp, checkpointing, dt};
    flux_inputs fi = {&tl, ts, gs, &tc, &tp, checkpointing, dt};
    sdt_error err = {0};
    sdt_arena measure, arena;
    sdt_arena_init_measure(&measure, be);
    bool ok = mr.mmdit ? mmdit_forward(mr.mmdit, be, &measure, &mi, &ma, &err) &&
                             mmdit_backward(mr.mmdit, be, &measure, &ma, &td, &tdc, &tdp, &err)
                       : flux_forward(mr.flux, be, &measure, &fi, &fa, &err) &&
                             flux_backward(mr.flux, be, &measure, &fa, &td, &tdc, &tdp, &err);
    CHECK(ok, "measuring (%s) failed: %s", sdt_dtype_name(dt), err.message);
    r->measured = measure.peak;
    const bool have_arena = ok && sdt_arena_init(&arena, be, measure.peak);
    CHECK(!ok || have_arena, "an arena of the measured %zu bytes", measure.peak);
    ok = have_arena && (mr.mmdit ? mmdit_forward(mr.mmdit, be, &arena, &mi, &ma, &err) &&
                                       mmdit_backward(mr.mmdit, be, &arena, &ma, &td, &tdc, &tdp, &err)
                                 : flux_forward(mr.flux, be, &arena, &fi, &fa, &err) &&
                                       flux_backward(mr.flux, be, &arena, &fa, &td, &tdc, &tdp, &err));
    CHECK(!have_arena || ok, "a %s step on an arena of the measured peak failed: %s", sdt_dtype_name(dt), err.message);
    if (ok) {
        const sdt_tensor *out = mr.mmdit ? &ma.out : &fa.out;
        CHECK(out->dtype == SDT_F32, "the prediction must stay f32 (it is %s)", sdt_dtype_name(out->dtype));
        memcpy(r->out, out->data, sizeof(float) * p->n_out);
    }
    if (have_arena) {
        r->real_peak = arena.peak;
        sdt_arena_release(&arena);
    }
    free(bl), free(bc), free(bp);
    return ok;
}

/* What a measuring pass counts that a real one does not: Flux's RoPE tables (two f32 [S, head_dim]), which a real
 * forward finds cached on the model; 0 for the MMDiT. */
static inline size_t dit_cached_rope_bytes(dit_model_ref mr)
{
    if (!mr.flux) return 0;
    const size_t table = (size_t)(DIT_T + (DIT_LH / 2) * (DIT_LW / 2)) * mr.flux->cfg.head_dim * sizeof(float);
    return 2 * ((table + 255) / 256 * 256); /* the arena's alignment */
}

#endif
