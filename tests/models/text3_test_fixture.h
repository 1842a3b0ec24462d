/* text3_test_fixture.h - what test_sd3_text.c and test_flux_text.c share (header only): the CPU backend with its
 * norm backwards counted (a frozen table's encoder must run none: layer norms by width tell CLIP-L's from bigG's,
 * RMS norms are T5's), a temp folder and the tiny encoders of text3_test_models.h written into it and opened;
 * the loss their gradient checks differentiate. */
#ifndef SDT_TESTS_TEXT3_TEST_FIXTURE_H
#define SDT_TESTS_TEXT3_TEST_FIXTURE_H

#include <stdlib.h>

#include "model_test_util.h"
#include "text3_test_models.h"

/* The backwards run since the last reset: ln[0] of CLIP-L's width, ln[1] of bigG's, rms all of them. */
typedef struct text3_norm_counts {
    int ln[2], rms;
    int64_t widths[2];
} text3_norm_counts;

static text3_norm_counts text3_counts;
static int (*text3_real_ln_backward)(sdt_backend *, sdt_tensor *, sdt_tensor *, sdt_tensor *, const sdt_tensor *,
                                     const sdt_tensor *, const sdt_tensor *, const sdt_tensor *, const sdt_tensor *);
static int (*text3_real_rms_backward)(sdt_backend *, sdt_tensor *, sdt_tensor *, const sdt_tensor *, const sdt_tensor *,
                                      const sdt_tensor *, const sdt_tensor *);

static inline int text3_counting_ln_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta,
                                             const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *gamma,
                                             const sdt_tensor *mean, const sdt_tensor *rstd)
{
    int64_t c = dout->shape[dout->ndim - 1];
    text3_counts.ln[0] += c == text3_counts.widths[0], text3_counts.ln[1] += c == text3_counts.widths[1];
    return text3_real_ln_backward(be, dx, dgamma, dbeta, dout, x, gamma, mean, rstd);
}

static inline int text3_counting_rms_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma,
                                              const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *gamma,
                                              const sdt_tensor *rstd)
{
    text3_counts.rms++;
    return text3_real_rms_backward(be, dx, dgamma, dout, x, gamma, rstd);
}

static inline void text3_counts_reset(void)
{
    text3_counts.ln[0] = text3_counts.ln[1] = text3_counts.rms = 0;
}

/* The scalar the gradient checks differentiate: <d(context), context> + <d(pooled), pooled>, the backward's seeds
 * against the forward's outputs (n_ctx and n_pool values). */
static inline double text3_seeded_loss(const float *dctx, const float *ctx, size_t n_ctx, const float *dpool,
                                       const float *pooled, size_t n_pool)
{
    double s = 0;
    for (size_t i = 0; i < n_ctx; i++) s += (double)dctx[i] * ctx[i];
    for (size_t i = 0; i < n_pool; i++) s += (double)dpool[i] * pooled[i];
    return s;
}

/* What a central-difference callback (row_gradient_check.h) reads: the encoders, the backend, the test's problem. */
typedef struct text3_fd_context {
    const text3_models *m;
    sdt_backend *be;
    const void *problem;
} text3_fd_context;

typedef struct text3_fixture {
    sdt_backend *be;
    char dir[512];
    text3_models m;
    bool open; /* the encoders were made and opened */
} text3_fixture;

/* The backend (counting), the folder and the encoders (Flux's: CLIP-L without projection, no bigG); false (said,
 * what names the encoders) when they failed. Close it either way. */
static inline bool text3_fixture_open(text3_fixture *f, sdt_test_rng *rng, bool flux, const char *what)
{
    memset(f, 0, sizeof *f);
    f->be = mt_backend();
    text3_real_ln_backward = f->be->layernorm_backward, text3_real_rms_backward = f->be->rmsnorm_backward;
    f->be->layernorm_backward = text3_counting_ln_backward, f->be->rmsnorm_backward = text3_counting_rms_backward;
    snprintf(f->dir, sizeof f->dir, "%s/sdt-%s-text-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             flux ? "flux" : "sd3");
    CHECK(mkdtemp(f->dir) != NULL, "mkdtemp %s", f->dir);
    sdt_error error = {0};
    f->open = text3_make(f->dir, flux, sdt_test_next(rng), &f->m, &error);
    CHECK(f->open, "the tiny %s encoders: %s", what, error.message);
    if (f->open) text3_counts.widths[0] = f->m.l.cfg.width, text3_counts.widths[1] = flux ? -1 : f->m.g.cfg.width;
    return f->open;
}

static inline void text3_fixture_close(text3_fixture *f)
{
    text3_close(&f->m);
    mt_remove_folder(f->dir);
    f->be->layernorm_backward = text3_real_ln_backward, f->be->rmsnorm_backward = text3_real_rms_backward;
    f->be->destroy(f->be);
}

#endif
