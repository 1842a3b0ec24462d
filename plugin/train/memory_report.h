/* memory_report.h - the peak-memory line at the end of a training run.
 *
 * On a backend that counts its allocations (CUDA), the run's start resets the backend's peak
 * and reads the device's memory in use (cudaMemGetInfo); the end logs the most the backend
 * held during the run beside prepare's estimate (and the error of that estimate), and the
 * device's memory in use at both ends, and what was kept off the device instead (the note: T5's output cached in
 * host memory, its weights not loaded). A backend that does not count (the CPU) logs nothing. */
#ifndef SDT_TRAIN_MEMORY_REPORT_H
#define SDT_TRAIN_MEMORY_REPORT_H

#include <stddef.h>

#include "ops.h"
#include "sdtrain.h"

typedef struct sdt_memory_report {
    sdt_backend *be;       /* NULL: nothing to report */
    size_t estimate_bytes; /* prepare's memory_estimate_bytes */
    size_t device_used_at_start;
    bool started;
    const char *note; /* NULL, or a sentence the line ends with (SD3.5: T5's output cached instead of its weights) */
} sdt_memory_report;

void sdt_memory_report_begin(sdt_memory_report *r, sdt_backend *be, size_t estimate_bytes);
void sdt_memory_report_end(const sdt_memory_report *r, const sdt_host_callbacks *host);

#endif
