/* ldm_diffusers_pairs.h - the names LDM and diffusers checkpoints spell differently, one
 * table per place, read in either direction: weights.c maps diffusers -> LDM when it opens
 * a diffusers folder, diffusers_names.c maps LDM -> diffusers when it writes one. */
#ifndef SDT_MODELS_LDM_DIFFUSERS_PAIRS_H
#define SDT_MODELS_LDM_DIFFUSERS_PAIRS_H

#include <stddef.h>

typedef enum sdt_name_direction { SDT_TO_DIFFUSERS, SDT_TO_LDM } sdt_name_direction;

/* Pairs {ldm, diffusers, ..., NULL}. Where several diffusers names map to one LDM name
 * (older diffusers VAE attention), the current one comes first: it is what is written. */
extern const char *const sdt_pairs_unet_fixed[];  /* whole keys: time embedding, conv_in, out */
extern const char *const sdt_pairs_unet_resnet[]; /* inside a UNet res-block */
extern const char *const sdt_pairs_vae_resnet[];  /* inside a VAE res-block */
extern const char *const sdt_pairs_vae_attn[];    /* inside the VAE mid-block attention */

/* The partner of the whole name, or NULL. */
const char *sdt_pair_name(const char *const *pairs, const char *name, sdt_name_direction to);
/* The partner of rest's first dotted part(s) ("in_layers.0" of "in_layers.0.weight"), with
 * *tail pointing at what follows them; NULL (and *tail untouched) when none matches. */
const char *sdt_pair_head(const char *const *pairs, const char *rest, sdt_name_direction to, const char **tail);

#endif
