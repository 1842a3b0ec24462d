/* trainer_ranks.c - one trainer over several devices (see trainer_ranks.h). */
#include "api/trainer_ranks.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/trainer_handle.h"
#include "host/backend_select.h"
#include "train/rank_group.h"

typedef struct rank_slot {
    sdt_trainer_ranks *owner;
    int index;
    int32_t device[1];    /* the rank's options list its device alone (train/run_comm.h) */
    sdt_train_request rq; /* the host's request with this rank's options */
    void *job;            /* NULL until prepared */
    sdt_run_control own;  /* ranks after 0: their run's state and metrics (rank 0's is the handle's) */
    sdt_run_control *ctl; /* what the rank's run reads and writes */
    const sdt_host_callbacks *host;
    sdt_prepare_info info;
    sdt_status status;
    sdt_error error;
    bool ok;
    pthread_t thread;
    bool thread_started;
} rank_slot;

struct sdt_trainer_ranks {
    const sdt_train_method *method;
    sdt_rank_group *group;
    bool on_cpu;               /* device cpu (the test build's ranks): no CUDA device to set */
    sdt_host_callbacks silent; /* the callbacks of the ranks after 0: none */
    sdt_run_control *prepare_control;
    int count;
    rank_slot slots[];
};

/* The rank's device as its thread's current one for the guard's life (nothing on the CPU). */
static void enter_device(const rank_slot *s, plugin_cuda_device_guard *guard)
{
    guard->module = NULL;
    guard->previous = -1;
    if (!s->owner->on_cpu) plugin_cuda_device_enter(guard, s->device[0]);
}

static void *prepare_rank(void *arg)
{
    rank_slot *s = arg;
    sdt_trainer_ranks *r = s->owner;
    plugin_cuda_device_guard guard;
    enter_device(s, &guard);
    memset(&s->info, 0, sizeof s->info);
    s->info.struct_size = sizeof s->info;
    s->ok = r->method->prepare(&s->rq, s->host, r->prepare_control, &s->job, &s->info, &s->error);
    if (!s->ok) {
        s->job = NULL;
        sdt_rank_group_note_failure(r->group, s->index);
        sdt_rank_group_leave(r->group, s->index, s->error.message); /* the ranks waiting for it stop now */
    }
    plugin_cuda_device_leave(&guard);
    return NULL;
}

static void destroy_jobs(sdt_trainer_ranks *r)
{
    for (int i = r->count - 1; i >= 0; i--) {
        rank_slot *s = &r->slots[i];
        if (!s->job) continue;
        plugin_cuda_device_guard guard;
        enter_device(s, &guard);
        r->method->destroy(s->job);
        plugin_cuda_device_leave(&guard);
        s->job = NULL;
    }
}

void sdt_trainer_ranks_destroy(sdt_trainer_ranks *r)
{
    if (!r) return;
    destroy_jobs(r);
    for (int i = 1; i < r->count; i++) sdt_run_control_fini(&r->slots[i].own);
    sdt_rank_group_free(r->group);
    free(r);
}

/* Starts fn on every rank after 0 and runs it for rank 0 on this thread; a rank whose thread cannot
 * start is marked by mark (its failure) and fn is not run for it. Waits for all. */
static void on_every_rank(sdt_trainer_ranks *r, void *(*fn)(void *), void (*mark)(rank_slot *))
{
    for (int i = 1; i < r->count; i++) {
        rank_slot *s = &r->slots[i];
        s->thread_started = pthread_create(&s->thread, NULL, fn, s) == 0;
        if (!s->thread_started) mark(s);
    }
    fn(&r->slots[0]);
    for (int i = 1; i < r->count; i++)
        if (r->slots[i].thread_started) pthread_join(r->slots[i].thread, NULL);
}

static void prepare_thread_failed(rank_slot *s)
{
    s->ok = false;
    sdt_fail(&s->error, SDT_ERR_OUT_OF_MEMORY, "no thread could be started for rank %d (CUDA device %d)",
             sdt_rank_group_first_rank(s->owner->group) + s->index, (int)s->device[0]);
    sdt_rank_group_note_failure(s->owner->group, s->index);
    sdt_rank_group_leave(s->owner->group, s->index, s->error.message);
}

/* The rank that failed first (the group's record), else the first that failed, else -1. */
static int failing_rank(const sdt_trainer_ranks *r, bool (*failed)(const rank_slot *))
{
    int first = sdt_rank_group_first_failed(r->group);
    if (first >= 0 && failed(&r->slots[first])) return first;
    for (int i = 0; i < r->count; i++)
        if (failed(&r->slots[i])) return i;
    return -1;
}

static bool prepare_failed(const rank_slot *s)
{
    return !s->ok;
}

