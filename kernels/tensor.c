/* tensor.c - tensor views and the scalar dtype conversions every backend shares.
 *
 * The f16 conversion mirrors CUDA's __float2half_rn bit for bit: round to
 * nearest even, denormals produced, values >= 65520 become inf, NaN stays a
 * (quiet) NaN. bf16 is the upper half of an f32, rounded to nearest even.
 */
#include "tensor.h"

#include <math.h>
#include <string.h>

size_t sdt_dtype_size(sdt_dtype dtype)
{
    switch (dtype) {
        case SDT_F32:
            return 4;
        case SDT_F16:
            return 2;
        case SDT_BF16:
            return 2;
        case SDT_I32:
            return 4;
    }
    return 0;
}

const char *sdt_dtype_name(sdt_dtype dtype)
{
    switch (dtype) {
        case SDT_F32:
            return "f32";
        case SDT_F16:
            return "f16";
        case SDT_BF16:
            return "bf16";
        case SDT_I32:
            return "i32";
    }
    return "unknown";
}

int64_t sdt_tensor_numel(const sdt_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

size_t sdt_tensor_nbytes(const sdt_tensor *t)
{
    return (size_t)sdt_tensor_numel(t) * sdt_dtype_size(t->dtype);
}

sdt_tensor sdt_tensor_make(void *data, sdt_dtype dtype, sdt_device device, int ndim, const int64_t *shape)
{
    sdt_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dtype;
    t.device = device;
    if (ndim < 0) ndim = 0;
    if (ndim > SDT_MAX_DIMS) ndim = SDT_MAX_DIMS;
    t.ndim = ndim;
    for (int i = 0; i < ndim; i++) t.shape[i] = shape[i];
    return t;
}

sdt_tensor sdt_tensor_4d(void *data, sdt_dtype dtype, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    const int64_t shape[4] = {d0, d1, d2, d3};
    if (ndim > 4) ndim = 4;
    return sdt_tensor_make(data, dtype, SDT_DEVICE_CPU, ndim, shape);
}

bool sdt_tensor_same_shape(const sdt_tensor *a, const sdt_tensor *b)
{
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

sdt_tensor sdt_tensor_reshape(const sdt_tensor *t, int ndim, const int64_t *shape)
{
    sdt_tensor v = sdt_tensor_make(t->data, t->dtype, t->device, ndim, shape);
    return v;
}

sdt_tensor sdt_tensor_channels_last_view(const sdt_tensor *t, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    const int64_t shape[4] = {d0, d1, d2, d3};
    sdt_tensor v = sdt_tensor_make(t->data, t->dtype, t->device, 4, shape);
    v.channels_last = true;
    return v;
}

static uint32_t float_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float bits_float(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Shifts m right by shift bits, rounding to nearest even (shift >= 1). */
static uint32_t shift_right_rne(uint32_t m, int shift)
{
    uint32_t kept = m >> shift;
    uint32_t rest = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (kept & 1u))) kept++;
    return kept;
}

uint16_t sdt_f32_to_f16(float x)
{
    uint32_t f = float_bits(x);
    uint16_t sign = (uint16_t)((f >> 16) & 0x8000u);
    uint32_t absf = f & 0x7fffffffu;

    if (absf > 0x7f800000u) /* NaN: keep the top payload bits, force quiet */
        return (uint16_t)(sign | 0x7e00u | ((absf >> 13) & 0x3ffu));
    if (absf >= 0x477ff000u) /* >= 65520 (the tie above 65504) and inf */
        return (uint16_t)(sign | 0x7c00u);
    if (absf >= 0x38800000u) { /* normal f16: rebias exponent 127 -> 15 */
        uint32_t rebased = absf - 0x38000000u;
        /* the carry of a round-up moves into the exponent, which is correct */
        return (uint16_t)(sign | shift_right_rne(rebased, 13));
    }
    /* f16 denormal (or zero): value = m * 2^(e-150), in units of 2^-24 is m * 2^(e-126) */
    int e = (int)(absf >> 23);
    int shift = 126 - e;
    if (shift > 24) return sign; /* below half the smallest denormal */
    uint32_t m = (absf & 0x7fffffu) | 0x800000u;
    return (uint16_t)(sign | shift_right_rne(m, shift));
}

float sdt_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;

    if (exp == 0x1f) /* inf, or NaN made quiet */
        return bits_float(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0u));
    if (exp == 0) {
        if (mant == 0) return bits_float(sign);
        /* denormal: mant * 2^-24, renormalised */
        int e = -14;
        while (!(mant & 0x400u)) {
            mant <<= 1;
            e--;
        }
        mant &= 0x3ffu;
        return bits_float(sign | ((uint32_t)(e + 127) << 23) | (mant << 13));
    }
    return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t sdt_f32_to_bf16(float x)
{
    uint32_t f = float_bits(x);
    if ((f & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((f >> 16) | 0x0040u); /* quiet NaN */
    /* finite values near FLT_MAX round up to inf, as on a GPU */
    f += 0x7fffu + ((f >> 16) & 1u);
    return (uint16_t)(f >> 16);
}

float sdt_bf16_to_f32(uint16_t b)
{
    return bits_float((uint32_t)b << 16);
}

float sdt_round_to_dtype(float x, sdt_dtype dtype)
{
    switch (dtype) {
        case SDT_F16:
            return sdt_f16_to_f32(sdt_f32_to_f16(x));
        case SDT_BF16:
            return sdt_bf16_to_f32(sdt_f32_to_bf16(x));
        default:
            return x;
    }
}

void sdt_load_f32(const void *src, sdt_dtype dtype, float *dst, int64_t n)
{
    switch (dtype) {
        case SDT_F32:
            if ((const void *)dst != src) memcpy(dst, src, (size_t)n * sizeof(float));
            break;
        case SDT_F16:
            for (int64_t i = 0; i < n; i++) dst[i] = sdt_f16_to_f32(((const uint16_t *)src)[i]);
            break;
        case SDT_BF16:
            for (int64_t i = 0; i < n; i++) dst[i] = sdt_bf16_to_f32(((const uint16_t *)src)[i]);
            break;
        case SDT_I32:
            for (int64_t i = 0; i < n; i++) dst[i] = (float)((const int32_t *)src)[i];
            break;
    }
}

void sdt_store_f32(const float *src, void *dst, sdt_dtype dtype, int64_t n)
{
    switch (dtype) {
        case SDT_F32:
            if ((const void *)src != dst) memcpy(dst, src, (size_t)n * sizeof(float));
            break;
        case SDT_F16:
            for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = sdt_f32_to_f16(src[i]);
            break;
        case SDT_BF16:
            for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = sdt_f32_to_bf16(src[i]);
            break;
        case SDT_I32:
            for (int64_t i = 0; i < n; i++) ((int32_t *)dst)[i] = (int32_t)lrintf(src[i]);
            break;
    }
}

int64_t sdt_tensor_rows(const sdt_tensor *t)
{
    int64_t rows = 1;
    for (int i = 0; i + 1 < t->ndim; i++) rows *= t->shape[i];
    return rows;
}

int64_t sdt_tensor_last_dim(const sdt_tensor *t)
{
    return t->ndim ? t->shape[t->ndim - 1] : 1;
}
