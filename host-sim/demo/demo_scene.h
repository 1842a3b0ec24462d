/* demo_scene.h - the demo dataset's concept: an orange ring on a plain background.
 *
 * Each image shows one ring (size, thickness, position and shade vary) on a
 * vertical gradient of a named colour with a little noise. The backgrounds avoid
 * orange, so "share of orange pixels" is a measure of the concept a later test
 * can apply to previews. Everything is integer arithmetic on a seeded generator:
 * the same seed gives the same pixels on every machine.
 */
#ifndef SDT_DEMO_SCENE_H
#define SDT_DEMO_SCENE_H

#include <stdbool.h>
#include <stdint.h>

/* The concept's colour: a pixel is "orange" when R is high, G middling, B low. */
static inline bool demo_is_concept_colour(uint8_t r, uint8_t g, uint8_t b)
{
    return r >= 200 && g >= 80 && g <= 180 && b <= 70 && r >= g + 60;
}

typedef struct demo_scene {
    int size;                    /* width = height, pixels */
    const char *background_name; /* "blue", ... */
    uint8_t top[3], bottom[3];   /* background gradient ends */
    uint8_t ring[3];             /* the ring's shade of orange */
    int cx8, cy8;                /* ring centre, 1/8 pixel units */
    int outer8, inner8;          /* radii, 1/8 pixel units */
    uint64_t noise_seed;
    int noise;                   /* per-channel noise amplitude */
} demo_scene;

/* A random scene for an image of size x size pixels, drawn from *rng_state. */
demo_scene demo_scene_random(uint64_t *rng_state, int size);
/* Fills rgb (size * size * 3 bytes, rows top to bottom). */
void demo_scene_draw(const demo_scene *s, uint8_t *rgb);
/* The caption: the background and the ring's position only, never the ring,
 * so the embedding has to learn the ring itself. Free with g_free. */
char *demo_scene_caption(const demo_scene *s);

#endif
