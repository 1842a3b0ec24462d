/* test_ema.c - the average's update (train/ema.h) against a float64 reference: 500 steps of
 * random values at decay 0.99 and 0.9999, blended every step and every 3rd, stay within a few
 * f32 roundings of the same recurrence carried in double (the blend rounds once per step, so the
 * error does not grow with the step count), and the cadence counts 1-based steps. */
#include <math.h>
#include <stdlib.h>

#include "sdt_test.h"
#include "train/ema.h"

#define N 257
#define STEPS 500

static double uniform(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 9007199254740992.0;
}

static void check(double decay, int every)
{
    float avg[N], values[N];
    double ref[N];
    uint64_t s = 12345;
    for (int i = 0; i < N; i++) ref[i] = avg[i] = (float)(uniform(&s) * 2 - 1);
    sdt_ema e = {.decay = decay, .every = every};
    double worst = 0;
    for (int step = 1; step <= STEPS; step++) {
        for (int i = 0; i < N; i++) values[i] = (float)(sin(step * 0.01 + i) + 0.1 * (uniform(&s) - 0.5));
        if (!sdt_ema_due(&e, step)) continue;
        sdt_ema_blend(avg, values, N, decay);
        for (int i = 0; i < N; i++) {
            ref[i] = decay * ref[i] + (1 - decay) * (double)values[i];
            double err = fabs((double)avg[i] - ref[i]);
            if (err > worst) worst = err;
        }
    }
    /* each step rounds once (<= 2^-24 relative); the recurrence shrinks old errors by decay, so the
     * total stays below about 1 / (1 - decay) roundings, and far below it in practice */
    double bound = 8 * ldexp(1.0, -24) * fmin(1.0 / (1 - decay), STEPS);
    CHECK(worst <= bound, "decay %g every %d: worst error %.3g against float64 (bound %.3g)", decay, every, worst,
          bound);
}

int main(void)
{
    check(0.99, 1);
    check(0.9999, 1);
    check(0.9, 3);
    sdt_ema e = {.decay = 0.5, .every = 3};
    CHECK(!sdt_ema_due(&e, 0) && !sdt_ema_due(&e, 1) && !sdt_ema_due(&e, 2) && sdt_ema_due(&e, 3) && sdt_ema_due(&e, 6),
          "every 3 steps: 3, 6, ...");
    e.decay = 0;
    CHECK(!sdt_ema_due(&e, 3), "off: never");
    /* one exact case: 0.75 * 1 + 0.25 * 3 = 1.5 */
    float a = 1, v = 3;
    sdt_ema_blend(&a, &v, 1, 0.75);
    CHECK(a == 1.5f, "0.75 * 1 + 0.25 * 3 = %g", a);
    return sdt_test_finish("train_test_ema");
}
