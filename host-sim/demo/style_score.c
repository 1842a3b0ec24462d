/* style_score.c - see style_score.h. */
#include "style_score.h"

#include <string.h>

#include "shape_match.h"

style_reading style_score(const uint8_t *rgb, int size)
{
    style_reading out;
    memset(&out, 0, sizeof out);
    shape_match m;
    if (!shape_match_read(&m, rgb, size)) return out;
    out.object_share = m.object_share;
    if (m.found) {
        out.shape = m.shape;
        for (int s = 0; s < WORLD_SHAPE_COUNT; s++) out.outlined_probability += shape_match_probability(&m, (world_shape)s, true);
        /* Fully inside the filled shape and untouched by the outline's stroke: the hole. */
        float object_sum = 0.0f;
        for (int y = 0; y < size; y++)
            for (int x = 0; x < size; x++) {
                if (world_shape_coverage(m.shape, false, m.cx, m.cy, m.radius, x, y) < 16 ||
                    world_shape_coverage(m.shape, true, m.cx, m.cy, m.radius, x, y) > 0)
                    continue;
                out.interior_pixels++;
                object_sum += m.mask[(size_t)y * size + x];
            }
        if (out.interior_pixels > 0) out.hollowness = 1.0f - object_sum / (float)out.interior_pixels;
        out.score = out.interior_pixels >= STYLE_MIN_INTERIOR_PIXELS ? out.hollowness : out.outlined_probability;
    }
    shape_match_free(&m);
    return out;
}
