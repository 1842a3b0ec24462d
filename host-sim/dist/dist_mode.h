/* dist_mode.h - how one `sdt-host train` runs, from --gpus, --in-process, --device cuda:N and
 * torchrun's environment (issue 33): on one device as before, as the launcher of one rank process per
 * GPU, as one rank of a job (torchrun's variables, or set by the launcher), or with the GPUs as the
 * plugin's threads in this one process. */
#ifndef SDT_HOST_DIST_MODE_H
#define SDT_HOST_DIST_MODE_H

#include <glib.h>

#include "dist_plan.h"
#include "panel_options.h"

typedef enum dist_mode {
    DIST_ONE_DEVICE, /* as before: nothing for the plugin to know */
    DIST_LAUNCHER,   /* --gpus: start one rank process per GPU (launch.h) */
    DIST_RANK,       /* WORLD_SIZE > 1: meet the others (dist_join_job), then train */
    DIST_IN_PROCESS  /* --gpus --in-process, or one chosen GPU: the plan goes to the plugin as it is */
} dist_mode;

/* Decides the mode and fills plan (dist_plan_clear it). envp: torchrun's variables (g_get_environ()).
 * FALSE with one sentence; *usage_error when the command line was at fault (exit 2) rather than the
 * environment. */
gboolean dist_choose(const panel_host_options *host, uint32_t device_choice, char **envp, host_dist_plan *plan,
                     dist_mode *mode, char **error, gboolean *usage_error);

/* For a host that is one process (sdt-host serve): --gpus always as the plugin's threads (no
 * launcher, no torchrun environment), or --device cuda:N. *spread: the plan has devices for the
 * plugin (dist_extension, then dist_plan_apply). FALSE with one sentence. */
gboolean dist_choose_in_process(const panel_host_options *host, uint32_t device_choice, host_dist_plan *plan,
                                gboolean *spread, char **error);

/* A rank meets the others at MASTER_ADDR:MASTER_PORT: rank 0 makes the communicator id through the
 * plugin's extension and hands it (with the job's fingerprint checked) to every other rank, which
 * receives it into plan->comm_id. FALSE with one sentence. */
gboolean dist_join_job(host_dist_plan *plan, const sdt_distributed_ext *ext, uint64_t fingerprint, char **error);

#endif
