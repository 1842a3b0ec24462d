/* sample_augment.h - the per-sample random choices of the data options flip and caption_dropout.
 *
 * Each is a pure function of (seed, draw), where draw numbers the sample's use in the run
 * (micro-batch * batch size + position, as the noise and the timestep are drawn), so a resumed
 * run makes the same choices an uninterrupted one would, and turning one option on changes no
 * other draw (each has its own stream of train/rng.h). */
#ifndef SDT_TRAIN_SAMPLE_AUGMENT_H
#define SDT_TRAIN_SAMPLE_AUGMENT_H

#include <stdbool.h>
#include <stdint.h>

/* Mirror this use of the image left-right? Probability 1/2. */
bool sdt_augment_flip(uint64_t seed, uint64_t draw);
/* Train this use on the empty prompt? Probability p (0: never, 1: always). */
bool sdt_augment_caption_dropped(uint64_t seed, uint64_t draw, double p);

#endif
