/* run_outputs.h - what a run writes besides its trained files and state: the output folders and
 * the run folder's lock, the loss CSV (with the row write_csv_every skipped, kept for the run's
 * end and in the resume state), metrics.jsonl and loss.png, and the first write that failed for
 * IO (which stops the run after its step: run_loop.h). The job fills it at prepare and hands it
 * what to write; nothing here knows the job. */
#ifndef SDT_TRAIN_RUN_OUTPUTS_H
#define SDT_TRAIN_RUN_OUTPUTS_H

#include "sdt_error.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "data/metrics_log.h"
#include "data/outputs.h"
#include "data/run_lock.h"
#include "host/host_log.h"

typedef struct sdt_run_outputs {
    sdt_output_dirs dirs;
    const sdt_output_layout *layout;
    sdt_run_lock log_lock; /* the run folder's */
    time_t started_at;     /* names the log folder (its date) and the settings file */
    int64_t write_csv_every;
    bool csv_validation;                  /* the CSV has the validation column */
    char csv_unwritten[SDT_LOSS_ROW_MAX]; /* the last step's row (its text) when write_csv_every skipped it: the run's
                                           * end writes it; the resume state keeps it, so a kill between the final
                                           * state and this row loses nothing */
    bool csv_row_unwritten;
    bool csv_refused; /* a row was refused (an existing CSV with other columns): warned once, not every step */
    bool write_metrics;
    sdt_metrics_log metrics; /* open when write_metrics */
    sdt_error write_failure; /* a write of a step (loss CSV, timed state) that failed for IO; stops the run */
} sdt_run_outputs;

/* The step's row: every write_csv_every-th now, another kept for the run's end. A failure for IO is
 * kept as the write failure; another is one warning for the run. */
void sdt_run_outputs_csv_row(sdt_run_outputs *o, const sdt_loss_row *row, const sdt_host_callbacks *host);
/* The kept row of the run's last step, once. false + error for a failure for IO. */
bool sdt_run_outputs_flush_csv(sdt_run_outputs *o, const sdt_host_callbacks *host, sdt_error *error);
/* This step's line of metrics.jsonl (write_metrics): a failure for IO stops the run as the CSV's does. */
void sdt_run_outputs_metrics_line(sdt_run_outputs *o, const sdt_metrics_record *r, const sdt_host_callbacks *host);
/* loss.png in the run folder (write_metrics), titled "<name> (<run_kind>)". */
bool sdt_run_outputs_loss_plot(sdt_run_outputs *o, const char *name, const char *run_kind, sdt_error *error);
/* Keeps why as the write failure when it failed for IO and none is kept yet; true when kept. */
bool sdt_run_outputs_note_failure(sdt_run_outputs *o, const sdt_error *why);
/* The kept write failure (wrapped with the step) into error, cleared: true when there was one. */
bool sdt_run_outputs_take_failure(sdt_run_outputs *o, int64_t step, sdt_error *error);

/* The resume state's record of the row not yet in the CSV ("csv_row"): written, checked against the
 * state's step (false + a damage sentence naming the file), and read back: the run's end writes
 * it as it would have been, and a copy that a killed run wrote after the state goes first. */
void sdt_run_outputs_to_json(const sdt_run_outputs *o, cJSON *record);
bool sdt_run_outputs_check_json(const cJSON *record, double step, const char *path, sdt_error *error);
void sdt_run_outputs_from_json(sdt_run_outputs *o, const cJSON *record, int64_t step, const sdt_host_callbacks *host);

#endif
