/* kernels_cpu.c - how close the CPU backend's GEMM-bound ops (linear, conv2d)
 * come to OpenBLAS sgemm itself.
 *
 * Each case times the op and bare sgemm calls of exactly the GEMMs the op
 * reduces to (same M, N, K and transposes: one for forward, dgrad + wgrad for
 * backward; per image for conv2d), best of several ~40 ms samples, two ways:
 *  - "op/OpenBLAS": against OpenBLAS's own multi-threaded sgemm, the issue's
 *    yardstick. The backend runs OpenBLAS single-threaded under its OpenMP
 *    threads (kernels/cpu/cpu_gemm.h), so the two pools are timed in separate
 *    phases with a pause between, lest one's spin-waiting slow the other.
 *  - "op/GEMM": against the same GEMMs issued through the backend's own
 *    cpu_sgemm, sample by sample interleaved with the op. Same pool, same
 *    moment: on a shared, loaded machine this is the steadier measure of what
 *    the op adds on top of its GEMMs (im2col, col2im, bias sums).
 * 1.0 means nothing added. Shapes are Stable Diffusion's, scaled down.
 *
 * usage: kernels_cpu [out.json]   (default bench_kernels_cpu.json)
 * Environment: SDT_BENCH_REPEATS, rounds (default 5); SDT_BENCH_THREADS, threads
 * for the backend and the reference (default: OpenBLAS's, i.e. all cores).
 * Not a ctest test: timings are reported, never asserted.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu/cpu_gemm.h"
#include "ops.h"

typedef enum { CASE_LINEAR, CASE_CONV } case_kind;

typedef struct bench_case {
    const char *name;
    case_kind kind;
    bool backward;
    /* linear: rows n, in c, out oc. conv: batch n, in c, out oc, size hw, kernel k. */
    int n, c, oc, hw, k, stride, pad;
} bench_case;

/* One sgemm call C [m, n] = op(A) [m, k] op(B) [k, n], row-major. */
typedef struct gemm_spec {
    bool ta, tb;
    int m, n, k;
} gemm_spec;

typedef struct bench_result {
    double op_gflops;   /* the op */
    double pool_gflops; /* its GEMMs through cpu_sgemm, interleaved with the op */
    double blas_gflops; /* its GEMMs through multi-threaded OpenBLAS */
    gemm_spec main;     /* the first (forward or dgrad) GEMM, for the table */
} bench_result;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *alloc_random(size_t n)
{
    float *p = malloc(n * sizeof *p);
    if (!p) {
        fprintf(stderr, "kernels_cpu: out of memory allocating %zu floats\n", n);
        exit(1);
    }
    uint64_t s = 0x9E3779B97F4A7C15ull ^ n;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (float)((double)(s >> 40) / (double)(1ull << 24)) - 0.5f;
    }
    return p;
}

/* Everything one case needs: op tensors plus the sgemm operands of the same size. */
typedef struct bench_state {
    const bench_case *bc;
    sdt_backend *be;
    sdt_tensor x, w, b, out, dx, dw, db;
    float *buf[7];
    gemm_spec gemm[2]; /* the GEMMs the op performs per image */
    int ngemm, images;
    float *ga, *gb, *gc;
    double flops; /* of one op call: its GEMMs' multiply-adds, times 2 */
} bench_state;

