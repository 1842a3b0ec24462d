/* test_run_loop.c - the shared training loop with a synthetic job: finishing, cadences,
 * interrupt from another thread (the current step finishes, then one save), a failing step
 * (last good state saved, the error's sentence returned), periodic save failures: a full disk
 * (IO) stops the run with its sentence and the last good state's, any other is a warning. */
#include <pthread.h>
#include <string.h>

#include "ops.h"
#include "train/run_loop.h"
#include "sdt_test.h"

typedef struct fake_job {
    int64_t step, max_steps;
    int64_t fail_at;      /* step that returns an error, 0 = never */
    int64_t interrupt_at; /* step during which another thread presses Interrupt, 0 = never */
    sdt_run_control *ctl;
    int snapshots, previews, final_saves, metrics_calls, warnings;
    sdt_save_reason last_reason;
    int64_t saved_step;
    sdt_error_code snapshot_fails; /* SDT_ERR_OK: snapshots succeed */
} fake_job;

static void *press_interrupt(void *ctl)
{
    sdt_run_control_request_interrupt(ctl);
    return NULL;
}

static bool fake_step(void *p, sdt_metrics *m, uint32_t *images, sdt_error *error)
{
    fake_job *j = p;
    if (j->fail_at && j->step + 1 == j->fail_at) {
        return sdt_fail(error, SDT_ERR_NUMERICAL, "step %lld: loss is NaN", (long long)j->fail_at);
    }
    if (j->interrupt_at && j->step + 1 == j->interrupt_at) { /* Interrupt arrives mid-step */
        pthread_t t;
        pthread_create(&t, NULL, press_interrupt, j->ctl);
        pthread_join(t, NULL);
    }
    j->step++;
    m->step = j->step;
    m->max_steps = j->max_steps;
    m->loss = 1.0 / (double)j->step;
    *images = 2;
    return true;
}

static bool fake_done(const void *p)
{
    const fake_job *j = p;
    return j->step >= j->max_steps;
}

static bool fake_snapshot(void *p, int64_t step, sdt_error *error)
{
    fake_job *j = p;
    (void)step;
    j->snapshots++;
    if (j->snapshot_fails == SDT_ERR_IO)
        return sdt_fail(error, SDT_ERR_IO, "copy.safetensors: writing failed (No space left on device)");
    if (j->snapshot_fails) return sdt_fail(error, j->snapshot_fails, "no memory for the copy");
    return true;
}

static bool fake_preview(void *p, int64_t step, sdt_error *error)
{
    (void)step;
    (void)error;
    ((fake_job *)p)->previews++;
    return true;
}

static bool fake_final(void *p, sdt_save_reason reason, sdt_error *error)
{
    (void)error;
    fake_job *j = p;
    j->final_saves++;
    j->last_reason = reason;
    j->saved_step = j->step;
    return true;
}

static const sdt_job_ops fake_ops = {fake_step, fake_done, fake_snapshot, fake_preview, fake_final, NULL, NULL, NULL};

static void on_metrics(void *user, const sdt_metrics *m)
{
    fake_job *j = user;
    j->metrics_calls++;
    CHECK(m->step == j->step && m->images_per_second >= 0, "metrics callback sees the finished step");
}

static char memory_line[512]; /* the last "GPU memory:" line logged */

static void on_log(void *user, sdt_log_level level, const char *message)
{
    if (level == SDT_LOG_WARNING) ((fake_job *)user)->warnings++;
    if (strncmp(message, "GPU memory:", 11) == 0) snprintf(memory_line, sizeof memory_line, "%s", message);
}

/* A backend that only answers memory_stats: it holds `held` bytes, its peak rises as steps run
 * (fake_step does not know it: the test moves it between begin and end), and the device has
 * 80 GiB with `device_used` in use. */
