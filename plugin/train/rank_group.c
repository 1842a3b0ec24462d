/* rank_group.c - the ranks of one trainer over its listed devices (see rank_group.h). */
#include "train/rank_group.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testhooks/test_hooks.h"

struct sdt_rank_group {
    int count, first_rank, world_size, timeout_seconds;
    int32_t devices[SDT_TRAIN_MAX_DEVICES];
    uint8_t comm_id[SDT_COMM_ID_BYTES];
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int arrived;
    sdt_backend *backends[SDT_TRAIN_MAX_DEVICES];
    bool on_cuda[SDT_TRAIN_MAX_DEVICES]; /* the rank's backend is the CUDA module's */
    sdt_comm *comms[SDT_TRAIN_MAX_DEVICES];
    bool owned; /* the comms are NCCL's: each rank destroys its own */
    bool opened, failed;
    sdt_error failure; /* why every open fails, once failed */
    void *nccl_module; /* the CUDA module while NCCL's communicators live */
    int first_failed;  /* the rank index that stopped first after an error, or -1 */
};

sdt_rank_group *sdt_rank_group_new(const sdt_train_options *o, sdt_error *error)
{
    sdt_rank_group *g = calloc(1, sizeof *g);
    if (!g) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory");
        return NULL;
    }
    g->count = (int)o->device_count;
    g->first_rank = o->world_size > 1 ? (int)o->rank : 0;
    g->world_size = o->world_size > 1 ? (int)o->world_size : g->count;
    g->timeout_seconds = o->comm_timeout_seconds > 0 ? (int)o->comm_timeout_seconds : SDT_COMM_DEFAULT_TIMEOUT_SECONDS;
    memcpy(g->devices, o->devices, (size_t)g->count * sizeof *g->devices);
    memcpy(g->comm_id, o->comm_id, sizeof g->comm_id);
    g->first_failed = -1;
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->changed, NULL);
    return g;
}

void sdt_rank_group_free(sdt_rank_group *g)
{
    if (!g) return;
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->changed);
    if (g->nccl_module) plugin_nccl_close(g->nccl_module);
    free(g);
}

int sdt_rank_group_world_size(const sdt_rank_group *g)
{
    return g->world_size;
}
int sdt_rank_group_first_rank(const sdt_rank_group *g)
{
    return g->first_rank;
}

static bool all_zero(const uint8_t *bytes, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (bytes[i]) return false;
    return true;
}

/* NCCL's communicators over every rank's CUDA backend, as one group; the lock is held. */
static bool open_nccl(sdt_rank_group *g, const char *prefix, sdt_error *error)
{
    for (int i = 0; i < g->count; i++)
        if (!g->on_cuda[i])
            return sdt_fail(error, SDT_ERR_UNSUPPORTED,
                            "%sdevices lists CUDA ordinals, but the ranks would train on the CPU; set %sdevice to cuda "
                            "(the ranks sum their gradients over NCCL, which needs the CUDA module).",
                            prefix, prefix);
    char why[SDT_ERROR_MESSAGE_MAX + 16];
    const sdt_comm_nccl_api *api = plugin_nccl_open(&g->nccl_module, why, sizeof why);
    sdt_error reason = {0};
    if (api && !api->available(&reason)) memcpy(why, reason.message, sizeof reason.message);
    bool usable = api && reason.code == SDT_ERR_OK;
    /* one device that is the whole job has nothing to sum: it trains without NCCL where NCCL is missing */
    if (!usable && g->count == 1 && g->world_size == 1) return true;
    if (!usable)
        return sdt_fail(error, SDT_ERR_UNSUPPORTED,
                        "%sdevices lists %d device(s) of a job of %d ranks, which sum their gradients over NCCL: %s; "
                        "list one device.",
                        prefix, g->count, g->world_size, why);
    /* the whole job in this process: its id is made here (several processes: rank 0's, in comm_id) */
    if (g->world_size == g->count && !api->new_id(g->comm_id, error))
        return sdt_error_wrap(error, "%sdevices: making the communicator's id", prefix);
    if (g->world_size > g->count && all_zero(g->comm_id, sizeof g->comm_id))
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%scomm_id is all zero but %sworld_size %d spans other processes; pass the id rank 0's process "
                        "made with sdtrain.distributed/1's new_comm_id.",
                        prefix, prefix, g->world_size);
    if (!api->open_group(g->backends, g->count, g->comm_id, g->world_size, g->first_rank, g->timeout_seconds, g->comms,
                         error))
        return sdt_error_wrap(error, "%sdevices: opening ranks %d..%d of %d", prefix, g->first_rank,
                              g->first_rank + g->count - 1, g->world_size);
    g->owned = true;
    return true;
}

/* Every rank's communicator, by the last rank to arrive; the lock is held. */
static bool open_all(sdt_rank_group *g, const char *prefix, sdt_error *error)
{
    /* the test build's ranks as threads, when the test program provides them */
    int provided = 0;
    for (int i = 0; i < g->count; i++) {
        g->comms[i] = sdt_test_hook_comm(g->first_rank + i, g->world_size);
        provided += g->comms[i] != NULL;
    }
    if (provided == g->count) return true;
    memset(g->comms, 0, sizeof g->comms);
    return open_nccl(g, prefix, error);
}

bool sdt_rank_group_open(sdt_rank_group *g, int index, plugin_backend *pb, const char *prefix, sdt_comm **comm,
                         bool *owned, sdt_error *error)
{
    pthread_mutex_lock(&g->lock);
    g->backends[index] = pb->be;
    g->on_cuda[index] = pb->module != NULL;
    if (!g->failed && ++g->arrived == g->count) {
        sdt_error made = {0};
        if (open_all(g, prefix, &made))
            g->opened = true;
        else
            g->failed = true, g->failure = made;
        pthread_cond_broadcast(&g->changed);
    }
    while (!g->opened && !g->failed) pthread_cond_wait(&g->changed, &g->lock);
    bool ok = g->opened;
    if (ok) {
        *comm = g->comms[index];
        *owned = g->owned;
    } else {
        *error = g->failure;
    }
    pthread_mutex_unlock(&g->lock);
    return ok;
}

void sdt_rank_group_leave(sdt_rank_group *g, int index, const char *why)
{
    pthread_mutex_lock(&g->lock);
    if (!g->opened && !g->failed) {
        g->failed = true;
        sdt_fail(&g->failure, SDT_ERR_DEVICE, "rank %d (device %d) failed: its prepare failed (%s); every rank stops.",
                 g->first_rank + index, (int)g->devices[index], why && why[0] ? why : "no reason given");
        pthread_cond_broadcast(&g->changed);
    }
    pthread_mutex_unlock(&g->lock);
}

void sdt_rank_group_abort(sdt_rank_group *g, int index, const char *why)
{
    sdt_rank_group_note_failure(g, index);
    pthread_mutex_lock(&g->lock);
    sdt_comm *c = g->opened ? g->comms[index] : NULL;
    pthread_mutex_unlock(&g->lock);
    if (c) c->abort(c, why);
}

void sdt_rank_group_note_failure(sdt_rank_group *g, int index)
{
    pthread_mutex_lock(&g->lock);
    if (g->first_failed < 0) g->first_failed = index;
    pthread_mutex_unlock(&g->lock);
}

int sdt_rank_group_first_failed(const sdt_rank_group *g)
{
    sdt_rank_group *mutable_g = (sdt_rank_group *)g; /* the lock only */
    pthread_mutex_lock(&mutable_g->lock);
    int first = g->first_failed;
    pthread_mutex_unlock(&mutable_g->lock);
    return first;
}
