/* test_dtype_storage - f16/bf16 storage: exact decoding, round-to-nearest-even encoding
 * (ties, denormals, the 65504/65520 overflow boundary), NaN/inf propagation, and ops that
 * read and write 16-bit tensors (a real f16 overflow to inf, accumulation into f16 grads). */
#include <float.h>
#include <string.h>

#include "kernel_test.h"

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* Independent f16 decoding from the IEEE definition. */
static double f16_value(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
    double mag = exp == 0 ? ldexp(mant, -24) : ldexp(1024 + mant, exp - 25);
    if (exp == 31) mag = mant ? NAN : INFINITY;
    return sign ? -mag : mag;
}

static void check_f16_decode_all(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        double want = f16_value((uint16_t)h);
        float got = sdt_f16_to_f32((uint16_t)h);
        bool ok = isnan(want) ? isnan(got) && (bits_of(got) & 0x400000u)
                              : (double)got == want && !signbit(got) == !signbit(want);
        /* re-encoding any non-NaN value is exact, denormals included */
        if (!isnan(want) && sdt_f32_to_f16(got) != h) ok = false;
        if (isnan(want)) {
            uint16_t back = sdt_f32_to_f16(got);
            if ((back & 0x7c00u) != 0x7c00u || !(back & 0x3ffu) || !(back & 0x200u)) ok = false;
        }
        if (!ok && bad++ < 5)
            CHECK(false, "f16 0x%04x decodes to %.9g (want %.9g) or fails to round-trip", h, (double)got, want);
    }
    CHECK(bad == 0, "%d f16 bit patterns decode or round-trip wrongly", bad);
}

/* x must encode to the nearest f16, ties to even mantissa; |x| < 65504. */
static bool is_nearest_even_f16(float x, uint16_t h)
{
    uint16_t mag = h & 0x7fffu;
    double ax = fabs((double)x), here = fabs(f16_value(h));
    if ((h >> 15) != (bits_of(x) >> 31) && here != 0) return false;
    double err = fabs(ax - here);
    double below = mag > 0 ? f16_value((uint16_t)(mag - 1)) : -1.0;
    double above = f16_value((uint16_t)(mag + 1));
    if (mag > 0 && fabs(ax - below) < err) return false;
    if (fabs(ax - above) < err) return false;
    bool tie = (mag > 0 && fabs(ax - below) == err) || fabs(ax - above) == err;
    return !tie || !(mag & 1u);
}

static void check_f16_encode_random(sdt_test_rng *r)
{
    int bad = 0;
    for (int i = 0; i < 400000; i++) {
        /* exponents from deep below the denormals to the top of the f16 range */
        uint32_t e = 95 + (uint32_t)(sdt_test_next(r) % 48);
        uint32_t u = ((uint32_t)(sdt_test_next(r) & 1) << 31) | (e << 23) | (uint32_t)(sdt_test_next(r) & 0x7fffff);
        if (i % 4 == 0) u &= ~0x0fffu; /* many exact ties and near-ties */
        float x = float_of(u);
        if (fabs(x) >= 65504.0f) continue;
        uint16_t h = sdt_f32_to_f16(x);
        if (!is_nearest_even_f16(x, h) && bad++ < 5)
            CHECK(false, "f32 %.9g (0x%08x) encodes to f16 0x%04x, not the nearest-even value", (double)x, u, h);
    }
    CHECK(bad == 0, "%d random f32 values encode to f16 wrongly", bad);
}

#ifdef __FLT16_MANT_DIG__
/* The compiler's own IEEE conversion, where the target has _Float16, as a second opinion. */
static void check_f16_against_compiler(sdt_test_rng *r)
{
    int bad = 0;
    for (int i = 0; i < 200000; i++) {
        float x = float_of((uint32_t)sdt_test_next(r));
        _Float16 hw = (_Float16)x;
        uint16_t want;
        memcpy(&want, &hw, 2);
        uint16_t got = sdt_f32_to_f16(x);
        bool ok = isnan(x) ? (got & 0x7c00u) == 0x7c00u && (got & 0x3ffu) : got == want;
        if (!ok && bad++ < 5) CHECK(false, "f16(%.9g) = 0x%04x, compiler says 0x%04x", (double)x, got, want);
    }
    CHECK(bad == 0, "%d values disagree with the compiler's _Float16 conversion", bad);
}
#endif

