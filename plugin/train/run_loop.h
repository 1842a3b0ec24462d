/* run_loop.h - drives a training job on the calling (worker) thread.
 *
 * Trainers (textual inversion, later hypernetworks) implement sdt_job_ops: one optimizer step
 * and the saves. The loop owns the policy every trainer shares, so it lives in one place:
 * the interrupt request is honoured between steps (the current step always finishes), metrics
 * are timed, published for [any thread] readers and sent to the host after every step,
 * snapshots and previews follow their cadences, and every way out of the loop ends in a save:
 * finished, interrupted, or failed (the last good state). A write the disk refuses (an IO
 * failure: full, gone, read-only) stops the run with that failure, whatever was being written:
 * every later save would fail the same way, and the user must hear it, not find it in a warning
 * after hours of training that cannot be saved. */
#ifndef SDT_PLUGIN_RUN_LOOP_H
#define SDT_PLUGIN_RUN_LOOP_H

#include "sdt_error.h"

#include <stddef.h>
#include <stdint.h>

#include "train/run_control.h"
#include "sdtrain.h"

typedef enum sdt_save_reason {
    SDT_SAVE_FINISHED = 0,
    SDT_SAVE_INTERRUPTED = 1,
    SDT_SAVE_AFTER_ERROR = 2, /* save the last good state; the step that failed left no trace */
} sdt_save_reason;

typedef struct sdt_job_ops {
    /* One optimizer step (all micro-batches of one accumulation window). Fills *metrics with what
     * the trainer knows (step after this one, epoch, loss, grad norm, lr, scale, skipped steps,
     * precision, fallback) and *images with the samples it processed; timing is the loop's.
     * A failed step must leave the trainable state as it was before the step. */
    bool (*step)(void *job, sdt_metrics *metrics, uint32_t *images, sdt_error *error);
    /* true when no step is left (max steps or the end of the LR schedule). */
    bool (*done)(const void *job);
    /* Optional (NULL = none): the copy saved every save_every steps; the preview image. */
    bool (*save_snapshot)(void *job, int64_t step, sdt_error *error);
    bool (*save_preview)(void *job, int64_t step, sdt_error *error);
    /* The final save: embedding and full training state, atomically. */
    bool (*save_final)(void *job, sdt_save_reason reason, sdt_error *error);
    /* Optional: true (and the failure in *error) when a write the job makes on its own during a
     * step (the loss CSV, a timed state) failed for IO; the loop then stops as after a failed step. */
    bool (*write_failed)(void *job, sdt_error *error);
    /* Optional: the files the last successful save_final wrote ("the training state S, the
     * embedding E (step N)"), for the sentence of a run that stops after an error. */
    const char *(*saved_note)(const void *job);
    /* Optional: before each step, whether to stop (*stop: this process's interrupt request) made the
     * same on every rank of a data-parallel job (train/run_comm.h), so all stop after the same step;
     * a failure stops the run as a failed step does. */
    bool (*agree_stop)(void *job, bool *stop, sdt_error *error);
} sdt_job_ops;

typedef struct sdt_run_params {
    int64_t save_every;    /* 0 = never */
    int64_t preview_every; /* 0 = never */
    /* Optional: the backend and prepare's estimate, for the peak-memory line at the end
     * (train/memory_report.h); NULL logs none. */
    struct sdt_backend *backend;
    size_t memory_estimate_bytes;
    const char *memory_note; /* optional: a sentence the peak-memory line ends with (what is cached instead) */
} sdt_run_params;

/* Runs the job until done, an error or an interrupt request in ctl. The caller has moved ctl to
 * SDT_RUN_RUNNING; the loop leaves it FINISHED, INTERRUPTED or FAILED. Returns OK, INTERRUPTED,
 * or the failure's status with its error value in *error (which then also says what the save of
 * the last good state wrote, or why it failed too). A snapshot or preview that fails for IO stops
 * the run the same way; other snapshot and preview failures (e.g. no memory for a preview) are
 * logged as warnings and training goes on (the previous files are intact: saves are atomic). */
sdt_status sdt_run_job(const sdt_job_ops *ops, void *job, const sdt_run_params *params, sdt_run_control *ctl,
                       const sdt_host_callbacks *host, sdt_error *error);

#endif
