/* test_lr_schedule.c - A1111 LR schedule grammar: values at boundaries, resume, errors, backoff, random input. */
#include <math.h>
#include <string.h>

#include "data/lr_schedule.h"
#include "sdt_test.h"

static sdt_lr_schedule parse_ok(const char *text, int64_t cur, int64_t max)
{
    sdt_lr_schedule s;
    sdt_error error = {0};
    bool ok = sdt_lr_schedule_parse(text, NULL, cur, max, &s, &error);
    CHECK(ok, "\"%s\" (cur %lld, max %lld) should parse: %s", text, (long long)cur, (long long)max, error.message);
    return s;
}

static void expect_error(const char *text, const char *must_mention)
{
    sdt_lr_schedule s;
    sdt_error error = {0};
    bool ok = sdt_lr_schedule_parse(text, NULL, 0, 1000, &s, &error);
    CHECK(!ok, "\"%s\" should be refused", text);
    CHECK(!ok || s.n_segments == 0, "a refused schedule holds no segments");
    CHECK(strlen(error.message) > 20, "\"%s\": the error explains itself (got \"%s\")", text, error.message);
    CHECK(strstr(error.message, must_mention) != NULL, "\"%s\": the error names \"%s\" (got \"%s\")", text,
          must_mention, error.message);
    sdt_lr_schedule_free(&s);
}

static void test_example_from_a1111(void)
{
    /* 0.005 for steps 0-99, 1e-3 for 100-999, 1e-5 from 1000 to max */
    sdt_lr_schedule s = parse_ok("0.005:100, 1e-3:1000, 1e-5", 0, 5000);
    CHECK(s.n_segments == 3, "three segments, got %d", s.n_segments);
    CHECK(sdt_lr_at(&s, 0) == 0.005, "step 0");
    CHECK(sdt_lr_at(&s, 99) == 0.005, "step 99 still 0.005");
    CHECK(sdt_lr_at(&s, 100) == 1e-3, "step 100 moves to 1e-3");
    CHECK(sdt_lr_at(&s, 999) == 1e-3, "step 999");
    CHECK(sdt_lr_at(&s, 1000) == 1e-5, "step 1000 moves to 1e-5");
    CHECK(sdt_lr_at(&s, 4999) == 1e-5, "step 4999");
    CHECK(sdt_lr_finished(&s, 5000) && sdt_lr_at(&s, 5000) < 0, "finished at max steps");
    CHECK(sdt_lr_end_step(&s) == 5000, "ends at max steps");
    CHECK(sdt_lr_segment_index(&s, 150) == 1, "segment index");
    sdt_lr_schedule_free(&s);
}

static void test_grammar_details(void)
{
    sdt_lr_schedule s = parse_ok("  0.5  ", 0, 10); /* spaces around a bare rate */
    CHECK(s.n_segments == 1 && sdt_lr_at(&s, 9) == 0.5 && sdt_lr_end_step(&s) == 10, "bare rate runs to max");
    sdt_lr_schedule_free(&s);

    s = parse_ok("0.01:500", 0, 1000); /* explicit last step ends training early */
    CHECK(sdt_lr_end_step(&s) == 500 && sdt_lr_finished(&s, 500) && !sdt_lr_finished(&s, 499), "ends at 500");
    sdt_lr_schedule_free(&s);

    s = parse_ok("0.01:100, 0.001:-1", 0, 1000); /* -1 = max steps */
    CHECK(s.n_segments == 2 && sdt_lr_end_step(&s) == 1000 && sdt_lr_at(&s, 500) == 0.001, "-1 runs to max");
    sdt_lr_schedule_free(&s);

    s = parse_ok("0.01:100, 0.002:2000, 0.1:3000", 0, 1000); /* a step past max clamps and ends */
    CHECK(s.n_segments == 2 && s.segments[1].end_step == 1000, "clamped to max steps");
    sdt_lr_schedule_free(&s);

    s = parse_ok("0.01:1000, 0.002:2000, 0.1", 0, 1000); /* a step exactly at max ends the run there */
    CHECK(s.n_segments == 1 && sdt_lr_end_step(&s) == 1000, "no empty segment after max, got %d", s.n_segments);
    sdt_lr_schedule_free(&s);

    s = parse_ok(",, 0.01:10 ,, 0.02 ,", 0, 100); /* blank entries skipped */
    CHECK(s.n_segments == 2 && sdt_lr_at(&s, 10) == 0.02, "blank entries skipped");
    sdt_lr_schedule_free(&s);

    s = parse_ok("+1E-3 : +20, 2.5e+1", 0, 100); /* signs, exponent, spaces around ':' */
    CHECK(sdt_lr_at(&s, 19) == 1e-3 && sdt_lr_at(&s, 20) == 25.0, "signs and exponents");
    sdt_lr_schedule_free(&s);

    s = parse_ok("0", 0, 100); /* A1111 accepts the string "0" */
    CHECK(sdt_lr_at(&s, 0) == 0.0, "zero rate allowed");
    sdt_lr_schedule_free(&s);
}

