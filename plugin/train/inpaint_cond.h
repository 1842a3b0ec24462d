/* inpaint_cond.h - the extra input channels of an inpainting UNet (in_channels 9 = 4 + 1 + 4).
 *
 * Training and previews have no mask, so, as A1111 does (txt2img_image_conditioning for
 * conditioning keys "hybrid"/"concat"), the whole image counts as masked: one channel of
 * ones, then the VAE latent of a uniformly grey image (0.5, i.e. 0 in [-1, 1]), scaled like
 * every latent. The UNet sees [noisy latent, mask, masked-image latent] along the channels.
 * A1111 samples the grey image's latent; sdtrain takes its mean, so the extra channels are
 * the same at every step (docs/a1111-differences.md).
 */
#ifndef SDT_TRAIN_INPAINT_COND_H
#define SDT_TRAIN_INPAINT_COND_H

#include <stdbool.h>
#include <stddef.h>

#include "train/sd_runtime.h"
#include "train/work_arena.h"

/* The channels past the latent ones the UNet takes (0 for an ordinary model). */
int inpaint_extra_channels(const sd_runtime *rt);

/* The extra channels for one latent size, kept until the size (or the runtime's precision) changes. */
typedef struct inpaint_cond {
    float *values; /* [extra, h, w] */
    int h, w;
    sdt_dtype dtype;
} inpaint_cond;

/* values for latents of h x w (computed with the VAE on wa the first time, or after a
 * change); NULL + *error when the model is not an inpainting one of the supported layout
 * (extra = 1 + latent channels) or encoding fails. */
const float *inpaint_cond_get(inpaint_cond *ic, sd_runtime *rt, work_arena *wa, int h, int w, sdt_error *error);
void inpaint_cond_free(inpaint_cond *ic);

#endif
