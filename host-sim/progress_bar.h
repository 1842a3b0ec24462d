/* progress_bar.h - one line of training progress: step, bar, loss, lr, images/s, ETA. */
#ifndef SDT_HOST_PROGRESS_BAR_H
#define SDT_HOST_PROGRESS_BAR_H

#include <stddef.h>

#include "sdtrain.h"

/* Formats m (from get_metrics) into out, at most bar_width characters of bar. start_step is the
 * step the run began at, so the ETA uses only this run's pace. */
void progress_bar_format(const sdt_metrics *m, long long start_step, int bar_width, char *out, size_t out_size);

#endif
