/* gemm_shapes.c - an LD_PRELOAD shim that times every cblas_sgemm call of a process by shape.
 *
 * Why: the CPU step's GEMM share and which shapes carry it decide whether a GEMM kernel of our own
 * pays (bench/NOTES.md run 36). A bench tool only, never linked into the plugin; it reads its output
 * path from GEMM_SHAPES_OUT because a preloaded library has no other input.
 *   GEMM_SHAPES_OUT=shapes.tsv LD_PRELOAD=build/bench/gemm_shapes/libgemm_shapes.so sdt-host train ...
 * Writes PATH.pid (one file per process that called sgemm), one line per (transA, transB, m, n, k): calls, thread CPU seconds, GFLOP/s; one thread only
 * (calls from several threads at once are counted under a lock, their times overlap). */
#define _GNU_SOURCE
#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef void (*sgemm_fn)(const CBLAS_ORDER, const CBLAS_TRANSPOSE, const CBLAS_TRANSPOSE, const blasint, const blasint,
                         const blasint, const float, const float *, const blasint, const float *, const blasint,
                         const float, float *, const blasint);

enum { MAX_SHAPES = 4096 };
typedef struct {
    int ta, tb, m, n, k;
    long calls;
    double seconds;
} shape_entry;

static shape_entry shapes[MAX_SHAPES];
static int shape_count;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static double thread_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cblas_sgemm(const CBLAS_ORDER order, const CBLAS_TRANSPOSE ta, const CBLAS_TRANSPOSE tb, const blasint m,
                 const blasint n, const blasint k, const float alpha, const float *a, const blasint lda, const float *b,
                 const blasint ldb, const float beta, float *c, const blasint ldc)
{
    static sgemm_fn real;
    if (!real) real = (sgemm_fn)dlsym(RTLD_NEXT, "cblas_sgemm");
    if (!real) { /* OpenBLAS came with a plugin opened RTLD_LOCAL (sdt-host's): not in the global scope */
        void *blas = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);
        real = blas ? (sgemm_fn)dlsym(blas, "cblas_sgemm") : NULL;
        if (!real) abort();
    }
    const double t0 = thread_seconds();
    real(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    const double dt = thread_seconds() - t0;
    pthread_mutex_lock(&lock);
    int i = 0;
    while (i < shape_count && !(shapes[i].ta == (ta == CblasTrans) && shapes[i].tb == (tb == CblasTrans) &&
                                shapes[i].m == m && shapes[i].n == n && shapes[i].k == k))
        i++;
    if (i == shape_count && shape_count < MAX_SHAPES)
        shapes[shape_count++] = (shape_entry){ta == CblasTrans, tb == CblasTrans, m, n, k, 0, 0.0};
    if (i < shape_count) {
        shapes[i].calls++;
        shapes[i].seconds += dt;
    }
    pthread_mutex_unlock(&lock);
}

__attribute__((destructor)) static void write_shapes(void)
{
    /* every process of a preloaded command tree runs this: only one that called sgemm writes, to PATH.pid */
    const char *path = getenv("GEMM_SHAPES_OUT");
    if (!path || shape_count == 0) return;
    char name[4096];
    snprintf(name, sizeof name, "%s.%ld", path, (long)getpid());
    FILE *f = fopen(name, "w");
    if (!f) return;
    fprintf(f, "ta\ttb\tm\tn\tk\tcalls\tseconds\tgflops\n");
    for (int i = 0; i < shape_count; i++) {
        const shape_entry *s = &shapes[i];
        const double flops = 2.0 * s->m * s->n * s->k * (double)s->calls;
        fprintf(f, "%d\t%d\t%d\t%d\t%d\t%ld\t%.6f\t%.2f\n", s->ta, s->tb, s->m, s->n, s->k, s->calls, s->seconds,
                s->seconds > 0 ? flops / s->seconds * 1e-9 : 0.0);
    }
    fclose(f);
}
