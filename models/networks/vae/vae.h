/* vae.h - Stable Diffusion's AutoencoderKL (LDM first_stage_model.*), forward only.
 *
 * The encoder turns an image [B, 3, H, W] in [-1, 1] into the mean and
 * log-variance of the latent distribution [B, z, H/f, W/f] (f = 2^(levels-1));
 * the decoder turns latents back into an image. Used to cache training latents
 * and to decode previews; nothing here needs gradients.
 *
 * Latents passed between the VAE and the UNet are always *scaled* latents
 * (scaling factor 0.18215 for SD 1.x/2.x): vae_latents_sample/vae_latents_mean
 * multiply by it and vae_decode divides by it first, as LDM does. SD3's and Flux's
 * 16-channel VAE also shifts them: latents = (z - shift) scaling, decoded from
 * latents / scaling + shift (diffusers' SD3 and Flux pipelines).
 *
 * Activations ping-pong between two arena buffers sized by a shape pass, with
 * per-block scratch given back after each block, so the peak stays a few
 * full-resolution activations rather than the sum of all of them.
 */
#ifndef SDT_MODELS_VAE_H
#define SDT_MODELS_VAE_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>

#include "arena.h"
#include "ops.h"
#include "param_list.h"
#include "weights.h"

#define VAE_MAX_LEVELS 4
#define VAE_MAX_RES_BLOCKS 3

typedef struct vae_config {
    int in_channels;             /* image channels (3) */
    int ch;                      /* base width (128) */
    int levels;                  /* resolution levels (4) */
    int ch_mult[VAE_MAX_LEVELS]; /* width multipliers per level (1, 2, 4, 4) */
    int res_blocks;              /* resnet blocks per encoder level (2); the decoder has one more */
    int z_channels;              /* latent channels (4) */
    int groups;                  /* groupnorm groups (32) */
    float eps;                   /* groupnorm eps (1e-6) */
    float scaling;               /* latent scaling factor (0.18215) */
    float shift;                 /* latent shift (0 for SD; SD3 0.0609, Flux 0.1159): latents = (z - shift) scaling */
    int has_quant_conv;          /* 1: quant_conv / post_quant_conv (SD's); 0: SD3's and Flux's 16-channel VAE */
    int fp16_safe;               /* nonzero: a diffusers config with force_upcast false (the fp16-fix VAE's):
                                   * its activations stay within fp16's range; SDXL's own VAE overflows. An int
                                   * (no padding): configs are compared byte for byte */
} vae_config;

vae_config vae_config_sd(void);
/* Tests: width 64, levels (1, 2), one resnet per level, z = 4: latents are half the image size. */
vae_config vae_config_tiny(void);
/* SD3/SD3.5's and Flux.1's AutoencoderKL: SD's network with 16 latent channels and no quant_conv /
 * post_quant_conv; the two differ only in the latents' scaling and shift, from their diffusers
 * configs (stabilityai/stable-diffusion-3.5-*: scaling_factor 1.5305, shift_factor 0.0609;
 * black-forest-labs/FLUX.1-*: 0.3611, 0.1159). */
vae_config vae_config_sd3(void);
vae_config vae_config_flux(void);
/* Tests: vae_config_tiny's network with 16 latent channels, no quant convs, SD3's scaling and shift. */
vae_config vae_config_tiny16(void);
bool vae_config_check(const vae_config *cfg, sdt_error *error);
/* From names and shapes: base width from encoder.conv_in, levels and multipliers from
 * encoder.down.*.block.0.conv1, resnets per level by counting, z from decoder.conv_in, the quant
 * convs by their presence. Groups 32, eps 1e-6, scaling and shift are not stored in checkpoints:
 * SD's (0.18215, 0) with quant convs, SD3's (1.5305, 0.0609) for 16 channels without them; a Flux
 * run takes vae_config_flux()'s scaling and shift (the same network: only the family tells them
 * apart). The keys are looked up under vae_key_prefix(w). */
bool vae_config_detect(const sdt_weights *w, vae_config *cfg, sdt_error *error);
/* Where w keeps the VAE: VAE_KEY_PREFIX (single files, SD3.5's all-in-one, diffusers folders), or ""
 * for a lone VAE file in LDM names (Flux's ae.safetensors, a standalone SD VAE): the file has
 * encoder.conv_in.weight and decoder.conv_in.weight at the top and no first_stage_model.* ones. */
const char *vae_key_prefix(const sdt_weights *w);
/* Every first_stage_model.* parameter for this config (canonical LDM keys). */
bool vae_params(const vae_config *cfg, sdt_param_visitor visit, void *user);
/* The same LDM names under another prefix ("" for a lone VAE file such as Flux's ae.safetensors). */
bool vae_params_under(const vae_config *cfg, const char *prefix, sdt_param_visitor visit, void *user);
/* Downsampling factor between image and latents. */
int vae_factor(const vae_config *cfg);

