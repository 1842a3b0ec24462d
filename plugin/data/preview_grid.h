/* preview_grid.h - a run's preview grid: rows of prompts by columns of seeds, each cell one
 * preview image, labelled so a person reading the picture alone knows what it shows: a title
 * band on top (the step, the sampler, its steps and CFG scale), the seeds over the columns and
 * the prompts left of the rows (both wrapped), black on white, in data/pixel_font.h's font.
 *
 * The layout is a pure function of the labels and the cell size, so a test can check it:
 *   width  = left + cols * cell_w,   height = top + rows * cell_h,
 * cell (r, c) at (left + c * cell_w, top + r * cell_h), no gaps between cells. */
#ifndef SDT_DATA_PREVIEW_GRID_H
#define SDT_DATA_PREVIEW_GRID_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#define SDT_PREVIEW_GRID_MAX_ROWS 32
#define SDT_PREVIEW_GRID_MAX_COLS 16

typedef struct sdt_preview_grid_labels {
    int rows, cols;
    const char *const *row_labels; /* [rows] the prompts */
    const char *const *col_labels; /* [cols] e.g. "seed 42" */
    const char *title;             /* e.g. "step 500  euler_a 20 steps  cfg 7" */
} sdt_preview_grid_labels;

typedef struct sdt_preview_grid_layout {
    int scale;     /* font pixels per label pixel: 1 for cells narrower than 256, else 2 */
    int left, top; /* the label margins */
    int width, height;
} sdt_preview_grid_layout;

/* text word-wrapped to lines of at most `columns` characters (4..64), at most `lines` lines (up to
 * 8; cut with "..."), as drawn: a prompt at 24 x 4, a seed label at what fits over a cell x 3. */
void sdt_preview_grid_wrap(const char *text, int columns, int lines, char *out, int out_size);
void sdt_preview_grid_measure(const sdt_preview_grid_labels *labels, int cell_w, int cell_h,
                              sdt_preview_grid_layout *out);
/* cells[r * cols + c] is cell_w x cell_h x 3 RGB bytes. *rgb receives the malloc'd grid (layout's
 * width x height x 3). false + OUT_OF_MEMORY, or VALIDATION for a count past the maxima. */
bool sdt_preview_grid_compose(const sdt_preview_grid_labels *labels, const uint8_t *const *cells, int cell_w,
                              int cell_h, uint8_t **rgb, sdt_preview_grid_layout *layout, sdt_error *error);

#endif
