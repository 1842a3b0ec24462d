/* prediction_probe.c - see prediction_probe.h. */
#include "prediction_probe.h"

#include <math.h>
#include <stdlib.h>

enum { PROBE_SIZE = 8, PROBE_TOKENS = 2, PROBE_T = 999 };
#define PROBE_VALUE 0.5f

bool sd_prediction_probe_applies(const sd_config *cfg)
{
    return cfg->clip.act == SDT_ACT_GELU && cfg->unet.in_channels == cfg->unet.out_channels;
}

/* The probe's tensors and forward on `a`; on a measuring arena only the sizes count. */
static bool probe_on(sdt_unet *unet, sdt_backend *be, sdt_arena *a, sdt_dtype act_dtype, float *host, sdt_error *error)
{
    const sdt_unet_config *c = sdt_unet_get_config(unet);
    int64_t n_lat = (int64_t)c->in_channels * PROBE_SIZE * PROBE_SIZE, n_ctx = (int64_t)PROBE_TOKENS * c->context_dim;
    int64_t lshape[4] = {1, c->in_channels, PROBE_SIZE, PROBE_SIZE},
            oshape[4] = {1, c->out_channels, PROBE_SIZE, PROBE_SIZE};
    int64_t cshape[3] = {1, PROBE_TOKENS, c->context_dim}, tshape[1] = {1};
    sdt_tensor lat = sdt_arena_tensor(a, SDT_F32, 4, lshape), ts = sdt_arena_tensor(a, SDT_F32, 1, tshape);
    sdt_tensor ctx32 = sdt_arena_tensor(a, SDT_F32, 3, cshape), ctx = sdt_arena_tensor(a, act_dtype, 3, cshape);
    float t = PROBE_T;
    if (!a->measuring) {
        for (int64_t i = 0; i < (n_lat > n_ctx ? n_lat : n_ctx); i++) host[i] = PROBE_VALUE;
        if (!sdt_arena_fits(a))
            return sdt_fail(error, a->error.code, "prediction probe: staging its input failed: %s", a->error.message);
        if (be->upload(be, lat.data, host, (size_t)n_lat * sizeof(float)) ||
            be->upload(be, ctx32.data, host, (size_t)n_ctx * sizeof(float)) || be->upload(be, ts.data, &t, sizeof t) ||
            be->convert(be, &ctx, &ctx32))
            return sdt_fail(error, be->error.code, "prediction probe: staging its input failed: %s", be->error.message);
    }
    sdt_unet_options uo = sdt_unet_options_default();
    uo.act_dtype = act_dtype;
    uo.for_backward = false;
    sdt_tensor out;
    if (!sdt_unet_forward(unet, be, a, &uo, &lat, &ts, &ctx, NULL, &out, error)) return false;
    sdt_tensor out32 = sdt_arena_tensor(a, SDT_F32, 4, oshape);
    if (a->measuring) return true;
    if (!sdt_arena_fits(a))
        return sdt_fail(error, a->error.code, "prediction probe: reading the UNet's output failed: %s",
                        a->error.message);
    if (be->convert(be, &out32, &out) || be->download(be, host, out32.data, sdt_tensor_nbytes(&out32)))
        return sdt_fail(error, be->error.code, "prediction probe: reading the UNet's output failed: %s",
                        be->error.message);
    return true;
}

bool sd_prediction_probe(sdt_unet *unet, sdt_backend *be, sdt_dtype act_dtype, double *mean_diff, bool *v,
                         sdt_error *error)
{
    const sdt_unet_config *c = sdt_unet_get_config(unet);
    int64_t n_out = (int64_t)c->out_channels * PROBE_SIZE * PROBE_SIZE;
    int64_t n_host =
        (int64_t)(c->in_channels > c->out_channels ? c->in_channels : c->out_channels) * PROBE_SIZE * PROBE_SIZE;
    if (n_host < (int64_t)PROBE_TOKENS * c->context_dim) n_host = (int64_t)PROBE_TOKENS * c->context_dim;
    sdt_arena a;
    sdt_arena_init_measure(&a, be);
    if (!probe_on(unet, be, &a, act_dtype, NULL, error)) return false;
    size_t bytes = a.peak;
    float *host = malloc((size_t)n_host * sizeof(float));
    if (!host || !sdt_arena_init(&a, be, bytes)) {
        free(host);
        return sdt_fail(error, host ? be->error.code : SDT_ERR_OUT_OF_MEMORY,
                        "prediction probe: %zu bytes for one UNet pass at 8x8 are not available: %s", bytes,
                        host ? be->error.message : "out of host memory");
    }
    bool ok = probe_on(unet, be, &a, act_dtype, host, error);
    sdt_arena_release(&a);
    double sum = 0.0;
    for (int64_t i = 0; ok && i < n_out; i++) sum += (double)host[i] - PROBE_VALUE;
    free(host);
    if (!ok) return false;
    *mean_diff = sum / (double)n_out;
    if (!isfinite(*mean_diff))
        return sdt_fail(error, SDT_ERR_NUMERICAL,
                        "prediction probe: the UNet returned a non-finite value at t = %d; the checkpoint "
                        "is damaged, or set the prediction type (epsilon or v) yourself",
                        PROBE_T);
    *v = *mean_diff < SD_PREDICTION_PROBE_V_BELOW;
    return true;
}
