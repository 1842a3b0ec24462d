/* host_log.h - calls into the host's callback table, NULL-safe, so trainers never test for
 * missing callbacks themselves. The plugin keeps its own copy of the table per handle. */
#ifndef SDT_PLUGIN_HOST_LOG_H
#define SDT_PLUGIN_HOST_LOG_H

#include "sdtrain.h"

/* Copies the host's table (the first struct_size bytes; missing callbacks become NULL) into
 * *own. A NULL host table gives an empty one. false when struct_size is too small to be real. */
bool sdt_host_callbacks_adopt(sdt_host_callbacks *own, const sdt_host_callbacks *host);

void sdt_host_log(const sdt_host_callbacks *cb, sdt_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void sdt_host_metrics(const sdt_host_callbacks *cb, const sdt_metrics *metrics);
void sdt_host_preview(const sdt_host_callbacks *cb, const sdt_preview *preview);
void sdt_host_file_saved(const sdt_host_callbacks *cb, sdt_file_kind kind, const char *path, int64_t step);

#endif
