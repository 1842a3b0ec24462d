/* run_control.h - the part of a training handle that other threads touch while run() works:
 * the interrupt request, the run state and the latest metrics ([any thread] calls of the ABI). */
#ifndef SDT_PLUGIN_RUN_CONTROL_H
#define SDT_PLUGIN_RUN_CONTROL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "sdtrain.h"

typedef struct sdt_run_control {
    atomic_bool interrupt_requested;
    atomic_int state;             /* sdt_run_state */
    pthread_mutex_t metrics_lock; /* sdt_metrics is too wide for one atomic */
    sdt_metrics latest;
} sdt_run_control;

void sdt_run_control_init(sdt_run_control *c);
void sdt_run_control_fini(sdt_run_control *c);

void sdt_run_control_request_interrupt(sdt_run_control *c);
bool sdt_run_control_interrupt_requested(const sdt_run_control *c);
/* Forgets an interrupt request and the metrics: a new preparation starts clean. */
void sdt_run_control_reset(sdt_run_control *c);

sdt_run_state sdt_run_control_state(const sdt_run_control *c);
void sdt_run_control_set_state(sdt_run_control *c, sdt_run_state s);
/* Moves to RUNNING only from PREPARED, atomically, so two threads calling run()
 * on one handle cannot both start. false = the handle is in another state (left unchanged). */
bool sdt_run_control_begin_run(sdt_run_control *c);

void sdt_run_control_publish(sdt_run_control *c, const sdt_metrics *m);
void sdt_run_control_latest(const sdt_run_control *c, sdt_metrics *out); /* full sizeof copy */

/* Monotonic seconds: the clock of every interval a run measures (throughput, timed state, progress lines). */
double sdt_run_clock(void);

#endif
