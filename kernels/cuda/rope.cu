/* rope.cu - rotary position embedding (diffusers' apply_rotary_emb, interleaved pairs) on the GPU. Semantics:
 * kernels/ops.h; the CPU's kernels/cpu/rope.c is the reference. One thread per pair: it reads the pair before
 * writing it, so out may alias x. */
#include "cuda_ops.h"

__global__ void rope_k(void *out, int odt, const void *x, int xdt, const void *cos, int cdt, const void *sin, int sdt,
                       int64_t pairs, int64_t width, int64_t S, int64_t D, bool transposed)
{
    GRID_STRIDE(p, pairs)
    {
        const int64_t j = 2 * p, r = j / width, i = (j % width) % D, t = (r % S) * D + i;
        const float a = ld(x, xdt, j), b = ld(x, xdt, j + 1);
        const float c0 = ld(cos, cdt, t), c1 = ld(cos, cdt, t + 1), s0 = ld(sin, sdt, t), s1 = ld(sin, sdt, t + 1);
        if (transposed) {
            acc(out, odt, j, a * c0 + b * s1);
            acc(out, odt, j + 1, b * c1 - a * s0);
        } else {
            st(out, odt, j, a * c0 - b * s0);
            st(out, odt, j + 1, b * c1 + a * s1);
        }
    }
}

static int rope_launch(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *cos,
                       const sdt_tensor *sin, bool transposed)
{
    const int64_t pairs = sdt_tensor_numel(x) / 2;
    if (pairs == 0) return 0;
    rope_k LAUNCH(be, pairs)(out->data, out->dtype, x->data, x->dtype, cos->data, cos->dtype, sin->data, sin->dtype,
                             pairs, sdt_tensor_last_dim(x), cos->shape[0], cos->shape[1], transposed);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_rope_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *cos,
                      const sdt_tensor *sin)
{
    return rope_launch(be, out, x, cos, sin, false);
}

int cuda_rope_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *cos,
                       const sdt_tensor *sin)
{
    if (!dx) return 0;
    return rope_launch(be, dx, dout, cos, sin, true);
}
