/* rendezvous.h - how the ranks of a data-parallel job meet before training (issue 33), as torchrun's
 * MASTER_ADDR:MASTER_PORT contract has it: rank 0 listens there, waits until every other rank has
 * connected and said which job it belongs to (the world size and a fingerprint of the options), then
 * sends each the communicator id it made (NCCL's unique id, through the plugin). A rank of another
 * job is refused with a sentence; every wait is bounded by the timeout; every failure is one
 * sentence. Plain TCP; NCCL then picks its own transport. */
#ifndef SDT_HOST_DIST_RENDEZVOUS_H
#define SDT_HOST_DIST_RENDEZVOUS_H

#include <glib.h>
#include <stdint.h>

#define RENDEZVOUS_ID_BYTES 128

/* What each rank says of its job; rank 0 refuses a rank whose job differs. */
typedef struct rendezvous_job {
    int32_t world_size;
    uint64_t fingerprint; /* the options' hash (panel_config_fingerprint) */
    int timeout_seconds;  /* the longest any wait lasts */
} rendezvous_job;

typedef struct rendezvous_listener rendezvous_listener;

/* Rank 0: listens on addr:port (a loopback addr listens on loopback only, any other on every
 * interface, as the other machines connect to it). NULL with a sentence (port in use, ...). */
rendezvous_listener *rendezvous_listen(const char *addr, uint16_t port, char **error);
/* Rank 0: waits for ranks 1..world_size-1, then sends each id. FALSE with a sentence naming the
 * ranks that did not come within the timeout (and any connection it refused meanwhile); the
 * ranks that did come are told so. */
gboolean rendezvous_serve(rendezvous_listener *listener, const rendezvous_job *job,
                          const uint8_t id[RENDEZVOUS_ID_BYTES], char **error);
void rendezvous_listener_free(rendezvous_listener *listener);

/* Ranks 1..: connects to rank 0 (retrying until the timeout: rank 0 may start later), says its job
 * and rank, and receives the id. FALSE with a sentence (refused, timed out, connection cut short). */
gboolean rendezvous_join(const char *addr, uint16_t port, const rendezvous_job *job, int32_t rank,
                         uint8_t id[RENDEZVOUS_ID_BYTES], char **error);

/* A TCP port free on 127.0.0.1 right now (for a launcher's own ranks); 0 with a sentence. */
uint16_t rendezvous_free_port(char **error);

#endif
