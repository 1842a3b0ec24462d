/* fake_plugin.c - a stand-in libsdtrain.so for testing sdt-host on its own: it speaks the ABI
 * (our major plus FAKE_ABI_MAJOR_OFFSET, so a second build plays a plugin of another major), "trains"
 * by counting steps with a short sleep each, honours interrupt(), and reports metrics, logs and
 * a saved file. Only the host's behaviour is under test here, never numerics. */
#include <stdatomic.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SDTRAIN_BUILDING_PLUGIN
#include "sdtrain.h"

#ifndef FAKE_ABI_MAJOR_OFFSET
#define FAKE_ABI_MAJOR_OFFSET 0
#endif
#define FAKE_ABI_MAJOR (SDT_ABI_VERSION_MAJOR + FAKE_ABI_MAJOR_OFFSET)

struct sdt_ti_trainer {
    sdt_host_callbacks cb;
    atomic_bool interrupt;
    atomic_int state;
    atomic_llong step;
    long long max_steps;
    char error[256];
    char log_dir[512];
};

static sdt_status fake_init(sdt_version v, char *err, uint32_t n)
{
    if (v.major != FAKE_ABI_MAJOR) {
        if (err && n) snprintf(err, n, "fake plugin: other major");
        return SDT_STATUS_VERSION_MISMATCH;
    }
    return SDT_STATUS_OK;
}
static void fake_deinit(void) {}
static const char *fake_status_name(sdt_status s) { (void)s; return "SDT_STATUS_FAKE"; }

static sdt_status defaults(sdt_ti_config *c)
{
    uint32_t size = c->struct_size;
    memset(c, 0, size < sizeof *c ? size : sizeof *c);
    c->struct_size = size;
    c->max_steps = 100;
    c->batch_size = 1;
    return SDT_STATUS_OK;
}

static sdt_status create(const sdt_host_callbacks *cb, sdt_ti_trainer **out, char *err, uint32_t n)
{
    (void)err; (void)n;
    sdt_ti_trainer *t = calloc(1, sizeof *t);
    if (cb) memcpy(&t->cb, cb, cb->struct_size < sizeof t->cb ? cb->struct_size : sizeof t->cb);
    *out = t;
    return SDT_STATUS_OK;
}

static void destroy(sdt_ti_trainer *t) { free(t); }

static sdt_status last_error(const sdt_ti_trainer *t, char *buf, uint32_t n, uint32_t *needed)
{
    if (needed) *needed = (uint32_t)strlen(t->error) + 1;
    if (buf && n) snprintf(buf, n, "%s", t->error);
    return SDT_STATUS_OK;
}

static sdt_status create_embedding(sdt_ti_trainer *t, const sdt_embedding_spec *s, char *path, uint32_t n, uint32_t *needed)
{
    (void)needed;
    if (path && n) snprintf(path, n, "%s/%s.safetensors", s->output_dir, s->name);
    (void)t;
    return SDT_STATUS_OK;
}

static sdt_status prepare(sdt_ti_trainer *t, const sdt_ti_config *c, sdt_prepare_info *info)
{
    if (!c->dataset_dir || !c->dataset_dir[0]) {
        snprintf(t->error, sizeof t->error, "fake: Dataset directory is empty.");
        return SDT_STATUS_VALIDATION;
    }
    t->max_steps = c->max_steps;
    snprintf(t->log_dir, sizeof t->log_dir, "%s", c->log_dir ? c->log_dir : ".");
    atomic_store(&t->interrupt, false);
    atomic_store(&t->state, SDT_RUN_PREPARED);
    if (info) info->max_steps = c->max_steps;
    return SDT_STATUS_OK;
}

static void report(sdt_ti_trainer *t, long long step)
{
    sdt_metrics m;
    memset(&m, 0, sizeof m);
    m.struct_size = sizeof m;
    m.step = step;
    m.max_steps = t->max_steps;
    m.loss = 1.0 / (double)step;
    m.learn_rate = 0.005;
    m.images_per_second = 100;
    m.elapsed_seconds = 0.005 * (double)step;
    if (t->cb.metrics) t->cb.metrics(t->cb.user_data, &m);
}

static sdt_status run(sdt_ti_trainer *t)
{
    atomic_store(&t->state, SDT_RUN_RUNNING);
    if (t->cb.log) t->cb.log(t->cb.user_data, SDT_LOG_INFO, "fake: training started");
    struct timespec pause = { 0, 5 * 1000 * 1000 };
    while (atomic_load(&t->step) < t->max_steps && !atomic_load(&t->interrupt)) {
        nanosleep(&pause, NULL);
        report(t, atomic_fetch_add(&t->step, 1) + 1);
    }
    char path[600];
    snprintf(path, sizeof path, "%s/fake.safetensors", t->log_dir);
    sdt_saved_file f = { sizeof f, SDT_FILE_EMBEDDING, atomic_load(&t->step), path };
    if (t->cb.file_saved) t->cb.file_saved(t->cb.user_data, &f);
    bool stopped = atomic_load(&t->interrupt);
    atomic_store(&t->state, stopped ? SDT_RUN_INTERRUPTED : SDT_RUN_FINISHED);
    return stopped ? SDT_STATUS_INTERRUPTED : SDT_STATUS_OK;
}

static sdt_status interrupt(sdt_ti_trainer *t) { atomic_store(&t->interrupt, true); return SDT_STATUS_OK; }

static sdt_status run_state(const sdt_ti_trainer *t, sdt_run_state *s)
{
    *s = (sdt_run_state)atomic_load(&((sdt_ti_trainer *)t)->state);
    return SDT_STATUS_OK;
}

static sdt_status metrics(const sdt_ti_trainer *t, sdt_metrics *m)
{
    long long step = atomic_load(&((sdt_ti_trainer *)t)->step);
    uint32_t size = m->struct_size;
    memset(m, 0, size);
    m->struct_size = size;
    m->step = step;
    m->max_steps = t->max_steps;
    return SDT_STATUS_OK;
}

static sdt_status inspect(sdt_ti_trainer *t, const char *path, sdt_embedding_info *info, char *json, uint32_t n, uint32_t *needed)
{
    (void)t;
    const char *text = "{\"fake\": true}";
    if (needed) *needed = (uint32_t)strlen(text) + 1;
    if (json && n) snprintf(json, n, "%s", text);
    if (info) snprintf(info->name, sizeof info->name, "%s", path);
    return json || !needed ? SDT_STATUS_OK : SDT_STATUS_BUFFER_TOO_SMALL;
}

/* A 1.1 factory: the table ends before the members 1.2 appended. */
static const sdt_ti_factory factory = {
    (uint32_t)offsetof(sdt_ti_factory, train_options_defaults), defaults, create, destroy, last_error,
    create_embedding, prepare, run, interrupt, run_state, metrics, NULL, NULL, inspect, NULL,
};

static const void *get_factory(const char *id)
{
    return id && strcmp(id, SDT_FACTORY_TEXTUAL_INVERSION) == 0 ? &factory : NULL;
}

SDT_EXPORT const sdt_entry sdtrain_entry = {
    { FAKE_ABI_MAJOR, 0, 0 }, "fake", fake_init, fake_deinit, get_factory, fake_status_name,
};
