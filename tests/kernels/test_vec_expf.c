/* test_vec_expf - kernels/cpu/vec_expf.h: cpu_expf_array gives expf's bits for every input it is
 * handed: every 251st float bit pattern (all exponents, both signs, subnormals, the |x| >= 88
 * lanes, inf and NaN), every length 0..19 at every start offset 0..3 (the vector body and the
 * scalar tail), a special value in each lane of a vector, and in place (y == x). The attention's
 * softmax calls it, so a single differing bit would change the CPU backend's results. It says
 * which path it took (the vector one needs AVX2 + FMA and a matching libm). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/vec_expf.h"
#include "sdt_test.h"
#include "vec_array_check.h"

int main(void)
{
    printf("test_vec_expf: %s path\n", cpu_expf_array_is_vectorized() ? "AVX2 + FMA" : "scalar");
    enum { CHUNK = 1 << 16 };
    float *x = malloc(sizeof(float) * CHUNK), *y = malloc(sizeof(float) * CHUNK);
    if (!x || !y) return 1;

    int64_t bad = 0;
    uint64_t u = 0;
    for (int n; (n = vac_next_patterns(x, CHUNK, &u)) > 0;) {
        cpu_expf_array(x, y, n);
        for (int i = 0; i < n; i++)
            if (!vac_same_bits(y[i], expf(x[i])) && bad++ < 5)
                fprintf(stderr, "expf(%a): %a, libm %a\n", (double)x[i], (double)y[i], (double)expf(x[i]));
    }
    CHECK(bad == 0, "%lld of the strided bit patterns differ from expf", (long long)bad);

    float src[32];
    for (int i = 0; i < 32; i++) src[i] = -3.0f + 0.37f * (float)i;
    vac_check_places(cpu_expf_array, expf, src, "cpu_expf_array against expf");

    const float special[] = {INFINITY, -INFINITY, NAN, 88.73f, -103.9f, -87.34f, 1e-40f};
    for (size_t s = 0; s < sizeof special / sizeof special[0]; s++)
        for (int lane = 0; lane < 4; lane++) {
            float v[8];
            for (int i = 0; i < 8; i++) v[i] = i == lane ? special[s] : 0.25f * (float)i - 1.0f;
            float ref[8];
            for (int i = 0; i < 8; i++) ref[i] = expf(v[i]);
            cpu_expf_array(v, v, 8); /* in place */
            int ok = 1;
            for (int i = 0; i < 8; i++) ok &= vac_same_bits(v[i], ref[i]);
            CHECK(ok, "special value %a in lane %d (in place): a result differs from expf", (double)special[s], lane);
        }
    free(x);
    free(y);
    return sdt_test_finish("test_vec_expf");
}
