/* fp8.h - the two 8-bit float storages safetensors names (F8_E4M3, F8_E5M2), read and upcast exactly.
 *
 * F8_E4M3 is torch.float8_e4m3fn (OCP's E4M3, "fn": finite, no infinities): 1 sign, 4 exponent bits
 * (bias 7), 3 mantissa bits; exponent 0 is subnormal (m/8 * 2^-6); S.1111.111 is NaN, the one pattern
 * above the largest finite value 448 (S.1111.110). F8_E5M2 is torch.float8_e5m2: IEEE-like, 5
 * exponent bits (bias 15), 2 mantissa bits, subnormals m/4 * 2^-14, exponent 31 is inf (m 0) or
 * NaN: the top byte of an IEEE half. Every value of both is exact in bf16 (8 exponent bits cover
 * 2^-16 .. 2^15 as normals, 7 mantissa bits hold 3), so files are upcast to bf16, losing nothing.
 * NaNs keep their sign and become bf16's quiet NaN. */
#ifndef SDT_MODELS_FP8_H
#define SDT_MODELS_FP8_H

#include <stddef.h>
#include <stdint.h>

typedef enum sdt_fp8_kind { SDT_FP8_E4M3 = 0, SDT_FP8_E5M2 } sdt_fp8_kind;

/* The exact value of one byte. */
float sdt_fp8_to_f32(uint8_t byte, sdt_fp8_kind kind);
/* The exact bf16 bits of one byte. */
uint16_t sdt_fp8_to_bf16(uint8_t byte, sdt_fp8_kind kind);
/* The byte nearest x (ties to even), as torch's .to(float8_*) rounds: NaN, and for E4M3 anything past the
 * largest finite value after rounding, becomes NaN (e4m3fn has no infinity); E5M2 overflows to inf. For
 * writing test files in people's fp8 layouts. */
uint8_t sdt_fp8_from_f32(float x, sdt_fp8_kind kind);
/* n bytes to n bf16 values (through a 256-entry table built for the call). */
void sdt_fp8_to_bf16_n(const uint8_t *src, uint16_t *dst, size_t n, sdt_fp8_kind kind);

#endif
