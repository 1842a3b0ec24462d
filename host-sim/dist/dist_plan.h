/* dist_plan.h - how one `sdt-host train` takes part in data-parallel training (issue 33): the ranks
 * of the job, this process's rank and device(s), where rank 0 waits for the others, and the
 * communicator id they share. Read from torchrun's environment (a rank process), from --gpus (the
 * launcher, or --in-process: one process, the plugin's threads), and handed to the plugin through
 * sdt_train_options in one place (dist_plan_apply). */
#ifndef SDT_HOST_DIST_PLAN_H
#define SDT_HOST_DIST_PLAN_H

#include <glib.h>
#include <stdint.h>

#include "sdtrain.h"

#define DIST_COMM_ID_BYTES 128
#define DIST_MAX_WORLD_SIZE 65536
#define DIST_MAX_GPU_ORDINAL 1023
#define DIST_DEFAULT_TIMEOUT_SECONDS 600 /* sdt_train_options.comm_timeout_seconds 0 means this */

typedef struct host_dist_plan {
    int32_t world_size;       /* ranks in the whole job; 1: one device, as before */
    int32_t rank;             /* this process's (first) rank */
    int32_t local_rank;       /* its index on this machine (torchrun's LOCAL_RANK) */
    int32_t local_world_size; /* ranks on this machine; 0 when LOCAL_WORLD_SIZE is not set */
    char *master_addr;        /* rank 0's address (MASTER_ADDR); NULL in-process */
    uint16_t master_port;     /* MASTER_PORT, or the one after it when torchrun's agent serves that */
    int32_t *devices;         /* CUDA ordinals: in-process one per rank (thread), a rank process its one */
    int32_t device_count;
    int32_t timeout_seconds;             /* a silent rank stops the job after this long */
    uint8_t comm_id[DIST_COMM_ID_BYTES]; /* from rank 0 (rendezvous); zero in-process */
} host_dist_plan;

void dist_plan_clear(host_dist_plan *plan);

/* Reads torchrun's contract from envp (g_get_environ() in production, a test's list in tests):
 * WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE (optional), MASTER_ADDR (must resolve) and
 * MASTER_PORT (the ranks meet on the port after it when TORCHELASTIC_USE_AGENT_STORE=True: recent torchrun
 * serves MASTER_PORT itself). *is_rank FALSE (nothing else read) when WORLD_SIZE is unset, empty or 1. The device is
 * LOCAL_RANK. FALSE with one sentence (g_free) naming the variable and the fix. */
gboolean dist_plan_from_environment(char **envp, host_dist_plan *plan, gboolean *is_rank, char **error);

/* Parses a GPU list "0,1,2,3" (what --gpus takes): distinct ordinals 0..DIST_MAX_GPU_ORDINAL, at
 * least one. *gpus is g_free'd by the caller. origin names the option in the sentence. */
gboolean dist_parse_gpu_list(const char *text, const char *origin, int32_t **gpus, int32_t *count, char **error);

/* The plugin's distributed extension, checked usable (its available()); NULL with a sentence. */
const sdt_distributed_ext *dist_extension(const sdt_trainer_factory *factory, char **error);

/* THE one place the plan reaches the plugin: copies it into options' ABI 1.8 fields. FALSE with a
 * sentence when the options cannot hold it. (While the ABI is pending, see dist_plan.c.) */
gboolean dist_plan_apply(const host_dist_plan *plan, sdt_train_options *options, char **error);

#endif
