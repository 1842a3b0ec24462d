/* loss_plot.h - the run's loss.png: training loss, its running mean and the validation loss
 * against the step, so a user opens one picture to see whether a run learns.
 *
 * Drawn into RGB memory without a plotting library: axes with round-number ticks and labels in
 * the built-in pixel font (data/pixel_font.h), the training loss as thin light points joined by
 * lines, its trailing mean as a thick dark line, the validation loss as a thick orange line
 * with a dot per measurement (the lowest ringed and named under the title), and a legend naming
 * each. The y range covers the mean and the validation loss and all but the highest 5% of the
 * training losses (a few spikes would flatten everything else); losses above it are drawn at the
 * top edge. Written with data/png_write.h. */
#ifndef SDT_DATA_LOSS_PLOT_H
#define SDT_DATA_LOSS_PLOT_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct sdt_loss_series {
    const int64_t *step;
    const double *value; /* non-finite values are left out */
    int n;
} sdt_loss_series;

typedef struct sdt_loss_plot {
    sdt_loss_series train, validation;
    const char *title; /* drawn above the plot (upper case), or NULL */
} sdt_loss_plot;

#define SDT_LOSS_PLOT_WIDTH 900
#define SDT_LOSS_PLOT_HEIGHT 520

/* The trailing window of the running mean for n training losses: n / 10, from 1 to 100. */
int sdt_loss_plot_mean_window(int n);

/* The picture (SDT_LOSS_PLOT_WIDTH x SDT_LOSS_PLOT_HEIGHT RGB, malloc'd), NULL when out of memory. */
uint8_t *sdt_loss_plot_render(const sdt_loss_plot *plot);

/* Renders and writes it atomically to path. */
bool sdt_loss_plot_write(const char *path, const sdt_loss_plot *plot, sdt_error *error);

#endif
