/* serve_log_runs.h - the Runs list: every run folder under the log folder (<logs>/<date>/<name>/,
 * as the plugin writes them, this panel's runs and the CLI's alike), with its files. */
#ifndef SDT_SERVE_LOG_RUNS_H
#define SDT_SERVE_LOG_RUNS_H

#include <cjson/cJSON.h>

#include "serve_folders.h"

/* [{ "folder": "<date>/<name>", "date", "name", "modified" (unix s), "csv", "metrics" (metrics.jsonl), "settings",
 *    "images": [...], "files": [...] }], newest first; paths relative to the log folder. */
cJSON *serve_log_runs_json(const serve_folders *folders);

#endif
