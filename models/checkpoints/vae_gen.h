/* vae_gen.h - seeded random-weight VAE files, for tests and benchmarks: every parameter vae_params_under
 * enumerates for the config, under a prefix ("" writes a lone VAE file in LDM names, as Flux's
 * ae.safetensors is; VAE_KEY_PREFIX the VAE part of an all-in-one file), drawn and written by
 * param_file_gen.h. */
#ifndef SDT_MODELS_VAE_GEN_H
#define SDT_MODELS_VAE_GEN_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#include "vae.h"

/* Writes path atomically in dtype (SDT_F32, SDT_F16 or SDT_BF16). */
bool vae_generate(const char *path, const vae_config *cfg, const char *prefix, sdt_dtype dtype, uint64_t seed,
                  bool perturb_all, sdt_error *error);

#endif
