/* outputs.c - output folder layout, loss CSV, settings JSON; see outputs.h. */
#include "data/outputs.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "c_numeric.h"
#include "data/file_name.h"
#include "file_read.h"
#include "write_fault.h"
#include "c_json.h"

#define LOSS_CSV_LIMIT ((size_t)1 << 30) /* ten million rows */
#define OUTPUT_NAME_MAX 200              /* bytes; leaves room for "-<step>.safetensors" */

const sdt_output_layout sdt_output_layout_embedding = {"embeddings", SDT_LOSS_CSV_NAME, true};
const sdt_output_layout sdt_output_layout_hypernetwork = {"hypernetworks", SDT_HN_LOSS_CSV_NAME, false};
const sdt_output_layout sdt_output_layout_hypernetwork_cards = {"hypernetworks", SDT_HN_LOSS_CSV_NAME, true};

static bool fits(int n, size_t size)
{
    return n >= 0 && (size_t)n < size;
}

static bool make_folder(const char *path, sdt_error *error)
{
    if (g_mkdir_with_parents(path, 0777) != 0) {
        sdt_fail(error, SDT_ERR_IO, "%s: cannot create the output folder (%s); choose a writable log directory", path,
                 strerror(errno));
        return false;
    }
    return true;
}

bool sdt_outputs_paths(const char *log_dir, const char *name, time_t when, const sdt_output_layout *layout,
                       sdt_output_dirs *out, sdt_error *error)
{
    if (!layout) layout = &sdt_output_layout_embedding;
    memset(out, 0, sizeof(*out));
    if (!log_dir || !log_dir[0]) {
        sdt_fail(error, SDT_ERR_IO, "Log directory is empty; choose a folder for the training outputs");
        return false;
    }
    if (!sdt_file_name_check(layout == &sdt_output_layout_embedding ? "embedding" : "hypernetwork", name,
                             OUTPUT_NAME_MAX, error))
        return false;
    struct tm tm;
    localtime_r(&when, &tm);
    char date[16];
    strftime(date, sizeof(date), "%Y-%m-%d", &tm);
    bool ok = fits(snprintf(out->root, sizeof(out->root), "%s/%s/%s", log_dir, date, name), sizeof(out->root)) &&
              fits(snprintf(out->copies, SDT_PATH_MAX, "%s/%s", out->root, layout->copies), SDT_PATH_MAX) &&
              fits(snprintf(out->images, SDT_PATH_MAX, "%s/images", out->root), SDT_PATH_MAX) &&
              (!layout->cards ||
               fits(snprintf(out->image_embeddings, SDT_PATH_MAX, "%s/image_embeddings", out->root), SDT_PATH_MAX)) &&
              fits(snprintf(out->loss_csv, SDT_PATH_MAX, "%s/%s", out->root, layout->loss_csv), SDT_PATH_MAX);
    if (!ok) {
        sdt_fail(error, SDT_ERR_IO, "%s: the log directory path is too long; choose a shorter one", log_dir);
        return false;
    }
    return true;
}

bool sdt_outputs_prepare(const char *log_dir, const char *name, time_t when, const sdt_output_layout *layout,
                         sdt_output_dirs *out, sdt_error *error)
{
    if (!layout) layout = &sdt_output_layout_embedding;
    return sdt_outputs_paths(log_dir, name, when, layout, out, error) && make_folder(out->copies, error) &&
           make_folder(out->images, error) && (!layout->cards || make_folder(out->image_embeddings, error));
}

bool sdt_output_file(char *buf, size_t size, const char *folder, const char *name, int64_t step, const char *ext)
{
    return fits(snprintf(buf, size, "%s/%s-%" PRId64 "%s", folder, name, step, ext ? ext : ""), size);
}

/* The first line of path (without newline) into buf; "" for a missing or empty file. */
static bool read_first_line(const char *path, char *buf, size_t size, sdt_error *error)
{
    buf[0] = 0;
    sdt_error why;
    int fd = sdt_file_open_regular(path, "loss CSV", NULL, &why);
    if (fd < 0) {
        if (why.code == SDT_ERR_NOT_FOUND) return true;
        if (error) *error = why;
        return false;
    }
    ssize_t got = read(fd, buf, size - 1);
    close(fd);
    buf[got > 0 ? got : 0] = 0;
    buf[strcspn(buf, "\r\n")] = 0;
    return true;
}

__attribute__((format(printf, 3, 0))) static void append_number(GString *s, double v, const char *fmt)
{
    g_string_append_c(s, ',');
    char text[64];
    if (isfinite(v)) {
        sdt_c_snprintf(text, sizeof text, fmt, v);
        g_string_append(s, text);
    } else if (!isnan(v))
        g_string_append(s, v > 0 ? "inf" : "-inf");
}

