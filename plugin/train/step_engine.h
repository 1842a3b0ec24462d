/* step_engine.h - one optimizer step over parameter groups, for every training method.
 *
 * A group is what one optimizer trains: its AdamW, its LR schedule, its clip settings and an
 * optional guard around its update (textual inversion's divergence check). A run has one or
 * more groups (an embedding; a hypernetwork; both in joint training) and one backward pass
 * per micro-batch feeds all of them. Per step the engine does, in this order:
 *   set each group's lr, zero its grads; the caller's accumulate (forward + backward of every
 *   micro-batch, seeded with the loss scale); for fp16, unscale each optimizer (torch's
 *   GradScaler with several optimizers: each records its own inf/NaN); the loss policy
 *   (train/fallback.h); each group clipped on UNSCALED gradients and stepped (a group whose own
 *   gradients overflowed is skipped, the others step); ONE scaler update for the iteration (one
 *   backoff however many groups overflowed); then the fallback's action for every group: skip,
 *   the one-shot switch to fp32 with the LR backoff on every group's schedule, or stop with a
 *   diagnosis.
 * Data parallelism (docs/abi.md 3.16, engine.comm set): right after accumulate, every group's
 * gradients are summed over the ranks (one all-reduce per parameter, each rank's backward having
 * been seeded with 1/world of the loss scale's share, so the sum is the global batch's mean), and
 * so are the loss and the zero-gradient flag; from there on every rank sees the same values, so
 * the scaler's overflow check, the fallback, clipping and AdamW decide and do the same everywhere
 * (one rank's inf or NaN makes the sum non-finite on every rank: one rank's overflow skips the
 * step on all). The sum is taken of the still-scaled gradients, just before the unscale: the same
 * values as unscaling first (the scale is a power of two unless loss_scale_init is not) while the
 * scaler's own inf check is the reduced flag, with no second path.
 * The run's length is the first group's schedule; a group whose own schedule ends sooner rests
 * (keeps its values, no update) from then on. The engine knows no model: the job supplies accumulate, the fp32 switch and the sentence that
 * explains a non-finite loss (step_engine_hooks). */
#ifndef SDT_TRAIN_STEP_ENGINE_H
#define SDT_TRAIN_STEP_ENGINE_H

#include "sdt_error.h"

#include "comm.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/lr_schedule.h"
#include "train/diagnosis.h"
#include "train/fallback.h"
#include "train/lr_scheduler.h"
#include "train/optimizer.h"
#include "train/scaler.h"
#include "sdtrain.h"

#define SDT_STEP_MAX_GROUPS 4

/* A group's schedules as the host gave them, with the config fields they came from, so a bad
 * entry is reported under its own name ("config.clip_value", "config.embedding_learn_rate"). */
typedef struct sdt_schedule_texts {
    const char *lr, *lr_field;
    uint32_t clip_mode; /* sdt_clip_mode */
    const char *clip, *clip_field;
} sdt_schedule_texts;

typedef struct sdt_param_group {
    const char *name;                  /* "embedding", "hypernetwork": messages, state keys */
    const char *state_prefix;          /* static: its tensors' key prefix in the state (NULL: its part's) */
    sdt_optimizer *opt;                /* owned by the engine once added */
    char *lr_text, *clip_text;         /* the schedules as given: a resume parses them again at its step */
    const char *lr_field, *clip_field; /* static: the config fields they came from, for sentences */
    uint32_t clip_mode;                /* sdt_clip_mode */
    sdt_lr_schedule lr, clip_value;
    /* Optional guard around a taken step (NULL: none): before saves what an undo needs;
     * after may undo the step and fail with the sentence (SDT_ERR_NUMERICAL). */
    bool (*before_step)(void *user, sdt_error *error);
    bool (*after_step)(void *user, int64_t step_number, double lr, sdt_error *error);
    void *guard_user;
    /* this iteration */
    double grad_norm; /* unscaled, before clipping */
    bool stepped;
    bool resting;    /* its schedule ended before the run's (the first group's): no update */
    int64_t skipped; /* steps this group did not take */
} sdt_param_group;

