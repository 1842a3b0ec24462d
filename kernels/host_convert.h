/* host_convert.h - whole-tensor passes over host memory when weights load: the NaN/Inf scan,
 * the dtype conversion and the channels-last permutation, split over OpenMP's threads (a 6.9 GB SDXL checkpoint passes
 * through both once per load). Results equal the element-by-element functions of tensor.h bit
 * for bit: the scan names the same first element, the conversion writes the bits that
 * sdt_load_f32 followed by sdt_store_f32 write. */
#ifndef SDT_KERNELS_HOST_CONVERT_H
#define SDT_KERNELS_HOST_CONVERT_H

#include <stdint.h>

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The index of the first NaN or Inf among n elements of a float dtype (F32, F16, BF16), or -1
 * when all are finite (and for any other dtype). */
int64_t sdt_host_first_nonfinite(const void *src, sdt_dtype dtype, int64_t n);

/* n elements from src_dtype to dst_dtype (any two of F32, F16, BF16; the same dtype copies),
 * rounding as sdt_store_f32 does. src and dst must not overlap. */
void sdt_host_convert(const void *src, sdt_dtype src_dtype, void *dst, sdt_dtype dst_dtype, int64_t n);

/* The layout change of a 4-D tensor [n, c, H, W] of esize-byte elements (s = H*W) between row-major
 * (NCHW) and channels-last (NHWC) memory (tensor.h): to_channels_last moves NCHW src into NHWC dst,
 * else back. Bytes move, nothing is rounded. src and dst must not overlap. (A conv filter
 * [OC, C, KH, KW] is n = OC, c = C, s = KH*KW.) */
void sdt_host_permute_channels(const void *src, void *dst, size_t esize, int64_t n, int64_t c, int64_t s,
                               bool to_channels_last);

#ifdef __cplusplus
}
#endif

#endif
