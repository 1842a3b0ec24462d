/* vec_array_check.h - what the tests of the vector array functions share (test_vec_expf.c, test_vec_erfcf.c;
 * header only): bit-for-bit comparison, the walk over every 251st float bit pattern (all exponents, both signs,
 * subnormals, inf and NaN), and the check that a value does not depend on its place in the array. */
#ifndef SDT_TESTS_VEC_ARRAY_CHECK_H
#define SDT_TESTS_VEC_ARRAY_CHECK_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sdt_test.h"

/* The same bits, or both NaN. */
static inline int vac_same_bits(float a, float b)
{
    uint32_t ua, ub;
    memcpy(&ua, &a, 4), memcpy(&ub, &b, 4);
    return ua == ub || (isnan(a) && isnan(b));
}

/* The next bit patterns of the walk from *u (start at 0) in x, at most cap of them; how many (0: the walk is done). */
static inline int vac_next_patterns(float *x, int cap, uint64_t *u)
{
    int n = 0;
    for (; n < cap && *u < (1ULL << 32); n++, *u += 251) {
        const uint32_t bits = (uint32_t)*u;
        memcpy(&x[n], &bits, 4);
    }
    return n;
}

/* fn over every length 0..19 at every start offset 0..3 of src[32] gives one(src[i]) at each place it wrote and
 * leaves the neighbours alone (checked, naming fn_name). */
static inline void vac_check_places(void (*fn)(const float *, float *, int64_t), float (*one)(float), const float *src,
                                    const char *fn_name)
{
    float dst[32];
    for (int offset = 0; offset < 4; offset++)
        for (int n = 0; n < 20; n++) {
            for (int i = 0; i < 32; i++) dst[i] = -1.0f;
            fn(src + offset, dst + offset, n);
            int ok = 1;
            for (int i = 0; i < 32; i++)
                ok &= vac_same_bits(dst[i], i >= offset && i < offset + n ? one(src[i]) : -1.0f);
            CHECK(ok, "%s, length %d at offset %d: a value depends on its place or a neighbour was written", fn_name, n,
                  offset);
        }
}

#endif
