/* metrics_log.h - metrics.jsonl in the run's log folder: one JSON object per optimizer step,
 *
 *   {"step":12,"epoch":0,"loss":0.1234,"validation_loss":0.1111,"learn_rate":0.005,
 *    "learn_rates":{"hypernetwork":1e-05,"embedding":0.005},"grad_norm":0.5,"loss_scale":65536,
 *    "skipped":false,"skipped_total":0,"images_per_s":3.2,"precision":"fp16"}
 *
 * (validation_loss only at the steps where it was measured, learn_rates only when several
 * groups train; a value that is not finite is null). Each line is appended with one write() and
 * fsynced, so a crash leaves whole lines and at most one cut-off line at the end. Opening it for
 * a run drops every line past the run's step (written after the state it resumes from) and a
 * cut-off line, so a resumed run continues the file without repeating a step; the lines kept
 * are the history the loss plot (data/loss_plot.h) draws. */
#ifndef SDT_DATA_METRICS_LOG_H
#define SDT_DATA_METRICS_LOG_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#include "data/loss_plot.h"

#define SDT_METRICS_LOG_NAME "metrics.jsonl"
#define SDT_LOSS_PLOT_NAME "loss.png"
#define SDT_METRICS_MAX_GROUPS 4

typedef struct sdt_metrics_record {
    int64_t step, epoch;
    double loss, validation_loss; /* validation_loss NAN: not measured at this step (left out) */
    double learn_rate, grad_norm, loss_scale, images_per_s;
    int n_groups; /* > 1: learn_rates by group name */
    const char *group_names[SDT_METRICS_MAX_GROUPS];
    double group_rates[SDT_METRICS_MAX_GROUPS];
    bool skipped; /* this step's update was skipped (non-finite gradients) */
    int64_t skipped_total;
    const char *precision;
} sdt_metrics_record;

/* The history of one run's file: training and validation losses by step (grown as lines come). */
typedef struct sdt_metrics_log {
    char path[4096];
    int64_t *steps, *val_steps;
    double *losses, *val_losses;
    int n, n_val, cap, cap_val;
} sdt_metrics_log;

/* <folder>/metrics.jsonl: lines past last_step and a cut-off last line dropped (atomically), the
 * rest read into the history; *dropped (may be NULL) gets how many lines went. A missing file is an
 * empty history. false + error when the file
 * cannot be read or rewritten, or a kept line is not a metrics object (the sentence names it). */
bool sdt_metrics_log_open(sdt_metrics_log *log, const char *folder, int64_t last_step, int *dropped, sdt_error *error);
/* Appends one line and adds it to the history. false + an IO error when the write fails. */
bool sdt_metrics_log_append(sdt_metrics_log *log, const sdt_metrics_record *r, sdt_error *error);
/* The history as the loss plot's series (pointers into log). */
sdt_loss_plot sdt_metrics_log_plot(const sdt_metrics_log *log, const char *title);
void sdt_metrics_log_free(sdt_metrics_log *log);

#endif
