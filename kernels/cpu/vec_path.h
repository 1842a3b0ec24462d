/* vec_path.h - how the vector array functions (vec_expf.c, vec_erfcf.c) choose their path, once per process
 * (internal to kernels/cpu, header only): the vector code runs only where the CPU has AVX2 and FMA and a check at
 * first use finds it giving the scalar function's bits on a spread of inputs; otherwise the scalar function itself
 * runs (the same bits, slower). */
#ifndef SDT_KERNELS_CPU_VEC_PATH_H
#define SDT_KERNELS_CPU_VEC_PATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Whether vec over x[0..n) gives scalar(x[i])'s bits for every i (any NaN matches any NaN); v is n floats of
 * scratch. */
static inline int cpu_vec_matches_scalar(void (*vec)(const float *, float *, int64_t), float (*scalar)(float),
                                         const float *x, float *v, int n)
{
    vec(x, v, n);
    for (int i = 0; i < n; i++) {
        const float e = scalar(x[i]);
        uint32_t a, b;
        memcpy(&a, &v[i], 4), memcpy(&b, &e, 4);
        if (a != b && !(isnan(v[i]) && isnan(e))) return 0;
    }
    return 1;
}

/* 1 for the vector path, 0 for the scalar one: *path is -1 until decided, then the decision (AVX2 and FMA, and
 * matches() true), made once (a race decides it twice, the same way). */
static inline int cpu_vec_path(int *path, int (*matches)(void))
{
    int p = __atomic_load_n(path, __ATOMIC_RELAXED);
    if (p < 0) {
        __builtin_cpu_init();
        p = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && matches();
        __atomic_store_n(path, p, __ATOMIC_RELAXED);
    }
    return p;
}

#endif
