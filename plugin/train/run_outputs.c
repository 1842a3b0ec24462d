/* run_outputs.c - see run_outputs.h. */
#include "train/run_outputs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A row of the loss CSV. A failure for IO (the disk) is returned (the run stops: run_loop.h);
 * any other (e.g. an existing CSV with other columns) is one warning for the run, and training goes on:
 * every later row would be refused for the same reason. */
static bool append_csv_row(sdt_run_outputs *o, const char *row_text, const sdt_host_callbacks *host, sdt_error *error)
{
    sdt_error why;
    if (sdt_loss_csv_append_line(o->dirs.loss_csv, o->csv_validation, row_text, &why)) return true;
    if (why.code == SDT_ERR_IO) {
        if (error) *error = why;
        return false;
    }
    if (!o->csv_refused)
        sdt_host_log(host, SDT_LOG_WARNING, "the loss CSV was not updated: %s; this run adds no rows to it",
                     why.message);
    o->csv_refused = true;
    return true;
}

void sdt_run_outputs_csv_row(sdt_run_outputs *o, const sdt_loss_row *row, const sdt_host_callbacks *host)
{
    if (o->write_csv_every <= 0) return;
    sdt_loss_row_format(row, o->csv_unwritten, sizeof o->csv_unwritten); /* SDT_LOSS_ROW_MAX holds any row */
    o->csv_row_unwritten = row->step % o->write_csv_every != 0;
    sdt_error why;
    if (!o->csv_row_unwritten && !append_csv_row(o, o->csv_unwritten, host, &why) &&
        o->write_failure.code == SDT_ERR_OK)
        o->write_failure = why;
}

bool sdt_run_outputs_flush_csv(sdt_run_outputs *o, const sdt_host_callbacks *host, sdt_error *error)
{
    if (!o->csv_row_unwritten) return true;
    o->csv_row_unwritten = false;
    return append_csv_row(o, o->csv_unwritten, host, error);
}

void sdt_run_outputs_metrics_line(sdt_run_outputs *o, const sdt_metrics_record *r, const sdt_host_callbacks *host)
{
    if (!o->write_metrics) return;
    sdt_error why;
    if (sdt_metrics_log_append(&o->metrics, r, &why)) return;
    if (why.code == SDT_ERR_IO && o->write_failure.code == SDT_ERR_OK)
        o->write_failure = why;
    else if (why.code != SDT_ERR_IO)
        sdt_host_log(host, SDT_LOG_WARNING, "metrics.jsonl was not updated: %s", why.message);
}

bool sdt_run_outputs_loss_plot(sdt_run_outputs *o, const char *name, const char *run_kind, sdt_error *error)
{
    if (!o->write_metrics) return true;
    char path[4096], title[300];
    snprintf(path, sizeof path, "%.4000s/" SDT_LOSS_PLOT_NAME, o->dirs.root);
    snprintf(title, sizeof title, "%s (%s)", name, run_kind);
    sdt_loss_plot plot = sdt_metrics_log_plot(&o->metrics, title);
    return sdt_loss_plot_write(path, &plot, error);
}

bool sdt_run_outputs_note_failure(sdt_run_outputs *o, const sdt_error *why)
{
    if (why->code != SDT_ERR_IO || o->write_failure.code != SDT_ERR_OK) return false;
    o->write_failure = *why;
    return true;
}

bool sdt_run_outputs_take_failure(sdt_run_outputs *o, int64_t step, sdt_error *error)
{
    if (o->write_failure.code == SDT_ERR_OK) return false;
    *error = o->write_failure;
    sdt_error_wrap(error, "Step %lld: a file of the run could not be written, so training stopped", (long long)step);
    sdt_error_clear(&o->write_failure);
    return true;
}

void sdt_run_outputs_to_json(const sdt_run_outputs *o, cJSON *record)
{
    /* the last step's row that the run's end writes: a kill between this state and that row loses nothing */
    if (o->csv_row_unwritten) cJSON_AddStringToObject(record, "csv_row", o->csv_unwritten);
}

bool sdt_run_outputs_check_json(const cJSON *record, double step, const char *path, sdt_error *error)
{
    const cJSON *row = cJSON_GetObjectItemCaseSensitive(record, "csv_row");
    const char *text = cJSON_GetStringValue(row);
    char *end = NULL;
    if (row && (!text || strlen(text) >= SDT_LOSS_ROW_MAX || strchr(text, '\n') ||
                (double)strtoll(text, &end, 10) != step || *end != ','))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: the state's csv_row is not the loss CSV row of its step %.17g (the file "
                        "is damaged); resume from an earlier state, or train without --resume",
                        path, step);
    return true;
}

void sdt_run_outputs_from_json(sdt_run_outputs *o, const cJSON *record, int64_t step, const sdt_host_callbacks *host)
{
    const char *row = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(record, "csv_row"));
    o->csv_row_unwritten = row != NULL;
    if (row) snprintf(o->csv_unwritten, sizeof o->csv_unwritten, "%s", row);
    sdt_error why;
    if (!sdt_loss_csv_truncate_after(o->dirs.loss_csv, row ? step - 1 : step, &why))
        sdt_host_log(host, SDT_LOG_WARNING, "%s", why.message);
}
