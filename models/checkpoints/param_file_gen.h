/* param_file_gen.h - one network's parameters, as its enumerator lists them, drawn as checkpoint_gen.h
 * draws a whole model's (sdt_ckpt_fill: each tensor its own stream keyed by seed and key; perturb_all
 * also randomises the norm weights and biases) and written atomically as one safetensors file. The one
 * writer behind the per-network generators (t5_gen, mmdit_gen). */
#ifndef SDT_MODELS_PARAM_FILE_GEN_H
#define SDT_MODELS_PARAM_FILE_GEN_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#include "ops.h"
#include "param_list.h"

/* A network's parameter list over its config (t5_params, mmdit_params behind a const void * adapter). */
typedef bool (*sdt_param_enumerator)(const void *cfg, sdt_param_visitor visit, void *user);

/* Writes path in dtype (SDT_F32, SDT_F16 or SDT_BF16); network names it in sentences ("T5") and
 * generator in the file's metadata ("t5_generate"). */
bool sdt_param_file_generate(const char *path, const char *network, const char *generator,
                             sdt_param_enumerator enumerate, const void *cfg, sdt_dtype dtype, uint64_t seed,
                             bool perturb_all, sdt_error *error);

#endif
