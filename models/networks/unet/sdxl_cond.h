/* sdxl_cond.h - SDXL's vector conditioning y, the input of the UNet's label_emb.
 *
 * y = [pooled text embedding, emb(original height), emb(original width),
 *      emb(crop top), emb(crop left), emb(target height), emb(target width)]
 * as diffusers' UNet2DConditionModel builds it for addition_embed_type "text_time"
 * (torch.concat([text_embeds, time_embeds])) and sgm's GeneralConditioner does
 * (the OpenCLIP bigG embedder's pooled output first, then the three
 * ConcatTimestepEmbedderND outputs). emb(v) is the sinusoidal timestep embedding
 * of width addition_time_embed_dim (SDXL 256) with cos first (flip_sin_to_cos,
 * shift 0, max period 10000): [cos(v f_i), sin(v f_i)], f_i = 10000^(-i / half).
 * The pooled part is y's first adm_in - 6 x width values (SDXL 1280), so its
 * gradient is the same slice of d(y) (sdt_unet_backward).
 */
#ifndef SDT_MODELS_SDXL_COND_H
#define SDT_MODELS_SDXL_COND_H

#include "unet.h"

/* The six numbers of SDXL's size conditioning, in pixels, in the order y holds them. */
typedef struct sdt_sdxl_sizes {
    double original_height, original_width; /* the training image before resizing / cropping */
    double crop_top, crop_left;             /* where the crop starts in the resized image */
    double target_height, target_width;     /* the size being generated (trained) */
} sdt_sdxl_sizes;

/* Width of the pooled text embedding inside y under this config (SDXL 1280); 0 without label_emb. */
int sdt_sdxl_pooled_width(const sdt_unet_config *c);

/* out[0 .. width) = the sinusoidal embedding of one number (width even). */
void sdt_sdxl_size_embedding(double value, int width, float *out);

/* y [adm_in_channels] (host f32) of one image from its pooled text embedding
 * (sdt_sdxl_pooled_width floats) and sizes. false + a sentence for a config without
 * label_emb or sizes that are not finite. */
bool sdt_sdxl_vector_cond(const sdt_unet_config *c, const float *pooled, const sdt_sdxl_sizes *sizes, float *y,
                          sdt_error *error);

#endif
