/* test_vec_erfcf - shared_math.h's shared_erfcf (the erfc of both backends' GELU) and
 * kernels/cpu/vec_erfcf.h's cpu_erfcf_array, its vector form:
 *  - shared_erfcf is within 1 ulp of erfc in double for every 251st float bit pattern (all exponents,
 *    both signs, subnormals, the ranges where erfc rounds to 0 or to 2, inf and NaN);
 *  - cpu_erfcf_array gives shared_erfcf's bits for every one of them (on either path: the vector one
 *    needs AVX2 + FMA and its first-use check; the test says which ran), so the CPU's GEGLU and GELU
 *    equal act_gelu, which the CUDA kernels compute too;
 *  - an input gives the same bits wherever it sits: every length 0..19 at every start offset 0..3
 *    against one-element calls, a special value in each lane, and in place (y == x); a value that
 *    depended on its place would make a row's output depend on the batch;
 *  - act_normal_cdf is 0.5 * shared_erfcf(-x / sqrt 2): GELU is computed with this erfc; cpu_normal_cdf_array
 *    (the CPU's GELU and GEGLU) gives act_normal_cdf's and act_gelu_grad's bits. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/vec_erfcf.h"
#include "sdt_test.h"
#include "shared_math.h"
#include "vec_array_check.h"

static float erfc_one(float x)
{
    float y;
    cpu_erfcf_array(&x, &y, 1);
    return y;
}

/* |y - erfc(x)| in units of the float spacing at erfc(x) (2^-149 for subnormals). */
static double ulp_error(float x, float y)
{
    const double ref = erfc((double)x);
    const float r = (float)ref;
    const double ulp = (double)nextafterf(fabsf(r), INFINITY) - (double)fabsf(r);
    return fabs((double)y - ref) / ulp;
}

int main(void)
{
    printf("test_vec_erfcf: %s path\n", cpu_erfcf_array_is_vectorized() ? "AVX2 + FMA" : "scalar shared_erfcf");
    enum { CHUNK = 1 << 16 };
    float *x = malloc(sizeof(float) * CHUNK), *y = malloc(sizeof(float) * CHUNK);
    if (!x || !y) return 1;

    int64_t inaccurate = 0, differ = 0, inexact = 0, checked = 0;
    double worst = 0;
    uint64_t u = 0;
    for (int n; (n = vac_next_patterns(x, CHUNK, &u)) > 0;) {
        cpu_erfcf_array(x, y, n);
        for (int i = 0; i < n; i++) {
            checked++;
            const float s = shared_erfcf(x[i]);
            if (!vac_same_bits(y[i], s) && differ++ < 5)
                fprintf(stderr, "erfc(%a): the array gives %a, shared_erfcf %a\n", (double)x[i], (double)y[i],
                        (double)s);
            if (isnan(x[i])) {
                if (!isnan(s) && inaccurate++ < 5) fprintf(stderr, "erfc(NaN): %a, expected NaN\n", (double)s);
                continue;
            }
            const double e = ulp_error(x[i], s);
            worst = e > worst ? e : worst;
            inexact += !vac_same_bits(s, (float)erfc((double)x[i]));
            if (!(e <= 1.0) && inaccurate++ < 5)
                fprintf(stderr, "shared_erfcf(%a) = %a, erfc in double %a: %.3f ulp\n", (double)x[i], (double)s,
                        erfc((double)x[i]), e);
        }
    }
    printf("  %lld inputs, worst %.4f ulp, %lld not the correctly rounded float\n", (long long)checked, worst,
           (long long)inexact);
    CHECK(inaccurate == 0, "%lld of the strided bit patterns are more than 1 ulp off erfc", (long long)inaccurate);
    CHECK(differ == 0, "%lld of the strided bit patterns differ between cpu_erfcf_array and shared_erfcf",
          (long long)differ);

    float src[32];
    for (int i = 0; i < 32; i++) src[i] = -4.1f + 0.29f * (float)i;
    vac_check_places(cpu_erfcf_array, erfc_one, src, "cpu_erfcf_array against one-element calls");

    const float special[] = {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 10.05f, 10.1f, -10.1f, 1e-40f, -3.9f};
    const float expect[] = {0.0f, 2.0f, NAN, 1.0f, 1.0f, -1.0f /* unchecked */, 0.0f, 2.0f, 1.0f, 2.0f};
    for (size_t s = 0; s < sizeof special / sizeof special[0]; s++) {
        if (expect[s] != -1.0f)
            CHECK(vac_same_bits(erfc_one(special[s]), expect[s]) && vac_same_bits(shared_erfcf(special[s]), expect[s]),
                  "erfc(%a) = %a (shared_erfcf %a), expected %a", (double)special[s], (double)erfc_one(special[s]),
                  (double)shared_erfcf(special[s]), (double)expect[s]);
        for (int lane = 0; lane < 4; lane++) {
            float v[4] = {0.5f, -0.5f, 2.0f, -2.0f}, w[4];
            v[lane] = special[s];
            cpu_erfcf_array(v, w, 4);
            int ok = 1;
            for (int i = 0; i < 4; i++) ok &= vac_same_bits(w[i], erfc_one(v[i]));
            CHECK(ok, "special value %a in lane %d changes a lane's result", (double)special[s], lane);
        }
    }

    float inplace[7] = {-2.5f, -1.0f, -0.1f, 0.0f, 0.3f, 1.7f, 6.0f}, copy[7];
    memcpy(copy, inplace, sizeof inplace);
    cpu_erfcf_array(inplace, inplace, 7);
    int ok = 1;
    for (int i = 0; i < 7; i++) ok &= vac_same_bits(inplace[i], erfc_one(copy[i]));
    CHECK(ok, "in place (y == x) differs from out of place");

    enum { NCDF = 4001 };
    float *g = malloc(sizeof(float) * NCDF * 4), *cdf = g + NCDF, *grad = cdf + NCDF, *cdf_alone = grad + NCDF;
    if (!g) return 1;
    for (int i = 0; i < NCDF; i++) g[i] = (float)(i - NCDF / 2) / 128.0f;
    cpu_normal_cdf_array(g, cdf, grad, NCDF);
    cpu_normal_cdf_array(g, cdf_alone, NULL, NCDF);
    int cdf_differ = 0, grad_differ = 0, alone_differ = 0;
    for (int i = 0; i < NCDF; i++) {
        cdf_differ += !vac_same_bits(act_normal_cdf(g[i]), 0.5f * shared_erfcf(-g[i] * ACT_INV_SQRT2)) ||
                      !vac_same_bits(cdf[i], act_normal_cdf(g[i]));
        grad_differ += !vac_same_bits(grad[i], act_gelu_grad(g[i]));
        alone_differ += !vac_same_bits(cdf_alone[i], cdf[i]);
    }
    CHECK(cdf_differ == 0,
          "act_normal_cdf, 0.5 * shared_erfcf(-x / sqrt 2) and cpu_normal_cdf_array differ at %d points", cdf_differ);
    CHECK(grad_differ == 0, "cpu_normal_cdf_array's derivative differs from act_gelu_grad at %d points", grad_differ);
    CHECK(alone_differ == 0, "cpu_normal_cdf_array's Phi without the derivative differs at %d points", alone_differ);
    free(g);
    free(x), free(y);
    return sdt_test_finish("vec_erfcf");
}
