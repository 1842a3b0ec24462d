/* concat_channels.cu - torch.cat along channels (NCHW) and its backward on the GPU. Semantics: kernels/ops.h. */
#include "cuda_ops.h"

/* out [B, Ca+Cb, S] from a [B, Ca, S] and b [B, Cb, S]; backward=1 splits dout back, accumulating. */
__global__ void concat_k(void *out, int odt, void *a, int adt, void *b, int bdt, int64_t B, int64_t Ca, int64_t Cb, int64_t S,
                         int backward)
{
    int64_t C = Ca + Cb;
    GRID_STRIDE(i, B * C * S)
    {
        int64_t bi = i / (C * S), r = i % (C * S), c = r / S, s = r % S;
        void *src = c < Ca ? a : b;
        int sdt = c < Ca ? adt : bdt;
        int64_t j = c < Ca ? (bi * Ca + c) * S + s : (bi * Cb + (c - Ca)) * S + s;
        if (!backward) st(out, odt, i, ld(src, sdt, j));
        else if (src) acc(src, sdt, j, ld(out, odt, i));
    }
}

int cuda_concat_channels_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *a, const sdt_tensor *b)
{
    int64_t B = a->shape[0], Ca = a->shape[1], Cb = b->shape[1], S = sdt_tensor_numel(a) / (B * Ca);
    concat_k LAUNCH(be, B * (Ca + Cb) * S)(out->data, out->dtype, a->data, a->dtype, b->data, b->dtype, B, Ca, Cb, S, 0);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_concat_channels_backward(sdt_backend *be, sdt_tensor *da, sdt_tensor *db, const sdt_tensor *dout)
{
    int64_t B = dout->shape[0], C = dout->shape[1], S = sdt_tensor_numel(dout) / (B * C);
    int64_t Ca = da ? da->shape[1] : C - db->shape[1], Cb = C - Ca;
    concat_k LAUNCH(be, B * C * S)(dout->data, dout->dtype, da ? da->data : NULL, da ? da->dtype : 0, db ? db->data : NULL,
                                  db ? db->dtype : 0, B, Ca, Cb, S, 1);
    CUDA_LAUNCHED(be);
    return 0;
}
