/* ema.c - see ema.h. */
#include "train/ema.h"

#include <stdlib.h>
#include <string.h>

void sdt_ema_blend(float *average, const float *values, size_t n, double decay)
{
    double rest = 1.0 - decay;
    for (size_t i = 0; i < n; i++) average[i] = (float)(decay * (double)average[i] + rest * (double)values[i]);
}

bool sdt_ema_due(const sdt_ema *e, int64_t step)
{
    return e->decay > 0 && e->every > 0 && step > 0 && step % e->every == 0;
}

void sdt_ema_free(sdt_ema *e)
{
    for (int g = 0; g < e->n_groups; g++) free(e->values[g]);
    memset(e, 0, sizeof *e);
}
