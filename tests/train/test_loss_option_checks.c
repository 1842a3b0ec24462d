/* test_loss_option_checks - the 1.5 options' validation (one sentence naming the field and the
 * fix, for every method through sdt_train_options_check), their defaults (every one off: A1111's
 * training), and a 1.4 host's smaller struct reading as the defaults whatever lies past it. */
#include <stddef.h>
#include <string.h>

#include "sdt_test.h"
#include "train/train_options.h"

static sdt_train_options defaults(void)
{
    sdt_train_options o;
    sdt_train_options_set_defaults(&o, "textual_inversion");
    return o;
}

/* o is refused with a sentence holding every one of the texts. */
static void expect_refused(const sdt_train_options *o, const char *what, const char *t1, const char *t2)
{
    sdt_error e;
    sdt_error_clear(&e);
    bool ok = sdt_train_options_check(o, "config.train_options->", &e);
    CHECK(!ok && e.code == SDT_ERR_VALIDATION, "%s: not refused", what);
    CHECK(strstr(e.message, t1) != NULL && (!t2 || strstr(e.message, t2) != NULL),
          "%s: the sentence lacks '%s'/'%s': %s", what, t1, t2 ? t2 : "", e.message);
}

int main(void)
{
    sdt_train_options o = defaults();
    CHECK(o.loss_type == SDT_LOSS_L2 && o.huber_delta == 1.0 && o.min_snr_gamma == 0.0 && o.noise_offset == 0.0 &&
              !o.noise_offset_random_strength && o.timestep_min == 0 && o.timestep_max == 999 && !o.zero_terminal_snr &&
              o.lr_scheduler == SDT_LR_SCHEDULER_CONSTANT && o.lr_cycles == 1 && o.warmup_steps == 0,
          "the 1.5 defaults are A1111's training");
    sdt_error e;
    CHECK(sdt_train_options_check(&o, "config.", &e), "the defaults pass: %s", e.message);
    o.loss_type = SDT_LOSS_HUBER, o.huber_delta = 0.25, o.min_snr_gamma = 5, o.noise_offset = 1,
    o.noise_offset_random_strength = true;
    o.timestep_min = o.timestep_max = 999, o.zero_terminal_snr = true,
    o.lr_scheduler = SDT_LR_SCHEDULER_COSINE_WITH_RESTARTS;
    o.lr_cycles = 3, o.warmup_steps = 10;
    CHECK(sdt_train_options_check(&o, "config.", &e), "every option on, in range, passes: %s", e.message);

    o = defaults(), o.loss_type = 3;
    expect_refused(&o, "loss_type 3", "config.train_options->loss_type is 3", "huber");
    o = defaults(), o.cuda_graph = SDT_CUDA_GRAPH_OFF + 1; /* 1.11's enum, checked with the others */
    expect_refused(&o, "cuda_graph 3", "config.train_options->cuda_graph is 3", "2 (off)");
    o = defaults();
    CHECK(o.cuda_graph == SDT_CUDA_GRAPH_AUTO, "cuda_graph defaults to AUTO");
    o.cuda_graph = SDT_CUDA_GRAPH_ON;
    CHECK(sdt_train_options_check(&o, "config.", &e), "cuda_graph on passes: %s", e.message);
    o = defaults(), o.huber_delta = 0;
    expect_refused(&o, "huber_delta 0", "huber_delta must be a positive finite number", NULL);
    o = defaults(), o.huber_delta = 1e-60; /* 0 as the float the loss computes in */
    expect_refused(&o, "huber_delta 1e-60", "huber_delta must be a positive finite number", NULL);
    /* values that only scale the gradient until every gradient underflows to 0 (issue 29) */
    o = defaults(), o.huber_delta = 1e-45;
    expect_refused(&o, "huber_delta 1e-45", "huber_delta is 1e-45, below 0.0001", "every gradient would vanish");
    o = defaults(), o.min_snr_gamma = 5e-324;
    expect_refused(&o, "min_snr_gamma 5e-324", "min_snr_gamma is 4.94066e-324, below 0.0001",
                   "every gradient would vanish");
    o = defaults(), o.min_snr_gamma = 1e-5;
    expect_refused(&o, "min_snr_gamma 1e-5", "min_snr_gamma is 1e-05", "use 0 (off)");
    o = defaults(), o.loss_type = SDT_LOSS_HUBER, o.huber_delta = 1e-4, o.min_snr_gamma = 1e-4;
    CHECK(sdt_train_options_check(&o, "config.", &e), "the smallest delta and gamma pass: %s", e.message);
    o = defaults(), o.huber_delta = NAN;
    expect_refused(&o, "huber_delta NaN", "huber_delta", NULL);
    o = defaults(), o.min_snr_gamma = -1;
    expect_refused(&o, "min_snr_gamma -1", "min_snr_gamma must be 0 (off)", NULL);
    o = defaults(), o.min_snr_gamma = INFINITY;
    expect_refused(&o, "min_snr_gamma inf", "min_snr_gamma", NULL);
    o = defaults(), o.noise_offset = 1.5;
    expect_refused(&o, "noise_offset 1.5", "noise_offset must be between 0 (off) and 1", NULL);
    o = defaults(), o.noise_offset_random_strength = true;
    expect_refused(&o, "random strength without an offset", "noise_offset_random_strength", "set noise_offset too");
    o = defaults(), o.timestep_max = 1000;
    expect_refused(&o, "timestep_max 1000", "timestep_max is 1000", "at most 999");
    o = defaults(), o.timestep_min = 600, o.timestep_max = 500;
    expect_refused(&o, "timestep_min above timestep_max",
                   "timestep_min (600) is above config.train_options->timestep_max (500)", "min <= max");
    o = defaults(), o.lr_scheduler = 4;
    expect_refused(&o, "lr_scheduler 4", "lr_scheduler is 4", "cosine_with_restarts");
    o = defaults(), o.lr_cycles = 0;
    expect_refused(&o, "lr_cycles 0", "lr_cycles must be at least 1", NULL);
    o = defaults(), o.warmup_steps = -1;
    expect_refused(&o, "warmup_steps -1", "warmup_steps must be positive or 0", NULL);

    /* A 1.4 host's struct ends at save_state_every_seconds: what lies past it is not read. */
    unsigned char raw[sizeof(sdt_train_options)];
    memset(raw, 0xA5, sizeof raw);
    sdt_train_options host = defaults();
    host.struct_size = (uint32_t)(offsetof(sdt_train_options, save_state_every_seconds) + sizeof(int64_t));
    memcpy(raw, &host, host.struct_size);
    sdt_train_options own;
    CHECK(sdt_train_options_read(&own, (const sdt_train_options *)(const void *)raw, "textual_inversion",
                                 "config.train_options", &e),
          "a 1.4-sized struct reads: %s", e.message);
    sdt_train_options want = defaults();
    CHECK(memcmp((char *)&own + offsetof(sdt_train_options, loss_type),
                 (char *)&want + offsetof(sdt_train_options, loss_type),
                 sizeof own - offsetof(sdt_train_options, loss_type)) == 0,
          "a 1.4 host gets the 1.5 defaults, not the bytes past its struct_size");
    /* reserved_loss must be 0 */
    host = defaults();
    host.reserved_loss[1] = 1;
    CHECK(!sdt_train_options_read(&own, &host, "textual_inversion", "config.train_options", &e) &&
              strstr(e.message, "reserved") != NULL,
          "reserved_loss not 0 is refused: %s", e.message);
    return sdt_test_finish("loss_option_checks");
}