static void test_resume(void)
{
    /* A run resumed at step k sees exactly the rates a fresh run had from k on. */
    const char *text = "0.005:100, 1e-3:1000, 1e-5";
    sdt_lr_schedule fresh = parse_ok(text, 0, 3000);
    int64_t resume_points[] = {1, 99, 100, 101, 999, 1000, 2999};
    for (size_t i = 0; i < sizeof(resume_points) / sizeof(resume_points[0]); i++) {
        int64_t k = resume_points[i];
        sdt_lr_schedule r = parse_ok(text, k, 3000);
        for (int64_t step = k; step <= 3000; step++)
            if (sdt_lr_at(&r, step) != sdt_lr_at(&fresh, step)) {
                CHECK(0, "resume at %lld: step %lld differs", (long long)k, (long long)step);
                break;
            }
        CHECK(r.start_step == k, "start step recorded");
        sdt_lr_schedule_free(&r);
    }
    sdt_lr_schedule_free(&fresh);

    sdt_lr_schedule s;
    sdt_error error = {0};
    CHECK(!sdt_lr_schedule_parse("0.01:100", NULL, 100, 1000, &s, &error) &&
              strstr(error.message, "already at step 100"),
          "a schedule that already ended is explained: %s", error.message);
    CHECK(!sdt_lr_schedule_parse("0.01", NULL, 1000, 1000, &s, &error) && strstr(error.message, "Max steps"),
          "step >= max steps is explained: %s", error.message);
    /* The caller names the field: a clip value's bad entry is not called a learning rate schedule. */
    CHECK(!sdt_lr_schedule_parse("0.1:x", "config.clip_value", 0, 1000, &s, &error) &&
              strncmp(error.message, "config.clip_value: ", 19) == 0 &&
              !strstr(error.message, "learning rate schedule"),
          "a bad entry under the caller's field name: %s", error.message);
    CHECK(!sdt_lr_schedule_parse(" , ", "config.embedding_learn_rate", 0, 1000, &s, &error) &&
              strncmp(error.message, "config.embedding_learn_rate is empty", 36) == 0,
          "an empty schedule under the caller's field name: %s", error.message);
    CHECK(!sdt_lr_schedule_parse("0.01:100", "config.learn_rate", 100, 1000, &s, &error) &&
              strstr(error.message, "config.learn_rate \"0.01:100\" ends at step 100"),
          "an ended schedule under the caller's field name: %s", error.message);
}

static void test_errors(void)
{
    expect_error("", "empty");
    expect_error(" , ,", "empty");
    expect_error("abc", "\"abc\"");
    expect_error("0.005:1e3", "0.005:1e3");
    expect_error("0.005:100.0", "whole number");
    expect_error("0.005:100:200", "more than one ':'");
    expect_error("0.01:100, 0.001:50", "steps must increase");
    expect_error("0.01:0", "positive");
    expect_error("0.01:-5", "positive");
    expect_error("-0.01", "finite number >= 0");
    expect_error("nan", "\"nan\"");
    expect_error("inf:100", "\"inf\"");
    expect_error("0x10", "\"0x10\"");
    expect_error("0.01, 0.001:100", "already runs to Max steps");
    expect_error("0.01:100, 0.001:-1, 5:7", "already runs to Max steps");
    expect_error("0.01:100, 1e-3:1000, oops", "\"oops\"");
    expect_error("0.01:99999999999999999999999", "whole number");
}

