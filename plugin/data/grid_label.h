/* grid_label.h - labels drawn into a grid picture (the preview grids, data/preview_grid.h, and
 * the demo's comparison grids), in a built-in 5x7 pixel font, so a grid names its rows and
 * columns without a font library: A-Z (lower case drawn as upper case), 0-9, space and
 * . : - + = , ( ) [ ] / _ ' " ! ? # < > * & % ; other characters are drawn as spaces.
 * '\n' starts a new line. */
#ifndef SDT_DATA_GRID_LABEL_H
#define SDT_DATA_GRID_LABEL_H

#include <stdint.h>

/* Width and height in pixels of text drawn at `scale` (each font pixel a scale x scale block). */
int sdt_grid_label_width(const char *text, int scale);
int sdt_grid_label_height(const char *text, int scale);

/* Draws text with its top left corner at (x, y) into an RGB image of w x h pixels (rows top to
 * bottom), clipped to the image. */
void sdt_grid_label_draw(uint8_t *rgb, int w, int h, int x, int y, const char *text, int scale, const uint8_t colour[3]);

#endif
