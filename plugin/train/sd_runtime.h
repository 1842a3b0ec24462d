/* sd_runtime.h - a Stable Diffusion checkpoint ready to compute on one backend.
 *
 * The checkpoint file is opened once (memory-mapped), its config detected and every
 * weight checked finite; then its tensors are materialized for the backend in the
 * storage dtype of the precision mode (f16/bf16 frozen weights for mixed precision,
 * f32 otherwise) and the three networks are bound to that copy. The NaN fallback
 * calls sd_runtime_set_dtype(F32): a fresh f32 copy, the networks rebound, the old
 * copy released.
 */
#ifndef SDT_TRAIN_SD_RUNTIME_H
#define SDT_TRAIN_SD_RUNTIME_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>

#include "sd_model.h"
#include "weights.h"

typedef struct sd_runtime {
    sdt_weights *file;    /* as opened: the CPU mapping */
    sdt_weights *dev;     /* materialized for be in dtype */
    sd_config cfg;
    sd_model model;
    sdt_backend *be;
    sdt_dtype dtype;      /* frozen weights and activations */
    bool bound;
} sd_runtime;

/* v_prediction true forces a v-prediction model; false keeps what the checkpoint says (a
 * diffusers scheduler config) or SD's default, epsilon. */
bool sd_runtime_open(sd_runtime *rt, const char *path, sdt_backend *be, sdt_dtype dtype, bool v_prediction, sdt_error *error);
bool sd_runtime_set_dtype(sd_runtime *rt, sdt_dtype dtype, sdt_error *error);
void sd_runtime_close(sd_runtime *rt);

#endif