static void state_init(bench_state *st, sdt_backend *be, const bench_case *bc)
{
    memset(st, 0, sizeof *st);
    st->bc = bc;
    st->be = be;
    if (bc->kind == CASE_LINEAR) {
        const int64_t xs[2] = {bc->n, bc->c}, ws[2] = {bc->oc, bc->c}, bs[1] = {bc->oc}, os[2] = {bc->n, bc->oc};
        st->buf[0] = alloc_random((size_t)bc->n * bc->c);
        st->buf[1] = alloc_random((size_t)bc->oc * bc->c);
        st->buf[2] = alloc_random((size_t)bc->oc);
        st->buf[3] = alloc_random((size_t)bc->n * bc->oc);
        st->buf[4] = alloc_random((size_t)bc->n * bc->c);
        st->buf[5] = alloc_random((size_t)bc->oc * bc->c);
        st->buf[6] = alloc_random((size_t)bc->oc);
        st->x = sdt_tensor_make(st->buf[0], SDT_F32, SDT_DEVICE_CPU, 2, xs);
        st->w = sdt_tensor_make(st->buf[1], SDT_F32, SDT_DEVICE_CPU, 2, ws);
        st->b = sdt_tensor_make(st->buf[2], SDT_F32, SDT_DEVICE_CPU, 1, bs);
        st->out = sdt_tensor_make(st->buf[3], SDT_F32, SDT_DEVICE_CPU, 2, os);
        st->dx = sdt_tensor_make(st->buf[4], SDT_F32, SDT_DEVICE_CPU, 2, xs);
        st->dw = sdt_tensor_make(st->buf[5], SDT_F32, SDT_DEVICE_CPU, 2, ws);
        st->db = sdt_tensor_make(st->buf[6], SDT_F32, SDT_DEVICE_CPU, 1, bs);
        st->images = 1;
        if (bc->backward) {
            st->gemm[0] = (gemm_spec){false, false, bc->n, bc->c, bc->oc}; /* dx = dout w */
            st->gemm[1] = (gemm_spec){true, false, bc->oc, bc->c, bc->n};  /* dw += dout^T x */
            st->ngemm = 2;
        } else {
            st->gemm[0] = (gemm_spec){false, true, bc->n, bc->oc, bc->c}; /* out = x w^T */
            st->ngemm = 1;
        }
    } else {
        const int oh = (bc->hw + 2 * bc->pad - bc->k) / bc->stride + 1;
        const int64_t xs[4] = {bc->n, bc->c, bc->hw, bc->hw}, ws[4] = {bc->oc, bc->c, bc->k, bc->k};
        const int64_t bs[1] = {bc->oc}, os[4] = {bc->n, bc->oc, oh, oh};
        const size_t nx = (size_t)bc->n * bc->c * bc->hw * bc->hw, nw = (size_t)bc->oc * bc->c * bc->k * bc->k;
        st->buf[0] = alloc_random(nx);
        st->buf[1] = alloc_random(nw);
        st->buf[2] = alloc_random((size_t)bc->oc);
        st->buf[3] = alloc_random((size_t)bc->n * bc->oc * oh * oh);
        st->buf[4] = alloc_random(nx);
        st->buf[5] = alloc_random(nw);
        st->buf[6] = alloc_random((size_t)bc->oc);
        st->x = sdt_tensor_make(st->buf[0], SDT_F32, SDT_DEVICE_CPU, 4, xs);
        st->w = sdt_tensor_make(st->buf[1], SDT_F32, SDT_DEVICE_CPU, 4, ws);
        st->b = sdt_tensor_make(st->buf[2], SDT_F32, SDT_DEVICE_CPU, 1, bs);
        st->out = sdt_tensor_make(st->buf[3], SDT_F32, SDT_DEVICE_CPU, 4, os);
        st->dx = sdt_tensor_make(st->buf[4], SDT_F32, SDT_DEVICE_CPU, 4, xs);
        st->dw = sdt_tensor_make(st->buf[5], SDT_F32, SDT_DEVICE_CPU, 4, ws);
        st->db = sdt_tensor_make(st->buf[6], SDT_F32, SDT_DEVICE_CPU, 1, bs);
        /* Per image: out [OC, P] = w [OC, R] x col [R, P], R = C*K*K, P = OH*OW. */
        const int rows = bc->c * bc->k * bc->k, np = oh * oh;
        st->images = bc->n;
        if (bc->backward) {
            st->gemm[0] = (gemm_spec){true, false, rows, np, bc->oc}; /* dcol = w^T dout */
            st->gemm[1] = (gemm_spec){false, true, bc->oc, rows, np}; /* dw += dout col^T */
            st->ngemm = 2;
        } else {
            st->gemm[0] = (gemm_spec){false, false, bc->oc, np, rows};
            st->ngemm = 1;
        }
    }
    size_t amax = 1, bmax = 1, cmax = 1;
    for (int i = 0; i < st->ngemm; i++) {
        const gemm_spec *g = &st->gemm[i];
        st->flops += 2.0 * g->m * g->n * g->k * st->images;
        if ((size_t)g->m * g->k > amax) amax = (size_t)g->m * g->k;
        if ((size_t)g->k * g->n > bmax) bmax = (size_t)g->k * g->n;
        if ((size_t)g->m * g->n > cmax) cmax = (size_t)g->m * g->n;
    }
    st->ga = alloc_random(amax);
    st->gb = alloc_random(bmax);
    st->gc = alloc_random(cmax);
}

static void state_free(bench_state *st)
{
    for (int i = 0; i < 7; i++) free(st->buf[i]);
    free(st->ga);
    free(st->gb);
    free(st->gc);
}

