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
        out.best_iou = m.best_iou;
        for (int s = 0; s < WORLD_SHAPE_COUNT; s++)
            out.outlined_probability += shape_match_probability(&m, (world_shape)s, true);
        /* The inside: within the shape's silhouette (a ring's hole included) and clear of the
         * outlined shape's strokes, where an outline shows only the background. */
        world_shape silhouette = m.shape == WORLD_RING ? WORLD_CIRCLE : m.shape;
        float object_sum = 0.0f;
        for (int y = 0; y < size; y++)
            for (int x = 0; x < size; x++) {
                if (world_shape_coverage(silhouette, false, m.cx, m.cy, m.radius, x, y) < 16 ||
                    world_shape_coverage(m.shape, true, m.cx, m.cy, m.radius, x, y) > 0)
                    continue;
                out.interior_pixels++;
                object_sum += m.mask[(size_t)y * size + x];
            }
        if (out.interior_pixels > 0) out.hollowness = 1.0f - object_sum / (float)out.interior_pixels;
        float outlined = out.interior_pixels >= STYLE_MIN_INTERIOR_PIXELS ? out.hollowness : out.outlined_probability;
        float shape_weight = (m.best_iou - STYLE_IOU_NONE) / (STYLE_IOU_FULL - STYLE_IOU_NONE);
        out.score = outlined * (shape_weight < 0.0f ? 0.0f : shape_weight > 1.0f ? 1.0f : shape_weight);
    }
    shape_match_free(&m);
    return out;
}
