/* concept_score.h - how much an image shows the demo world's held-out concept
 * (a filled yellow star, world.h), measured against the world's own renderer.
 *
 * The object is found and matched against every world shape, filled and outlined, as
 * shape_match.h does it. Colour: the share of object pixels whose nearest world colour
 * is the concept's. Shape: a softmax over the shape IoUs gives the probability that
 * the shape is the filled star. The score is the
 * product, 0..1: a rendered concept scores about 0.9, anything else of the world
 * near 0 (tests/demo/test_concept_score.c measures the separation on held-out
 * renders). Pure C, so CI and the demo score generated images the same way.
 */
#ifndef SDT_DEMO_CONCEPT_SCORE_H
#define SDT_DEMO_CONCEPT_SCORE_H

#include <stdbool.h>
#include <stdint.h>

#include "world.h"

typedef struct concept_reading {
    float score;                /* colour_share * star_probability, 0..1 */
    float colour_share;         /* share of object pixels nearest to the concept's colour */
    float star_probability;     /* softmax over the shape IoUs: the filled star's share */
    float star_any_probability; /* the filled and the outlined star's share (the joint demo's concept) */
    float object_share;         /* share of the image taken by the object */
    world_colour colour;        /* the object's nearest colour (by its mean) */
    world_shape shape;          /* the best-matching shape */
    bool outlined;              /* ... drawn as an outline */
    float best_iou;
} concept_reading;

/* Reads an RGB image of size x size pixels (rows top to bottom, size >= 16). An
 * image with no object (under 0.5% of the pixels) scores 0. */
concept_reading concept_score(const uint8_t *rgb, int size);

/* The threshold above which an image counts as showing the concept. */
#define CONCEPT_SCORE_THRESHOLD 0.5f

#endif
