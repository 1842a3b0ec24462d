/* style_score.h - how outlined a picture of the demo world is: the held-out style of world.h
 * (a shape drawn as a stroke with the background inside), the hypernetwork demo's target.
 *
 * The object is found and matched as shape_match.h does it (every world shape, filled and
 * outlined, drawn by the world's renderer into the object's box). The score is how much of the
 * best-matching shape's inside shows the background: over the pixels inside the shape and
 * clear of its outline's stroke (drawn by the renderer at the matched place and size), one
 * minus the mean object mask. A filled shape scores about 0, an outline about 1. Where the
 * shape has too little inside for that (a small ring's band is narrower than two strokes), the
 * score is the softmax share of the outlined shapes among the IoU matches. Pure C, so CI and
 * the demo score generated images the same way (tests/demo/test_style_score.c measures the
 * separation on held-out renders). */
#ifndef SDT_DEMO_STYLE_SCORE_H
#define SDT_DEMO_STYLE_SCORE_H

#include <stdbool.h>
#include <stdint.h>

#include "world.h"

typedef struct style_reading {
    float score;                /* 0 (filled) .. 1 (outlined) */
    float hollowness;           /* the inside's background share; valid when interior_pixels > 0 */
    float outlined_probability; /* softmax over the IoU matches: the outlined shapes' share */
    int interior_pixels;        /* pixels inside the matched shape, clear of its stroke */
    float object_share;         /* share of the image taken by the object */
    world_shape shape;          /* the best-matching shape */
} style_reading;

/* Reads an RGB image of size x size pixels (rows top to bottom, size >= 16). An image with no
 * object scores 0. */
style_reading style_score(const uint8_t *rgb, int size);

/* Above this an image counts as outlined. */
#define STYLE_SCORE_THRESHOLD 0.5f
/* Fewer inside pixels than this: the score is the outlined probability. */
#define STYLE_MIN_INTERIOR_PIXELS 6

#endif
