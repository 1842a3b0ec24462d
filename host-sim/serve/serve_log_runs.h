/* serve_log_runs.h - the Runs list: every run folder below the logs folder, as the plugin writes them
 * (<log-dir>/<YYYY-MM-DD>/<name>/), this panel's runs and the CLI's alike, with its files. The log-dir
 * may be the logs folder or a folder typed inside it (up to 4 levels down: logs/project/first/...).
 * Links are never followed, so the walk stays inside the logs folder. */
#ifndef SDT_SERVE_LOG_RUNS_H
#define SDT_SERVE_LOG_RUNS_H

#include <cjson/cJSON.h>

#include "serve_folders.h"

/* [{ "folder": "[<log_dir>/]<date>/<name>", "log_dir" ("" for the logs folder), "date", "name",
 *    "modified" (unix s), "csv", "metrics" (metrics.jsonl), "settings", "images": [...], "files": [...] }],
 * newest first; paths relative to the logs folder. */
cJSON *serve_log_runs_json(const serve_folders *folders);

#endif