#define MIB ((size_t)1 << 20)
static size_t fake_held, fake_peak, fake_device_used;
static int fake_resets;
static bool fake_tracked = true;
static int fake_memory_stats(sdt_backend *be, sdt_memory_stats *s, bool reset_peak)
{
    (void)be;
    memset(s, 0, sizeof *s);
    s->tracked = fake_tracked;
    s->allocated_bytes = fake_held;
    s->peak_allocated_bytes = fake_peak;
    s->device_total_bytes = 80 * 1024 * MIB;
    s->device_free_bytes = s->device_total_bytes - fake_device_used;
    s->scratch_bytes = 300 * MIB;
    s->conv_workspace_bytes = 120 * MIB;
    if (reset_peak) {
        fake_peak = fake_held;
        fake_resets++;
    }
    return 0;
}

static sdt_status run_with(fake_job *j, sdt_run_control *ctl, int64_t save_every, sdt_backend *be, size_t estimate,
                           sdt_error *error)
{
    sdt_host_callbacks host = {sizeof host, j, on_log, on_metrics, NULL, NULL};
    sdt_run_params params = {
        .save_every = save_every, .preview_every = save_every * 2, .backend = be, .memory_estimate_bytes = estimate};
    j->ctl = ctl;
    sdt_run_control_set_state(ctl, SDT_RUN_PREPARED);
    CHECK(sdt_run_control_begin_run(ctl), "begin_run from PREPARED");
    CHECK(!sdt_run_control_begin_run(ctl), "a second begin_run is refused");
    return sdt_run_job(&fake_ops, j, &params, ctl, &host, error);
}

static sdt_status run(fake_job *j, sdt_run_control *ctl, int64_t save_every, sdt_error *error)
{
    return run_with(j, ctl, save_every, NULL, 0, error);
}

static void test_finishes(sdt_test_rng *rng)
{
    sdt_run_control ctl;
    sdt_run_control_init(&ctl);
    fake_job j = {0};
    j.max_steps = 5 + (int64_t)(sdt_test_next(rng) % 40);
    int64_t every = 1 + (int64_t)(sdt_test_next(rng) % 6);
    sdt_error error = {0};
    CHECK(run(&j, &ctl, every, &error) == SDT_STATUS_OK, "finishes: %s", error.message);
    CHECK(j.step == j.max_steps && j.metrics_calls == j.max_steps, "every step reported (%lld, %d)", (long long)j.step,
          j.metrics_calls);
    CHECK(j.snapshots == j.max_steps / every && j.previews == j.max_steps / (every * 2), "cadences %d %d", j.snapshots,
          j.previews);
    CHECK(j.final_saves == 1 && j.last_reason == SDT_SAVE_FINISHED, "one final save");
    CHECK(sdt_run_control_state(&ctl) == SDT_RUN_FINISHED, "state FINISHED");
    sdt_metrics m;
    sdt_run_control_latest(&ctl, &m);
    CHECK(m.step == j.max_steps && m.elapsed_seconds >= 0, "latest metrics published");
    sdt_run_control_fini(&ctl);
}

static void test_interrupt_mid_step(sdt_test_rng *rng)
{
    sdt_run_control ctl;
    sdt_run_control_init(&ctl);
    fake_job j = {0};
    j.max_steps = 1000;
    j.interrupt_at = 1 + (int64_t)(sdt_test_next(rng) % 20);
    sdt_error error = {0};
    CHECK(run(&j, &ctl, 0, &error) == SDT_STATUS_INTERRUPTED, "interrupted");
    CHECK(j.step == j.interrupt_at, "the interrupted step finished and no other began (%lld vs %lld)",
          (long long)j.step, (long long)j.interrupt_at);
    CHECK(j.final_saves == 1 && j.last_reason == SDT_SAVE_INTERRUPTED && j.saved_step == j.step, "saved on interrupt");
    CHECK(sdt_run_control_state(&ctl) == SDT_RUN_INTERRUPTED, "state INTERRUPTED");
    sdt_run_control_reset(&ctl);
    CHECK(!sdt_run_control_interrupt_requested(&ctl), "reset clears the request");
    sdt_run_control_fini(&ctl);
}

typedef struct watcher {
    sdt_run_control *ctl;
    int64_t after;
} watcher;

/* A UI thread: polls the published metrics like get_metrics() and presses Interrupt. */
static void *watch_and_interrupt(void *p)
{
    watcher *w = p;
    for (;;) {
        sdt_metrics m;
        sdt_run_control_latest(w->ctl, &m);
        if (m.step >= w->after) break;
        sched_yield();
    }
    sdt_run_control_request_interrupt(w->ctl);
    return NULL;
}