bool sdt_loss_row_format(const sdt_loss_row *row, char *line, size_t size)
{
    GString *s = g_string_new(NULL);
    g_string_append_printf(s, "%" PRId64 ",%" PRId64 ",%" PRId64, row->step, row->epoch, row->epoch_step);
    append_number(s, row->loss, "%.7f"); /* A1111's format */
    append_number(s, row->learn_rate, "%.10g");
    append_number(s, row->grad_norm, "%.6g");
    append_number(s, row->loss_scale, "%.10g");
    g_string_append_printf(s, ",%s,%" PRId64, row->precision ? row->precision : "", row->skipped);
    append_number(s, row->images_per_s, "%.4g");
    if (row->with_validation) append_number(s, row->validation_loss, "%.7f");
    bool fits_line = s->len < size;
    if (fits_line) memcpy(line, s->str, s->len + 1);
    g_string_free(s, TRUE);
    return fits_line;
}

bool sdt_loss_csv_append_line(const char *path, bool with_validation, const char *row_text, sdt_error *error)
{
    char first[512];
    if (!read_first_line(path, first, sizeof(first), error)) return false;
    const char *header = with_validation ? SDT_LOSS_CSV_HEADER_VALIDATION : SDT_LOSS_CSV_HEADER;
    if (first[0] && strcmp(first, header) != 0) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: the existing loss CSV has other columns (\"%s\"); move it away or choose another log directory",
                 path, first);
        return false;
    }
    GString *line = g_string_new(NULL);
    if (!first[0]) g_string_append_printf(line, "%s\n", header);
    g_string_append_printf(line, "%s\n", row_text);

    /* O_APPEND + one write: a crash leaves whole rows, and a row never interleaves. */
    int fd = sdt_write_fault_disk_full(path) ? open(SDT_WRITE_FAULT_DEVICE, O_WRONLY | O_CLOEXEC)
                                             : open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    bool ok = fd >= 0 && write(fd, line->str, line->len) == (ssize_t)line->len && fsync(fd) == 0;
    if (!ok)
        sdt_fail(error, SDT_ERR_IO, "%s: cannot append to the loss CSV (%s); check free space and permissions", path,
                 strerror(errno));
    if (fd >= 0) close(fd);
    g_string_free(line, TRUE);
    return ok;
}

bool sdt_loss_csv_append(const char *path, const sdt_loss_row *row, sdt_error *error)
{
    char text[SDT_LOSS_ROW_MAX];
    if (!sdt_loss_row_format(row, text, sizeof text))
        return sdt_fail(error, SDT_ERR_INTERNAL, "%s: a loss CSV row is longer than %d bytes (a bug: please report)",
                        path, SDT_LOSS_ROW_MAX);
    return sdt_loss_csv_append_line(path, row->with_validation, text, error);
}

bool sdt_loss_csv_truncate_after(const char *path, int64_t last_step, sdt_error *error)
{
    char *text = NULL;
    size_t len = 0;
    sdt_error why;
    if (!sdt_file_read_all(path, "loss CSV", LOSS_CSV_LIMIT, &text, &len, &why)) {
        bool missing = why.code == SDT_ERR_NOT_FOUND;
        if (!missing && error) *error = why;
        return missing;
    }
    GString *kept = g_string_new(NULL);
    bool header = true, changed = false;
    for (char *p = text, *next; p < text + len; p = next) {
        char *nl = memchr(p, '\n', (size_t)(text + len - p));
        next = nl ? nl + 1 : text + len;
        /* A row cut short by a crash (no newline) is dropped too. */
        bool keep = header || (nl && strtoll(p, NULL, 10) <= last_step);
        if (keep)
            g_string_append_len(kept, p, next - p);
        else
            changed = true;
        header = false;
    }
    bool ok = !changed || sdt_atomic_write(path, kept->str, kept->len, error);
    g_string_free(kept, TRUE);
    free(text);
    return ok;
}

bool sdt_settings_save(const char *folder, const cJSON *settings, time_t when, char *path_out, size_t path_size,
                       sdt_error *error)
{
    struct tm tm;
    localtime_r(&when, &tm);
    char stamp[32], path[SDT_PATH_MAX];
    strftime(stamp, sizeof(stamp), "%Y-%m-%d-%H-%M-%S", &tm);
    /* A second run in the same second (a resume right after its run) gets settings-<stamp>_2.json, which
     * sorts after the first: the earlier run's settings are never replaced. The run folder's lock keeps
     * another process from taking the same name meanwhile. */
    for (int n = 1;; n++) {
        char suffix[16] = "";
        if (n > 1) snprintf(suffix, sizeof suffix, "_%d", n);
        if (!fits(snprintf(path, sizeof(path), "%s/settings-%s%s.json", folder, stamp, suffix), sizeof(path))) {
            sdt_fail(error, SDT_ERR_IO, "%s: the folder path is too long for the settings file", folder);
            return false;
        }
        struct stat st;
        if (lstat(path, &st) != 0 && errno == ENOENT) break;
        if (n == 1000) {
            sdt_fail(error, SDT_ERR_IO,
                     "%s: 1000 settings files were written in one second; wait a second and start again", folder);
            return false;
        }
    }
    char *text = sdt_json_print(settings);
    if (!text) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory writing the settings", path);
        return false;
    }
    bool ok = sdt_atomic_write(path, text, strlen(text), error);
    cJSON_free(text);
    if (ok && path_out) snprintf(path_out, path_size, "%s", path);
    return ok;
}
