/* trainer_handle.c - the shared trainer lifecycle (see trainer_handle.h). */
#include "api/trainer_handle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/trainer_ranks.h"
#include "compose/train_compose.h"
#include "host/copy_out.h"
#include "host/host_log.h"

static bool compose_prepare(const void *request, const sdt_host_callbacks *host, sdt_run_control *control, void **job,
                            sdt_prepare_info *info, sdt_error *error)
{
    sdt_train_job *made = NULL;
    bool ok = sdt_compose_job(request, host, control, &made, info, error);
    *job = made;
    return ok;
}

const sdt_train_method sdt_compose_method = SDT_TRAIN_JOB_METHOD(compose_prepare);

static sdt_status create_fail(char *err, uint32_t err_size, sdt_status status, const char *sentence)
{
    if (err && err_size) sdt_copy_string_out(sentence, err, err_size, NULL);
    return status;
}

sdt_status sdt_trainer_create(size_t size, uint32_t magic, const sdt_train_method *method,
                              const sdt_host_callbacks *callbacks, const char *what, sdt_trainer_handle **out,
                              char *err, uint32_t err_size)
{
    if (!out) {
        char sentence[256];
        snprintf(sentence, sizeof sentence, "create(): the out pointer is NULL; pass the address of an %s pointer.",
                 what);
        return create_fail(err, err_size, SDT_STATUS_INVALID_ARGUMENT, sentence);
    }
    *out = NULL;
    sdt_trainer_handle *t = calloc(1, size);
    if (!t) return create_fail(err, err_size, SDT_STATUS_OUT_OF_MEMORY, "Out of memory while creating a trainer.");
    if (!sdt_host_callbacks_adopt(&t->host, callbacks)) {
        free(t);
        return create_fail(
            err, err_size, SDT_STATUS_INVALID_ARGUMENT,
            "create(): callbacks->struct_size is smaller than its own field; set it to sizeof(sdt_host_callbacks).");
    }
    sdt_handle_init(&t->base, magic);
    sdt_run_control_init(&t->control);
    t->method = method;
    if (err && err_size) err[0] = '\0';
    *out = t;
    return SDT_STATUS_OK;
}

bool sdt_trainer_valid(const sdt_trainer_handle *t, uint32_t magic)
{
    return t && sdt_handle_is(&t->base, magic);
}

static void drop_job(sdt_trainer_handle *t)
{
    if (t->job) t->method->destroy(t->job);
    sdt_trainer_ranks_destroy(t->ranks);
    t->job = NULL;
    t->ranks = NULL;
    sdt_run_control_set_state(&t->control, SDT_RUN_IDLE);
}

void sdt_trainer_destroy(sdt_trainer_handle *t, uint32_t magic)
{
    if (!sdt_trainer_valid(t, magic)) return;
    if (sdt_run_control_state(&t->control) == SDT_RUN_RUNNING) {
        /* Freeing now would pull the memory from under run(); refusing leaks one trainer,
         * which is the lesser harm. The host broke rule [main thread]; tell it. */
        sdt_run_control_request_interrupt(&t->control);
        sdt_host_log(&t->host, SDT_LOG_ERROR,
                     "destroy() was called while run() is in progress; the trainer is interrupted but not "
                     "freed. Call interrupt(), wait for run() to return, then destroy().");
        return;
    }
    if (t->job) t->method->destroy(t->job);
    sdt_trainer_ranks_destroy(t->ranks);
    sdt_run_control_fini(&t->control);
    sdt_handle_fini(&t->base);
    free(t);
}

sdt_status sdt_trainer_refuse_while_running(sdt_trainer_handle *t, const char *call)
{
    return sdt_handle_fail(
        &t->base, SDT_STATUS_BAD_STATE,
        "%s() was called while run() is in progress; interrupt() and wait for run() to return first.", call);
}

sdt_status sdt_trainer_begin_call(sdt_trainer_handle *t, const char *call)
{
    sdt_handle_clear_error(&t->base);
    if (sdt_run_control_state(&t->control) == SDT_RUN_RUNNING) return sdt_trainer_refuse_while_running(t, call);
    return SDT_STATUS_OK;
}

sdt_status sdt_trainer_begin_prepare(sdt_trainer_handle *t, const sdt_prepare_info *info)
{
    sdt_status st = sdt_trainer_begin_call(t, "prepare");
    if (st != SDT_STATUS_OK) return st;
    if (info && info->struct_size < sizeof(uint32_t))
        return sdt_handle_fail(&t->base, SDT_STATUS_INVALID_ARGUMENT,
                               "prepare(): info->struct_size is not set; set it to sizeof(sdt_prepare_info).");
    return SDT_STATUS_OK;
}