static int run_op(bench_state *st)
{
    const bench_case *bc = st->bc;
    sdt_backend *be = st->be;
    if (bc->kind == CASE_LINEAR)
        return bc->backward ? be->linear_backward(be, &st->dx, &st->dw, &st->db, &st->out, &st->x, &st->w)
                            : be->linear_forward(be, &st->out, &st->x, &st->w, &st->b);
    return bc->backward
               ? be->conv2d_backward(be, &st->dx, &st->dw, &st->db, &st->out, &st->x, &st->w, bc->stride, bc->pad)
               : be->conv2d_forward(be, &st->out, &st->x, &st->w, &st->b, bc->stride, bc->pad);
}

/* The op's GEMMs alone, on operands of the same shapes and layouts: through the
 * backend's cpu_sgemm (pool) or straight to multi-threaded OpenBLAS. */
static void run_gemm(bench_state *st, bool pool)
{
    for (int img = 0; img < st->images; img++)
        for (int i = 0; i < st->ngemm; i++) {
            const gemm_spec *g = &st->gemm[i];
            const int lda = g->ta ? g->m : g->k, ldb = g->tb ? g->k : g->n;
            if (pool)
                cpu_sgemm(st->be, g->ta, g->tb, g->m, g->n, g->k, 1.0f, st->ga, lda, st->gb, ldb, 0.0f, st->gc, g->n);
            else
                cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans, g->m,
                            g->n, g->k, 1.0f, st->ga, lda, st->gb, ldb, 0.0f, st->gc, g->n);
        }
}

/* Seconds for `iters` calls of the op (gemm < 0) or of its GEMMs (pool: gemm > 0, OpenBLAS: gemm == 0). */
static double time_sample(bench_state *st, int iters, int gemm)
{
    const double t0 = now_seconds();
    for (int i = 0; i < iters; i++) {
        if (gemm < 0)
            run_op(st);
        else
            run_gemm(st, gemm > 0);
    }
    return now_seconds() - t0;
}

static void keep_min(double *best, double t)
{
    if (t < *best) *best = t;
}