static void test_interrupt_concurrent(sdt_test_rng *rng)
{
    sdt_run_control ctl;
    sdt_run_control_init(&ctl);
    fake_job j = {0};
    j.max_steps = INT64_MAX; /* only the interrupt ends it */
    watcher w = {&ctl, 1 + (int64_t)(sdt_test_next(rng) % 50)};
    pthread_t ui;
    pthread_create(&ui, NULL, watch_and_interrupt, &w);
    sdt_error error = {0};
    sdt_status st = run(&j, &ctl, 0, &error);
    pthread_join(ui, NULL);
    CHECK(st == SDT_STATUS_INTERRUPTED && j.step >= w.after, "concurrent interrupt stops the run after step %lld",
          (long long)j.step);
    CHECK(j.final_saves == 1 && j.saved_step == j.step, "saved once, at the last finished step");
    sdt_run_control_fini(&ctl);
}

static void test_failing_step(sdt_test_rng *rng)
{
    sdt_run_control ctl;
    sdt_run_control_init(&ctl);
    fake_job j = {0};
    j.max_steps = 100;
    j.fail_at = 2 + (int64_t)(sdt_test_next(rng) % 50);
    sdt_error error = {0};
    CHECK(run(&j, &ctl, 0, &error) == SDT_STATUS_NUMERICAL, "the step's error is returned");
    CHECK(strstr(error.message, "NaN") != NULL, "with its sentence: %s", error.message);
    CHECK(j.final_saves == 1 && j.last_reason == SDT_SAVE_AFTER_ERROR && j.saved_step == j.fail_at - 1,
          "the last good state (step %lld) is saved", (long long)j.saved_step);
    CHECK(sdt_run_control_state(&ctl) == SDT_RUN_FAILED, "state FAILED");
    sdt_run_control_fini(&ctl);
}

static void test_snapshot_failure_is_not_fatal(void)
{
    sdt_run_control ctl;
    sdt_run_control_init(&ctl);
    fake_job j = {0};
    j.max_steps = 9;
    j.snapshot_fails = SDT_ERR_OUT_OF_MEMORY;
    sdt_error error = {0};
    CHECK(run(&j, &ctl, 3, &error) == SDT_STATUS_OK, "training goes on past snapshots that failed for memory");
    CHECK(j.snapshots == 3 && j.warnings == 3, "each failure is a warning (%d, %d)", j.snapshots, j.warnings);
    sdt_run_control_fini(&ctl);
}

/* Issue 20: a full disk used to be a warning per copy, and the run went on (and exited 0 when the
 * disk was freed before the end); now it stops at once, saying so and what the final save did. */
static void test_snapshot_disk_full_stops(void)
{
    sdt_run_control ctl;
    sdt_run_control_init(&ctl);
    fake_job j = {0};
    j.max_steps = 9;
    j.snapshot_fails = SDT_ERR_IO;
    sdt_error error = {0};
    sdt_status st = run(&j, &ctl, 3, &error);
    CHECK(st == SDT_STATUS_IO, "a copy the disk refused stops the run: status %d", (int)st);
    CHECK(j.step == 3 && j.snapshots == 1 && j.final_saves == 1 && j.last_reason == SDT_SAVE_AFTER_ERROR,
          "stopped at the first copy (step %lld, %d copies) and saved the last good state", (long long)j.step,
          j.snapshots);
    CHECK(strstr(error.message, "No space left on device") && strstr(error.message, "step 3") &&
              strstr(error.message, "last good state was saved"),
          "sentence: %s", error.message);
    CHECK(sdt_run_control_state(&ctl) == SDT_RUN_FAILED, "state FAILED");
    sdt_run_control_fini(&ctl);
}

static void test_interrupt_before_run(void)
{
    sdt_run_control ctl;
    sdt_run_control_init(&ctl);
    sdt_run_control_request_interrupt(&ctl);
    fake_job j = {0};
    j.max_steps = 10;
    sdt_error error = {0};
    CHECK(run(&j, &ctl, 0, &error) == SDT_STATUS_INTERRUPTED && j.step == 0 && j.final_saves == 1,
          "an interrupt before run() stops at once, after saving");
    sdt_run_control_fini(&ctl);
}

