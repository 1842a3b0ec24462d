/* sdxl_cond.c - SDXL's vector conditioning y; see sdxl_cond.h. */
#include "sdxl_cond.h"

#include <math.h>
#include <string.h>

int sdt_sdxl_pooled_width(const sdt_unet_config *c)
{
    return c->adm_in_channels > 0 ? c->adm_in_channels - 6 * c->addition_time_embed_dim : 0;
}

/* Computed in double and rounded once: sizes reach 4096, where an f32 argument is
 * already 2^-12 off; diffusers' f32 arithmetic differs from this by about that. */
void sdt_sdxl_size_embedding(double value, int width, float *out)
{
    const int half = width / 2;
    for (int i = 0; i < half; i++) {
        double arg = value * exp(-log(10000.0) * (double)i / (double)half);
        out[i] = (float)cos(arg);
        out[half + i] = (float)sin(arg);
    }
}

bool sdt_sdxl_vector_cond(const sdt_unet_config *c, const float *pooled, const sdt_sdxl_sizes *sizes, float *y,
                          sdt_error *error)
{
    const int pooled_width = sdt_sdxl_pooled_width(c), width = c->addition_time_embed_dim;
    if (pooled_width <= 0)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "sdxl conditioning: this UNet has no label_emb (adm_in_channels "
                        "%d), so it takes no y; build y only for SDXL",
                        c->adm_in_channels);
    const double numbers[6] = {sizes->original_height, sizes->original_width, sizes->crop_top,
                               sizes->crop_left,       sizes->target_height,  sizes->target_width};
    for (int k = 0; k < 6; k++)
        if (!isfinite(numbers[k]))
            return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                            "sdxl conditioning: size number %d (original h, w, crop "
                            "top, left, target h, w) is not finite; pass sizes in pixels",
                            k);
    memcpy(y, pooled, (size_t)pooled_width * sizeof *y);
    for (int k = 0; k < 6; k++) sdt_sdxl_size_embedding(numbers[k], width, y + pooled_width + k * width);
    return true;
}
