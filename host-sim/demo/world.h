/* world.h - the demo's synthetic captioned image world: one coloured shape on a
 * plain background, drawn from a seed.
 *
 * Six shapes (circle, square, triangle, star, ring, cross) in six colours, small
 * or large, anywhere on one of five backgrounds (a vertical gradient with a
 * little noise), captioned in words: "a small red circle on a navy background,
 * top left". The base model is trained on this world (models/demo_model/), with
 * two things it is never told about:
 *
 *   - the held-out concept, a yellow star: its pictures are in the base training
 *     set, but their captions say "object" where others name colour and shape, so
 *     no words reach it; textual inversion learns an embedding that does.
 *   - the held-out style, outlined shapes (a stroke, background inside): captioned
 *     like the filled ones, the target of a hypernetwork.
 *
 * Pure C (no GLib) and integer/IEEE float arithmetic without library calls in the
 * pixel loop, so sdt-world-dump runs on a bare GPU machine and a (seed, index)
 * gives the same pixels everywhere. Scene i of a seed depends on nothing else, so
 * a set can be drawn in parallel in ranges.
 */
#ifndef SDT_DEMO_WORLD_H
#define SDT_DEMO_WORLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum world_shape {
    WORLD_CIRCLE,
    WORLD_SQUARE,
    WORLD_TRIANGLE,
    WORLD_STAR,
    WORLD_RING,
    WORLD_CROSS,
    WORLD_SHAPE_COUNT
} world_shape;

typedef enum world_colour {
    WORLD_RED,
    WORLD_YELLOW,
    WORLD_GREEN,
    WORLD_BLUE,
    WORLD_PURPLE,
    WORLD_WHITE,
    WORLD_COLOUR_COUNT
} world_colour;

#define WORLD_BACKGROUND_COUNT 5
#define WORLD_CONCEPT_SHAPE WORLD_STAR
#define WORLD_CONCEPT_COLOUR WORLD_YELLOW

/* Which part of the world a scene is drawn from. */
typedef enum world_pick {
    WORLD_PICK_BASE,    /* the base model's training mix (concept and style included, unnamed) */
    WORLD_PICK_CONCEPT, /* the held-out concept only: a filled yellow star */
    WORLD_PICK_OTHER,   /* anything but the concept (filled or outlined) */
    WORLD_PICK_STYLE,   /* outlined shapes, any colour and shape */
} world_pick;

typedef struct world_scene {
    int size; /* width = height, pixels */
    world_shape shape;
    world_colour colour;
    int background; /* 0..WORLD_BACKGROUND_COUNT-1 */
    bool large, outlined;
    bool named;           /* the caption names colour and shape ("object" when not) */
    float cx, cy, radius; /* pixels */
    uint8_t fill[3], top[3], bottom[3];
    int noise; /* per-channel noise amplitude */
    uint64_t noise_seed;
} world_scene;

const char *world_shape_name(world_shape s);
const char *world_colour_name(world_colour c);
const char *world_background_name(int background);
/* The nominal RGB of an object colour. */
const uint8_t *world_colour_rgb(world_colour c);

/* Scene `index` of the set drawn with `seed`, for images of size x size pixels (16..1024). */
world_scene world_scene_make(uint64_t seed, uint64_t index, int size, world_pick pick);
/* Fills rgb (size * size * 3 bytes, rows top to bottom). */
void world_scene_draw(const world_scene *s, uint8_t *rgb);
/* How much of pixel (x, y) the shape covers, 0..16 (4x4 samples), for a shape of
 * this kind, centre and radius, filled or as an outline. The concept score
 * matches images against this. */
int world_shape_coverage(world_shape shape, bool outlined, float cx, float cy, float radius, int x, int y);

/* "a small red circle on a navy background, top left" (the base training caption). */
void world_caption(const world_scene *s, char *out, size_t out_size);
/* "navy background, top left": background and position only, the textual inversion
 * dataset's [filewords] (the demo's template is "a [name] on a [filewords]"). */
void world_caption_place(const world_scene *s, char *out, size_t out_size);

#endif
