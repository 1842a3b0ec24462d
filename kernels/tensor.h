/* tensor.h - the tensor every op and model passes around.
 *
 * A tensor is a view: a data pointer plus dtype, device and a row-major shape.
 * It never owns its memory; arenas (arena.h) and model weight stores do.
 * A 4-D tensor may be channels-last: its shape stays the logical [N, C, H, W]
 * (every shape check and sentence reads the same) while its memory is N, H, W, C,
 * the layout cuDNN's fastest convolutions want (docs/DESIGN.md, "Channels-last").
 * f16 and bf16 are real 16-bit storage on both backends, so overflow to inf
 * and precision loss happen on the CPU exactly as they do on a GPU.
 */
#ifndef SDT_KERNELS_TENSOR_H
#define SDT_KERNELS_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SDT_MAX_DIMS 5

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sdt_dtype {
    SDT_F32 = 0,
    SDT_F16 = 1,
    SDT_BF16 = 2,
    SDT_I32 = 3, /* token ids */
} sdt_dtype;

typedef enum sdt_device {
    SDT_DEVICE_CPU = 0,
    SDT_DEVICE_CUDA = 1,
} sdt_device;

typedef struct sdt_tensor {
    void *data;
    sdt_dtype dtype;
    sdt_device device;
    int ndim;
    int64_t shape[SDT_MAX_DIMS];
    /* 4-D only: memory is [N, H, W, C] for the logical shape [N, C, H, W] (a conv filter
     * [OC, C, KH, KW]: OC, KH, KW, C). Only the ops that say so take it (kernels/op_checks.c);
     * a view of other dims is plain row-major and clears it (sdt_tensor_reshape). */
    bool channels_last;
} sdt_tensor;

size_t sdt_dtype_size(sdt_dtype dtype);
const char *sdt_dtype_name(sdt_dtype dtype);
int64_t sdt_tensor_numel(const sdt_tensor *t);
size_t sdt_tensor_nbytes(const sdt_tensor *t);
/* Makes a view; shape has ndim entries. */
sdt_tensor sdt_tensor_make(void *data, sdt_dtype dtype, sdt_device device, int ndim, const int64_t *shape);
/* Convenience for up to 4 dims; pass 0 for unused trailing dims is NOT allowed: ndim says how many are used. */
sdt_tensor sdt_tensor_4d(void *data, sdt_dtype dtype, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3);
bool sdt_tensor_same_shape(const sdt_tensor *a, const sdt_tensor *b);
/* t's memory viewed with another shape (same numel), row-major: channels_last is cleared, so a
 * channels-last image [B, C, H, W] viewed as [B, H*W, C] is its tokens. */
sdt_tensor sdt_tensor_reshape(const sdt_tensor *t, int ndim, const int64_t *shape);
/* The channels-last 4-D view [d0, d1, d2, d3] of memory laid out [d0, d2, d3, d1] (tokens
 * [B, H*W, C] seen as the image [B, C, H, W] they are). */
sdt_tensor sdt_tensor_channels_last_view(const sdt_tensor *t, int64_t d0, int64_t d1, int64_t d2, int64_t d3);
/* t viewed as a matrix [rows, last dim] (x [..., C] of linear, layernorm, softmax): the product
 * of all dims but the last, and the last (1 for a 0-d tensor). */
int64_t sdt_tensor_rows(const sdt_tensor *t);
int64_t sdt_tensor_last_dim(const sdt_tensor *t);

/* Scalar conversions, IEEE round-to-nearest-even; inf and NaN preserved;
 * values above the f16 range become inf exactly as a GPU conversion does;
 * f16 denormals are produced and read back. */
uint16_t sdt_f32_to_f16(float x);
float sdt_f16_to_f32(uint16_t h);
uint16_t sdt_f32_to_bf16(float x);
float sdt_bf16_to_f32(uint16_t b);
/* Rounds x to the nearest value representable in dtype (identity for f32). */
float sdt_round_to_dtype(float x, sdt_dtype dtype);

/* Bulk conversions between a host tensor's storage and f32 (CPU only). */
void sdt_load_f32(const void *src, sdt_dtype dtype, float *dst, int64_t n);
void sdt_store_f32(const float *src, void *dst, sdt_dtype dtype, int64_t n);

#ifdef __cplusplus
}
#endif

#endif