typedef struct sdt_step_hooks {
    void *user;
    /* Forward and backward of every micro-batch, gradients seeded with `scale`; *loss is their
     * mean (unscaled). Must call sdt_optimizer_note_backward(opt, scale) of every group per
     * micro-batch. */
    bool (*accumulate)(void *user, float scale, double *loss, sdt_error *error);
    /* The fallback's switch: frozen weights in f32 from now on. */
    bool (*use_fp32)(void *user, sdt_error *error);
    /* Why the loss of step_number was not finite (the data or the optimisation), one sentence. */
    void (*explain)(void *user, int64_t step_number, char *why, size_t size);
    /* Extra words for a skipped step's warning (e.g. the files with bad latents); "" for none. */
    void (*skip_note)(void *user, char *note, size_t size);
    void (*log)(void *user, sdt_log_level level, const char *message);
} sdt_step_hooks;

typedef struct sdt_step_engine {
    sdt_param_group groups[SDT_STEP_MAX_GROUPS];
    int n_groups;
    sdt_scaler *scaler; /* fp16 only, shared by every group; NULL otherwise and after the fallback */
    sdt_fallback fallback;
    sdt_diagnosis diagnosis;
    int64_t skipped; /* iterations in which some group did not step */
    sdt_step_hooks hooks;
    sdt_backend *be;
    sdt_lr_scheduler_config lr_scheduler; /* a factor on every group's schedule (zeroed: 1) */
    const char *inject_inf_group;         /* tests only (testhooks/test_hooks.h): this group's grads get an inf */
    int64_t inject_inf_step;
    /* Set by accumulate for the step in progress (cleared before it): a group whose gradients are
     * all exactly zero had nothing to learn from this step (caption drop-out gave every sample the
     * empty prompt, where an embedding's token is absent), so it rests this step instead of failing
     * the no-gradient check. */
    bool zero_gradient_expected;
    /* Data parallelism (NULL: one rank): the job's communicator, not owned. */
    sdt_comm *comm;
} sdt_step_engine;

/* What one step did, for metrics and the CSV. */
typedef struct sdt_step_result {
    double loss;        /* NAN when not finite */
    double grad_norm;   /* unscaled, all groups together */
    double learn_rate;  /* the first group's, as used (the schedule's rate times the scheduler's factor) */
    float scale_before; /* the loss scale the backward was seeded with */
    bool nonfinite;
} sdt_step_result;

/* Adds a group (zeroed fields but name, opt, schedules' text, clip mode, guard); takes opt. */
bool sdt_step_engine_add_group(sdt_step_engine *e, const sdt_param_group *g, sdt_error *error);
/* Parses every group's schedules at `step` (after a resume too; max_steps caps them); *end_step:
 * where the first schedule ends. */
bool sdt_step_engine_parse_schedules(sdt_step_engine *e, int64_t step, int64_t max_steps, int64_t *end_step,
                                     sdt_error *error);
/* After the schedules: the LR backoff of an already fired fallback, from `step` on (resume). */
bool sdt_step_engine_reapply_backoff(sdt_step_engine *e, int64_t step, sdt_error *error);
/* The scaler (fp16: shared by every group, min scale 1), the fallback and the diagnosis. */
bool sdt_step_engine_setup(sdt_step_engine *e, sdt_backend *be, bool fp16, bool mixed_precision, double init_scale,
                           double lr_backoff, int max_consecutive, sdt_error *error);
/* One step; step is the 0-based number of steps done before it. */
bool sdt_step_engine_step(sdt_step_engine *e, int64_t step, sdt_step_result *out, sdt_error *error);
/* The switch to fp32 without the fallback (resuming a run that had switched): no scaler. */
void sdt_step_engine_drop_scaler(sdt_step_engine *e);
/* A group's rate at step as the update uses it: its schedule's, times the scheduler's factor;
 * negative when its schedule has ended. */
double sdt_step_engine_rate(const sdt_step_engine *e, const sdt_param_group *g, int64_t step);
/* true when the first group's schedule has ended at step. */
bool sdt_step_engine_finished(const sdt_step_engine *e, int64_t step);
void sdt_step_engine_free(sdt_step_engine *e);

/* Host f32 copy of every value of a group's optimizer, in parameter order (malloc'd; *count), read
 * from the backend be the group's tensors live on. */
float *sdt_step_engine_group_values(const sdt_step_engine *e, sdt_backend *be, int group, size_t *count,
                                    sdt_error *error);

#endif
