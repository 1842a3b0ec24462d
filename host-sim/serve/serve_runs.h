/* serve_runs.h - the panel's training runs: each one a trainer of the plugin (the same panel
 * file -> config path as `sdt-host train`, panel_options.h) prepared and run on its own worker
 * thread, its callbacks turned into events on the main loop. Interrupt is the CLI's Ctrl-C: the
 * step finishes and everything is saved. One run per file: the plugin's locks say so. */
#ifndef SDT_SERVE_RUNS_H
#define SDT_SERVE_RUNS_H

#include <cjson/cJSON.h>
#include <glib.h>

#include "plugin_loader.h"
#include "serve_events.h"
#include "serve_folders.h"

typedef struct serve_runs serve_runs;

serve_runs *serve_runs_new(const host_plugin *plugin, serve_events *events, const serve_folders *folders);
/* Interrupts every run, waits for each to save, and frees. */
void serve_runs_free(serve_runs *runs);

/* [main thread] Starts a run from a panel file's text whose paths serve_train_request checked.
 * Returns its id (> 0), or 0 with a sentence in *error (g_free). A failure of prepare (a lock
 * another run holds, a bad option) arrives later as the run's "failed" state. */
int serve_runs_start(serve_runs *runs, const char *panel_text, size_t n, char **error);

/* [main thread] The Interrupt button. FALSE with a sentence when no such run is going. */
gboolean serve_runs_interrupt(serve_runs *runs, int id, char **error);

/* [main thread] Every run of this panel: id, method, name, state, error, last metrics. */
cJSON *serve_runs_json(const serve_runs *runs);

/* Whether any run is preparing or training. */
gboolean serve_runs_busy(const serve_runs *runs);

#endif
