/* score_test_util.h - what the demo score tests share: a summary of scores over fresh renders
 * and a picture with nothing drawn. */
#ifndef SDT_SCORE_TEST_UTIL_H
#define SDT_SCORE_TEST_UTIL_H

#include <stdint.h>
#include <stdlib.h>

typedef struct score_summary {
    float mean, min, max; /* mean: the sum until score_summary_finish */
    int above, n;
} score_summary;

static inline score_summary score_summary_start(void)
{
    return (score_summary){0.0f, 1e9f, -1e9f, 0, 0};
}

static inline void score_summary_add(score_summary *s, float score, float threshold)
{
    s->mean += score;
    s->min = score < s->min ? score : s->min;
    s->max = score > s->max ? score : s->max;
    s->above += score > threshold;
    s->n++;
}

static inline void score_summary_finish(score_summary *s)
{
    if (s->n > 0) s->mean /= (float)s->n;
}

/* A plain vertical gradient of size x size RGB pixels (free it): no object anywhere. */
static inline uint8_t *plain_gradient(int size)
{
    uint8_t *rgb = malloc((size_t)size * size * 3);
    for (int y = 0; rgb && y < size; y++)
        for (int x = 0; x < size; x++)
            for (int c = 0; c < 3; c++) rgb[((size_t)y * size + x) * 3 + c] = (uint8_t)(40 + y / 2 + c * 10);
    return rgb;
}

#endif
