/* test_cpu_threads - kernels/cpu/cpu_context.h: each op family's thread count follows its work
 * size (one thread below the family's measured threshold, the backend's threads from it on; a GEMM
 * of 262144 multiply-adds, which the old rule split, stays on one thread), the tests' switch
 * threads everything, and a product under the GEMM threshold gives the 1-thread bits on 2 threads
 * (the old rule split it, which changes bits under Haswell/Zen kernels). OpenBLAS runs one thread
 * here (CMakeLists: OPENBLAS_NUM_THREADS=1), else cpu_sgemm would never split. */
#include <cblas.h>
#include <stdint.h>
#include <string.h>

#include "cpu/cpu_context.h"
#include "cpu/cpu_gemm.h"
#include "sdt_test.h"

static sdt_backend *backend(int threads, bool thread_small_work)
{
    sdt_backend *be = sdt_backend_cpu_create(threads);
    if (be) ((cpu_context *)be->ctx)->thread_small_work = thread_small_work;
    return be;
}

/* C = A B for one shape on `be`, A and B filled by a fixed LCG. */
static void product(sdt_backend *be, bool ta, bool tb, int m, int n, int k, float *c)
{
    static float a[96 * 300], b[300 * 200];
    uint32_t s = 12345;
    for (size_t i = 0; i < sizeof a / sizeof *a; i++)
        a[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (size_t i = 0; i < sizeof b / sizeof *b; i++)
        b[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (int i = 0; i < m * n; i++) c[i] = 0.25f; /* beta = 1 adds into it */
    cpu_sgemm(be, ta, tb, m, n, k, 1.0f, a, ta ? m : k, b, tb ? k : n, 1.0f, c, n);
}

int main(void)
{
    CHECK(openblas_get_num_threads() == 1, "OpenBLAS runs %d threads; the test needs 1 (OPENBLAS_NUM_THREADS=1)",
          openblas_get_num_threads());
    sdt_backend *two = backend(2, false), *forced = backend(2, true);
    CHECK(two && forced, "cannot create the CPU backend");
    if (!two || !forced) return sdt_test_finish("test_cpu_threads");

    CHECK(cpu_threads_for(two, CPU_ELEMENTWISE_MIN_WORK - 1) == 1, "a small loop must stay on one thread");
    CHECK(cpu_threads_for(two, CPU_ELEMENTWISE_MIN_WORK) == 2, "a large loop must use both threads");
    CHECK(cpu_threads_over(two, 64 * 128 * 32, CPU_GEMM_MIN_MACS) == 1,
          "a 64x128x32 GEMM (measured slower split in two) must stay on one thread");
    CHECK(cpu_threads_over(two, 64 * 256 * 64, CPU_GEMM_MIN_MACS) == 2, "a 64x256x64 GEMM must use both threads");
    CHECK(cpu_threads_for(forced, 1) == 2 && cpu_threads_over(forced, 1, CPU_GEMM_MIN_MACS) == 2,
          "thread_small_work must thread every op");

    /* A product under the GEMM threshold is one BLAS call at any thread count, so its bits are the
     * 1-thread bits. (A split one's are not under Haswell/Zen kernels: bench/NOTES.md run 35.) The
     * old rule split 64x128x32 in two column panels, which changes 390 of its bits here. */
    sdt_backend *one = backend(1, false);
    CHECK(one != NULL, "cannot create the CPU backend");
    static float c1[96 * 300], c2[96 * 300];
    static const int shapes[][3] = {{64, 128, 32}, {128, 64, 32}, {64, 256, 63}};
    for (size_t s = 0; one && s < sizeof shapes / sizeof *shapes; s++)
        for (int t = 0; t < 4; t++) {
            const int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            const bool ta = t & 1, tb = t & 2;
            CHECK((int64_t)m * n * k < CPU_GEMM_MIN_MACS, "shape %d is not under the threshold", (int)s);
            product(one, ta, tb, m, n, k, c1);
            product(two, ta, tb, m, n, k, c2);
            CHECK(memcmp(c1, c2, sizeof(float) * (size_t)m * n) == 0, "%dx%dx%d (ta %d tb %d): 2 threads differ from 1",
                  m, n, k, ta, tb);
        }
    sdt_backend *three = NULL;
    sdt_backend *all[] = {one, two, three, forced};
    for (int i = 0; i < 4; i++)
        if (all[i]) all[i]->destroy(all[i]);
    return sdt_test_finish("test_cpu_threads");
}
