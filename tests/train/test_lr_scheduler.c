/* test_lr_scheduler - the LR schedulers of ABI 1.5 against diffusers' get_scheduler
 * (src/diffusers/optimization.py), whose lambdas are written out below as diffusers writes them
 * (Python's float division and % 1.0), independently of train/lr_scheduler.c; a few values by
 * hand; and the rate the step engine uses: the A1111 schedule string's rate times the factor. */
#include <math.h>
#include <string.h>

#include "sdt_test.h"
#include "train/lr_scheduler.h"
#include "train/step_engine.h"

/* get_constant_schedule_with_warmup's lr_lambda */
static double diffusers_constant(int64_t step, int64_t warmup, int64_t total, int cycles)
{
    (void)total, (void)cycles;
    if (step < warmup) return (double)step / fmax(1.0, (double)warmup);
    return 1.0;
}

/* get_linear_schedule_with_warmup's lr_lambda */
static double diffusers_linear(int64_t step, int64_t warmup, int64_t total, int cycles)
{
    (void)cycles;
    if (step < warmup) return (double)step / (double)(warmup > 1 ? warmup : 1);
    return fmax(0.0, (double)(total - step) / (double)(total - warmup > 1 ? total - warmup : 1));
}

/* get_cosine_schedule_with_warmup's lr_lambda, num_cycles = 0.5 */
static double diffusers_cosine(int64_t step, int64_t warmup, int64_t total, int cycles)
{
    (void)cycles;
    if (step < warmup) return (double)step / (double)(warmup > 1 ? warmup : 1);
    double progress = (double)(step - warmup) / (double)(total - warmup > 1 ? total - warmup : 1);
    return fmax(0.0, 0.5 * (1.0 + cos(3.14159265358979323846 * 0.5 * 2.0 * progress)));
}

/* get_cosine_with_hard_restarts_schedule_with_warmup's lr_lambda */
static double diffusers_hard_restarts(int64_t step, int64_t warmup, int64_t total, int cycles)
{
    if (step < warmup) return (double)step / (double)(warmup > 1 ? warmup : 1);
    double progress = (double)(step - warmup) / (double)(total - warmup > 1 ? total - warmup : 1);
    if (progress >= 1.0) return 0.0;
    double x = (double)cycles * progress;
    return fmax(0.0, 0.5 * (1.0 + cos(3.14159265358979323846 * (x - floor(x))))); /* Python's % 1.0 */
}

typedef double (*reference_fn)(int64_t, int64_t, int64_t, int);

static void test_against_diffusers(void)
{
    const reference_fn refs[4] = {diffusers_constant, diffusers_linear, diffusers_cosine, diffusers_hard_restarts};
    const sdt_lr_scheduler kinds[4] = {SDT_LR_SCHEDULER_CONSTANT, SDT_LR_SCHEDULER_LINEAR, SDT_LR_SCHEDULER_COSINE,
                                       SDT_LR_SCHEDULER_COSINE_WITH_RESTARTS};
    const int64_t warmups[] = {0, 1, 7, 100};
    const int64_t totals[] = {1, 50, 333, 1000};
    const int cycles[] = {1, 3};
    for (int k = 0; k < 4; k++)
        for (size_t w = 0; w < 4; w++)
            for (size_t t = 0; t < 4; t++)
                for (int c = 0; c < 2; c++) {
                    sdt_lr_scheduler_config cfg = {kinds[k], warmups[w], totals[t], (uint32_t)cycles[c]};
                    for (int64_t s = 0; s <= totals[t] + 3; s++) {
                        double got = sdt_lr_scheduler_factor(&cfg, s),
                               want = refs[k](s, warmups[w], totals[t], cycles[c]);
                        CHECK(fabs(got - want) < 1e-12,
                              "%s (warmup %lld, max steps %lld, cycles %d) at step %lld: %.15g, "
                              "diffusers %.15g",
                              sdt_lr_scheduler_name(kinds[k]), (long long)warmups[w], (long long)totals[t], cycles[c],
                              (long long)s, got, want);
                    }
                }
}

static void test_by_hand(void)
{
    sdt_lr_scheduler_config linear = {SDT_LR_SCHEDULER_LINEAR, 10, 110, 1};
    CHECK(sdt_lr_scheduler_factor(&linear, 0) == 0.0, "warmup starts at 0");
    CHECK(sdt_lr_scheduler_factor(&linear, 5) == 0.5, "half way through warmup: 0.5");
    CHECK(sdt_lr_scheduler_factor(&linear, 10) == 1.0, "warmup ends at 1");
    CHECK(sdt_lr_scheduler_factor(&linear, 60) == 0.5, "linear: half way to max steps, 0.5");
    CHECK(sdt_lr_scheduler_factor(&linear, 110) == 0.0, "linear: 0 at max steps");
    sdt_lr_scheduler_config cosine = {SDT_LR_SCHEDULER_COSINE, 0, 100, 1};
    CHECK(fabs(sdt_lr_scheduler_factor(&cosine, 50) - 0.5) < 1e-15, "cosine: 0.5 half way");
    CHECK(fabs(sdt_lr_scheduler_factor(&cosine, 25) - (0.5 + 0.5 * sqrt(0.5))) < 1e-15, "cosine at a quarter");
    sdt_lr_scheduler_config restarts = {SDT_LR_SCHEDULER_COSINE_WITH_RESTARTS, 0, 100, 2};
    CHECK(sdt_lr_scheduler_factor(&restarts, 50) == 1.0, "2 restarts: back to 1 half way");
    CHECK(fabs(sdt_lr_scheduler_factor(&restarts, 25) - 0.5) < 1e-15, "2 restarts: 0.5 a quarter of the way");
    CHECK(sdt_lr_scheduler_factor(&restarts, 100) == 0.0, "restarts: 0 at max steps");
    sdt_lr_scheduler_config none;
    memset(&none, 0, sizeof none);
    for (int64_t s = 0; s < 10; s++) CHECK(sdt_lr_scheduler_factor(&none, s) == 1.0, "zeroed config: factor 1");
}

/* The engine's rate: the schedule string's rate (A1111's base) times the factor; ended: negative. */
static void test_engine_rate(void)
{
    sdt_step_engine e;
    memset(&e, 0, sizeof e);
    sdt_param_group g;
    memset(&g, 0, sizeof g);
    sdt_error error;
    CHECK(sdt_lr_schedule_parse("0.01:40, 0.001", "config.learn_rate", 0, 100, &g.lr, &error), "parse: %s",
          error.message);
    for (int64_t s = 0; s < 100; s++)
        CHECK(sdt_step_engine_rate(&e, &g, s) == (s < 40 ? 0.01 : 0.001),
              "constant without warmup: the string's rate exactly");
    e.lr_scheduler = (sdt_lr_scheduler_config){SDT_LR_SCHEDULER_COSINE, 10, 100, 1};
    for (int64_t s = 0; s < 100; s++) {
        double want = (s < 40 ? 0.01 : 0.001) * diffusers_cosine(s, 10, 100, 1);
        CHECK(fabs(sdt_step_engine_rate(&e, &g, s) - want) < 1e-15, "cosine x string at step %lld", (long long)s);
    }
    CHECK(sdt_step_engine_rate(&e, &g, 100) < 0, "past the schedule's end the rate is negative (the group rests)");
    sdt_lr_schedule_free(&g.lr);
}

int main(void)
{
    test_against_diffusers();
    test_by_hand();
    test_engine_rate();
    return sdt_test_finish("lr_scheduler");
}