static void check_f16_specials(void)
{
    CHECK(sdt_f32_to_f16(65504.0f) == 0x7bffu, "65504 must stay 65504");
    CHECK(sdt_f32_to_f16(65519.996f) == 0x7bffu, "65519.996 must round down to 65504");
    CHECK(sdt_f32_to_f16(65520.0f) == 0x7c00u, "65520 must round to inf (tie to even)");
    CHECK(sdt_f32_to_f16(-65520.0f) == 0xfc00u, "-65520 must round to -inf");
    CHECK(sdt_f32_to_f16(1e9f) == 0x7c00u, "1e9 must overflow to inf");
    CHECK(sdt_f32_to_f16(INFINITY) == 0x7c00u && sdt_f32_to_f16(-INFINITY) == 0xfc00u, "inf must stay inf");
    uint16_t qnan = sdt_f32_to_f16(NAN), snan = sdt_f32_to_f16(float_of(0x7f800001u));
    CHECK((qnan & 0x7e00u) == 0x7e00u, "NaN must encode as a quiet f16 NaN (got 0x%04x)", qnan);
    CHECK((snan & 0x7e00u) == 0x7e00u, "a signalling NaN with a low payload must stay NaN (got 0x%04x)", snan);
    CHECK(isnan(sdt_f16_to_f32(0x7c01u)), "an f16 signalling NaN must decode to NaN");
    CHECK(sdt_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00u, "1 + 2^-11 is a tie and must round to even (1.0)");
    CHECK(sdt_f32_to_f16(1.0f + 0x3p-11f) == 0x3c02u, "1 + 3*2^-11 is a tie and must round up to even");
    CHECK(sdt_f32_to_f16(0x1p-24f) == 0x0001u, "2^-24 is the smallest denormal");
    CHECK(sdt_f32_to_f16(0x1p-25f) == 0x0000u, "2^-25 is a tie between 0 and 2^-24 and rounds to 0");
    CHECK(sdt_f32_to_f16(0x1.000002p-25f) == 0x0001u, "just above 2^-25 rounds to the smallest denormal");
    CHECK(sdt_f32_to_f16(0x3p-25f) == 0x0002u, "3*2^-25 is a tie and rounds to even (2 * 2^-24)");
    CHECK(sdt_f32_to_f16(0x1p-14f - 0x1p-25f) == 0x0400u, "the tie below 2^-14 rounds up to the smallest normal");
    CHECK(sdt_f32_to_f16(-0.0f) == 0x8000u, "-0 keeps its sign");
    CHECK(sdt_f16_to_f32(0x0001u) == 0x1p-24f, "the smallest denormal decodes to 2^-24");
}