/* Lets spinning OpenMP / OpenBLAS workers give up their cores before the next phase. */
static void pause_for_idle_pools(void)
{
    struct timespec ts = {0, 150 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static int bench_one(sdt_backend *be, const bench_case *bc, int repeats, int blas_threads, bench_result *res)
{
    bench_state st;
    state_init(&st, be, bc);
    if (run_op(&st)) { /* warm-up: scratch buffers, page faults, BLAS threads */
        fprintf(stderr, "kernels_cpu: %s failed: %s\n", bc->name, be->error.message);
        state_free(&st);
        return -1;
    }
    run_gemm(&st, true);
    /* Each sample runs long enough (~40 ms) that timer and thread wake-up noise vanish. */
    const double once = time_sample(&st, 1, -1);
    const int iters = once > 0.04 ? 1 : (int)(0.04 / (once > 1e-6 ? once : 1e-6)) + 1;
    double best_op = 1e30, best_pool = 1e30, best_blas = 1e30;
    for (int round = 0; round < repeats; round++) {
        for (int r = 0; r < 3; r++) {
            keep_min(&best_op, time_sample(&st, iters, -1));
            keep_min(&best_pool, time_sample(&st, iters, 1));
        }
        pause_for_idle_pools();
        openblas_set_num_threads(blas_threads);
        run_gemm(&st, false);
        for (int r = 0; r < 3; r++) keep_min(&best_blas, time_sample(&st, iters, 0));
        openblas_set_num_threads(1); /* back to what the backend expects */
        pause_for_idle_pools();
    }
    res->op_gflops = st.flops * iters / best_op * 1e-9;
    res->pool_gflops = st.flops * iters / best_pool * 1e-9;
    res->blas_gflops = st.flops * iters / best_blas * 1e-9;
    res->main = st.gemm[0];
    state_free(&st);
    return 0;
}

/* Writes the JSON atomically: temp file, fsync, rename. */
static int write_json(const char *path, const bench_case *cases, const bench_result *res, int count, int threads)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "kernels_cpu: cannot write %s; pass a writable path as the first argument.\n", tmp);
        return -1;
    }
    fprintf(f, "{\n  \"benchmark\": \"kernels_cpu\",\n  \"threads\": %d,\n  \"cases\": [\n", threads);
    for (int i = 0; i < count; i++)
        fprintf(f,
                "    {\"name\": \"%s\", \"gemm_m\": %d, \"gemm_n\": %d, \"gemm_k\": %d, \"op_gflops\": %.2f, "
                "\"openblas_sgemm_gflops\": %.2f, \"pool_sgemm_gflops\": %.2f, \"fraction_of_openblas\": %.3f, "
                "\"fraction_of_pool_gemm\": %.3f}%s\n",
                cases[i].name, res[i].main.m, res[i].main.n, res[i].main.k, res[i].op_gflops, res[i].blas_gflops,
                res[i].pool_gflops, res[i].op_gflops / res[i].blas_gflops, res[i].op_gflops / res[i].pool_gflops,
                i + 1 < count ? "," : "");
    fprintf(f, "  ]\n}\n");
    int ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "kernels_cpu: could not finish writing %s.\n", path);
        remove(tmp);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *json_path = argc > 1 ? argv[1] : "bench_kernels_cpu.json";
    const char *rep_env = getenv("SDT_BENCH_REPEATS");
    const int repeats = rep_env && atoi(rep_env) > 0 ? atoi(rep_env) : 5;
    static const bench_case cases[] = {
        {"linear fwd 4096x320->320", CASE_LINEAR, false, 4096, 320, 320, 0, 0, 0, 0},
        {"linear fwd 1024x640->640", CASE_LINEAR, false, 1024, 640, 640, 0, 0, 0, 0},
        {"linear bwd 4096x320->320", CASE_LINEAR, true, 4096, 320, 320, 0, 0, 0, 0},
        {"linear bwd 1024x640->640", CASE_LINEAR, true, 1024, 640, 640, 0, 0, 0, 0},
        {"conv2d fwd 3x3 320->320 32x32", CASE_CONV, false, 1, 320, 320, 32, 3, 1, 1},
        {"conv2d fwd 3x3 640->640 16x16", CASE_CONV, false, 1, 640, 640, 16, 3, 1, 1},
        {"conv2d fwd 3x3 s2 320->320 32x32", CASE_CONV, false, 1, 320, 320, 32, 3, 2, 1},
        {"conv2d fwd 1x1 640->640 16x16", CASE_CONV, false, 1, 640, 640, 16, 1, 1, 0},
        {"conv2d bwd 3x3 320->320 32x32", CASE_CONV, true, 1, 320, 320, 32, 3, 1, 1},
        {"conv2d bwd 3x3 640->640 16x16", CASE_CONV, true, 1, 640, 640, 16, 3, 1, 1},
        {"conv2d bwd 3x3 s2 320->320 32x32", CASE_CONV, true, 1, 320, 320, 32, 3, 2, 1},
        {"conv2d bwd 1x1 640->640 16x16", CASE_CONV, true, 1, 640, 640, 16, 1, 1, 0},
    };
    const int count = (int)(sizeof cases / sizeof cases[0]);
    bench_result res[sizeof cases / sizeof cases[0]];

    const char *thr_env = getenv("SDT_BENCH_THREADS");
    const int want_threads = thr_env && atoi(thr_env) > 0 ? atoi(thr_env) : 0;
    if (want_threads) openblas_set_num_threads(want_threads);
    /* OpenBLAS's thread count, read before the backend pins it to 1. */
    const int threads = openblas_get_num_threads();
    sdt_backend *be = sdt_backend_cpu_create(threads);
    if (!be) {
        fprintf(stderr, "kernels_cpu: could not create the CPU backend\n");
        return 1;
    }
    printf("kernels_cpu: %d threads (backend OpenMP and reference OpenBLAS), best of %d rounds x 3 samples each\n",
           threads, repeats);
    printf("%-33s %14s %8s %9s %9s %12s %8s\n", "case", "GEMM m*n*k", "op GF/s", "OpenBLAS", "pool GEMM", "op/OpenBLAS",
           "op/GEMM");
    for (int i = 0; i < count; i++) {
        if (bench_one(be, &cases[i], repeats, threads, &res[i])) {
            be->destroy(be);
            return 1;
        }
        char gemm[48];
        snprintf(gemm, sizeof gemm, "%dx%dx%d", res[i].main.m, res[i].main.n, res[i].main.k);
        printf("%-33s %14s %8.1f %9.1f %9.1f %11.0f%% %7.0f%%\n", cases[i].name, gemm, res[i].op_gflops,
               res[i].blas_gflops, res[i].pool_gflops, 100.0 * res[i].op_gflops / res[i].blas_gflops,
               100.0 * res[i].op_gflops / res[i].pool_gflops);
        fflush(stdout);
    }
    be->destroy(be);
    if (write_json(json_path, cases, res, count, threads)) return 1;
    printf("kernels_cpu: wrote %s\n", json_path);
    return 0;
}
