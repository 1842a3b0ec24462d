/* concat_channels.cu - torch.cat along channels and its backward on the GPU, NCHW or channels-last
 * (tensor.h: there each pixel's Ca channels of a, then its Cb of b). Semantics: kernels/ops.h. */
#include "cuda_ops.h"
#include "vec_io.cuh"

/* out [B, Ca+Cb, S] from a [B, Ca, S] and b [B, Cb, S]: per batch, a's Ca*S values then b's Cb*S.
 * Channels-last is the same walk with a pixel as the batch: B*S blocks of Ca then Cb values.
 * backward = true splits dout back, accumulating (a NULL part is skipped). A thread moves VEC
 * values (16-byte accesses when Ca*S and Cb*S are multiples of VEC, vec_io.cuh). */
template <typename T>
__global__ void concat_k(io<T> out, io<T> a, io<T> b, int64_t B, int64_t na, int64_t nb, bool backward)
{
    constexpr int V = io<T>::VEC;
    const int64_t ua = na / V, per_batch = (na + nb) / V;
    GRID_STRIDE(u, B * per_batch)
    {
        int64_t bi = u / per_batch, r = u - bi * per_batch;
        bool in_a = r < ua;
        const io<T> &part = in_a ? a : b;
        if (!part.p) continue;
        int64_t j = in_a ? bi * na + r * V : bi * nb + (r - ua) * V;
        float f[V];
        if (!backward) {
            part.load(j, f);
            out.store(u * V, f);
        } else {
            float g[V];
            out.load(u * V, f);
            part.load(j, g);
#pragma unroll
            for (int k = 0; k < V; k++) g[k] += f[k];
            part.store(j, g);
        }
    }
}

/* Launches concat_k: typed when the present tensors share a dtype and are aligned and both
 * parts' per-batch extents are multiples of the vector width. */
static int concat_launch(sdt_backend *be, const sdt_tensor *out, const sdt_tensor *a, const sdt_tensor *b, int64_t B,
                         int64_t na, int64_t nb, bool backward)
{
    int dt = out->dtype;
    const void *ptrs[3] = {out->data, a ? a->data : NULL, b ? b->data : NULL};
    bool same = (!a || a->dtype == dt) && (!b || b->dtype == dt) && vec_ok(dt, na, ptrs, 3) && nb % vec_width(dt) == 0;
    int64_t n = B * (na + nb);
    SDT_IO_SWITCH(
        same, dt, T,
        concat_k<T> LAUNCH(be, n / io<T>::VEC)(io_of<T>(out->data, dt), io_of<T>(a ? a->data : NULL, a ? a->dtype : 0),
                                               io_of<T>(b ? b->data : NULL, b ? b->dtype : 0), B, na, nb, backward));
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_concat_channels_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *a, const sdt_tensor *b)
{
    int64_t B = a->shape[0], Ca = a->shape[1], Cb = b->shape[1], S = sdt_tensor_numel(a) / (B * Ca);
    if (out->channels_last) return concat_launch(be, out, a, b, B * S, Ca, Cb, false);
    return concat_launch(be, out, a, b, B, Ca * S, Cb * S, false);
}

int cuda_concat_channels_backward(sdt_backend *be, sdt_tensor *da, sdt_tensor *db, const sdt_tensor *dout)
{
    int64_t B = dout->shape[0], C = dout->shape[1], S = sdt_tensor_numel(dout) / (B * C);
    int64_t Ca = da ? da->shape[1] : C - db->shape[1], Cb = C - Ca;
    if (dout->channels_last) return concat_launch(be, dout, da, db, B * S, Ca, Cb, true);
    return concat_launch(be, dout, da, db, B, Ca * S, Cb * S, true);
}
