/* fake_plugin.c - a stand-in libsdtrain.so for testing sdt-host on its own: it speaks the ABI
 * (our major plus FAKE_ABI_MAJOR_OFFSET, so a second build plays a plugin of another major), "trains"
 * by counting steps with a short sleep each, honours interrupt(), and reports metrics, logs and
 * a saved file. Only the host's behaviour is under test here, never numerics. It offers the
 * trainer factory ("sdtrain.trainer/1") and its file extensions only, none of the deprecated
 * method factories: a host that asked for one of those would fail here.
 * Data-parallel launches (issue 33): it offers the distributed extension (a made-up id), and a rank
 * whose dataset folder is named fail-rank-N or crash-rank-N, where N is its RANK (the variable the
 * launcher gives each rank; read here, in a test double, to pick the rank that misbehaves), fails
 * after 3 steps with a sentence or is killed by SIGKILL. */
#include <signal.h>
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

struct sdt_trainer {
    sdt_host_callbacks cb;
    atomic_bool interrupt;
    atomic_int state;
    atomic_llong step;
    long long max_steps;
    char error[256];
    char log_dir[512];
    int misbehave; /* 0, or after 3 steps: 1 fail, 2 die by SIGKILL */
};

/* Whether the dataset folder dir names this rank (RANK) as the one to misbehave: 1 fail, 2 crash. */
static int misbehaviour(const char *dir)
{
    const char *rank = getenv("RANK");
    const char *base = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
    char name[64];
    for (int kind = 1; rank && kind <= 2; kind++) {
        snprintf(name, sizeof name, "%s-rank-%s", kind == 1 ? "fail" : "crash", rank);
        if (strcmp(base, name) == 0) return kind;
    }
    return 0;
}

static sdt_status fake_init(sdt_version v, char *err, uint32_t n)
{
    if (v.major != FAKE_ABI_MAJOR) {
        if (err && n) snprintf(err, n, "fake plugin: other major");
        return SDT_STATUS_VERSION_MISMATCH;
    }
    return SDT_STATUS_OK;
}
static void fake_deinit(void) {}
static const char *fake_status_name(sdt_status s)
{
    (void)s;
    return "SDT_STATUS_FAKE";
}

/* Zeroes the first struct_size bytes the host's struct has, keeping struct_size. */
#define CLEAR(p)                                                                                                       \
    do {                                                                                                               \
        uint32_t size = (p)->struct_size;                                                                              \
        memset((p), 0, size < sizeof *(p) ? size : sizeof *(p));                                                       \
        (p)->struct_size = size;                                                                                       \
    } while (0)

static sdt_status options_defaults(sdt_train_options *o)
{
    CLEAR(o);
    o->max_steps = 100;
    o->batch_size = 1;
    return SDT_STATUS_OK;
}

static sdt_status embedding_defaults(sdt_embedding_part *p)
{
    CLEAR(p);
    p->learn_rate = "0.005";
    return SDT_STATUS_OK;
}

static sdt_status hypernetwork_defaults(sdt_hypernetwork_part *p)
{
    CLEAR(p);
    p->learn_rate = "0.00001";
    return SDT_STATUS_OK;
}

static sdt_status create(const sdt_host_callbacks *cb, sdt_trainer **out, char *err, uint32_t n)
{
    (void)err;
    (void)n;
    sdt_trainer *t = calloc(1, sizeof *t);
    if (cb) memcpy(&t->cb, cb, cb->struct_size < sizeof t->cb ? cb->struct_size : sizeof t->cb);
    *out = t;
    return SDT_STATUS_OK;
}

static void destroy(sdt_trainer *t)
{
    free(t);
}

static sdt_status last_error(const sdt_trainer *t, char *buf, uint32_t n, uint32_t *needed)
{
    if (needed) *needed = (uint32_t)strlen(t->error) + 1;
    if (buf && n) snprintf(buf, n, "%s", t->error);
    return SDT_STATUS_OK;
}

