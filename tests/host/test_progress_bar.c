/* test_progress_bar.c - the progress line sdt-host draws: counts, bar fill, ETA from this run's
 * pace, and no overflow for any bar width. */
#include <string.h>

#include "progress_bar.h"
#include "sdt_test.h"

static int count_char(const char *s, char c)
{
    int n = 0;
    for (; *s; s++) n += *s == c;
    return n;
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("test_progress_bar");
    sdt_metrics m;
    memset(&m, 0, sizeof m);
    m.struct_size = sizeof m;
    m.max_steps = 100 + (int64_t)(sdt_test_next(&rng) % 1000);
    m.step = 1 + (int64_t)(sdt_test_next(&rng) % (uint64_t)(m.max_steps - 1));
    m.loss = 0.125;
    m.learn_rate = 0.005;
    m.images_per_second = 3.5;
    long long start = (long long)(sdt_test_next(&rng) % (uint64_t)m.step);
    double per_step = 0.5 + (double)(sdt_test_next(&rng) % 4);
    m.elapsed_seconds = per_step * (double)(m.step - start);
    char line[512];
    progress_bar_format(&m, start, 20, line, sizeof line);
    printf("%s\n", line);
    char head[64];
    snprintf(head, sizeof head, "step %lld/%lld [", (long long)m.step, (long long)m.max_steps);
    CHECK(strncmp(line, head, strlen(head)) == 0, "starts with the step count: %s", line);
    CHECK(count_char(line, '#') == (int)(20 * m.step / m.max_steps), "bar fill");
    CHECK(count_char(line, '#') + count_char(line, '.') >= 20, "bar width");
    CHECK(strstr(line, "loss 0.1250") && strstr(line, "lr 5.00e-03") && strstr(line, "3.5 img/s"), "fields: %s", line);
    long long eta = (long long)(per_step * (double)(m.max_steps - m.step) + 0.5);
    char want[32];
    if (eta >= 3600)
        snprintf(want, sizeof want, "ETA %lld:%02lld:%02lld", eta / 3600, (eta / 60) % 60, eta % 60);
    else
        snprintf(want, sizeof want, "ETA %02lld:%02lld", eta / 60, eta % 60);
    CHECK(strstr(line, want) != NULL, "%s in %s", want, line);
    m.step = start; /* nothing done yet in this run: unknown ETA */
    progress_bar_format(&m, start, 20, line, sizeof line);
    CHECK(strstr(line, "ETA --:--") != NULL, "unknown ETA: %s", line);
    m.fallback_fired = true;
    progress_bar_format(&m, start, 1000, line, 40);
    CHECK(strlen(line) == 39, "truncated to the buffer");
    return sdt_test_finish("test_progress_bar");
}