sdt_status sdt_trainer_prepare(sdt_trainer_handle *t, const void *config, sdt_prepare_info *info)
{
    drop_job(t);
    sdt_run_control_reset(&t->control);
    sdt_error error = {0};
    sdt_prepare_info found;
    memset(&found, 0, sizeof found);
    found.struct_size = sizeof found;
    /* every training factory's config is a request (compose/train_request.h); devices: one job each */
    const sdt_train_request *rq = config;
    bool ok = rq->options.devices
                  ? sdt_trainer_ranks_prepare(t->method, rq, &t->host, &t->control, &t->ranks, &found, &error)
                  : t->method->prepare(config, &t->host, &t->control, &t->job, &found, &error);
    if (!ok) {
        t->job = NULL;
        t->ranks = NULL;
        return sdt_handle_fail_error(&t->base, &error);
    }
    if (info) sdt_struct_write_out(info, &found, sizeof found);
    sdt_run_control_set_state(&t->control, SDT_RUN_PREPARED);
    return SDT_STATUS_OK;
}

sdt_status sdt_trainer_run(sdt_trainer_handle *t)
{
    sdt_handle_clear_error(&t->base);
    if ((!t->job && !t->ranks) || !sdt_run_control_begin_run(&t->control)) {
        if (sdt_run_control_state(&t->control) == SDT_RUN_RUNNING) return sdt_trainer_refuse_while_running(t, "run");
        return sdt_handle_fail(
            &t->base, SDT_STATUS_BAD_STATE,
            "run() needs a freshly prepared trainer; call prepare() first (to continue an interrupted run, prepare with resume_state_path).");
    }
    sdt_error error = {0};
    sdt_status st;
    if (t->ranks) {
        st = sdt_trainer_ranks_run(t->ranks, &t->control, &t->host, &error);
    } else {
        sdt_run_params params = t->method->run_params(t->job);
        st = sdt_run_job(t->method->ops(), t->job, &params, &t->control, &t->host, &error);
    }
    if (st < 0) return sdt_handle_fail_error(&t->base, &error);
    return st;
}

sdt_status sdt_trainer_interrupt(sdt_trainer_handle *t)
{
    sdt_run_control_request_interrupt(&t->control);
    /* with devices listed, rank 0's run sums it with the other ranks' before each step: all stop */
    return SDT_STATUS_OK;
}

sdt_status sdt_trainer_get_run_state(const sdt_trainer_handle *t, sdt_run_state *state)
{
    if (!state) return SDT_STATUS_INVALID_ARGUMENT;
    *state = sdt_run_control_state(&t->control);
    return SDT_STATUS_OK;
}

sdt_status sdt_trainer_get_metrics(const sdt_trainer_handle *t, sdt_metrics *metrics)
{
    if (!metrics || metrics->struct_size < sizeof(uint32_t)) return SDT_STATUS_INVALID_ARGUMENT;
    sdt_metrics latest;
    sdt_run_control_latest(&t->control, &latest);
    sdt_struct_write_out(metrics, &latest, sizeof latest);
    return SDT_STATUS_OK;
}

typedef bool (*state_io_fn)(void *, const char *, sdt_error *);
typedef bool (*ranks_state_io_fn)(sdt_trainer_ranks *, const char *, sdt_error *);

static sdt_status state_io(sdt_trainer_handle *t, const char *path, const char *call, state_io_fn io,
                           ranks_state_io_fn ranks_io)
{
    sdt_status st = sdt_trainer_begin_call(t, call);
    if (st != SDT_STATUS_OK) return st;
    if (!path || !path[0])
        return sdt_handle_fail(&t->base, SDT_STATUS_INVALID_ARGUMENT, "%s(): path is empty; pass a file path.", call);
    if (!t->job && !t->ranks)
        return sdt_handle_fail(&t->base, SDT_STATUS_BAD_STATE, "%s() needs a prepared trainer; call prepare() first.",
                               call);
    sdt_error error = {0};
    bool ok = t->ranks ? ranks_io(t->ranks, path, &error) : io(t->job, path, &error);
    return ok ? SDT_STATUS_OK : sdt_handle_fail_error(&t->base, &error);
}

sdt_status sdt_trainer_save_state(sdt_trainer_handle *t, const char *path)
{
    return state_io(t, path, "save_state", t->method->save_state, sdt_trainer_ranks_save_state);
}

sdt_status sdt_trainer_load_state(sdt_trainer_handle *t, const char *path)
{
    return state_io(t, path, "load_state", t->method->load_state, sdt_trainer_ranks_load_state);
}