typedef struct vae_resblock {
    sdt_tensor n1_w, n1_b, c1_w, c1_b, n2_w, n2_b, c2_w, c2_b;
    sdt_tensor sc_w, sc_b; /* nin_shortcut (1x1 conv) when in != out channels */
    int cin, cout;
} vae_resblock;

typedef struct vae_attn {
    sdt_tensor n_w, n_b, q_w, q_b, k_w, k_b, v_w, v_b, o_w, o_b; /* q/k/v/proj_out as linear [C, C] */
} vae_attn;

typedef struct vae_mid {
    vae_resblock b1;
    vae_attn attn;
    vae_resblock b2;
} vae_mid;

typedef struct vae_model {
    vae_config cfg;
    sdt_tensor enc_in_w, enc_in_b;
    vae_resblock enc_block[VAE_MAX_LEVELS][VAE_MAX_RES_BLOCKS];
    sdt_tensor down_w3[VAE_MAX_LEVELS], down_b[VAE_MAX_LEVELS]; /* checkpoint's 3x3 stride-2 convs */
    /* The same convs as 4x4 kernels with a zero first row and column: with symmetric
     * padding 1 they equal LDM's pad (0, 1, 0, 1) + 3x3 stride 2, using only conv2d. */
    sdt_tensor down_w4[VAE_MAX_LEVELS];
    vae_mid enc_mid;
    sdt_tensor enc_norm_w, enc_norm_b, enc_out_w, enc_out_b, quant_w, quant_b;
    sdt_tensor post_quant_w, post_quant_b, dec_in_w, dec_in_b;
    vae_mid dec_mid;
    vae_resblock dec_block[VAE_MAX_LEVELS][VAE_MAX_RES_BLOCKS + 1];
    sdt_tensor up_w[VAE_MAX_LEVELS], up_b[VAE_MAX_LEVELS];
    sdt_tensor dec_norm_w, dec_norm_b, dec_out_w, dec_out_b;
    sdt_backend *be; /* owner of the down_w4 buffers */
} vae_model;

/* Looks every parameter up (shape-checked, under vae_key_prefix(w)) and builds the padded downsample kernels
 * on the backend (their only owned memory; vae_free releases it). */
bool vae_load(vae_model *m, const vae_config *cfg, const sdt_weights *w, sdt_backend *be, sdt_error *error);
/* The canonical key prefix of the VAE's weights. */
#define VAE_KEY_PREFIX "first_stage_model."
void vae_free(vae_model *m); /* and m->be becomes NULL: not loaded */

/* image [B, in_channels, H, W] (H, W multiples of vae_factor) -> mean and logvar
 * [B, z, H/f, W/f] (caller tensors, any float dtype; logvar as the network gives it,
 * unclamped). Activations stored in act_dtype. With a measuring arena nothing runs. */
bool vae_encode(const vae_model *m, sdt_backend *be, sdt_arena *arena, const sdt_tensor *image, sdt_dtype act_dtype,
                sdt_tensor *mean, sdt_tensor *logvar, sdt_error *error);
/* Scaled latents [B, z, h, w] -> image [B, in_channels, h*f, w*f] (not clamped): the network decodes
 * latents / scaling + shift. */
bool vae_decode(const vae_model *m, sdt_backend *be, sdt_arena *arena, const sdt_tensor *latents, sdt_dtype act_dtype,
                sdt_tensor *image, sdt_error *error);

/* latents = scaling * (mean + exp(0.5 * clamp(logvar, -30, 20)) * noise), noise ~ N(0, 1)
 * supplied by the caller (reproducible). Computed on the host: latents are small. */
bool vae_latents_sample(sdt_backend *be, sdt_tensor *latents, const sdt_tensor *mean, const sdt_tensor *logvar,
                        const sdt_tensor *noise, float scaling, sdt_error *error);
/* latents = scaling * mean (the deterministic choice). */
bool vae_latents_mean(sdt_backend *be, sdt_tensor *latents, const sdt_tensor *mean, float scaling, sdt_error *error);
/* The same with a latent shift, as SD3's and Flux's pipelines scale: latents = scaling * (z - shift), z the
 * sample (or the mean); shift 0 gives the two above exactly. */
bool vae_latents_sample_shifted(sdt_backend *be, sdt_tensor *latents, const sdt_tensor *mean, const sdt_tensor *logvar,
                                const sdt_tensor *noise, float scaling, float shift, sdt_error *error);
bool vae_latents_mean_shifted(sdt_backend *be, sdt_tensor *latents, const sdt_tensor *mean, float scaling, float shift,
                              sdt_error *error);

#endif
