/* style_score.h - how outlined a picture of the demo world is: the held-out style of world.h
 * (a shape drawn as a stroke with the background inside), the hypernetwork demo's target.
 *
 * The object is found and matched as shape_match.h does it (every world shape, filled and
 * outlined, drawn by the world's renderer into the object's box). The score is how much of the
 * best-matching shape's inside shows the background: over the pixels within its silhouette and
 * clear of its outline's strokes (drawn by the renderer at the matched place and size), one
 * minus the mean object mask. A filled shape scores about 0, an outline about 1. A ring's
 * silhouette is its circle, hole included: a thick outlined circle is a ring to the IoU match,
 * and is read as hollow; so is a filled ring, which is hollow by nature (the world draws an
 * annulus), so rings say nothing about the style and the demo's grid does not draw them.
 * Where the shape has too little inside for this (fewer than STYLE_MIN_INTERIOR_PIXELS), the
 * score is the softmax share of the outlined shapes among the IoU matches. Either is weighed by
 * how well the object matches a world shape at all (its best IoU, from 0 at STYLE_IOU_NONE to 1
 * at STYLE_IOU_FULL and above): a picture a hypernetwork has turned to noise has holes
 * everywhere but is no outline. Pure C, so CI and
 * the demo score generated images the same way (tests/demo/test_style_score.c measures the
 * separation on held-out renders). */
#ifndef SDT_DEMO_STYLE_SCORE_H
#define SDT_DEMO_STYLE_SCORE_H

#include <stdbool.h>
#include <stdint.h>

#include "world.h"

typedef struct style_reading {
    float score;                /* 0 (filled, or no world shape) .. 1 (outlined) */
    float hollowness;           /* the inside's background share (1 - mean object mask there) */
    float outlined_probability; /* softmax over the IoU matches: the outlined shapes' share */
    int interior_pixels;        /* pixels inside the matched shape, clear of its stroke */
    float best_iou;             /* how well the best shape matches the object */
    float object_share;         /* share of the image taken by the object */
    world_shape shape;          /* the best-matching shape */
} style_reading;

/* Reads an RGB image of size x size pixels (rows top to bottom, size >= 16). An image with no
 * object scores 0. */
style_reading style_score(const uint8_t *rgb, int size);

/* Above this an image counts as outlined. */
#define STYLE_SCORE_THRESHOLD 0.5f
/* A best IoU of STYLE_IOU_NONE or less is no shape, STYLE_IOU_FULL or more a whole one. The
 * world's own renders: outlines 0.45 and up, filled shapes 0.7 and up
 * (tests/demo/test_style_score.c); noise from an overtrained hypernetwork 0.1 to 0.2. */
#define STYLE_IOU_NONE 0.2f
#define STYLE_IOU_FULL 0.4f
/* Fewer inside pixels than this: the score is the outlined probability. */
#define STYLE_MIN_INTERIOR_PIXELS 6

#endif
