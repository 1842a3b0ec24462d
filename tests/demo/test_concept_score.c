/* test_concept_score.c - the concept score (host-sim/demo/concept_score.h) separates
 * the held-out concept from the rest of the world on fresh renders: N concept scenes
 * (filled yellow stars) and N other scenes (every other colour-shape pair, filled or
 * outlined, which includes yellow circles, red stars and outlined yellow stars) from a
 * seed no one has seen (printed). Prints the separation: each set's mean, min and max
 * score and the share on the wrong side of the threshold. Also: an empty background
 * scores 0, and each render is read back as its own colour and shape. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "concept_score.h"
#include "score_test_util.h"
#include "sdt_test.h"
#include "world.h"

#define SCENES 300

static score_summary score_set(uint64_t seed, world_pick pick, int size, int *right_shape, int *right_colour)
{
    score_summary s = score_summary_start();
    uint8_t *rgb = malloc((size_t)size * size * 3);
    *right_shape = *right_colour = 0;
    for (int i = 0; i < SCENES; i++) {
        world_scene scene = world_scene_make(seed, (uint64_t)i, size, pick);
        world_scene_draw(&scene, rgb);
        concept_reading r = concept_score(rgb, size);
        score_summary_add(&s, r.score, CONCEPT_SCORE_THRESHOLD);
        *right_shape += r.shape == scene.shape && r.outlined == scene.outlined;
        *right_colour += r.colour == scene.colour;
    }
    free(rgb);
    score_summary_finish(&s);
    return s;
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("test_concept_score");
    uint64_t seed = sdt_test_next(&rng);
    const int size = 64;
    int shape_c, colour_c, shape_o, colour_o;
    score_summary concept = score_set(seed, WORLD_PICK_CONCEPT, size, &shape_c, &colour_c);
    score_summary other = score_set(seed, WORLD_PICK_OTHER, size, &shape_o, &colour_o);
    printf("concept renders: mean %.3f min %.3f max %.3f, %d/%d above %.2f\n", concept.mean, concept.min, concept.max,
           concept.above, SCENES, CONCEPT_SCORE_THRESHOLD);
    printf("other renders:   mean %.3f min %.3f max %.3f, %d/%d above %.2f\n", other.mean, other.min, other.max,
           other.above, SCENES, CONCEPT_SCORE_THRESHOLD);
    printf("shape read right: %d/%d concept, %d/%d other; colour: %d/%d, %d/%d\n", shape_c, SCENES, shape_o, SCENES,
           colour_c, SCENES, colour_o, SCENES);
    CHECK(concept.above >= SCENES * 97 / 100, "only %d of %d concept renders score above the threshold", concept.above,
          SCENES);
    CHECK(other.above <= SCENES * 2 / 100, "%d of %d other renders score above the threshold", other.above, SCENES);
    CHECK(concept.mean - other.mean >= 0.6f, "the means are only %.3f apart", concept.mean - other.mean);
    CHECK(colour_c + colour_o >= 2 * SCENES * 97 / 100, "colours read right: %d of %d", colour_c + colour_o,
          2 * SCENES);
    CHECK(shape_c + shape_o >= 2 * SCENES * 85 / 100, "shapes read right: %d of %d", shape_c + shape_o, 2 * SCENES);

    /* Nothing drawn: a plain gradient scores 0. */
    uint8_t *plain = plain_gradient(size);
    concept_reading r = concept_score(plain, size);
    CHECK(r.score == 0.0f && r.object_share < 0.005f, "a plain background scores %.3f (object share %.3f)", r.score,
          r.object_share);
    free(plain);
    return sdt_test_finish("test_concept_score");
}
