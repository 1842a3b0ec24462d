/* preview_grid.c - see preview_grid.h. */
#include "data/preview_grid.h"

#include <stdlib.h>
#include <string.h>

#include "data/pixel_font.h"

#define WRAP_COLUMNS 24 /* a prompt's lines */
#define WRAP_LINES 4
#define SEED_LINES 3
#define WRAP_MAX_COLUMNS 64
#define WRAP_MAX_LINES 8
#define PAD 4 /* label pixels around every label, times the scale */

/* Greedy word wrap; a word longer than a line is split across lines. */
void sdt_preview_grid_wrap(const char *text, int columns, int lines, char *out, int out_size)
{
    if (columns < 4) columns = 4;
    if (columns > WRAP_MAX_COLUMNS) columns = WRAP_MAX_COLUMNS;
    if (lines > WRAP_MAX_LINES) lines = WRAP_MAX_LINES;
    if (lines < 1) lines = 1;
    char buf[WRAP_MAX_LINES * (WRAP_MAX_COLUMNS + 1) + 4];
    int at = 0, line = 0, col = 0;
    bool cut = false;
    const char *p = text ? text : "";
    while (*p && !cut) {
        while (*p == ' ' || *p == '\t') p++;
        int word = 0;
        while (p[word] && p[word] != ' ' && p[word] != '\t') word++;
        if (!word) break;
        if (col > 0 && col + 1 + (word < columns ? word : columns) > columns) {
            if (++line == lines) {
                cut = true;
                break;
            }
            buf[at++] = '\n';
            col = 0;
        } else if (col > 0) {
            buf[at++] = ' ';
            col++;
        }
        for (int k = 0; k < word; k++) {
            if (col == columns) {
                if (++line == lines) {
                    cut = true;
                    break;
                }
                buf[at++] = '\n';
                col = 0;
            }
            buf[at++] = p[k];
            col++;
        }
        p += word;
    }
    if (cut) { /* say so, within the last line */
        while (col > columns - 3) at--, col--;
        memcpy(buf + at, "...", 3);
        at += 3;
    }
    buf[at] = '\0';
    int n = at < out_size - 1 ? at : out_size - 1;
    memcpy(out, buf, (size_t)n);
    out[n] = '\0';
}

#define WRAPPED_SIZE (WRAP_MAX_LINES * (WRAP_MAX_COLUMNS + 1) + 4)

/* The characters of a column label's line: what fits over a cell, less a margin. */
static int seed_columns(int cell_w, int scale)
{
    return (cell_w - 4 * scale) / (6 * scale);
}

void sdt_preview_grid_measure(const sdt_preview_grid_labels *labels, int cell_w, int cell_h,
                              sdt_preview_grid_layout *out)
{
    (void)cell_h;
    int scale = cell_w < 256 ? 1 : 2, pad = PAD * scale;
    int widest = 0, tallest_col = 0;
    for (int r = 0; r < labels->rows; r++) {
        char wrapped[WRAPPED_SIZE];
        sdt_preview_grid_wrap(labels->row_labels[r], WRAP_COLUMNS, WRAP_LINES, wrapped, sizeof wrapped);
        int w = sdt_pixel_font_width(wrapped, scale);
        widest = w > widest ? w : widest;
    }
    for (int c = 0; c < labels->cols; c++) {
        char wrapped[WRAPPED_SIZE];
        sdt_preview_grid_wrap(labels->col_labels[c], seed_columns(cell_w, scale), SEED_LINES, wrapped, sizeof wrapped);
        int h = sdt_pixel_font_height(wrapped, scale);
        tallest_col = h > tallest_col ? h : tallest_col;
    }
    out->scale = scale;
    out->left = widest + 2 * pad;
    out->top = sdt_pixel_font_height(labels->title ? labels->title : "", scale) + tallest_col + 4 * pad;
    out->width = out->left + labels->cols * cell_w;
    out->height = out->top + labels->rows * cell_h;
}

bool sdt_preview_grid_compose(const sdt_preview_grid_labels *labels, const uint8_t *const *cells, int cell_w,
                              int cell_h, uint8_t **rgb, sdt_preview_grid_layout *layout, sdt_error *error)
{
    *rgb = NULL;
    if (labels->rows < 1 || labels->rows > SDT_PREVIEW_GRID_MAX_ROWS || labels->cols < 1 ||
        labels->cols > SDT_PREVIEW_GRID_MAX_COLS)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "a preview grid of %d prompts by %d seeds: it takes 1..%d prompts and "
                        "1..%d seeds",
                        labels->rows, labels->cols, SDT_PREVIEW_GRID_MAX_ROWS, SDT_PREVIEW_GRID_MAX_COLS);
    sdt_preview_grid_measure(labels, cell_w, cell_h, layout);
    int W = layout->width, H = layout->height, s = layout->scale, pad = PAD * s;
    uint8_t *g = malloc((size_t)W * H * 3);
    if (!g) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory drawing a %d x %d preview grid", W, H);
    memset(g, 255, (size_t)W * H * 3);
    static const uint8_t ink[3] = {0, 0, 0};
    sdt_pixel_font_draw(g, W, H, pad, pad, labels->title ? labels->title : "", s, ink);
    for (int c = 0; c < labels->cols; c++) {
        char wrapped[WRAPPED_SIZE];
        sdt_preview_grid_wrap(labels->col_labels[c], seed_columns(cell_w, s), SEED_LINES, wrapped, sizeof wrapped);
        int lw = sdt_pixel_font_width(wrapped, s), lh = sdt_pixel_font_height(wrapped, s);
        sdt_pixel_font_draw(g, W, H, layout->left + c * cell_w + (cell_w - lw) / 2, layout->top - pad - lh, wrapped, s,
                            ink);
    }
    for (int r = 0; r < labels->rows; r++) {
        char wrapped[WRAPPED_SIZE];
        sdt_preview_grid_wrap(labels->row_labels[r], WRAP_COLUMNS, WRAP_LINES, wrapped, sizeof wrapped);
        int lh = sdt_pixel_font_height(wrapped, s);
        sdt_pixel_font_draw(g, W, H, pad, layout->top + r * cell_h + (cell_h - lh) / 2, wrapped, s, ink);
        for (int c = 0; c < labels->cols; c++)
            for (int y = 0; y < cell_h; y++)
                memcpy(g + ((size_t)(layout->top + r * cell_h + y) * W + layout->left + c * cell_w) * 3,
                       cells[r * labels->cols + c] + (size_t)y * cell_w * 3, (size_t)cell_w * 3);
    }
    *rgb = g;
    return true;
}
