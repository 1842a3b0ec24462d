/* comm.h - the communicator of data-parallel training (docs/abi.md 3.16): the collectives one
 * rank of a job calls, in the same order on every rank, over whatever carries them.
 *
 * Implementations: NCCL in the CUDA module (kernels/cuda/nccl_comm.cu, reached through
 * sdt_comm_nccl_get_api: libnccl.so.2 is opened on first use, never linked), and in the tests a
 * "ranks as threads" double over plain memory (tests/common/thread_comm.h). The interface sits
 * in kernels/ because the CUDA module, which knows only kernels/, implements it; the plugin
 * chooses and drives it.
 *
 * Every call is collective and bounded: a rank that does not arrive within the job's timeout,
 * or one that failed (abort), makes the call fail on every rank with one sentence naming the
 * rank and the cause, and the communicator stays failed (every later call fails the same way).
 * Nothing in here writes a file. */
#ifndef SDT_KERNELS_COMM_H
#define SDT_KERNELS_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sdt_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The job's communicator id: NCCL's ncclUniqueId is 128 bytes (sdt_train_options.comm_id). */
#define SDT_COMM_ID_BYTES 128
/* The most values all_reduce_i64 and all_reduce_f64 take at once. */
#define SDT_COMM_SMALL_COUNT 64
/* comm_timeout_seconds 0 means this many seconds. */
#define SDT_COMM_DEFAULT_TIMEOUT_SECONDS 600

struct sdt_backend; /* kernels/ops.h */

typedef struct sdt_comm sdt_comm;
struct sdt_comm {
    int rank;       /* this rank's number in the job, 0 .. world_size - 1 */
    int world_size; /* ranks in the job */
    /* Sum of count f32 values over every rank, in place. buf lives where the rank's backend keeps
     * tensors (device memory for NCCL, host memory for the CPU). The thread double adds in rank
     * order 0, 1, 2 ... so the sum is the same bits on every rank and at every world size that
     * splits the same values the same way. */
    bool (*all_reduce_f32)(sdt_comm *c, float *buf, size_t count, sdt_error *error);
    /* Sum of a small vector (at most SDT_COMM_SMALL_COUNT) of int64 values (flags, counts) in host
     * memory, in place. */
    bool (*all_reduce_i64)(sdt_comm *c, int64_t *buf, size_t count, sdt_error *error);
    /* The same for doubles in host memory (the loss and metrics for the log), in rank order in the
     * thread double. */
    bool (*all_reduce_f64)(sdt_comm *c, double *buf, size_t count, sdt_error *error);
    /* bytes at buf (the backend's memory, as all_reduce_f32) from rank root to every rank. */
    bool (*broadcast)(sdt_comm *c, void *buf, size_t bytes, int root, sdt_error *error);
    /* Returns when every rank has arrived. */
    bool (*barrier)(sdt_comm *c, sdt_error *error);
    /* This rank failed (why: one sentence): every rank's pending and later calls fail, naming
     * this rank and why; more than once is harmless. Called on the thread that drives this rank's
     * collectives (NCCL's abort frees the communicator a call in flight would still poll); a host's
     * interrupt reaches the ranks as a flag they sum at the step's end, not through abort. The
     * thread double takes it from any thread. */
    void (*abort)(sdt_comm *c, const char *why);
    void (*destroy)(sdt_comm *c);
    void *impl;
};

/* The NCCL implementation's entry points, resolved from the CUDA module by name
 * (SDT_COMM_NCCL_API_SYMBOL); kernels/cuda/nccl_comm.cu. Each fills error's sentence on failure. */
typedef struct sdt_comm_nccl_api {
    uint32_t struct_size;
    /* true when libnccl.so.2 can be opened and has every symbol used. */
    bool (*available)(sdt_error *error);
    /* ncclGetUniqueId into id. */
    bool (*new_id)(uint8_t id[SDT_COMM_ID_BYTES], sdt_error *error);
    /* One rank of a job of world_size processes (ncclCommInitRank), on the CUDA device of the
     * backend's context; be is the rank's CUDA backend (its stream carries the collectives). */
    sdt_comm *(*open_rank)(struct sdt_backend *be, const uint8_t id[SDT_COMM_ID_BYTES], int world_size, int rank,
                           int timeout_seconds, sdt_error *error);
    /* count ranks of one process, first_rank .. first_rank + count - 1, one per backend (its device;
     * every backend on its own device), as one NCCL group (ncclGroupStart, ncclCommInitRank each,
     * ncclGroupEnd: ncclCommInitAll when the process is the whole job). out[i] is backend i's. */
    bool (*open_group)(struct sdt_backend *const *backends, int count, const uint8_t id[SDT_COMM_ID_BYTES],
                       int world_size, int first_rank, int timeout_seconds, sdt_comm **out, sdt_error *error);
} sdt_comm_nccl_api;

#define SDT_COMM_NCCL_API_SYMBOL "sdt_comm_nccl_get_api"
typedef const sdt_comm_nccl_api *(*sdt_comm_nccl_api_fn)(void);

#ifdef __cplusplus
}
#endif

#endif
