/* upsample_nearest2x.cu - nearest 2x upsampling and its backward on the GPU, NCHW or channels-last
 * (tensor.h). Semantics: kernels/ops.h. */
#include "cuda_ops.h"

/* out [BC, 2H, 2W] = x [BC, H, W] repeated; backward sums 2x2 blocks of dout. */
__global__ void upsample_k(void *out, int odt, const void *x, int xdt, int64_t BC, int64_t H, int64_t W)
{
    GRID_STRIDE(i, BC * 4 * H * W)
    {
        int64_t bc = i / (4 * H * W), r = i % (4 * H * W), oy = r / (2 * W), ox = r % (2 * W);
        st(out, odt, i, ld(x, xdt, (bc * H + oy / 2) * W + ox / 2));
    }
}
__global__ void upsample_bwd_k(void *dx, int dxt, const void *dout, int dot, int64_t BC, int64_t H, int64_t W)
{
    GRID_STRIDE(i, BC * H * W)
    {
        int64_t bc = i / (H * W), r = i % (H * W), y = r / W, x = r % W;
        int64_t base = bc * 4 * H * W;
        float s = ld(dout, dot, base + (2 * y) * 2 * W + 2 * x) + ld(dout, dot, base + (2 * y) * 2 * W + 2 * x + 1) +
                  ld(dout, dot, base + (2 * y + 1) * 2 * W + 2 * x) +
                  ld(dout, dot, base + (2 * y + 1) * 2 * W + 2 * x + 1);
        acc(dx, dxt, i, s);
    }
}

/* Channels-last: out [B, 2H, 2W, C] = x [B, H, W, C] repeated, consecutive threads along c
 * (coalesced); backward sums each 2x2 block in the CPU's order (top pair, then bottom pair). */
__global__ void upsample_nhwc_k(void *out, int odt, const void *x, int xdt, int64_t B, int64_t H, int64_t W, int64_t C)
{
    GRID_STRIDE(i, B * 4 * H * W * C)
    {
        int64_t c = i % C, p = i / C, ox = p % (2 * W), r = p / (2 * W), oy = r % (2 * H), b = r / (2 * H);
        st(out, odt, i, ld(x, xdt, ((b * H + oy / 2) * W + ox / 2) * C + c));
    }
}
__global__ void upsample_nhwc_bwd_k(void *dx, int dxt, const void *dout, int dot, int64_t B, int64_t H, int64_t W,
                                    int64_t C)
{
    GRID_STRIDE(i, B * H * W * C)
    {
        int64_t c = i % C, p = i / C, x = p % W, r = p / W, y = r % H, b = r / H;
        int64_t top = ((b * 2 * H + 2 * y) * 2 * W + 2 * x) * C + c, bottom = top + 2 * W * C;
        float s = (ld(dout, dot, top) + ld(dout, dot, top + C)) + (ld(dout, dot, bottom) + ld(dout, dot, bottom + C));
        acc(dx, dxt, i, s);
    }
}

int cuda_upsample_nearest2x_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x)
{
    int64_t H = x->shape[x->ndim - 2], W = x->shape[x->ndim - 1], BC = sdt_tensor_numel(x) / (H * W);
    if (x->channels_last) {
        upsample_nhwc_k LAUNCH(be, 4 * BC * H * W)(out->data, out->dtype, x->data, x->dtype, x->shape[0], H, W,
                                                   x->shape[1]);
        CUDA_LAUNCHED(be);
        return 0;
    }
    upsample_k LAUNCH(be, 4 * BC * H * W)(out->data, out->dtype, x->data, x->dtype, BC, H, W);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_upsample_nearest2x_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout)
{
    if (!dx) return 0;
    int64_t H = dx->shape[dx->ndim - 2], W = dx->shape[dx->ndim - 1], BC = sdt_tensor_numel(dx) / (H * W);
    if (dx->channels_last) {
        upsample_nhwc_bwd_k LAUNCH(be, BC * H * W)(dx->data, dx->dtype, dout->data, dout->dtype, dx->shape[0], H, W,
                                                   dx->shape[1]);
        CUDA_LAUNCHED(be);
        return 0;
    }
    upsample_bwd_k LAUNCH(be, BC * H * W)(dx->data, dx->dtype, dout->data, dout->dtype, BC, H, W);
    CUDA_LAUNCHED(be);
    return 0;
}