static sdt_status create_embedding(sdt_trainer *t, const sdt_embedding_spec *s, char *path, uint32_t n,
                                   uint32_t *needed)
{
    (void)needed;
    if (path && n) snprintf(path, n, "%s/%s.safetensors", s->output_dir, s->name);
    (void)t;
    return SDT_STATUS_OK;
}

static sdt_status prepare(sdt_trainer *t, const sdt_trainer_config *config, sdt_prepare_info *info)
{
    const sdt_train_options *c = config->options;
    if (!config->embedding && !config->hypernetwork) {
        snprintf(t->error, sizeof t->error, "fake: nothing to train.");
        return SDT_STATUS_VALIDATION;
    }
    if (!c->dataset_dir || !c->dataset_dir[0]) {
        snprintf(t->error, sizeof t->error, "fake: Dataset directory is empty.");
        return SDT_STATUS_VALIDATION;
    }
    t->max_steps = c->max_steps;
    t->misbehave = misbehaviour(c->dataset_dir);
    snprintf(t->log_dir, sizeof t->log_dir, "%s", c->log_dir ? c->log_dir : ".");
    atomic_store(&t->interrupt, false);
    atomic_store(&t->state, SDT_RUN_PREPARED);
    if (info) info->max_steps = c->max_steps;
    return SDT_STATUS_OK;
}

static void report(sdt_trainer *t, long long step)
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

static sdt_status run(sdt_trainer *t)
{
    atomic_store(&t->state, SDT_RUN_RUNNING);
    if (t->cb.log) t->cb.log(t->cb.user_data, SDT_LOG_INFO, "fake: training started");
    if (getenv("RANK") && t->cb.log) { /* what a rank the launcher started was given */
        char line[256];
        snprintf(line, sizeof line, "fake: rank %s of %s, local rank %s of %s, rank 0 at %s", getenv("RANK"),
                 getenv("WORLD_SIZE"), getenv("LOCAL_RANK"), getenv("LOCAL_WORLD_SIZE"), getenv("MASTER_ADDR"));
        t->cb.log(t->cb.user_data, SDT_LOG_INFO, line);
    }
    struct timespec pause = {0, 5 * 1000 * 1000};
    while (atomic_load(&t->step) < t->max_steps && !atomic_load(&t->interrupt)) {
        nanosleep(&pause, NULL);
        report(t, atomic_fetch_add(&t->step, 1) + 1);
        if (t->misbehave == 2 && atomic_load(&t->step) == 3) raise(SIGKILL);
        if (t->misbehave == 1 && atomic_load(&t->step) == 3) {
            snprintf(t->error, sizeof t->error, "fake: rank %s failed on purpose.", getenv("RANK"));
            atomic_store(&t->state, SDT_RUN_FAILED);
            return SDT_STATUS_INTERNAL;
        }
    }
    char path[600];
    snprintf(path, sizeof path, "%s/fake.safetensors", t->log_dir);
    sdt_saved_file f = {sizeof f, SDT_FILE_EMBEDDING, atomic_load(&t->step), path};
    if (t->cb.file_saved) t->cb.file_saved(t->cb.user_data, &f);
    bool stopped = atomic_load(&t->interrupt);
    atomic_store(&t->state, stopped ? SDT_RUN_INTERRUPTED : SDT_RUN_FINISHED);
    return stopped ? SDT_STATUS_INTERRUPTED : SDT_STATUS_OK;
}

static sdt_status interrupt(sdt_trainer *t)
{
    atomic_store(&t->interrupt, true);
    return SDT_STATUS_OK;
}

static sdt_status run_state(const sdt_trainer *t, sdt_run_state *s)
{
    *s = (sdt_run_state)atomic_load(&((sdt_trainer *)t)->state);
    return SDT_STATUS_OK;
}

static sdt_status metrics(const sdt_trainer *t, sdt_metrics *m)
{
    long long step = atomic_load(&((sdt_trainer *)t)->step);
    uint32_t size = m->struct_size;
    memset(m, 0, size);
    m->struct_size = size;
    m->step = step;
    m->max_steps = t->max_steps;
    return SDT_STATUS_OK;
}

