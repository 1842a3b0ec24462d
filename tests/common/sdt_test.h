/* sdt_test.h - the small harness every C test shares (header only).
 *
 * CHECK records a failure with file:line and a message and keeps going, so one
 * run reports every broken case; sdt_test_finish() turns the count into the exit
 * status. A test that cannot run here (no GPU, no tokenizer files) returns
 * SDT_TEST_SKIP, which ctest reports as skipped (SKIP_RETURN_CODE 77).
 */
#ifndef SDT_TEST_H
#define SDT_TEST_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define SDT_TEST_SKIP 77

static int sdt_test_failures = 0;
static int sdt_test_checks = 0;

static inline void sdt_test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    sdt_test_failures++;
}

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        sdt_test_checks++;                                                                                             \
        if (!(cond)) sdt_test_fail(__FILE__, __LINE__, __VA_ARGS__);                                                   \
    } while (0)

static inline int sdt_test_finish(const char *name)
{
    if (sdt_test_failures)
        fprintf(stderr, "%s: %d of %d checks failed\n", name, sdt_test_failures, sdt_test_checks);
    else
        printf("%s: all %d checks passed\n", name, sdt_test_checks);
    return sdt_test_failures ? 1 : 0;
}

/* Deterministic RNG (splitmix64). A fixed default seed so every run checks the same cases;
 * SDT_TEST_SEED=N explores others. The seed is printed so a failure can be replayed. */
#define SDT_TEST_DEFAULT_SEED 20261126ull
typedef struct {
    uint64_t s;
} sdt_test_rng;

static inline uint64_t sdt_test_next(sdt_test_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline double sdt_test_uniform(sdt_test_rng *r) /* [0, 1) */
{
    return (double)(sdt_test_next(r) >> 11) * (1.0 / 9007199254740992.0);
}
static inline double sdt_test_normal(sdt_test_rng *r)
{
    double u1 = sdt_test_uniform(r), u2 = sdt_test_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
static inline sdt_test_rng sdt_test_rng_from_env(const char *name)
{
    const char *e = getenv("SDT_TEST_SEED");
    uint64_t seed = e ? strtoull(e, NULL, 0) : SDT_TEST_DEFAULT_SEED;
    printf("%s: seed %llu (set SDT_TEST_SEED to replay)\n", name, (unsigned long long)seed);
    sdt_test_rng r = {seed};
    return r;
}
static inline void sdt_test_fill_normal(sdt_test_rng *r, float *x, int64_t n, double scale)
{
    for (int64_t i = 0; i < n; i++) x[i] = (float)(scale * sdt_test_normal(r));
}

/* One element of a relative error: the largest |a - b| (NaN counts as largest) and |b|. */
static inline void sdt_rel_err_step(double a, double b, double *num, double *den)
{
    double d = fabs(a - b);
    if (d > *num || d != d) *num = d;
    if (fabs(b) > *den) *den = fabs(b);
}
/* max |a - b| / max(max |b|, floor): relative error of a float result against a double reference. */
static inline double sdt_rel_err_fd(const float *a, const double *b, int64_t n)
{
    double num = 0, den = 1e-12;
    for (int64_t i = 0; i < n; i++) sdt_rel_err_step(a[i], b[i], &num, &den);
    return num / den;
}
/* The same for two float results (one path against another). */
static inline double sdt_rel_err_ff(const float *a, const float *b, int64_t n)
{
    double num = 0, den = 1e-30;
    for (int64_t i = 0; i < n; i++) sdt_rel_err_step(a[i], b[i], &num, &den);
    return num / den;
}
static inline double sdt_rel_err_dd(const double *a, const double *b, int64_t n)
{
    double num = 0, den = 1e-300;
    for (int64_t i = 0; i < n; i++) sdt_rel_err_step(a[i], b[i], &num, &den);
    return num / den;
}

#endif
