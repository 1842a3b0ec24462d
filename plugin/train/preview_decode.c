/* preview_decode.c - see preview_decode.h. */
#include "train/preview_decode.h"

#include <math.h>
#include <stdlib.h>

static uint8_t to_u8(float v)
{
    float x = (v + 1.0f) * 127.5f;
    return (uint8_t)(x < 0 ? 0 : x > 255 ? 255 : lrintf(x));
}

bool sdt_preview_decode_rgb(sd_runtime *rt, sdt_arena *a, const float *x, int width, int height, uint8_t *rgb,
                            sdt_error *error)
{
    sdt_backend *be = rt->be;
    const vae_model *vae = &rt->model.vae;
    int f = vae_factor(&vae->cfg), c = vae->cfg.z_channels;
    int64_t n = (int64_t)c * (height / f) * (width / f);
    int64_t lshape[4] = {1, c, height / f, width / f}, ishape[4] = {1, 3, height, width};
    if (a->measuring) {
        sdt_tensor z = sdt_arena_tensor(a, SDT_F32, 4, lshape), img = sdt_arena_tensor(a, SDT_F32, 4, ishape);
        return vae_decode(vae, be, a, &z, rt->vae_dtype, &img, error);
    }
    int64_t hw = (int64_t)width * height;
    float *pix = malloc((size_t)(3 * hw) * sizeof(float));
    if (!pix) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "preview: out of host memory");
    sdt_tensor z = sdt_arena_tensor(a, SDT_F32, 4, lshape), img = sdt_arena_tensor(a, SDT_F32, 4, ishape);
    bool ok = sdt_arena_fits(a) && be->upload(be, z.data, x, (size_t)n * sizeof(float)) == 0 &&
              vae_decode(vae, be, a, &z, rt->vae_dtype, &img, error) &&
              be->download(be, pix, img.data, sdt_tensor_nbytes(&img)) == 0;
    if (!ok && !sdt_arena_fits(a))
        sdt_fail(error, a->error.code, "preview: decoding failed: %s", a->error.message);
    else if (!ok && error->code == SDT_ERR_OK)
        sdt_fail(error, be->error.code, "preview: decoding failed: %s", be->error.message);
    for (int64_t i = 0; ok && i < hw; i++)
        for (int ch = 0; ch < 3; ch++) rgb[i * 3 + ch] = to_u8(pix[ch * hw + i]);
    free(pix);
    return ok;
}
