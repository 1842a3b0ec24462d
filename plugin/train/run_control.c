/* run_control.c - cross-thread state of a training handle (see run_control.h). */
#include <string.h>
#include <time.h>

#include "train/run_control.h"

void sdt_run_control_init(sdt_run_control *c)
{
    atomic_init(&c->interrupt_requested, false);
    atomic_init(&c->state, SDT_RUN_IDLE);
    pthread_mutex_init(&c->metrics_lock, NULL);
    memset(&c->latest, 0, sizeof c->latest);
    c->latest.struct_size = sizeof c->latest;
}

void sdt_run_control_fini(sdt_run_control *c)
{
    pthread_mutex_destroy(&c->metrics_lock);
}

void sdt_run_control_request_interrupt(sdt_run_control *c)
{
    atomic_store(&c->interrupt_requested, true);
}

bool sdt_run_control_interrupt_requested(const sdt_run_control *c)
{
    return atomic_load((atomic_bool *)&c->interrupt_requested);
}

void sdt_run_control_reset(sdt_run_control *c)
{
    atomic_store(&c->interrupt_requested, false);
    sdt_metrics zero;
    memset(&zero, 0, sizeof zero);
    zero.struct_size = sizeof zero;
    sdt_run_control_publish(c, &zero);
}

sdt_run_state sdt_run_control_state(const sdt_run_control *c)
{
    return (sdt_run_state)atomic_load((atomic_int *)&c->state);
}

void sdt_run_control_set_state(sdt_run_control *c, sdt_run_state s)
{
    atomic_store(&c->state, (int)s);
}

bool sdt_run_control_begin_run(sdt_run_control *c)
{
    int expected = SDT_RUN_PREPARED;
    return atomic_compare_exchange_strong(&c->state, &expected, SDT_RUN_RUNNING);
}

void sdt_run_control_publish(sdt_run_control *c, const sdt_metrics *m)
{
    pthread_mutex_lock(&c->metrics_lock);
    c->latest = *m;
    c->latest.struct_size = sizeof c->latest;
    pthread_mutex_unlock(&c->metrics_lock);
}

void sdt_run_control_latest(const sdt_run_control *c, sdt_metrics *out)
{
    pthread_mutex_t *lock = (pthread_mutex_t *)&c->metrics_lock; /* logically const */
    pthread_mutex_lock(lock);
    *out = c->latest;
    pthread_mutex_unlock(lock);
}

double sdt_run_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