static void check_bf16(sdt_test_rng *r)
{
    int bad = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        float x = sdt_bf16_to_f32((uint16_t)b);
        bool ok =
            bits_of(x) == b << 16 && (isnan(x) ? isnan(sdt_bf16_to_f32(sdt_f32_to_bf16(x))) : sdt_f32_to_bf16(x) == b);
        if (!ok && bad++ < 5) CHECK(false, "bf16 0x%04x does not round-trip", b);
    }
    CHECK(bad == 0, "%d bf16 bit patterns fail to round-trip", bad);
    CHECK(sdt_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80u, "bf16: 1 + 2^-8 is a tie and rounds to even (1.0)");
    CHECK(sdt_f32_to_bf16(1.0f + 0x3p-8f) == 0x3f82u, "bf16: 1 + 3*2^-8 is a tie and rounds up to even");
    CHECK(sdt_f32_to_bf16(1.0f + 0x1.8p-8f) == 0x3f81u, "bf16: above the tie rounds up");
    CHECK(sdt_f32_to_bf16(FLT_MAX) == 0x7f80u, "bf16: FLT_MAX rounds to inf");
    CHECK(sdt_f32_to_bf16(-INFINITY) == 0xff80u, "bf16: -inf stays -inf");
    CHECK(isnan(sdt_bf16_to_f32(sdt_f32_to_bf16(float_of(0x7f800001u)))),
          "bf16: a NaN whose payload is all in the low half must stay NaN");
    /* random values: the result is one of the two neighbours, the nearer one */
    bad = 0;
    for (int i = 0; i < 200000; i++) {
        float x = float_of((uint32_t)sdt_test_next(r) & 0x7f7fffffu);
        float lo = float_of(bits_of(x) & 0xffff0000u), hi = float_of((bits_of(x) & 0xffff0000u) + 0x10000u);
        float got = sdt_bf16_to_f32(sdt_f32_to_bf16(x));
        /* above the largest bf16 the upper neighbour is inf, which rounding treats as 2^128 */
        double dl = (double)x - lo, dh = (isinf(hi) ? ldexp(1.0, 128) : (double)hi) - x;
        float want = dl < dh ? lo : dh < dl ? hi : ((bits_of(lo) >> 16) & 1 ? hi : lo);
        if (bits_of(got) != bits_of(want) && bad++ < 5)
            CHECK(false, "bf16(%.9g) = %.9g, want %.9g", (double)x, (double)got, (double)want);
    }
    CHECK(bad == 0, "%d random values round to bf16 wrongly", bad);
}

/* Ops reading and writing 16-bit tensors behave like a GPU: an f16 add overflows to inf,
 * NaN flows through, and a backward accumulates into an f16 gradient with rounding. */
