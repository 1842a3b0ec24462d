/* train_session.h - runs prepare + run on a worker thread while the main loop draws progress
 * and turns Ctrl-C into the Interrupt button: what a GUI training panel does. */
#ifndef SDT_HOST_TRAIN_SESSION_H
#define SDT_HOST_TRAIN_SESSION_H

#include "sdtrain.h"

/* The host callbacks sdt-host gives every trainer: log lines and saved files on stderr. */
sdt_host_callbacks train_session_callbacks(void);

/* Rewrites a plugin sentence for the terminal (a new string, g_free); NULL: print it as is. */
typedef char *(*train_session_explain_fn)(const char *sentence);

/* The trainer a session drives: either factory's (their lifecycle members are the same, in the
 * same order; only the trainer and config types differ). Set the ti_* or the hn_* members. */
typedef struct train_target {
    const sdt_ti_factory *ti;
    sdt_ti_trainer *ti_trainer;
    const sdt_ti_config *ti_config;
    const sdt_hn_factory *hn;
    sdt_hn_trainer *hn_trainer;
    const sdt_hn_config *hn_config;
} train_target;

/* Prepares and trains on a worker thread. Returns an sdt-host exit status (0, 1 or 130);
 * errors are printed as one sentence, passed through explain when given. */
int train_session_run(const train_target *target, train_session_explain_fn explain);

#endif
