/* flux_gen.h - seeded random-weight Flux.1 transformer files, for tests and benchmarks.
 *
 * Every parameter flux_params enumerates (under the config's prefix), drawn as checkpoint_gen.h draws a model's
 * (sdt_ckpt_fill: each tensor its own stream keyed by seed and key; perturb_all also randomises the norm weights
 * and biases), written as one safetensors file in diffusers' transformer names. */
#ifndef SDT_MODELS_FLUX_GEN_H
#define SDT_MODELS_FLUX_GEN_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#include "flux.h"

/* Writes path atomically in dtype (SDT_F32, SDT_F16 or SDT_BF16). */
bool flux_generate(const char *path, const flux_config *cfg, sdt_dtype dtype, uint64_t seed, bool perturb_all,
                   sdt_error *error);

#endif
