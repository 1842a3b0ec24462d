/* fp8.c - see fp8.h. */
#include "fp8.h"

#include <math.h>
#include <string.h>

float sdt_fp8_to_f32(uint8_t byte, sdt_fp8_kind kind)
{
    const int mant_bits = kind == SDT_FP8_E4M3 ? 3 : 2, bias = kind == SDT_FP8_E4M3 ? 7 : 15;
    const int exp_max = kind == SDT_FP8_E4M3 ? 15 : 31;
    const int sign = byte >> 7, exp = (byte >> mant_bits) & exp_max, mant = byte & ((1 << mant_bits) - 1);
    float v;
    if (kind == SDT_FP8_E4M3 && exp == 15 && mant == 7)
        v = NAN; /* the only non-finite pattern of e4m3fn */
    else if (kind == SDT_FP8_E5M2 && exp == 31)
        v = mant ? NAN : INFINITY;
    else if (exp == 0)
        v = ldexpf((float)mant, 1 - bias - mant_bits); /* subnormal: m * 2^(1 - bias - mant_bits) */
    else
        v = ldexpf((float)((1 << mant_bits) | mant), exp - bias - mant_bits);
    return sign ? -v : v;
}

uint16_t sdt_fp8_to_bf16(uint8_t byte, sdt_fp8_kind kind)
{
    float v = sdt_fp8_to_f32(byte, kind);
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    if (isnan(v)) return (uint16_t)((byte & 0x80 ? 0x8000u : 0) | 0x7FC0u);
    return (uint16_t)(bits >> 16); /* exact: the low 16 bits are zero for every fp8 value */
}

void sdt_fp8_to_bf16_n(const uint8_t *src, uint16_t *dst, size_t n, sdt_fp8_kind kind)
{
    uint16_t table[256];
    for (int i = 0; i < 256; i++) table[i] = sdt_fp8_to_bf16((uint8_t)i, kind);
    for (size_t i = 0; i < n; i++) dst[i] = table[src[i]];
}

uint8_t sdt_fp8_from_f32(float x, sdt_fp8_kind kind)
{
    const uint8_t sign = signbit(x) ? 0x80 : 0;
    const uint8_t nan = kind == SDT_FP8_E4M3 ? 0x7F : 0x7E;
    if (isnan(x)) return sign | nan;
    /* The candidates bracket |x| among the 127 finite magnitudes (ascending in their bit patterns): the
     * nearest wins, a tie goes to the even pattern (its last mantissa bit 0). */
    const float a = fabsf(x);
    const int top = kind == SDT_FP8_E4M3 ? 0x7E : 0x7B; /* the largest finite pattern */
    int lo = 0;
    while (lo < top && sdt_fp8_to_f32((uint8_t)(lo + 1), kind) <= a) lo++;
    if (lo == top) {
        float max = sdt_fp8_to_f32((uint8_t)top, kind), next_step = max - sdt_fp8_to_f32((uint8_t)(top - 1), kind);
        /* past the largest finite value by half a step or more (rounding would go beyond it): overflow */
        if (a - max >= next_step / 2 && !(a - max == next_step / 2 && (top & 1) == 0))
            return sign | (kind == SDT_FP8_E4M3 ? nan : 0x7C);
        return sign | (uint8_t)top;
    }
    float below = sdt_fp8_to_f32((uint8_t)lo, kind), above = sdt_fp8_to_f32((uint8_t)(lo + 1), kind);
    float d_lo = a - below, d_hi = above - a;
    int pick = d_lo < d_hi ? lo : d_hi < d_lo ? lo + 1 : (lo & 1) == 0 ? lo : lo + 1;
    return sign | (uint8_t)pick;
}
