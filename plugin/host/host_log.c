/* host_log.c - NULL-safe calls into the host callbacks (see host_log.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "host/copy_out.h"
#include "host/host_log.h"
#include "c_numeric.h"

bool sdt_host_callbacks_adopt(sdt_host_callbacks *own, const sdt_host_callbacks *host)
{
    memset(own, 0, sizeof *own);
    own->struct_size = sizeof *own;
    if (!host) return true;
    return sdt_struct_read_in(own, sizeof *own, host);
}

void sdt_host_log(const sdt_host_callbacks *cb, sdt_log_level level, const char *fmt, ...)
{
    if (!cb || !cb->log) return;
    char message[2048];
    va_list ap;
    va_start(ap, fmt);
    sdt_c_vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    cb->log(cb->user_data, level, message);
}

void sdt_host_metrics(const sdt_host_callbacks *cb, const sdt_metrics *metrics)
{
    if (cb && cb->metrics) cb->metrics(cb->user_data, metrics);
}

void sdt_host_preview(const sdt_host_callbacks *cb, const sdt_preview *preview)
{
    if (cb && cb->preview_ready) cb->preview_ready(cb->user_data, preview);
}

void sdt_host_file_saved(const sdt_host_callbacks *cb, sdt_file_kind kind, const char *path, int64_t step)
{
    if (!cb || !cb->file_saved) return;
    sdt_saved_file file = {sizeof file, (uint32_t)kind, step, path};
    cb->file_saved(cb->user_data, &file);
}
