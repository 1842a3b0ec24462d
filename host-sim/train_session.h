/* train_session.h - runs prepare + run on a worker thread while the main loop draws progress
 * and turns Ctrl-C into the Interrupt button: what a GUI training panel does. */
#ifndef SDT_HOST_TRAIN_SESSION_H
#define SDT_HOST_TRAIN_SESSION_H

#include "sdtrain.h"

/* The host callbacks sdt-host gives every trainer: log lines and saved files on stderr. */
sdt_host_callbacks train_session_callbacks(void);

/* Rewrites a plugin sentence for the terminal (a new string, g_free); NULL: print it as is. data
 * is the session's explain_data. */
typedef char *(*train_session_explain_fn)(const void *data, const char *sentence);

/* The trainer a session drives and what its prepare() receives. */
typedef struct train_target {
    const sdt_trainer_factory *factory;
    sdt_trainer *trainer;
    const sdt_trainer_config *config;
    int rank; /* a data-parallel job's rank (0 otherwise): only rank 0 draws the job's progress and saves */
} train_target;

/* Prepares and trains on a worker thread. Returns an sdt-host exit status (0, 1 or 130);
 * errors are printed as one sentence, passed through explain (with explain_data) when given. */
int train_session_run(const train_target *target, train_session_explain_fn explain, const void *explain_data);

#endif