/* The run's peak-memory line: the peak since the run began (the backend's peak is reset at the
 * start), prepare's estimate and its error, the device's memory in use at both ends; none on a
 * backend that does not count, or without a backend. */
static void test_memory_line(sdt_test_rng *rng)
{
    sdt_backend be;
    memset(&be, 0, sizeof be);
    be.memory_stats = fake_memory_stats;
    size_t peak_mib = 2000 + 20 * (size_t)(sdt_test_next(rng) % 50); /* a multiple of 20: 95% of it is whole MiB */
    fake_held = 1500 * MIB;
    fake_peak = 5000 * MIB; /* prepare's own peak: the run must not report it */
    fake_device_used = 3000 * MIB;
    fake_resets = 0;
    memory_line[0] = 0;
    fake_job j = {.max_steps = 3};
    sdt_run_control ctl;
    sdt_run_control_init(&ctl);
    sdt_error error = {0};
    size_t estimate = peak_mib * MIB - peak_mib * MIB / 20; /* 5% under */
    CHECK(run_with(&j, &ctl, 0, &be, estimate, &error) == SDT_STATUS_OK, "run with a counting backend: %s",
          error.message);
    CHECK(fake_resets == 1, "the run resets the backend's peak once at its start (%d)", fake_resets);
    char want[128];
    snprintf(want, sizeof want, "GPU memory: peak %zu MiB held by sdtrain during the run", (size_t)1500);
    CHECK(strncmp(memory_line, want, strlen(want)) == 0, "the line reports the run's peak, not prepare's: \"%s\"",
          memory_line);
    CHECK(strstr(memory_line, "The device had 3000 MiB in use when the run started") != NULL,
          "device use at start: \"%s\"", memory_line);
    CHECK(strstr(memory_line, "the kernels' scratch held 300 MiB, 120 MiB of it cuDNN's convolution workspace") != NULL,
          "scratch and workspace: \"%s\"", memory_line);
    sdt_run_control_fini(&ctl);

    /* a run that holds peak_mib, with an estimate 5% under it */
    memory_line[0] = 0;
    fake_job k = {.max_steps = 2};
    sdt_run_control_init(&ctl);
    fake_held = peak_mib * MIB; /* held when the run starts: the reset sets the peak to it */
    CHECK(run_with(&k, &ctl, 0, &be, estimate, &error) == SDT_STATUS_OK, "second run: %s", error.message);
    snprintf(want, sizeof want,
             "GPU memory: peak %zu MiB held by sdtrain during the run; prepare estimated %zu MiB (-5.0%%).", peak_mib,
             estimate / MIB);
    CHECK(strncmp(memory_line, want, strlen(want)) == 0, "peak and estimate error: \"%s\", want \"%s\"", memory_line,
          want);
    sdt_run_control_fini(&ctl);

    /* no line without a counting backend */
    memory_line[0] = 0;
    fake_tracked = false;
    fake_job l = {.max_steps = 1};
    sdt_run_control_init(&ctl);
    CHECK(run_with(&l, &ctl, 0, &be, estimate, &error) == SDT_STATUS_OK && memory_line[0] == 0,
          "a backend that does not count logs no memory line: \"%s\"", memory_line);
    sdt_run_control_fini(&ctl);
    fake_tracked = true;
    fake_job m = {.max_steps = 1};
    sdt_run_control_init(&ctl);
    CHECK(run(&m, &ctl, 0, &error) == SDT_STATUS_OK && memory_line[0] == 0, "no backend, no memory line");
    sdt_run_control_fini(&ctl);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("test_run_loop");
    test_finishes(&rng);
    test_interrupt_mid_step(&rng);
    test_interrupt_concurrent(&rng);
    test_failing_step(&rng);
    test_snapshot_failure_is_not_fatal();
    test_snapshot_disk_full_stops();
    test_interrupt_before_run();
    test_memory_line(&rng);
    return sdt_test_finish("test_run_loop");
}
