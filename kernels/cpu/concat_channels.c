/* concat_channels.c - torch.cat([a, b], dim=1) for [B, C, spatial...] (UNet skip connections);
 * backward splits dout back into da and db. */
#include "cpu_context.h"

#include <string.h>

typedef struct concat_dims {
    int64_t batch, ca, cb, spatial;
} concat_dims;

/* part (a or b, possibly NULL in backward) must be [B, C_part, spatial...] of whole [B, C, spatial...]. */
static bool part_fits(const sdt_tensor *part, const sdt_tensor *whole)
{
    if (!part) return true;
    if (part->ndim != whole->ndim || part->shape[0] != whole->shape[0] || part->shape[1] > whole->shape[1])
        return false;
    for (int i = 2; i < whole->ndim; i++)
        if (part->shape[i] != whole->shape[i]) return false;
    return true;
}

/* Shapes of one call; a or b may be NULL (a skipped gradient), its channels are then the rest of whole's. */
static int concat_shape(sdt_backend *be, const char *op, const sdt_tensor *whole, const sdt_tensor *a,
                        const sdt_tensor *b, concat_dims *d)
{
    if (cpu_check_tensor(be, op, "out/dout", whole) || (a && cpu_check_tensor(be, op, "a/da", a)) ||
        (b && cpu_check_tensor(be, op, "b/db", b)))
        return -1;
    bool ok = whole->ndim >= 2 && part_fits(a, whole) && part_fits(b, whole);
    if (ok) {
        d->batch = whole->shape[0];
        d->ca = a ? a->shape[1] : whole->shape[1] - b->shape[1];
        d->cb = whole->shape[1] - d->ca;
        ok = !b || b->shape[1] == d->cb;
    }
    if (!ok)
        return cpu_fail(be, SDT_ERR_INVALID_ARGUMENT, "%s: a [B, Ca, ...], b [B, Cb, ...] and out [B, Ca+Cb, ...] disagree; "
                            "check the skip connection's shapes.", op);
    d->spatial = 1;
    for (int i = 2; i < whole->ndim; i++) d->spatial *= whole->shape[i];
    return 0;
}

int cpu_concat_channels_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *a, const sdt_tensor *b)
{
    concat_dims d;
    if (!a || !b) return cpu_fail(be, SDT_ERR_INVALID_ARGUMENT, "concat_channels_forward: a and b are required; pass both tensors.");
    if (concat_shape(be, "concat_channels_forward", out, a, b, &d)) return -1;
    if (sdt_tensor_numel(out) == 0) return 0;
    const float *as = cpu_read_f32(be, a, 0);
    const float *bs = cpu_read_f32(be, b, 1);
    float *o = cpu_write_begin(be, out, 2, false);
    if (!as || !bs || !o) return -1;
    int64_t na = d.ca * d.spatial, nb = d.cb * d.spatial;
    #pragma omp parallel for num_threads(cpu_threads_for(be, d.batch * (na + nb))) schedule(static)
    for (int64_t n = 0; n < d.batch; n++) {
        memcpy(o + n * (na + nb), as + n * na, (size_t)na * sizeof(float));
        memcpy(o + n * (na + nb) + na, bs + n * nb, (size_t)nb * sizeof(float));
    }
    cpu_write_end(be, out, o);
    return 0;
}

/* dst[n] += the len floats of dout that start `offset` floats into image n. */
static int accumulate_block(sdt_backend *be, sdt_tensor *dst, const float *g, int64_t batch, int64_t image,
                            int64_t offset, int64_t len, int slot)
{
    if (!dst || len == 0) return 0;
    float *gd = cpu_write_begin(be, dst, slot, true);
    if (!gd) return -1;
    #pragma omp parallel for collapse(2) num_threads(cpu_threads_for(be, batch * len)) schedule(static)
    for (int64_t n = 0; n < batch; n++)
        for (int64_t i = 0; i < len; i++) gd[n * len + i] += g[n * image + offset + i];
    cpu_write_end(be, dst, gd);
    return 0;
}

int cpu_concat_channels_backward(sdt_backend *be, sdt_tensor *da, sdt_tensor *db, const sdt_tensor *dout)
{
    concat_dims d;
    if (!da && !db) return 0;
    if (concat_shape(be, "concat_channels_backward", dout, da, db, &d)) return -1;
    if (sdt_tensor_numel(dout) == 0) return 0;
    const float *g = cpu_read_f32(be, dout, 0);
    if (!g) return -1;
    int64_t na = d.ca * d.spatial, nb = d.cb * d.spatial;
    if (accumulate_block(be, da, g, d.batch, na + nb, 0, na, 1)) return -1;
    return accumulate_block(be, db, g, d.batch, na + nb, na, nb, 2);
}
