/* lr_scheduler.c - see lr_scheduler.h. */
#include "train/lr_scheduler.h"

#include <math.h>

#define LR_PI 3.14159265358979323846

static double at_least_one(int64_t v)
{
    return v > 1 ? (double)v : 1.0;
}

double sdt_lr_scheduler_factor(const sdt_lr_scheduler_config *c, int64_t step)
{
    if (step < c->warmup_steps) return (double)step / at_least_one(c->warmup_steps);
    double after = (double)(step - c->warmup_steps) / at_least_one(c->total_steps - c->warmup_steps);
    switch (c->kind) {
        case SDT_LR_SCHEDULER_LINEAR:
            return fmax(0.0, (double)(c->total_steps - step) / at_least_one(c->total_steps - c->warmup_steps));
        case SDT_LR_SCHEDULER_COSINE:
            return fmax(0.0, 0.5 * (1.0 + cos(LR_PI * after)));
        case SDT_LR_SCHEDULER_COSINE_WITH_RESTARTS: {
            if (after >= 1.0) return 0.0;
            double cycles = c->cycles ? (double)c->cycles : 1.0;
            return fmax(0.0, 0.5 * (1.0 + cos(LR_PI * fmod(cycles * after, 1.0))));
        }
        default:
            return 1.0;
    }
}

const char *sdt_lr_scheduler_name(sdt_lr_scheduler kind)
{
    switch (kind) {
        case SDT_LR_SCHEDULER_LINEAR:
            return "linear";
        case SDT_LR_SCHEDULER_COSINE:
            return "cosine";
        case SDT_LR_SCHEDULER_COSINE_WITH_RESTARTS:
            return "cosine_with_restarts";
        default:
            return "constant";
    }
}
