/* memory_report.c - see memory_report.h. */
#include "train/memory_report.h"

#include <string.h>

#include "host/host_log.h"

#define MIB(x) ((double)(x) / (1024.0 * 1024.0))

void sdt_memory_report_begin(sdt_memory_report *r, sdt_backend *be, size_t estimate_bytes)
{
    memset(r, 0, sizeof *r);
    sdt_memory_stats s;
    if (!be || !be->memory_stats || be->memory_stats(be, &s, true) != 0 || !s.tracked) return;
    r->be = be;
    r->estimate_bytes = estimate_bytes;
    r->device_used_at_start = s.device_total_bytes - s.device_free_bytes;
    r->started = true;
}

void sdt_memory_report_end(const sdt_memory_report *r, const sdt_host_callbacks *host)
{
    sdt_memory_stats s;
    if (!r->started || r->be->memory_stats(r->be, &s, false) != 0) return;
    double error = r->estimate_bytes ? 100.0 * ((double)r->estimate_bytes - (double)s.peak_allocated_bytes) /
                                           (double)s.peak_allocated_bytes
                                     : 0.0;
    sdt_host_log(host, SDT_LOG_INFO,
                 "GPU memory: peak %.0f MiB held by sdtrain during the run; prepare estimated %.0f MiB (%+.1f%%). "
                 "At the end the kernels' scratch held %.0f MiB, %.0f MiB of it cuDNN's convolution workspace. "
                 "The device had %.0f MiB in use when the run started and %.0f MiB at its end, of %.0f MiB "
                 "(the CUDA context, library workspaces and other processes included).%s%s",
                 MIB(s.peak_allocated_bytes), MIB(r->estimate_bytes), error, MIB(s.scratch_bytes),
                 MIB(s.conv_workspace_bytes), MIB(r->device_used_at_start),
                 MIB(s.device_total_bytes - s.device_free_bytes), MIB(s.device_total_bytes), r->note ? " " : "",
                 r->note ? r->note : "");
}
