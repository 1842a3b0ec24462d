/* run_comm.c - a run's place in a data-parallel job (see run_comm.h). */
#include "train/run_comm.h"

#include <string.h>

#include "testhooks/test_hooks.h"

void sdt_run_comm_init(sdt_run_comm *rc, const sdt_train_options *o)
{
    memset(rc, 0, sizeof *rc);
    rc->world_size = o->world_size > 1 ? (int)o->world_size : 1;
    rc->rank = rc->world_size > 1 ? (int)o->rank : 0;
    if (o->devices) return; /* an in-process rank: its group's communicator (sdt_run_comm_join) */
    /* the test program's communicator at once, so a prepare that fails before the backend exists
     * still tells the other ranks (NCCL's needs the CUDA backend: sdt_run_comm_open) */
    if (rc->world_size > 1) rc->comm = sdt_test_hook_comm(rc->rank, rc->world_size);
}

void sdt_run_comm_join(sdt_run_comm *rc, sdt_rank_group *group, int index)
{
    rc->group = group;
    rc->group_index = index;
}

bool sdt_run_comm_open(sdt_run_comm *rc, const sdt_train_options *o, plugin_backend *pb, const char *prefix,
                       sdt_error *error)
{
    if (rc->group) return sdt_rank_group_open(rc->group, rc->group_index, pb, prefix, &rc->comm, &rc->owned, error);
    if (rc->world_size == 1 || rc->comm) return true; /* one rank, or the test's (sdt_run_comm_init) */
    char why[512];
    const sdt_comm_nccl_api *api = plugin_nccl_open(&rc->nccl_module, why, sizeof why);
    if (!api)
        return sdt_fail(error, SDT_ERR_UNSUPPORTED,
                        "%sworld_size %d needs NCCL in the CUDA module: %s; run one process with world_size 0.", prefix,
                        rc->world_size, why);
    if (!pb->module) {
        plugin_nccl_close(rc->nccl_module);
        rc->nccl_module = NULL;
        return sdt_fail(error, SDT_ERR_UNSUPPORTED,
                        "%sworld_size %d runs over NCCL, which needs the CUDA device; set device to cuda.", prefix,
                        rc->world_size);
    }
    int timeout = o->comm_timeout_seconds > 0 ? (int)o->comm_timeout_seconds : SDT_COMM_DEFAULT_TIMEOUT_SECONDS;
    rc->comm = api->open_rank(pb->be, o->comm_id, rc->world_size, rc->rank, timeout, error);
    if (!rc->comm) {
        plugin_nccl_close(rc->nccl_module);
        rc->nccl_module = NULL;
        return sdt_error_wrap(error, "%scomm_id: opening rank %d of %d", prefix, rc->rank, rc->world_size);
    }
    rc->owned = true;
    return true;
}

bool sdt_run_comm_ready(sdt_run_comm *rc, sdt_error *error)
{
    if (rc->comm && !rc->comm->barrier(rc->comm, error))
        return sdt_error_wrap(error, "waiting for every rank to prepare");
    rc->ready = true;
    return true;
}

void sdt_run_comm_close(sdt_run_comm *rc)
{
    bool aborts = rc->comm && (!rc->ready || !rc->ended);
    if (aborts && rc->group) sdt_rank_group_note_failure(rc->group, rc->group_index); /* before the others hear it */
    if (rc->comm && !rc->ready)
        rc->comm->abort(rc->comm, "its prepare failed");
    else if (rc->comm && !rc->ended)
        rc->comm->abort(rc->comm, "its trainer was closed before the run ended");
    if (rc->comm && rc->owned) rc->comm->destroy(rc->comm);
    if (rc->nccl_module) plugin_nccl_close(rc->nccl_module);
    memset(rc, 0, sizeof *rc);
}

bool sdt_run_comm_writes(const sdt_run_comm *rc)
{
    return rc->rank == 0;
}

uint64_t sdt_run_comm_micro(const sdt_run_comm *rc, int64_t step, int accum, int micro)
{
    int world = rc->world_size > 1 ? rc->world_size : 1;
    return ((uint64_t)step * (uint64_t)accum + (uint64_t)micro) * (uint64_t)world + (uint64_t)rc->rank;
}

bool sdt_run_comm_any(const sdt_run_comm *rc, bool *flag, sdt_error *error)
{
    if (!rc->comm) return true;
    int64_t count = *flag ? 1 : 0;
    if (!rc->comm->all_reduce_i64(rc->comm, &count, 1, error)) return false;
    *flag = count > 0;
    return true;
}

bool sdt_run_comm_from_rank0(const sdt_run_comm *rc, double *value, sdt_error *error)
{
    if (!rc->comm) return true;
    if (rc->rank != 0) *value = 0.0;
    return rc->comm->all_reduce_f64(rc->comm, value, 1, error);
}

void sdt_run_comm_abort(sdt_run_comm *rc, const char *why)
{
    if (rc->group) sdt_rank_group_note_failure(rc->group, rc->group_index); /* before the others can hear it */
    if (rc->comm) rc->comm->abort(rc->comm, why);
}
