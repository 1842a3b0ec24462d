/* t5_gen.h - seeded random-weight T5 encoder files, for tests and benchmarks.
 *
 * Every parameter t5_params enumerates (under the config's prefix), drawn as checkpoint_gen.h draws
 * a model's (sdt_ckpt_fill: each tensor its own stream keyed by seed and key; perturb_all also
 * randomises the RMS norm weights), written as one safetensors file in the names people's T5 files use. */
#ifndef SDT_MODELS_T5_GEN_H
#define SDT_MODELS_T5_GEN_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#include "t5_encoder.h"

/* Writes path atomically in dtype (SDT_F32, SDT_F16 or SDT_BF16). */
bool t5_generate(const char *path, const t5_config *cfg, sdt_dtype dtype, uint64_t seed, bool perturb_all,
                 sdt_error *error);

#endif
