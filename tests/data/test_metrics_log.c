/* test_metrics_log.c - metrics.jsonl and loss.png (data/metrics_log.h, data/loss_plot.h):
 * appended lines are JSON objects with the step's values (validation_loss only when measured,
 * null for a non-finite value, learn_rates by group when several train); reopening at an earlier
 * step (a resume) drops the later lines and a cut-off last line, keeps the rest as the history,
 * and appending continues without a repeated step; a line that is not a metrics object is refused
 * with a sentence naming it. The plot renders at its size with the three series' colours present. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/metrics_log.h"
#include "sdt_test.h"

static sdt_metrics_record record(int64_t step, double loss, double val)
{
    sdt_metrics_record r = {.step = step,
                            .epoch = 0,
                            .loss = loss,
                            .validation_loss = val,
                            .learn_rate = 0.005,
                            .grad_norm = 0.5,
                            .loss_scale = 1,
                            .images_per_s = 2,
                            .skipped_total = 0,
                            .precision = "fp32"};
    return r;
}

static int count_lines(const char *path, int64_t *steps, int max)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int n = 0;
    while (f && fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        CHECK(j != NULL, "line %d is JSON: %s", n + 1, line);
        if (j && n < max) steps[n] = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(j, "step"));
        cJSON_Delete(j);
        n++;
    }
    if (f) fclose(f);
    return n;
}

static bool has_colour(const uint8_t *rgb, int n, int r, int g, int b)
{
    for (int i = 0; i < n; i++)
        if (rgb[3 * i] == r && rgb[3 * i + 1] == g && rgb[3 * i + 2] == b) return true;
    return false;
}

int main(void)
{
    char dir[] = "/tmp/sdt-metrics-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    sdt_metrics_log log;
    sdt_error e;
    sdt_error_clear(&e);
    CHECK(sdt_metrics_log_open(&log, dir, 0, NULL, &e) && log.n == 0, "a new file: empty history (%s)", e.message);
    for (int s = 1; s <= 6; s++) {
        sdt_metrics_record r = record(s, 0.1 / s, s % 2 == 0 ? 0.2 / s : NAN);
        if (s == 3) r.grad_norm = INFINITY;
        if (s == 4) {
            r.n_groups = 2;
            r.group_names[0] = "hypernetwork", r.group_rates[0] = 1e-5;
            r.group_names[1] = "embedding", r.group_rates[1] = 0.005;
        }
        CHECK(sdt_metrics_log_append(&log, &r, &e), "append step %d: %s", s, e.message);
    }
    CHECK(log.n == 6 && log.n_val == 3 && log.val_steps[0] == 2, "history: %d losses, %d validation losses", log.n,
          log.n_val);
    char text[8192];
    FILE *f = fopen(log.path, "r");
    size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[got] = 0;
    CHECK(strstr(text, "{\"step\":1,\"epoch\":0,\"loss\":0.1,\"learn_rate\":0.005,") == text, "the first line: %.80s",
          text);
    CHECK(strstr(text, "\"step\":2,\"epoch\":0,\"loss\":0.05,\"validation_loss\":0.1,") != NULL,
          "step 2 has its validation loss");
    CHECK(strstr(text, "\"grad_norm\":null") != NULL, "a non-finite value is null");
    CHECK(strstr(text, "\"learn_rates\":{\"hypernetwork\":1e-05,\"embedding\":0.005}") != NULL, "learn_rates by group");
    sdt_metrics_log_free(&log);

    /* a cut-off line (a crash mid-write) and a resume from step 4 */
    char path[4096];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    f = fopen(path, "a");
    if (f) {
        fputs("{\"step\":7,\"lo", f);
        fclose(f);
    }
    int dropped = -1;
    CHECK(sdt_metrics_log_open(&log, dir, 4, &dropped, &e), "reopen at step 4: %s", e.message);
    CHECK(dropped == 3, "steps 5, 6 and the cut-off line dropped (%d)", dropped);
    CHECK(log.n == 4 && log.n_val == 2, "history after the resume: %d losses, %d validation losses", log.n, log.n_val);
    for (int s = 5; s <= 8; s++) {
        sdt_metrics_record r = record(s, 0.1 / s, NAN);
        CHECK(sdt_metrics_log_append(&log, &r, &e), "append step %d: %s", s, e.message);
    }
    int64_t steps[32];
    int n = count_lines(path, steps, 32);
    CHECK(n == 8, "8 lines after the resume, not %d", n);
    for (int i = 0; i < n && i < 32; i++) CHECK(steps[i] == i + 1, "line %d is step %lld", i + 1, (long long)steps[i]);

    /* the plot */
    sdt_loss_plot plot = sdt_metrics_log_plot(&log, "test (embedding)");
    uint8_t *rgb = sdt_loss_plot_render(&plot);
    CHECK(rgb != NULL, "rendered");
    if (rgb) {
        int px = SDT_LOSS_PLOT_WIDTH * SDT_LOSS_PLOT_HEIGHT;
        CHECK(has_colour(rgb, px, 20, 70, 170) && has_colour(rgb, px, 230, 110, 0) &&
                  has_colour(rgb, px, 160, 190, 230),
              "the mean, validation and training colours are drawn");
        free(rgb);
    }
    char png[4096];
    snprintf(png, sizeof png, "%s/loss.png", dir);
    CHECK(sdt_loss_plot_write(png, &plot, &e), "loss.png written: %s", e.message);
    unsigned char head[24] = {0};
    f = fopen(png, "rb");
    CHECK(f && fread(head, 1, 24, f) == 24 && memcmp(head + 1, "PNG", 3) == 0 &&
              (head[16] << 24 | head[17] << 16 | head[18] << 8 | head[19]) == SDT_LOSS_PLOT_WIDTH,
          "a PNG %d wide", SDT_LOSS_PLOT_WIDTH);
    if (f) fclose(f);
    CHECK(sdt_loss_plot_mean_window(5) == 1 && sdt_loss_plot_mean_window(500) == 50 &&
              sdt_loss_plot_mean_window(5000) == 100,
          "the mean's window");
    sdt_metrics_log_free(&log);

    /* a line that is not a metrics object */
    f = fopen(path, "w");
    if (f) {
        fputs("{\"step\":1}\nnot json\n", f);
        fclose(f);
    }
    sdt_error_clear(&e);
    CHECK(!sdt_metrics_log_open(&log, dir, 10, NULL, &e) && e.code == SDT_ERR_BAD_FORMAT && strstr(e.message, "line 2"),
          "a damaged file is refused naming the line: %s", e.message);
    unlink(path);
    unlink(png);
    rmdir(dir);
    return sdt_test_finish("data_test_metrics_log");
}
