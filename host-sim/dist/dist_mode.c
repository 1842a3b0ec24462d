/* dist_mode.c - see dist_mode.h. */
#include <stdio.h>
#include <string.h>

#include "dist_mode.h"
#include "rendezvous.h"

static int32_t timeout_of(const panel_host_options *host)
{
    return host->comm_timeout ? (int32_t)MIN(host->comm_timeout, (uint32_t)G_MAXINT32 / 1000)
                              : DIST_DEFAULT_TIMEOUT_SECONDS;
}

/* --gpus: the launcher, or the plugin's threads (--in-process, or a single GPU: nothing to launch). */
static gboolean choose_gpus(const panel_host_options *host, uint32_t device_choice, host_dist_plan *plan,
                            dist_mode *mode, char **error, gboolean *usage_error)
{
    *usage_error = TRUE;
    if (device_choice == SDT_DEVICE_CHOICE_CPU) {
        *error = g_strdup("--gpus trains on GPUs, but --device cpu asks for the CPU; leave out one of them.");
        return FALSE;
    }
    if (host->cuda_device_given) {
        *error = g_strdup_printf("--gpus gives each rank its GPU, and --device cuda:%d names one more; leave out "
                                 "--device cuda:N with --gpus.",
                                 host->cuda_device);
        return FALSE;
    }
    if (!dist_parse_gpu_list(host->gpus, "--gpus", &plan->devices, &plan->device_count, error)) return FALSE;
    *usage_error = FALSE;
    plan->world_size = plan->device_count;
    plan->timeout_seconds = timeout_of(host);
    *mode = host->in_process || plan->device_count == 1 ? DIST_IN_PROCESS : DIST_LAUNCHER;
    return TRUE;
}

gboolean dist_choose(const panel_host_options *host, uint32_t device_choice, char **envp, host_dist_plan *plan,
                     dist_mode *mode, char **error, gboolean *usage_error)
{
    *mode = DIST_ONE_DEVICE;
    *usage_error = FALSE;
    gboolean is_rank = FALSE;
    if (!dist_plan_from_environment(envp, plan, &is_rank, error)) return FALSE;
    gboolean gpus = host->gpus && host->gpus[0];
    if (gpus && is_rank) {
        *error = g_strdup_printf("--gpus starts one process per GPU itself, but WORLD_SIZE=%d says this process is "
                                 "already one rank of a job (torchrun); leave out --gpus under torchrun, or unset "
                                 "WORLD_SIZE to let --gpus start the ranks.",
                                 plan->world_size);
        *usage_error = TRUE;
        return FALSE;
    }
    if (host->in_process && !gpus) {
        *error = g_strdup("--in-process runs the GPUs that --gpus lists in this one process; add --gpus, e.g. "
                          "--gpus 0,1.");
        *usage_error = TRUE;
        return FALSE;
    }
    if (gpus) return choose_gpus(host, device_choice, plan, mode, error, usage_error);
    if (is_rank) {
        if (device_choice == SDT_DEVICE_CHOICE_CPU) {
            *error = g_strdup_printf("WORLD_SIZE=%d asks for data-parallel training, which runs on GPUs (NCCL), but "
                                     "--device cpu asks for the CPU; leave out --device cpu, or unset WORLD_SIZE.",
                                     plan->world_size);
            *usage_error = TRUE;
            return FALSE;
        }
        if (host->cuda_device_given) plan->devices[0] = host->cuda_device;
        plan->timeout_seconds = timeout_of(host);
        *mode = DIST_RANK;
        return TRUE;
    }
    if (host->cuda_device_given) { /* one chosen GPU: the plugin needs the device list for it */
        plan->devices = g_new(int32_t, 1);
        plan->devices[0] = host->cuda_device;
        plan->device_count = 1;
        plan->timeout_seconds = timeout_of(host);
        *mode = DIST_IN_PROCESS;
    }
    return TRUE;
}

gboolean dist_choose_in_process(const panel_host_options *host, uint32_t device_choice, host_dist_plan *plan,
                                gboolean *spread, char **error)
{
    panel_host_options threads = *host;
    threads.in_process = host->gpus && host->gpus[0]; /* one process: the GPUs can only be its threads */
    char *no_environment[] = {NULL};
    dist_mode mode = DIST_ONE_DEVICE;
    gboolean usage = FALSE;
    if (!dist_choose(&threads, device_choice, no_environment, plan, &mode, error, &usage)) return FALSE;
    *spread = mode == DIST_IN_PROCESS;
    return TRUE;
}

gboolean dist_join_job(host_dist_plan *plan, const sdt_distributed_ext *ext, uint64_t fingerprint, char **error)
{
    rendezvous_job job = {plan->world_size, fingerprint, plan->timeout_seconds};
    fprintf(stderr, "Rank %d of %d (GPU %d): meeting the other ranks at %s:%u (at most %d s).\n", plan->rank,
            plan->world_size, plan->devices[0], plan->master_addr, (unsigned)plan->master_port, plan->timeout_seconds);
    if (plan->rank != 0)
        return rendezvous_join(plan->master_addr, plan->master_port, &job, plan->rank, plan->comm_id, error);
    /* Rank 0 listens first, so a port in use is said before anything else happens. */
    rendezvous_listener *listener = rendezvous_listen(plan->master_addr, plan->master_port, error);
    if (!listener) return FALSE;
    char why[1024] = "";
    gboolean ok = ext->new_comm_id(plan->comm_id, why, sizeof why) == SDT_STATUS_OK;
    if (!ok)
        *error = g_strdup_printf("The plugin could not make the communicator id for the job: %s",
                                 why[0] ? why : "it gave no reason.");
    ok = ok && rendezvous_serve(listener, &job, plan->comm_id, error);
    rendezvous_listener_free(listener);
    if (ok) fprintf(stderr, "All %d ranks joined.\n", plan->world_size);
    return ok;
}
