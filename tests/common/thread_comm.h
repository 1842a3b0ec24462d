/* thread_comm.h - a test double of the communicator (kernels/comm.h): the ranks of one job as
 * threads of one test process over plain memory, for the CPU checks of data parallelism. Not a
 * product path (issue 33): the plugin's communicator is NCCL's.
 *
 * Sums run in rank order 0, 1, 2 ... on the last rank to arrive, each element ((v0 + v1) + v2)
 * ..., so a sum repeats its bits and equals one rank accumulating the same shards in that order.
 * A rank that does not arrive within the timeout, or one that aborts (or is told to fail at its
 * Nth collective), fails every rank's call with one sentence naming the rank and the cause. */
#ifndef SDT_TEST_THREAD_COMM_H
#define SDT_TEST_THREAD_COMM_H

#include "comm.h"

typedef struct thread_comm_world thread_comm_world;

/* A job of world_size ranks (comms[r] is rank r's handle, for its thread); timeout_ms bounds
 * every wait. NULL when out of memory. */
thread_comm_world *thread_comm_world_new(int world_size, int timeout_ms, sdt_comm **comms);
/* Rank `rank` aborts with why ("injected failure") when it enters its call number `call` (0-based;
 * -1: never): the failure a test injects mid-step. */
void thread_comm_world_fail_at(thread_comm_world *w, int rank, int call, const char *why);
/* After every rank's thread has ended: frees the world and every handle. */
void thread_comm_world_free(thread_comm_world *w);

#endif
