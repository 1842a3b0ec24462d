/* kernel_test.h - small helpers shared by the kernel tests (header only): a CPU backend,
 * random host buffers and f32 tensor views over them. */
#ifndef SDT_KERNEL_TEST_H
#define SDT_KERNEL_TEST_H

#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "sdt_test.h"

/* Three threads by default: an odd count exercises uneven OpenMP partitions.
 * SDT_TEST_THREADS overrides it. */
static inline sdt_backend *kt_backend(void)
{
    const char *e = getenv("SDT_TEST_THREADS");
    sdt_backend *be = sdt_backend_cpu_create(e ? atoi(e) : 3);
    if (!be) {
        fprintf(stderr, "could not create the CPU backend\n");
        exit(1);
    }
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

/* The increment a backward added to a gradient buffer that started at `base`. */
static inline double *kt_increment(const float *after, const float *base, int64_t n)
{
    double *d = kt_alloc((size_t)n * sizeof *d);
    for (int64_t i = 0; i < n; i++) d[i] = (double)after[i] - (double)base[i];
    return d;
}

#endif
