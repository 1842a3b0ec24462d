/* shape_match.h - finds the one object in a picture of the demo world (world.h) and matches it
 * against every world shape, filled and outlined, drawn by the world's own renderer: what the
 * concept score (concept_score.h) and the style score (style_score.h) both read.
 *
 * The background is estimated from the top and bottom border rows (the world's objects never
 * touch them); pixels far from it in colour are the object, an edge pixel counting by how far it
 * is towards the object's full distance (as the renderer's coverage mixes object and
 * background). Each shape is drawn into the object's box and compared with that soft mask by
 * intersection over union. Pure C, so CI and the demo read pictures the same way. */
#ifndef SDT_DEMO_SHAPE_MATCH_H
#define SDT_DEMO_SHAPE_MATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "world.h"

/* Under this share of the picture the object counts as absent. */
#define SHAPE_MATCH_MIN_OBJECT_SHARE 0.005f

typedef struct shape_match {
    int size;
    float *mask;                      /* size * size, 0 (background) .. 1 (the object's full distance) */
    int n_object;                     /* pixels of the object */
    int n_colour[WORLD_COLOUR_COUNT]; /* object pixels nearest to each world colour */
    float object_share;               /* n_object / (size * size) */
    world_colour colour;              /* the nearest colour to the object's mean */
    bool found;                       /* object_share >= SHAPE_MATCH_MIN_OBJECT_SHARE */
    float iou[WORLD_SHAPE_COUNT][2];  /* [shape][outlined] */
    world_shape shape;                /* the best match ... */
    bool outlined;                    /* ... and whether it is the outline */
    float best_iou;
    float cx, cy, radius; /* where the best match was drawn, pixels */
} shape_match;

/* Reads an RGB image of size x size pixels (rows top to bottom). false when size < 16 or memory
 * ran out (m is then all zero); free with shape_match_free. */
bool shape_match_read(shape_match *m, const uint8_t *rgb, int size);
void shape_match_free(shape_match *m);

/* The softmax over the IoUs (the concept score's temperature): the probability of (shape,
 * outlined); 0 when no object was found. */
float shape_match_probability(const shape_match *m, world_shape shape, bool outlined);

#endif
