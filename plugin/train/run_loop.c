/* run_loop.c - the shared training loop (see run_loop.h). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "host/host_log.h"
#include "train/memory_report.h"
#include "train/run_loop.h"
#include "host/status.h"
#include "testhooks/test_hooks.h"

/* Weight of the newest step in the images/s average: smooth enough for a progress bar,
 * quick enough to show a slowdown within a few steps. */
#define THROUGHPUT_SMOOTHING 0.2

static bool cadence_due(int64_t every, int64_t step)
{
    return every > 0 && step > 0 && step % every == 0;
}

/* A periodic save that fails for IO (the disk) stops the run: false, the failure in *error. Any
 * other failure keeps the run going: the user keeps the run, and the warning says what failed. */
static bool periodic_save(const sdt_host_callbacks *host, const char *what, int64_t step,
                          bool (*save)(void *, int64_t, sdt_error *), void *job, sdt_error *error)
{
    sdt_error why = {0};
    if (save(job, step, &why)) return true;
    if (why.code == SDT_ERR_IO) {
        *error = why;
        return sdt_error_wrap(error, "Saving the %s at step %lld failed, so training stopped", what, (long long)step);
    }
    sdt_host_log(host, SDT_LOG_WARNING, "Saving the %s at step %lld failed (%s): %s Training continues.", what,
                 (long long)step, sdt_status_name(sdt_status_of(&why)), why.message);
    return true;
}

/* A failed step: keep what was good, then report the step's error, saying what was saved. */
static sdt_status fail_after_error(const sdt_job_ops *ops, void *job, sdt_run_control *ctl,
                                   const sdt_host_callbacks *host, sdt_error *error)
{
    sdt_error save_error = {0};
    if (ops->save_final(job, SDT_SAVE_AFTER_ERROR, &save_error)) {
        const char *note = ops->saved_note ? ops->saved_note(job) : NULL;
        sdt_host_log(host, SDT_LOG_INFO, "The last good state was saved%s%s.", note && *note ? ": " : "",
                     note ? note : "");
        if (note && *note)
            sdt_error_append(error, "; the last good state was saved: %s", note);
        else
            sdt_error_append(error, "; the last good state was saved");
    } else {
        sdt_host_log(host, SDT_LOG_ERROR, "Saving the last good state also failed: %s", save_error.message);
        sdt_error_append(error, "; saving the last good state also failed: %s", save_error.message);
    }
    sdt_host_log(host, SDT_LOG_ERROR, "%s", error->message);
    sdt_run_control_set_state(ctl, SDT_RUN_FAILED);
    return sdt_status_of(error);
}

static void time_metrics(sdt_metrics *m, uint32_t images, double step_seconds, double elapsed, double *throughput)
{
    double now_rate = step_seconds > 0 ? (double)images / step_seconds : 0.0;
    *throughput =
        *throughput <= 0 ? now_rate : THROUGHPUT_SMOOTHING * now_rate + (1 - THROUGHPUT_SMOOTHING) * *throughput;
    m->images_per_second = *throughput;
    m->elapsed_seconds = elapsed;
}

sdt_status sdt_run_job(const sdt_job_ops *ops, void *job, const sdt_run_params *params, sdt_run_control *ctl,
                       const sdt_host_callbacks *host, sdt_error *error)
{
    double start = sdt_run_clock();
    double throughput = 0;
    int64_t step = 0;
    sdt_memory_report memory;
    sdt_memory_report_begin(&memory, params->backend, params->memory_estimate_bytes);
    memory.note = params->memory_note;

    bool stop = false;
    while (!ops->done(job)) {
        stop = sdt_run_control_interrupt_requested(ctl);
        if (ops->agree_stop && !ops->agree_stop(job, &stop, error)) return fail_after_error(ops, job, ctl, host, error);
        if (stop) break;
        sdt_metrics m;
        memset(&m, 0, sizeof m);
        m.struct_size = sizeof m;
        uint32_t images = 0;
        double t0 = sdt_run_clock();
        if (!ops->step(job, &m, &images, error)) return fail_after_error(ops, job, ctl, host, error);
        unsigned delay_ms = sdt_test_hook_step_delay_ms();
        if (delay_ms) nanosleep(&(struct timespec){delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L}, NULL);
        double t1 = sdt_run_clock();
        time_metrics(&m, images, t1 - t0, t1 - start, &throughput);
        step = m.step;
        sdt_run_control_publish(ctl, &m);
        sdt_host_metrics(host, &m);
        if (ops->write_failed && ops->write_failed(job, error)) return fail_after_error(ops, job, ctl, host, error);
        if (ops->save_snapshot && cadence_due(params->save_every, step) &&
            !periodic_save(host, "copy", step, ops->save_snapshot, job, error))
            return fail_after_error(ops, job, ctl, host, error);
        if (ops->save_preview && cadence_due(params->preview_every, step) &&
            !periodic_save(host, "preview image", step, ops->save_preview, job, error))
            return fail_after_error(ops, job, ctl, host, error);
    }

    sdt_memory_report_end(&memory, host);
    bool interrupted = !ops->done(job) && stop;
    sdt_save_reason reason = interrupted ? SDT_SAVE_INTERRUPTED : SDT_SAVE_FINISHED;
    if (!ops->save_final(job, reason, error)) {
        sdt_host_log(host, SDT_LOG_ERROR, "%s", error->message);
        sdt_run_control_set_state(ctl, SDT_RUN_FAILED);
        return sdt_status_of(error);
    }
    if (interrupted) {
        sdt_host_log(host, SDT_LOG_INFO, "Interrupted after step %lld; the state is saved.", (long long)step);
        sdt_run_control_set_state(ctl, SDT_RUN_INTERRUPTED);
        return SDT_STATUS_INTERRUPTED;
    }
    sdt_run_control_set_state(ctl, SDT_RUN_FINISHED);
    return SDT_STATUS_OK;
}
