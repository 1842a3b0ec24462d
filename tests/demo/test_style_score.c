/* test_style_score.c - the style score (host-sim/demo/style_score.h) separates outlined from
 * filled pictures of the demo world on fresh renders: N outlined scenes (the held-out style:
 * every colour and shape) and N filled ones (the base mix with the outline turned off) from a
 * seed no one has seen (printed). Prints the separation: each set's mean, min and max score and
 * how many are on the wrong side of the threshold. Also: a plain background scores 0. */
#include <stdio.h>
#include <stdlib.h>

#include "score_test_util.h"
#include "sdt_test.h"
#include "style_score.h"
#include "world.h"

#define SCENES 300

typedef struct summary {
    score_summary scores;
    int by_probability; /* read by the IoU match: too little inside */
} summary;

/* SCENES scenes of the style (outlined) or the filled base mix, of rings only or without them. */
static summary score_set(uint64_t seed, bool outlined, bool rings, int size)
{
    summary s = {score_summary_start(), 0};
    uint8_t *rgb = malloc((size_t)size * size * 3);
    for (uint64_t i = 0, n = 0; n < SCENES; i++) {
        world_scene scene = world_scene_make(seed, i, size, outlined ? WORLD_PICK_STYLE : WORLD_PICK_BASE);
        if (!outlined && (scene.shape == WORLD_RING) != rings) continue;
        n++;
        scene.outlined = outlined;
        world_scene_draw(&scene, rgb);
        style_reading r = style_score(rgb, size);
        score_summary_add(&s.scores, r.score, STYLE_SCORE_THRESHOLD);
        s.by_probability += r.interior_pixels < STYLE_MIN_INTERIOR_PIXELS;
    }
    free(rgb);
    score_summary_finish(&s.scores);
    return s;
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("test_style_score");
    uint64_t seed = sdt_test_next(&rng);
    const int size = 64;
    summary o = score_set(seed, true, false, size), f = score_set(seed, false, false, size);
    summary rings = score_set(seed, false, true, size);
    const score_summary *outlined = &o.scores, *filled = &f.scores;
    printf("outlined renders: mean %.3f min %.3f max %.3f, %d/%d above %.2f (%d read by the IoU match)\n",
           outlined->mean, outlined->min, outlined->max, outlined->above, SCENES, STYLE_SCORE_THRESHOLD,
           o.by_probability);
    printf("filled renders:   mean %.3f min %.3f max %.3f, %d/%d above %.2f (%d read by the IoU match)\n", filled->mean,
           filled->min, filled->max, filled->above, SCENES, STYLE_SCORE_THRESHOLD, f.by_probability);
    printf("filled rings:     mean %.3f (not checked: an annulus is hollow)\n", rings.scores.mean);
    CHECK(outlined->above >= SCENES * 97 / 100, "only %d of %d outlined renders score above the threshold",
          outlined->above, SCENES);
    CHECK(filled->above <= SCENES * 2 / 100, "%d of %d filled renders score above the threshold", filled->above,
          SCENES);
    CHECK(outlined->mean - filled->mean >= 0.7f, "the means are only %.3f apart", outlined->mean - filled->mean);

    /* Nothing drawn: a plain gradient scores 0. */
    uint8_t *plain = plain_gradient(size);
    style_reading r = style_score(plain, size);
    CHECK(r.score == 0.0f && r.object_share < 0.005f, "a plain background scores %.3f (object share %.3f)", r.score,
          r.object_share);
    free(plain);
    return sdt_test_finish("test_style_score");
}
