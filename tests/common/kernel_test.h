/* kernel_test.h - small helpers shared by the kernel tests (header only): a CPU backend,
 * random host buffers and f32 tensor views over them. */
#ifndef SDT_KERNEL_TEST_H
#define SDT_KERNEL_TEST_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_context.h"
#include "ops.h"
#include "sdt_test.h"

/* Three threads by default: an odd count exercises uneven OpenMP partitions.
 * SDT_TEST_THREADS overrides it. Every loop runs threaded, however small, so the
 * tests' odd little shapes exercise the parallel paths too. */
static inline sdt_backend *kt_backend(void)
{
    const char *e = getenv("SDT_TEST_THREADS");
    sdt_backend *be = sdt_backend_cpu_create(e ? atoi(e) : 3);
    if (!be) {
        fprintf(stderr, "could not create the CPU backend\n");
        exit(1);
    }
    ((cpu_context *)be->ctx)->thread_small_work = true;
    return be;
}

/* malloc that never returns NULL to a test (a test without memory cannot say anything). */
static inline void *kt_alloc(size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory allocating %zu bytes\n", bytes);
        exit(1);
    }
    return p;
}

static inline float *kt_randn(sdt_test_rng *r, int64_t n, double scale)
{
    float *x = kt_alloc((size_t)n * sizeof *x);
    sdt_test_fill_normal(r, x, n, scale);
    return x;
}

static inline double *kt_to_double(const float *x, int64_t n)
{
    double *d = kt_alloc((size_t)n * sizeof *d);
    for (int64_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

static inline float *kt_copy(const float *x, int64_t n)
{
    float *c = kt_alloc((size_t)n * sizeof *c);
    memcpy(c, x, (size_t)n * sizeof *c);
    return c;
}

/* f32 CPU tensor over data; ndim 1..4 of the given dims. */
static inline sdt_tensor kt_f32(float *data, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    return sdt_tensor_4d(data, SDT_F32, ndim, d0, d1, d2, d3);
}

/* Gradient buffers for checking a backward. Run it twice: into `fresh` (zeros), which is
 * the pure gradient to compare with the float64 reference, and into `acc` (random `base`),
 * which must end as base + fresh: backward accumulates. */
typedef struct kt_grad {
    float *fresh, *acc, *base;
    int64_t n;
} kt_grad;

static inline kt_grad kt_grad_make(sdt_test_rng *r, int64_t n)
{
    kt_grad g = {kt_alloc((size_t)n * sizeof(float)), kt_randn(r, n, 1.0), NULL, n};
    g.base = kt_copy(g.acc, n);
    return g;
}

/* acc == base + fresh up to the rounding of one float add (bitwise unless the compiler fuses). */
static inline int kt_grad_accumulated(const kt_grad *g)
{
    for (int64_t i = 0; i < g->n; i++) {
        double want = (double)g->base[i] + (double)g->fresh[i];
        double tol = 2e-7 * (fabs((double)g->base[i]) + fabs((double)g->fresh[i])) + 1e-37;
        if (!(fabs((double)g->acc[i] - want) <= tol)) return 0;
    }
    return 1;
}

/* Gradient buffers for an op that WRITES its gradient (ops.h: linear_input_grad, attention_backward,
 * geglu_backward): `fresh` full of NaN and `acc` full of 1e30, so an op that reads its gradient or
 * leaves an element unwritten shows it (NaN, or 1e30 added in) against the reference; both runs
 * must give the same bits. `base` is unused. */
static inline kt_grad kt_grad_make_garbage(int64_t n)
{
    kt_grad g = {kt_alloc((size_t)n * sizeof(float)), kt_alloc((size_t)n * sizeof(float)), NULL, n};
    for (int64_t i = 0; i < n; i++) g.fresh[i] = NAN, g.acc[i] = 1e30f;
    return g;
}

/* Both runs of a kt_grad_make_garbage pair wrote the same bits. */
static inline int kt_grad_written(const kt_grad *g)
{
    return memcmp(g->fresh, g->acc, (size_t)g->n * sizeof(float)) == 0;
}

static inline void kt_grad_free(kt_grad *g)
{
    free(g->fresh), free(g->acc), free(g->base);
}

#endif