static void test_multiplier(sdt_test_rng *rng)
{
    sdt_lr_schedule s = parse_ok("0.004:100, 0.002:200, 0.001", 0, 300);
    sdt_error error = {0};
    int64_t from = 50 + (int64_t)(sdt_test_uniform(rng) * 200); /* random step inside a segment */
    CHECK(sdt_lr_apply_multiplier(&s, from, 0.5, &error), "backoff: %s", error.message);
    for (int64_t step = 0; step < 300; step++) {
        double base = step < 100 ? 0.004 : step < 200 ? 0.002 : 0.001;
        double want = step >= from ? base * 0.5 : base;
        if (sdt_lr_at(&s, step) != want) {
            CHECK(0, "backoff from %lld: step %lld has %g, want %g", (long long)from, (long long)step,
                  sdt_lr_at(&s, step), want);
            break;
        }
    }
    CHECK(sdt_lr_end_step(&s) == 300, "backoff keeps the end");
    /* The formatted schedule re-parses to the same rates (checkpoint round trip), also on resume. */
    char text[1024];
    CHECK(sdt_lr_schedule_format(&s, text, sizeof(text)), "format fits");
    sdt_lr_schedule again = parse_ok(text, 0, 300), resumed = parse_ok(text, from, 300);
    for (int64_t step = 0; step < 300; step++) {
        CHECK(sdt_lr_at(&again, step) == sdt_lr_at(&s, step), "formatted \"%s\" differs at %lld", text,
              (long long)step);
        if (step >= from)
            CHECK(sdt_lr_at(&resumed, step) == sdt_lr_at(&s, step), "resumed formatted differs at %lld",
                  (long long)step);
    }
    CHECK(!sdt_lr_apply_multiplier(&s, 10, 0.0, &error), "factor 0 refused");
    CHECK(!sdt_lr_apply_multiplier(&s, 10, NAN, &error), "NaN factor refused");
    sdt_lr_schedule_free(&again);
    sdt_lr_schedule_free(&resumed);
    sdt_lr_schedule_free(&s);
}

static void test_random_input(sdt_test_rng *rng)
{
    /* Random strings from the grammar's alphabet and random bytes: never a crash,
     * and every accepted schedule is well formed. */
    const char alphabet[] = "0123456789.:,-+eE  \t";
    for (int iter = 0; iter < 20000; iter++) {
        char text[48];
        int n = (int)(sdt_test_uniform(rng) * 47);
        bool bytes = iter % 4 == 0;
        for (int i = 0; i < n; i++)
            text[i] =
                bytes ? (char)(1 + sdt_test_next(rng) % 255) : alphabet[sdt_test_next(rng) % (sizeof(alphabet) - 1)];
        text[n] = 0;
        sdt_lr_schedule s;
        sdt_error error = {0};
        int64_t cur = (int64_t)(sdt_test_next(rng) % 50), max = cur + 1 + (int64_t)(sdt_test_next(rng) % 2000);
        if (sdt_lr_schedule_parse(text, NULL, cur, max, &s, &error)) {
            bool sane = s.n_segments > 0;
            for (int i = 0; i < s.n_segments; i++)
                sane = sane && s.segments[i].end_step > (i ? s.segments[i - 1].end_step : cur) &&
                       s.segments[i].end_step <= max && s.segments[i].rate >= 0 && isfinite(s.segments[i].rate);
            CHECK(sane, "accepted \"%s\" but the segments are not increasing within (cur, max]", text);
            sdt_lr_schedule_free(&s);
        } else {
            CHECK(error.message[0] != 0, "refused \"%s\" without a message", text);
        }
    }
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("lr_schedule");
    test_example_from_a1111();
    test_grammar_details();
    test_resume();
    test_errors();
    test_multiplier(&rng);
    test_random_input(&rng);
    return sdt_test_finish("lr_schedule");
}
