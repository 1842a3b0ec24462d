/* ema.h - the exponential moving average of trained values (--ema DECAY, --ema-every N):
 *
 *   average <- decay * average + (1 - decay) * value      every N optimizer steps,
 *
 * started from the values a run begins with, one f32 block per parameter group on the host
 * (an embedding's vectors, a hypernetwork's weights: small next to the model). Each element is
 * blended in double and rounded once, so the average does not drift by f32 rounding over a long
 * run. The job (train_job_average.c) keeps it in the resume state, writes it beside the result
 * and can show it in previews. */
#ifndef SDT_TRAIN_EMA_H
#define SDT_TRAIN_EMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SDT_EMA_MAX_GROUPS 4

typedef struct sdt_ema {
    double decay;                         /* 0: off */
    int64_t every;                        /* update every N steps */
    int n_groups;
    float *values[SDT_EMA_MAX_GROUPS];    /* each group's average, in the group's parameter order */
    size_t count[SDT_EMA_MAX_GROUPS];
} sdt_ema;

/* average[i] = decay * average[i] + (1 - decay) * values[i], in double, rounded to f32. */
void sdt_ema_blend(float *average, const float *values, size_t n, double decay);
/* true when the step just finished (1-based count) updates the average. */
bool sdt_ema_due(const sdt_ema *e, int64_t step);
void sdt_ema_free(sdt_ema *e);

#endif
