/* concat_channels.c - torch.cat([a, b], dim=1) for [B, C, spatial...] (UNet skip connections);
 * backward splits dout back into da and db. */
#include "cpu_context.h"

#include <string.h>

typedef struct concat_dims {
    int64_t batch, ca, cb, spatial;
} concat_dims;

/* Shapes of one call (checked before the op runs: op_checks.c); a or b may be NULL (a skipped
 * gradient), its channels are then the rest of whole's. */
static void concat_shape(const sdt_tensor *whole, const sdt_tensor *a, const sdt_tensor *b, concat_dims *d)
{
    d->batch = whole->shape[0];
    d->ca = a ? a->shape[1] : whole->shape[1] - b->shape[1];
    d->cb = whole->shape[1] - d->ca;
    d->spatial = 1;
    for (int i = 2; i < whole->ndim; i++) d->spatial *= whole->shape[i];
}

int cpu_concat_channels_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *a, const sdt_tensor *b)
{
    concat_dims d;
    concat_shape(out, a, b, &d);
    if (sdt_tensor_numel(out) == 0) return 0;
    const float *as = cpu_read_f32(be, a, 0);
    const float *bs = cpu_read_f32(be, b, 1);
    float *o = cpu_write_begin(be, out, 2, false);
    if (!as || !bs || !o) return -1;
    int64_t na = d.ca * d.spatial, nb = d.cb * d.spatial;
#pragma omp parallel for num_threads(cpu_threads_for(be, d.batch *(na + nb))) schedule(static)
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
#pragma omp parallel for collapse(2) num_threads(cpu_threads_for(be, batch *len)) schedule(static)
    for (int64_t n = 0; n < batch; n++)
        for (int64_t i = 0; i < len; i++) gd[n * len + i] += g[n * image + offset + i];
    cpu_write_end(be, dst, gd);
    return 0;
}

int cpu_concat_channels_backward(sdt_backend *be, sdt_tensor *da, sdt_tensor *db, const sdt_tensor *dout)
{
    concat_dims d;
    if (!da && !db) return 0;
    concat_shape(dout, da, db, &d);
    if (sdt_tensor_numel(dout) == 0) return 0;
    const float *g = cpu_read_f32(be, dout, 0);
    if (!g) return -1;
    int64_t na = d.ca * d.spatial, nb = d.cb * d.spatial;
    if (accumulate_block(be, da, g, d.batch, na + nb, 0, na, 1)) return -1;
    return accumulate_block(be, db, g, d.batch, na + nb, na, nb, 2);
}
