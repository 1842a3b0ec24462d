/* trainer_handle.h - the one trainer-handle lifecycle every training factory shares.
 *
 * A factory (the trainer factory; the deprecated textual-inversion and hypernetwork adapters)
 * keeps only what is its own: the one reader of its config struct into a training request
 * (compose/train_request.h) and its extra calls or extensions. Creating
 * and destroying the handle, the last error, refusing calls while run() is in progress,
 * prepare's bookkeeping, run() on the host's worker thread through the shared run loop,
 * interrupt, run state, metrics and save/load of the training state live here once.
 *
 * The job plugs in through sdt_train_method: how to prepare it from the (already read and
 * checked) request, and its step vtable, cadences, state files and destruction; every factory
 * uses sdt_compose_method, the job composed from the request's parts. */
#ifndef SDT_PLUGIN_TRAINER_HANDLE_H
#define SDT_PLUGIN_TRAINER_HANDLE_H

#include <stddef.h>
#include <stdint.h>

#include "api/handle.h"
#include "compose/train_request.h"
#include "train/run_control.h"
#include "train/run_loop.h"
#include "sdtrain.h"

typedef struct sdt_train_method {
    /* Validations that need files and models, then loading; *job is ready to run and *info
     * filled. config is the method's own config struct at its current size. The job may keep
     * host (the handle's copy of the callbacks, valid for the job's life) and control (the
     * handle's run control, which interrupt() sets, so a long preparation can stop). */
    bool (*prepare)(const void *config, const sdt_host_callbacks *host, sdt_run_control *control, void **job,
                    sdt_prepare_info *info, sdt_error *error);
    void (*destroy)(void *job);
    const sdt_job_ops *(*ops)(void);
    sdt_run_params (*run_params)(const void *job);
    bool (*save_state)(void *job, const char *path, sdt_error *error);
    bool (*load_state)(void *job, const char *path, sdt_error *error);
} sdt_train_method;

/* The method every training factory uses since 1.7: prepare's config is a training request
 * (compose/train_request.h, read once by the factory's reader) and the job is composed from its
 * parts (compose/train_compose.h). */
extern const sdt_train_method sdt_compose_method;

typedef struct sdt_trainer_handle {
    sdt_handle base;
    const sdt_train_method *method;
    sdt_host_callbacks host; /* the plugin's own copy */
    sdt_run_control control;
    void *job; /* NULL until prepare() succeeds */
    /* instead of job, when the options list devices: one job per device (api/trainer_ranks.h) */
    struct sdt_trainer_ranks *ranks;
} sdt_trainer_handle;

/* create(): allocates size bytes (a method's handle struct starting with sdt_trainer_handle),
 * adopts the callbacks and tags it with magic. what names the handle in sentences. */
sdt_status sdt_trainer_create(size_t size, uint32_t magic, const sdt_train_method *method,
                              const sdt_host_callbacks *callbacks, const char *what, sdt_trainer_handle **out,
                              char *err, uint32_t err_size);
/* destroy(): refuses (with a log line) while run() is in progress; NULL or a wrong handle is ignored. */
void sdt_trainer_destroy(sdt_trainer_handle *t, uint32_t magic);
/* true when t is a trainer handle of this magic. */
bool sdt_trainer_valid(const sdt_trainer_handle *t, uint32_t magic);

/* The BAD_STATE sentence for a call made while run() is in progress (call: "prepare"). */
sdt_status sdt_trainer_refuse_while_running(sdt_trainer_handle *t, const char *call);
/* Clears the last error and refuses while running: the start of every call that may change the job. */
sdt_status sdt_trainer_begin_call(sdt_trainer_handle *t, const char *call);

/* The start of prepare(): sdt_trainer_begin_call, then an info whose struct_size is unset is refused. */
sdt_status sdt_trainer_begin_prepare(sdt_trainer_handle *t, const sdt_prepare_info *info);
/* prepare() after the method's config checks: drops any previous job, then the method's prepare. */
sdt_status sdt_trainer_prepare(sdt_trainer_handle *t, const void *config, sdt_prepare_info *info);
sdt_status sdt_trainer_run(sdt_trainer_handle *t);
sdt_status sdt_trainer_interrupt(sdt_trainer_handle *t);
sdt_status sdt_trainer_get_run_state(const sdt_trainer_handle *t, sdt_run_state *state);
sdt_status sdt_trainer_get_metrics(const sdt_trainer_handle *t, sdt_metrics *metrics);
sdt_status sdt_trainer_save_state(sdt_trainer_handle *t, const char *path);
sdt_status sdt_trainer_load_state(sdt_trainer_handle *t, const char *path);

