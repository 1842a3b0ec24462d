/* concept_score.c - see concept_score.h. */
#include "concept_score.h"

#include <string.h>

#include "shape_match.h"

concept_reading concept_score(const uint8_t *rgb, int size)
{
    concept_reading out;
    memset(&out, 0, sizeof out);
    shape_match m;
    if (!shape_match_read(&m, rgb, size)) return out;
    out.object_share = m.object_share;
    if (m.found) {
        out.colour = m.colour;
        out.colour_share = (float)m.n_colour[WORLD_CONCEPT_COLOUR] / (float)m.n_object;
        out.shape = m.shape;
        out.outlined = m.outlined;
        out.best_iou = m.best_iou;
        out.star_probability = shape_match_probability(&m, WORLD_CONCEPT_SHAPE, false);
        out.star_any_probability = out.star_probability + shape_match_probability(&m, WORLD_CONCEPT_SHAPE, true);
        out.score = out.colour_share * out.star_probability;
    }
    shape_match_free(&m);
    return out;
}
