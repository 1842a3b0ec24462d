/* optimizer.h - torch.optim.AdamW over fp32 master parameters, with clipping.
 *
 * One optimizer = one named parameter group (lr, betas, eps, weight_decay) and
 * its parameters. Each parameter is an fp32 master tensor plus its gradient
 * tensor, both owned by the caller (the trainer's weight store); the optimizer
 * owns the AdamW moments m and v, allocated on the backend. The update runs
 * through the backend's adamw_update op, so it is the same on CPU and CUDA.
 *
 * Gradient bookkeeping replaces PyTorch's `.grad is None`: the trainer tells the
 * optimizer when a backward pass accumulated into its grads
 * (sdt_optimizer_note_backward); a step (taken or skipped) and zero_grad use
 * that up. A step with no backward since the last one is the "No inf checks
 * were recorded" case and is refused with SDT_CORE_NO_BACKWARD instead of
 * silently doing nothing.
 *
 * Clipping follows torch.nn.utils.clip_grad_norm_ / clip_grad_value_ and must
 * see UNSCALED gradients: while the grads still carry a loss scale (noted by
 * note_backward(scaled = true) and cleared by the scaler's unscale) clipping
 * and stepping are refused with SDT_CORE_GRADS_STILL_SCALED.
 *
 * Lifetime: destroy a scaler before the optimizers it scales.
 */
#ifndef SDT_CORE_OPTIMIZER_H
#define SDT_CORE_OPTIMIZER_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#include "train/core_status.h"
#include "ops.h"

typedef struct sdt_adamw_hparams {
    float lr;
    float beta1;
    float beta2;
    float eps;
    float weight_decay; /* decoupled: param *= 1 - lr * weight_decay */
} sdt_adamw_hparams;

/* torch.optim.AdamW defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 1e-2. */
sdt_adamw_hparams sdt_adamw_hparams_torch_default(void);
/* What textual inversion uses (A1111: AdamW(..., weight_decay=0.0)): the defaults with weight_decay 0. */
sdt_adamw_hparams sdt_adamw_hparams_textual_inversion(float lr);

typedef struct sdt_optimizer sdt_optimizer;

/* name appears in every message ("embedding", "hypernetwork"). NULL on failure (sentence in *error). */
sdt_optimizer *sdt_optimizer_create(sdt_backend *be, const char *name, const sdt_adamw_hparams *hp, sdt_error *error);
void sdt_optimizer_destroy(sdt_optimizer *opt);

/* Registers a parameter. param and grad are caller-owned views that must stay valid
 * while the optimizer lives; both fp32 on the backend's device, same shape.
 * trainable = false lists a frozen parameter (requires_grad=False): it is never
 * updated, grad may be NULL, and messages count it. Errors: SDT_CORE_FP16_MASTER
 * (16-bit master or grad), SDT_CORE_DUPLICATE_PARAM, SDT_CORE_INVALID_ARGUMENT. */
sdt_core_status sdt_optimizer_add_param(sdt_optimizer *opt, const char *name, sdt_tensor *param, sdt_tensor *grad,
                                        bool trainable, sdt_error *error);
/* Prepare-time check: SDT_CORE_NO_TRAINABLE_PARAMS when nothing can train. */
sdt_core_status sdt_optimizer_prepare(const sdt_optimizer *opt, sdt_error *error);

const char *sdt_optimizer_name(const sdt_optimizer *opt);
int sdt_optimizer_param_count(const sdt_optimizer *opt);
/* The first parameter whose memory overlaps one of b's, or NULL: a parameter
 * owned by two optimizers would be unscaled and updated twice. */
const char *sdt_optimizer_find_shared_param(const sdt_optimizer *a, const sdt_optimizer *b);

/* Zeroes every trainable grad and forgets the backward passes. */
sdt_core_status sdt_optimizer_zero_grad(sdt_optimizer *opt, sdt_error *error);
/* A backward pass accumulated into this optimizer's grads, seeded with loss_scale
 * (sdt_scaler_get_scale: 1 without scaling, so the grads count as unscaled). */
void sdt_optimizer_note_backward(sdt_optimizer *opt, float loss_scale);
/* Backward passes since the last step (taken or skipped) or zero_grad. */
int sdt_optimizer_backward_count(const sdt_optimizer *opt);
/* True when a backward accumulated onto grads a previous step already used
 * (zero_grad was not called in between): the scaler warns about it. */
bool sdt_optimizer_grads_not_zeroed(const sdt_optimizer *opt);

/* The scaler's fused pass: grads *= inv_scale and *found_inf |= any non-finite,
 * one backend unscale_check over all trainable grads; marks the grads unscaled. */
sdt_core_status sdt_optimizer_unscale_grads(sdt_optimizer *opt, float inv_scale, bool *found_inf, sdt_error *error);

/* L2 norm of all trainable grads (sqrt of a double sum of squares). */
sdt_core_status sdt_optimizer_grad_norm(sdt_optimizer *opt, double *norm, sdt_error *error);
/* torch.nn.utils.clip_grad_norm_(params, max_norm, 2.0, error_if_nonfinite):
 * coef = max_norm / (total + 1e-6), clamped to 1, grads *= coef; *total_norm gets the
 * norm before clipping. A non-finite norm turns the grads to NaN (torch does the
 * same) unless error_if_nonfinite, which returns SDT_CORE_NONFINITE_NORM. */
sdt_core_status sdt_optimizer_clip_grad_norm(sdt_optimizer *opt, double max_norm, bool error_if_nonfinite,
                                             double *total_norm, sdt_error *error);
/* torch.nn.utils.clip_grad_value_: every grad element clamped to [-clip_value, clip_value]. */
sdt_core_status sdt_optimizer_clip_grad_value(sdt_optimizer *opt, float clip_value, sdt_error *error);

/* SDT_CORE_NO_TRAINABLE_PARAMS or SDT_CORE_NO_BACKWARD (no backward since the last step or zero_grad),
 * the checks a step and the scaler's unscale make before touching anything. */
sdt_core_status sdt_optimizer_require_gradients(const sdt_optimizer *opt, sdt_error *error);

/* One AdamW step over the trainable parameters. Refuses: no backward since the
 * last step or zero_grad (SDT_CORE_NO_BACKWARD), grads still scaled, every grad exactly zero
 * (SDT_CORE_NO_GRADIENT_FLOW). */
sdt_core_status sdt_optimizer_step(sdt_optimizer *opt, sdt_error *error);
/* A step the scaler skipped: state untouched, but the grads count as used. */
void sdt_optimizer_note_skipped_step(sdt_optimizer *opt);

/* The schedule sets the learning rate before each step. */
void sdt_optimizer_set_lr(sdt_optimizer *opt, float lr);
/* Completed (not skipped) steps; torch's state['step']. set_ is for resume. */
int64_t sdt_optimizer_step_count(const sdt_optimizer *opt);
void sdt_optimizer_set_step_count(sdt_optimizer *opt, int64_t steps);
/* The loss scaler that owns this optimizer's scaling (opaque; NULL when none).
 * One owner at a time is what catches an optimizer handed to two scalers. */
const void *sdt_optimizer_owner(const sdt_optimizer *opt);
void sdt_optimizer_set_owner(sdt_optimizer *opt, const void *owner);

/* Views of parameter i's tensors and AdamW moments, for checkpoints and tests
 * (m and v are NULL for a frozen parameter). */
bool sdt_optimizer_param_views(sdt_optimizer *opt, int i, const char **name, sdt_tensor **param, sdt_tensor **grad,
                               sdt_tensor **m, sdt_tensor **v);

#endif
