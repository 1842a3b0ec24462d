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
