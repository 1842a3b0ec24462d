/* transformer_pack.h - writes a transformer family's files in the layouts people have, for tests: the
 * diffusers-named tensors a generator wrote (mmdit_gen, t5_gen, ...) packed into SAI's SD3 all-in-one layout
 * or BFL's Flux layout by transformer_keys.h's table run backwards (q, k, v rows concatenated, shift/scale
 * halves swapped back), other parts copied under the prefixes all-in-one files use, optionally stored as fp8
 * (F8_E4M3 / F8_E5M2, rounded as torch rounds). Reading the result back (sdt_weights_open) must give every
 * tensor of the sources (bit for bit, or fp8-rounded). */
#ifndef SDT_MODELS_TRANSFORMER_PACK_H
#define SDT_MODELS_TRANSFORMER_PACK_H

#include "sdt_error.h"

#include <stdbool.h>

#include "transformer_keys.h"
#include "weights.h"

typedef enum sdt_pack_storage { SDT_PACK_AS_IS = 0, SDT_PACK_F8_E4M3, SDT_PACK_F8_E5M2 } sdt_pack_storage;

/* Every tensor of w whose key starts with from_prefix, written as to_prefix + the rest. */
typedef struct sdt_pack_part {
    const sdt_weights *w;
    const char *from_prefix, *to_prefix;
} sdt_pack_part;

/* Writes path atomically: the transformer under transformer_prefix in w_transformer (diffusers' names; NULL for
 * none) in layout (SAI_SD3: under model.diffusion_model.; BFL_FLUX: under out_prefix, "" or
 * model.diffusion_model.), then the parts; float tensors in storage. */
bool sdt_pack_write(const char *path, sdt_tk_layout layout, const sdt_weights *w_transformer,
                    const char *transformer_prefix, const char *out_prefix, const sdt_pack_part *parts, int n_parts,
                    sdt_pack_storage storage, sdt_error *error);

#endif
