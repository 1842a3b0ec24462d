/* lr_scheduler.h - the learning-rate schedulers of ABI 1.5 (sdt_lr_scheduler), a factor on the
 * rate of A1111's schedule string (data/lr_schedule.h), which stays the default and gives the
 * base rate. As diffusers' get_scheduler (optimization.py) defines them, with s the step count
 * before the update (LambdaLR's last_epoch), W = warmup_steps, T = max_steps:
 *   warmup (every kind):  s < W: s / max(1, W)
 *   constant:             1
 *   linear:               max(0, (T - s) / max(1, T - W))
 *   cosine:               p = (s - W) / max(1, T - W); max(0, 0.5 (1 + cos(pi p)))
 *   cosine_with_restarts: p as cosine; 0 when p >= 1, else 0.5 (1 + cos(pi ((cycles p) mod 1)))
 * s and T count as the schedule string does (the trained file's own step), so the factor is a
 * pure function of the step and a resumed run continues it exactly. */
#ifndef SDT_TRAIN_LR_SCHEDULER_H
#define SDT_TRAIN_LR_SCHEDULER_H

#include <stdint.h>

#include "sdtrain.h"

typedef struct sdt_lr_scheduler_config {
    sdt_lr_scheduler kind; /* zeroed: constant without warmup, the factor is 1 */
    int64_t warmup_steps;
    int64_t total_steps; /* T: max_steps */
    uint32_t cycles;     /* cosine_with_restarts; 0 counts as 1 */
} sdt_lr_scheduler_config;

/* The factor at step s (0-based: steps done before this update). */
double sdt_lr_scheduler_factor(const sdt_lr_scheduler_config *c, int64_t step);
/* "constant", "linear", "cosine", "cosine_with_restarts". */
const char *sdt_lr_scheduler_name(sdt_lr_scheduler kind);

#endif
