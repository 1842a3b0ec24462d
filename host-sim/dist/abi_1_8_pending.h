/* abi_1_8_pending.h - the ABI 1.8 addition for data-parallel training (issue 33) as branch `dp` adds it
 * to abi/sdtrain.h, so sdt-host's side builds before that branch lands. Included only while
 * abi/sdtrain.h lacks it (dist_plan.h: #ifndef SDT_EXT_DISTRIBUTED); the lead deletes this file at
 * the merge. SDT_DIST_ABI_PENDING tells dist_plan.c that sdt_train_options has no such fields yet. */
#ifndef SDT_HOST_DIST_ABI_1_8_PENDING_H
#define SDT_HOST_DIST_ABI_1_8_PENDING_H

#include "sdtrain.h"

#ifndef SDT_EXT_DISTRIBUTED
#define SDT_DIST_ABI_PENDING 1

/* in struct sdt_train_options, after reserved6 (cannot be added here):
    int32_t world_size;           -- [0] ranks in the whole job; 0 or 1: one device, as before
    int32_t rank;                 -- [0] the job rank of this trainer's first device
    const int32_t *devices;       -- [NULL] in-process: device_count CUDA ordinals, one rank (thread) each
    int32_t device_count;         -- [0]
    int32_t comm_timeout_seconds; -- [0 = 600] a rank silent this long stops every rank
    uint8_t comm_id[128];         -- NCCL unique id made by rank 0's process, handed to every process */
#define SDT_EXT_DISTRIBUTED "sdtrain.distributed/1" /* an extension of sdtrain.trainer/1 (get_extension) */
/* As branch `dp` declares it (it returns sdt_status and takes a uint32_t size, as `create` does; the
 * first proposal had bool and size_t): SDT_STATUS_OK, or a status with the reason copied into err. */
typedef struct sdt_distributed_ext {
    uint32_t struct_size;
    sdt_status (*available)(char *err, uint32_t err_size);
    sdt_status (*new_comm_id)(uint8_t id[128], char *err, uint32_t err_size);
} sdt_distributed_ext;
#endif

#endif