static void check_ops_in_16bit(sdt_test_rng *r)
{
    sdt_backend *be = kt_backend();
    enum { N = 37 };
    uint16_t a[N], b[N], out[N];
    for (int i = 0; i < N; i++) {
        a[i] = sdt_f32_to_f16(40000.0f + 100.0f * (float)i);
        b[i] = sdt_f32_to_f16(i == 3 ? NAN : 30000.0f);
    }
    sdt_tensor ta = sdt_tensor_4d(a, SDT_F16, 1, N, 0, 0, 0), tb = sdt_tensor_4d(b, SDT_F16, 1, N, 0, 0, 0);
    sdt_tensor to = sdt_tensor_4d(out, SDT_F16, 1, N, 0, 0, 0);
    CHECK(be->add_forward(be, &to, &ta, &tb) == 0, "add_forward on f16 failed: %s", be->error.message);
    int infs = 0;
    for (int i = 0; i < N; i++) infs += out[i] == 0x7c00u;
    CHECK(infs == N - 1, "f16 add of 40000+ and 30000 must overflow to +inf in %d elements, got %d", N - 1, infs);
    CHECK(isnan(sdt_f16_to_f32(out[3])), "NaN + x must stay NaN in f16 storage");
    int64_t count = 0;
    CHECK(be->count_nonfinite(be, &to, &count) == 0 && count == N, "count_nonfinite on f16 found %lld of %d",
          (long long)count, N);

    /* the same values in bf16 do not overflow (8-bit exponent) */
    uint16_t ab[N], bb[N], ob[N];
    for (int i = 0; i < N; i++) {
        ab[i] = sdt_f32_to_bf16(sdt_f16_to_f32(a[i]));
        bb[i] = sdt_f32_to_bf16(30000.0f);
    }
    sdt_tensor tab = sdt_tensor_4d(ab, SDT_BF16, 1, N, 0, 0, 0), tbb = sdt_tensor_4d(bb, SDT_BF16, 1, N, 0, 0, 0);
    sdt_tensor tob = sdt_tensor_4d(ob, SDT_BF16, 1, N, 0, 0, 0);
    CHECK(be->add_forward(be, &tob, &tab, &tbb) == 0, "add_forward on bf16 failed: %s", be->error.message);
    for (int i = 0; i < N; i++) {
        float want = sdt_round_to_dtype(sdt_bf16_to_f32(ab[i]) + sdt_bf16_to_f32(bb[i]), SDT_BF16);
        CHECK(sdt_bf16_to_f32(ob[i]) == want, "bf16 add[%d] = %g, want %g", i, (double)sdt_bf16_to_f32(ob[i]),
              (double)want);
    }

    /* f16 in, f32 out: GELU of the decoded inputs; then an f16 gradient accumulates. */
    float xf[N], y[N], dyf[N];
    uint16_t xh[N], dxh[N], base[N];
    for (int i = 0; i < N; i++) {
        xh[i] = sdt_f32_to_f16((float)(2.0 * sdt_test_normal(r)));
        dyf[i] = (float)sdt_test_normal(r);
        base[i] = dxh[i] = sdt_f32_to_f16((float)sdt_test_normal(r));
        xf[i] = sdt_f16_to_f32(xh[i]);
    }
    sdt_tensor tx = sdt_tensor_4d(xh, SDT_F16, 2, 1, N, 0, 0), ty = kt_f32(y, 2, 1, N, 0, 0);
    CHECK(be->activation_forward(be, &ty, &tx, SDT_ACT_GELU) == 0, "gelu on f16 input failed: %s", be->error.message);
    for (int i = 0; i < N; i++) {
        double want = 0.5 * xf[i] * (1.0 + erf(xf[i] / sqrt(2.0)));
        CHECK(fabs(y[i] - want) <= 1e-6 * (1 + fabs(want)), "gelu(f16 %g) = %g, want %g", (double)xf[i], (double)y[i],
              want);
    }
    sdt_tensor tdy = kt_f32(dyf, 2, 1, N, 0, 0), tdx = sdt_tensor_4d(dxh, SDT_F16, 2, 1, N, 0, 0);
    CHECK(be->activation_backward(be, &tdx, &tdy, &tx, SDT_ACT_IDENTITY) == 0, "identity backward on f16 failed");
    for (int i = 0; i < N; i++) {
        float want = sdt_round_to_dtype(sdt_f16_to_f32(base[i]) + dyf[i], SDT_F16);
        CHECK(dxh[i] == sdt_f32_to_f16(want), "f16 grad[%d] = %g, want base + dout rounded = %g", i,
              (double)sdt_f16_to_f32(dxh[i]), (double)want);
    }

    /* convert f32 -> f16 -> f32 equals the scalar rounding */
    float src[N], back[N];
    uint16_t mid[N];
    for (int i = 0; i < N; i++) src[i] = (float)(1e4 * sdt_test_normal(r));
    src[0] = 65520.0f;
    sdt_tensor ts = kt_f32(src, 1, N, 0, 0, 0), tm = sdt_tensor_4d(mid, SDT_F16, 1, N, 0, 0, 0);
    sdt_tensor tbk = kt_f32(back, 1, N, 0, 0, 0);
    CHECK(be->convert(be, &tm, &ts) == 0 && be->convert(be, &tbk, &tm) == 0, "convert failed: %s", be->error.message);
    for (int i = 0; i < N; i++)
        CHECK(bits_of(back[i]) == bits_of(sdt_round_to_dtype(src[i], SDT_F16)), "convert f32->f16->f32 of %g gave %g",
              (double)src[i], (double)back[i]);
    CHECK(isinf(back[0]), "convert of 65520 to f16 must give inf");
    be->destroy(be);
}

int main(void)
{
    sdt_test_rng r = sdt_test_rng_from_env("dtype_storage");
    check_f16_decode_all();
    check_f16_specials();
    check_f16_encode_random(&r);
#ifdef __FLT16_MANT_DIG__
    check_f16_against_compiler(&r);
#endif
    check_bf16(&r);
    check_ops_in_16bit(&r);
    return sdt_test_finish("dtype_storage (f16/bf16 storage, convert, add, gelu, count_nonfinite)");
}