bool sdt_trainer_ranks_prepare(const sdt_train_method *method, const sdt_train_request *rq,
                               const sdt_host_callbacks *host, sdt_run_control *control, sdt_trainer_ranks **out,
                               sdt_prepare_info *info, sdt_error *error)
{
    *out = NULL;
    int count = (int)rq->options.device_count;
    sdt_trainer_ranks *r = calloc(1, sizeof *r + (size_t)count * sizeof(rank_slot));
    if (!r) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory");
    r->method = method;
    r->count = count;
    r->on_cpu = rq->options.device == SDT_DEVICE_CHOICE_CPU;
    r->prepare_control = control;
    r->silent.struct_size = sizeof r->silent;
    r->group = sdt_rank_group_new(&rq->options, error);
    if (!r->group) {
        free(r);
        return false;
    }
    for (int i = 0; i < count; i++) {
        rank_slot *s = &r->slots[i];
        s->owner = r;
        s->index = i;
        s->device[0] = rq->options.devices[i];
        s->rq = *rq;
        s->rq.options.devices = s->device;
        s->rq.options.device_count = 1;
        s->rq.options.world_size = sdt_rank_group_world_size(r->group);
        s->rq.options.rank = sdt_rank_group_first_rank(r->group) + i;
        s->rq.rank_group = r->group;
        s->rq.rank_index = i;
        s->host = i == 0 ? host : &r->silent;
        if (i > 0) sdt_run_control_init(&s->own);
        s->ctl = i == 0 ? control : &s->own;
    }
    on_every_rank(r, prepare_rank, prepare_thread_failed);
    int failed = failing_rank(r, prepare_failed);
    if (failed >= 0) {
        *error = r->slots[failed].error;
        sdt_trainer_ranks_destroy(r);
        return false;
    }
    *info = r->slots[0].info;
    *out = r;
    return true;
}

static void *run_rank(void *arg)
{
    rank_slot *s = arg;
    sdt_trainer_ranks *r = s->owner;
    plugin_cuda_device_guard guard;
    enter_device(s, &guard);
    sdt_run_params params = r->method->run_params(s->job);
    s->status = sdt_run_job(r->method->ops(), s->job, &params, s->ctl, s->host, &s->error);
    plugin_cuda_device_leave(&guard);
    return NULL;
}

static void run_thread_failed(rank_slot *s)
{
    s->status = SDT_STATUS_OUT_OF_MEMORY;
    sdt_fail(&s->error, SDT_ERR_OUT_OF_MEMORY, "no thread could be started for rank %d (CUDA device %d)",
             sdt_rank_group_first_rank(s->owner->group) + s->index, (int)s->device[0]);
    sdt_rank_group_abort(s->owner->group, s->index, s->error.message);
    sdt_run_control_set_state(s->ctl, SDT_RUN_FAILED);
}

static bool run_failed(const rank_slot *s)
{
    return s->status < 0;
}

sdt_status sdt_trainer_ranks_run(sdt_trainer_ranks *r, sdt_run_control *control, const sdt_host_callbacks *host,
                                 sdt_error *error)
{
    r->slots[0].ctl = control;
    r->slots[0].host = host;
    for (int i = 0; i < r->count; i++) {
        rank_slot *s = &r->slots[i];
        s->status = SDT_STATUS_OK;
        sdt_error_clear(&s->error);
        if (i > 0) sdt_run_control_set_state(s->ctl, SDT_RUN_RUNNING);
    }
    on_every_rank(r, run_rank, run_thread_failed);
    int failed = failing_rank(r, run_failed);
    if (failed < 0) return r->slots[0].status; /* OK or INTERRUPTED: every rank stopped after the same step */
    const rank_slot *cause = &r->slots[failed];
    if (run_failed(&r->slots[0])) {
        /* rank 0's sentence names the failing rank and its cause, and says what rank 0 saved */
        *error = r->slots[0].error;
        error->code = cause->error.code;
    } else {
        sdt_fail(error, cause->error.code, "rank %d (CUDA device %d): %s", sdt_rank_group_first_rank(r->group) + failed,
                 (int)cause->device[0], cause->error.message);
        sdt_run_control_set_state(control, SDT_RUN_FAILED);
    }
    return cause->status;
}

bool sdt_trainer_ranks_save_state(sdt_trainer_ranks *r, const char *path, sdt_error *error)
{
    rank_slot *s = &r->slots[0];
    plugin_cuda_device_guard guard;
    enter_device(s, &guard);
    bool ok = r->method->save_state(s->job, path, error);
    plugin_cuda_device_leave(&guard);
    return ok;
}

bool sdt_trainer_ranks_load_state(sdt_trainer_ranks *r, const char *path, sdt_error *error)
{
    bool ok = true;
    for (int i = 0; i < r->count && ok; i++) {
        rank_slot *s = &r->slots[i];
        plugin_cuda_device_guard guard;
        enter_device(s, &guard);
        ok = r->method->load_state(s->job, path, error);
        plugin_cuda_device_leave(&guard);
    }
    return ok;
}