static sdt_status inspect(sdt_trainer *t, const char *path, sdt_embedding_info *info, char *json, uint32_t n,
                          uint32_t *needed)
{
    (void)t;
    const char *text = "{\"fake\": true}";
    if (needed) *needed = (uint32_t)strlen(text) + 1;
    if (json && n) snprintf(json, n, "%s", text);
    if (info) snprintf(info->name, sizeof info->name, "%s", path);
    return json || !needed ? SDT_STATUS_OK : SDT_STATUS_BUFFER_TOO_SMALL;
}

/* A hypernetwork reader that knows no file: inspect falls back to the embedding reader's sentence. */
static sdt_status inspect_hypernetwork(sdt_trainer *t, const char *path, sdt_hypernetwork_info *info, char *json,
                                       uint32_t n, uint32_t *needed)
{
    (void)info, (void)json, (void)n, (void)needed;
    snprintf(t->error, sizeof t->error, "fake: %s is no hypernetwork.", path);
    return SDT_STATUS_BAD_FORMAT;
}

static sdt_status create_hypernetwork(sdt_trainer *t, const sdt_hypernetwork_spec *s, char *path, uint32_t n,
                                      uint32_t *needed)
{
    (void)t, (void)needed;
    if (path && n) snprintf(path, n, "%s/%s.pt", s->output_dir, s->name);
    return SDT_STATUS_OK;
}

static const sdt_embedding_files_ext embedding_files = {sizeof embedding_files, create_embedding, inspect};
static const sdt_hypernetwork_files_ext hypernetwork_files = {sizeof hypernetwork_files, create_hypernetwork,
                                                              inspect_hypernetwork};

/* FAKE_DIST_UNAVAILABLE plays a plugin whose CUDA module or NCCL cannot run here. */
static sdt_status distributed_available(char *err, uint32_t err_size)
{
#ifdef FAKE_DIST_UNAVAILABLE
    if (err && err_size) snprintf(err, err_size, "fake: NCCL (libnccl.so.2) is not installed.");
    return SDT_STATUS_UNSUPPORTED;
#else
    (void)err, (void)err_size;
    return SDT_STATUS_OK;
#endif
}

static sdt_status new_comm_id(uint8_t id[128], char *err, uint32_t err_size)
{
    (void)err, (void)err_size;
    for (int i = 0; i < 128; i++) id[i] = (uint8_t)(i + 1);
    return SDT_STATUS_OK;
}

static const sdt_distributed_ext distributed = {sizeof distributed, distributed_available, new_comm_id};

static const void *get_extension(const char *id)
{
    if (id && strcmp(id, SDT_EXT_DISTRIBUTED) == 0) return &distributed;
    if (id && strcmp(id, SDT_EXT_EMBEDDING_FILES) == 0) return &embedding_files;
    if (id && strcmp(id, SDT_EXT_HYPERNETWORK_FILES) == 0) return &hypernetwork_files;
    return NULL;
}

static const sdt_trainer_factory factory = {
    sizeof factory,
    options_defaults,
    embedding_defaults,
    hypernetwork_defaults,
    create,
    destroy,
    last_error,
    prepare,
    run,
    interrupt,
    run_state,
    metrics,
    NULL,
    NULL,
    get_extension,
};

/* Only the trainer factory: "sdtrain.textual_inversion/1" and "sdtrain.hypernetwork/1" are unknown here.
 * FAKE_NO_TRAINER_FACTORY plays a plugin from before 1.7, which has no trainer factory. */
static const void *get_factory(const char *id)
{
#ifdef FAKE_NO_TRAINER_FACTORY
    (void)id;
    return NULL;
#else
    return id && strcmp(id, SDT_FACTORY_TRAINER) == 0 ? &factory : NULL;
#endif
}

SDT_EXPORT const sdt_entry sdtrain_entry = {
    {FAKE_ABI_MAJOR, 0, 0}, "fake", fake_init, fake_deinit, get_factory, fake_status_name,
};