/* The typed lifecycle members of a factory whose handle type (struct starting with a
 * sdt_trainer_handle named core) is `type` and whose functions are named `prefix`_create,
 * `prefix`_prepare, `prefix`_destroy, `prefix`_get_last_error, `prefix`_run, ...: each checks the
 * handle, then calls the shared function above. prepare reads the factory's config struct
 * (config_type) with its one reader, `bool read(const config_type *, sdt_train_request *,
 * sdt_error *)`, into a request (compose/train_request.h) and prepares the composed job. One
 * definition for every training factory. */
#define SDT_TRAINER_LIFECYCLE(prefix, type, magic, config_type, read)                                                  \
    static bool prefix##_valid(const type *t)                                                                          \
    {                                                                                                                  \
        return t && sdt_trainer_valid(&t->core, magic);                                                                \
    }                                                                                                                  \
    static sdt_status prefix##_create(const sdt_host_callbacks *callbacks, type **out, char *err, uint32_t err_size)   \
    {                                                                                                                  \
        sdt_trainer_handle *made = NULL;                                                                               \
        sdt_status st =                                                                                                \
            sdt_trainer_create(sizeof(type), magic, &sdt_compose_method, callbacks, #type, &made, err, err_size);      \
        if (out) *out = (type *)made;                                                                                  \
        return st;                                                                                                     \
    }                                                                                                                  \
    static sdt_status prefix##_prepare(type *t, const config_type *config, sdt_prepare_info *info)                     \
    {                                                                                                                  \
        if (!prefix##_valid(t)) return SDT_STATUS_INVALID_ARGUMENT;                                                    \
        sdt_status st = sdt_trainer_begin_prepare(&t->core, info);                                                     \
        if (st != SDT_STATUS_OK) return st;                                                                            \
        sdt_train_request rq;                                                                                          \
        sdt_error error = {0};                                                                                         \
        if (!read(config, &rq, &error)) return sdt_handle_fail_error(&t->core.base, &error);                           \
        return sdt_trainer_prepare(&t->core, &rq, info);                                                               \
    }                                                                                                                  \
    static void prefix##_destroy(type *t)                                                                              \
    {                                                                                                                  \
        sdt_trainer_destroy(t ? &t->core : NULL, magic);                                                               \
    }                                                                                                                  \
    static sdt_status prefix##_get_last_error(const type *t, char *buf, uint32_t buf_size, uint32_t *needed)           \
    {                                                                                                                  \
        return prefix##_valid(t) ? sdt_handle_copy_error(&t->core.base, buf, buf_size, needed)                         \
                                 : SDT_STATUS_INVALID_ARGUMENT;                                                        \
    }                                                                                                                  \
    static sdt_status prefix##_run(type *t)                                                                            \
    {                                                                                                                  \
        return prefix##_valid(t) ? sdt_trainer_run(&t->core) : SDT_STATUS_INVALID_ARGUMENT;                            \
    }                                                                                                                  \
    static sdt_status prefix##_interrupt(type *t)                                                                      \
    {                                                                                                                  \
        return prefix##_valid(t) ? sdt_trainer_interrupt(&t->core) : SDT_STATUS_INVALID_ARGUMENT;                      \
    }                                                                                                                  \
    static sdt_status prefix##_get_run_state(const type *t, sdt_run_state *state)                                      \
    {                                                                                                                  \
        return prefix##_valid(t) ? sdt_trainer_get_run_state(&t->core, state) : SDT_STATUS_INVALID_ARGUMENT;           \
    }                                                                                                                  \
    static sdt_status prefix##_get_metrics(const type *t, sdt_metrics *metrics)                                        \
    {                                                                                                                  \
        return prefix##_valid(t) ? sdt_trainer_get_metrics(&t->core, metrics) : SDT_STATUS_INVALID_ARGUMENT;           \
    }                                                                                                                  \
    static sdt_status prefix##_save_state(type *t, const char *path)                                                   \
    {                                                                                                                  \
        return prefix##_valid(t) ? sdt_trainer_save_state(&t->core, path) : SDT_STATUS_INVALID_ARGUMENT;               \
    }                                                                                                                  \
    static sdt_status prefix##_load_state(type *t, const char *path)                                                   \
    {                                                                                                                  \
        return prefix##_valid(t) ? sdt_trainer_load_state(&t->core, path) : SDT_STATUS_INVALID_ARGUMENT;               \
    }

#endif
