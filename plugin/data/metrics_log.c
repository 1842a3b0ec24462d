/* metrics_log.c - see metrics_log.h. */
#include "data/metrics_log.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomic_file.h"
#include "c_numeric.h"
#include "file_read.h"
#include "write_fault.h"
#include "c_json.h"

#define METRICS_LOG_LIMIT ((size_t)512 << 20) /* ~2 million steps of lines */

static bool grow(void **a, void **b, int *cap, int need, size_t size_a, size_t size_b)
{
    if (need <= *cap) return true;
    int cap2 = *cap ? *cap * 2 : 256;
    while (cap2 < need) cap2 *= 2;
    void *na = realloc(*a, (size_t)cap2 * size_a);
    if (na) *a = na;
    void *nb = na ? realloc(*b, (size_t)cap2 * size_b) : NULL;
    if (nb) *b = nb;
    if (!na || !nb) return false;
    *cap = cap2;
    return true;
}

static bool history_add(sdt_metrics_log *log, int64_t step, double loss, double validation_loss)
{
    if (!grow((void **)&log->steps, (void **)&log->losses, &log->cap, log->n + 1, sizeof(int64_t), sizeof(double)))
        return false;
    log->steps[log->n] = step;
    log->losses[log->n++] = loss;
    if (isnan(validation_loss)) return true;
    if (!grow((void **)&log->val_steps, (void **)&log->val_losses, &log->cap_val, log->n_val + 1, sizeof(int64_t),
              sizeof(double)))
        return false;
    log->val_steps[log->n_val] = step;
    log->val_losses[log->n_val++] = validation_loss;
    return true;
}

static double number_or_nan(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? cJSON_GetNumberValue(v) : NAN;
}

bool sdt_metrics_log_open(sdt_metrics_log *log, const char *folder, int64_t last_step, int *dropped, sdt_error *error)
{
    memset(log, 0, sizeof *log);
    int n_dropped = 0;
    if (dropped) *dropped = 0;
    if (snprintf(log->path, sizeof log->path, "%s/" SDT_METRICS_LOG_NAME, folder) >= (int)sizeof log->path)
        return sdt_fail(error, SDT_ERR_IO, "%s: the log folder's path is too long for %s", folder,
                        SDT_METRICS_LOG_NAME);
    char *text = NULL;
    size_t len = 0;
    sdt_error why;
    if (!sdt_file_read_all(log->path, "metrics file", METRICS_LOG_LIMIT, &text, &len, &why)) {
        if (why.code == SDT_ERR_NOT_FOUND) return true;
        if (error) *error = why;
        return false;
    }
    GString *kept = g_string_new(NULL);
    bool changed = false, ok = true;
    int line_no = 0;
    for (char *p = text, *next; ok && p < text + len; p = next) {
        char *nl = memchr(p, '\n', (size_t)(text + len - p));
        next = nl ? nl + 1 : text + len;
        line_no++;
        if (!nl) { /* cut off by a crash */
            changed = true;
            n_dropped++;
            break;
        }
        cJSON *o = sdt_json_parse(p, (size_t)(nl - p));
        const cJSON *step = cJSON_GetObjectItemCaseSensitive(o, "step");
        if (!cJSON_IsNumber(step)) {
            ok = sdt_fail(error, SDT_ERR_BAD_FORMAT,
                          "%s: line %d is not a metrics object with a step; move the file away or "
                          "choose another log folder",
                          log->path, line_no);
        } else if ((int64_t)cJSON_GetNumberValue(step) > last_step) {
            changed = true;
            n_dropped++;
        } else {
            g_string_append_len(kept, p, next - p);
            if (!history_add(log, (int64_t)cJSON_GetNumberValue(step), number_or_nan(o, "loss"),
                             number_or_nan(o, "validation_loss")))
                ok = sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory reading %s", log->path);
        }
        cJSON_Delete(o);
    }
    if (ok && changed) ok = sdt_atomic_write(log->path, kept->str, kept->len, error);
    if (ok && dropped) *dropped = n_dropped;
    g_string_free(kept, TRUE);
    free(text);
    if (!ok) sdt_metrics_log_free(log);
    return ok;
}

__attribute__((format(printf, 4, 0))) static void add_number(GString *s, const char *key, double v, const char *fmt)
{
    g_string_append_printf(s, ",\"%s\":", key);
    if (!isfinite(v)) {
        g_string_append(s, "null");
        return;
    }
    char text[64];
    sdt_c_snprintf(text, sizeof text, fmt, v);
    g_string_append(s, text);
}

bool sdt_metrics_log_append(sdt_metrics_log *log, const sdt_metrics_record *r, sdt_error *error)
{
    GString *line = g_string_new(NULL);
    g_string_append_printf(line, "{\"step\":%" PRId64 ",\"epoch\":%" PRId64, r->step, r->epoch);
    add_number(line, "loss", r->loss, "%.9g");
    if (!isnan(r->validation_loss)) add_number(line, "validation_loss", r->validation_loss, "%.9g");
    add_number(line, "learn_rate", r->learn_rate, "%.10g");
    if (r->n_groups > 1) {
        g_string_append(line, ",\"learn_rates\":{");
        for (int g = 0; g < r->n_groups && g < SDT_METRICS_MAX_GROUPS; g++) {
            GString *one = g_string_new(NULL);
            add_number(one, r->group_names[g], r->group_rates[g], "%.10g");
            g_string_append(line, one->str + (g == 0)); /* the first without its comma */
            g_string_free(one, TRUE);
        }
        g_string_append_c(line, '}');
    }
    add_number(line, "grad_norm", r->grad_norm, "%.9g");
    add_number(line, "loss_scale", r->loss_scale, "%.10g");
    g_string_append_printf(line, ",\"skipped\":%s,\"skipped_total\":%" PRId64, r->skipped ? "true" : "false",
                           r->skipped_total);
    add_number(line, "images_per_s", r->images_per_s, "%.4g");
    g_string_append_printf(line, ",\"precision\":\"%s\"}\n", r->precision ? r->precision : "");
    /* O_APPEND + one write: a crash leaves whole lines, and a line never interleaves. */
    int fd = sdt_write_fault_disk_full(log->path) ? open(SDT_WRITE_FAULT_DEVICE, O_WRONLY | O_CLOEXEC)
                                                  : open(log->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    bool ok = fd >= 0 && write(fd, line->str, line->len) == (ssize_t)line->len && fsync(fd) == 0;
    if (!ok)
        sdt_fail(error, SDT_ERR_IO, "%s: cannot append to the metrics file (%s); check free space and permissions",
                 log->path, strerror(errno));
    if (fd >= 0) close(fd);
    g_string_free(line, TRUE);
    if (ok && !history_add(log, r->step, r->loss, r->validation_loss))
        ok = sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory keeping the metrics history");
    return ok;
}

sdt_loss_plot sdt_metrics_log_plot(const sdt_metrics_log *log, const char *title)
{
    sdt_loss_plot p = {{log->steps, log->losses, log->n}, {log->val_steps, log->val_losses, log->n_val}, title};
    return p;
}

void sdt_metrics_log_free(sdt_metrics_log *log)
{
    free(log->steps);
    free(log->losses);
    free(log->val_steps);
    free(log->val_losses);
    memset(log->path, 0, sizeof log->path);
    log->steps = log->val_steps = NULL;
    log->losses = log->val_losses = NULL;
    log->n = log->n_val = log->cap = log->cap_val = 0;
}
