/* test_faults_data.c - a NaN pixel in one training image (issue 5), through the ABI. 8-bit image
 * files cannot hold a NaN, so the plugin's fault hook SDTRAIN_FAULT_NAN_PIXEL=<file name> sets
 * one pixel of that image to NaN before VAE encoding (docs/faults.md); its latents are
 * then NaN, and so is the loss of every step that uses it.
 *  1. fp32, batch 1: prepare warns naming the image; each step with it is skipped (a warning
 *     names the file, the embedding does not move on that step), the others train; the run
 *     finishes with a finite embedding.
 *  2. fp16: the first such step fires the one-shot fallback: metrics.fallback_fired, precision
 *     FP32 from then on, the learning rate halved (lr_backoff 0.5) from the next step, the CSV's
 *     precision column, the state file's fallback record and the embedding's metadata
 *     (sdtrain_fallback) say so; training goes on.
 *  3. fp16, a two-image dataset with batch 2 (every step holds the bad image), at most 3 bad
 *     steps in a row: fallback, skip, then the run stops with SDT_STATUS_NUMERICAL and a sentence
 *     that blames the data and names that image file (and not the good one); the embedding
 *     file keeps its previous vectors, finite; the run state is FAILED. */
#include <cjson/cJSON.h>

#include "trainer_fixture.h"

#define BAD_IMAGE "demo_005.png"

static float *snapshot(const char *embeddings_dir, const char *name, int64_t step, int64_t *n)
{
    char path[FX_PATH];
    snprintf(path, sizeof path, "%.4000s/%.40s-%lld.safetensors", embeddings_dir, name, (long long)step);
    return fx_read_embedding(path, n);
}

/* The folder the run's snapshots went to (from the last one saved). */
static void snapshot_dir(const fx_recorder *rec, char *out)
{
    snprintf(out, FX_PATH, "%s", rec->last_saved[SDT_FILE_EMBEDDING_SNAPSHOT]);
    char *slash = strrchr(out, '/');
    if (slash) *slash = '\0';
}

static int count_in(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

static void check_skip_and_recover(const trainer_env *env, sdt_precision precision)
{
    const char *tag = precision == SDT_PRECISION_FP16 ? "fp16" : "fp32";
    printf("-- NaN pixel in %s, %s, batch 1\n", BAD_IMAGE, tag);
    char dir[FX_PATH], log[FX_PATH], emb[FX_PATH], name[32], buf[64];
    snprintf(name, sizeof name, "nanpix-%s", tag);
    snprintf(buf, sizeof buf, "%s-emb", name);
    fx_subdir(env, dir, buf);
    snprintf(buf, sizeof buf, "%s-log", name);
    fx_subdir(env, log, buf);
    if (!fx_make_embedding(env, dir, name, 1, "ring", emb)) return;
    fx_recorder rec;
    sdt_ti_trainer *t = fx_create(env, &rec);
    sdt_ti_config c;
    fx_config(env, &c, emb, NULL, log, 14); /* 12 images: the bad one is used once or twice */
    c.precision = precision;
    c.save_every = 1;
    c.learn_rate = "0.01";
    setenv("SDTRAIN_FAULT_NAN_PIXEL", BAD_IMAGE, 1);
    sdt_status st = fx_prepare_run(env, t, &c);
    unsetenv("SDTRAIN_FAULT_NAN_PIXEL");
    CHECK(st == SDT_STATUS_OK, "%s: the run survives: %s", tag, fx_last_error(env, t));
    CHECK(strstr(rec.log, "NaN/Inf latents") && strstr(rec.log, BAD_IMAGE), "%s: prepare warns naming the image:\n%s",
          tag, rec.log);
    char snaps[FX_PATH];
    snapshot_dir(&rec, snaps);
    int skipped = 0, first_bad = -1;
    for (int i = 0; i < rec.n_steps; i++) {
        const fx_step *s = &rec.steps[i];
        if (isfinite(s->loss)) continue;
        skipped++;
        if (first_bad < 0) first_bad = i;
        int64_t n1, n2;
        float *before = snapshot(snaps, name, s->step - 1, &n1), *after = snapshot(snaps, name, s->step, &n2);
        if (s->step > 1)
            CHECK(before && after && n1 == n2 && memcmp(before, after, (size_t)n1 * 4) == 0,
                  "%s: the skipped step %lld left the embedding as it was", tag, (long long)s->step);
        free(before);
        free(after);
    }
    int64_t total_skipped = rec.n_steps ? rec.steps[rec.n_steps - 1].skipped : -1;
    printf("  %d of %d steps skipped (first at step %d), skipped_steps %lld\n", skipped, rec.n_steps,
           first_bad >= 0 ? (int)rec.steps[first_bad].step : -1, (long long)total_skipped);
    CHECK(skipped >= 1 && skipped <= 2 && total_skipped == skipped, "%s: one or two skipped steps (%d, metrics %lld)",
          tag, skipped, (long long)total_skipped);
    CHECK(count_in(rec.log, "skipped") >= skipped && count_in(rec.log, "Non-finite latents came from: ") >= skipped,
          "%s: each skip is logged naming the file:\n%s", tag, rec.log);
    int64_t n;
    float *final = fx_read_embedding(emb, &n);
    CHECK(final && fx_all_finite(final, n), "%s: the saved embedding is finite", tag);
    free(final);
    if (precision == SDT_PRECISION_FP16 && first_bad >= 0) {
        const fx_step *bad = &rec.steps[first_bad];
        CHECK(bad->fallback && bad->precision == SDT_PRECISION_FP32, "fp16: the fallback fired at the bad step");
        for (int i = 0; i < first_bad; i++)
            CHECK(!rec.steps[i].fallback && rec.steps[i].precision == SDT_PRECISION_FP16 &&
                      rec.steps[i].learn_rate == 0.01,
                  "fp16: before it, fp16 at lr 0.01 (step %d)", i + 1);
        for (int i = first_bad + 1; i < rec.n_steps; i++)
            CHECK(rec.steps[i].fallback && rec.steps[i].precision == SDT_PRECISION_FP32 &&
                      rec.steps[i].learn_rate == 0.005 && rec.steps[i].loss_scale == 1,
                  "fp16: after it, fp32 at lr 0.005 unscaled (step %lld: prec %u lr %g)", (long long)rec.steps[i].step,
                  rec.steps[i].precision, rec.steps[i].learn_rate);
        CHECK(count_in(rec.log, "compute switches to fp32") == 1, "fp16: the switch is logged once:\n%s", rec.log);
        /* The CSV and the state file record it. */
        char csv_path[FX_PATH];
        snprintf(csv_path, sizeof csv_path, "%.4000s/../textual_inversion_loss.csv", snaps);
        size_t len;
        char *csv = (char *)fx_read_file(csv_path, &len);
        CHECK(csv && count_in(csv, ",fp16,") == first_bad && count_in(csv, ",fp32,") == rec.n_steps - first_bad,
              "fp16: the CSV's precision column switches at the bad step:\n%s", csv ? csv : "(no CSV)");
        free(csv);
        char *training = fx_read_metadata(rec.last_saved[SDT_FILE_TRAINING_STATE], "training");
        cJSON *j = training ? cJSON_Parse(training) : NULL;
        cJSON *fb = cJSON_GetObjectItem(j, "fallback");
        CHECK(cJSON_IsTrue(cJSON_GetObjectItem(fb, "fired")) &&
                  cJSON_GetNumberValue(cJSON_GetObjectItem(fb, "fired_at_step")) == (double)bad->step,
              "fp16: the state file records the fallback at step %lld: %s", (long long)bad->step,
              training ? training : "-");
        CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "precision"))
                         ? cJSON_GetStringValue(cJSON_GetObjectItem(j, "precision"))
                         : "",
                     "fp32") == 0,
              "fp16: the state says fp32 from now on");
        cJSON_Delete(j);
        free(training);
        char *note = fx_read_metadata(emb, "sdtrain_fallback");
        char want[64];
        snprintf(want, sizeof want, "fp32 from step %lld", (long long)bad->step);
        CHECK(note && strstr(note, want) && strstr(note, "x0.5"), "fp16: the embedding's metadata records it: %s",
              note ? note : "(none)");
        free(note);
    }
    env->ti->destroy(t);
}

static void check_stop_names_image(const trainer_env *env)
{
    printf("-- NaN pixel in every batch, fp16, 3 in a row allowed\n");
    char data[FX_PATH], dir[FX_PATH], log[FX_PATH], emb[FX_PATH];
    const char *stems[2] = {"demo_000", "demo_001"};
    fx_copy_images(env, fx_path(data, env->tmp, "stop-data"), stems, 2);
    fx_subdir(env, dir, "stop-emb");
    fx_subdir(env, log, "stop-log");
    if (!fx_make_embedding(env, dir, "nanstop", 1, "ring", emb)) return;
    int64_t n0;
    float *initial = fx_read_embedding(emb, &n0);
    fx_recorder rec;
    sdt_ti_trainer *t = fx_create(env, &rec);
    sdt_ti_config c;
    fx_config(env, &c, emb, data, log, 20);
    c.batch_size = 2;
    c.precision = SDT_PRECISION_FP16;
    c.max_consecutive_nonfinite = 3;
    setenv("SDTRAIN_FAULT_NAN_PIXEL", "demo_001.png", 1);
    sdt_status st = fx_prepare_run(env, t, &c);
    unsetenv("SDTRAIN_FAULT_NAN_PIXEL");
    const char *msg = fx_last_error(env, t);
    printf("  status %d after %d steps: %s\n", (int)st, rec.n_steps, msg);
    CHECK(st == SDT_STATUS_NUMERICAL, "stops with SDT_STATUS_NUMERICAL (got %d)", (int)st);
    CHECK(strstr(msg, "demo_001.png") && !strstr(msg, "demo_000.png") && strstr(msg, "data"),
          "the diagnosis blames the data and names only the bad image: %s", msg);
    CHECK(strstr(msg, "3 non-finite losses in a row") != NULL, "the sentence counts the bad steps: %s", msg);
    CHECK(rec.n_steps == 2 && rec.steps[0].fallback && rec.steps[1].skipped == 2,
          "fallback at step 1, skip at step 2, stop in step 3 (%d steps published)", rec.n_steps);
    sdt_run_state rs;
    env->ti->get_run_state(t, &rs);
    CHECK(rs == SDT_RUN_FAILED, "run state FAILED (%d)", (int)rs);
    CHECK(fx_embedding_check(emb, initial, n0, false),
          "the embedding file keeps its vectors (no step was taken) and stays finite");
    free(initial);
    env->ti->destroy(t);
}

int main(int argc, char **argv)
{
    trainer_env env;
    if (!trainer_env_open(&env, argc, argv, "trainer_faults_data")) return trainer_env_abandon(&env);
    check_skip_and_recover(&env, SDT_PRECISION_FP32);
    check_skip_and_recover(&env, SDT_PRECISION_FP16);
    check_stop_names_image(&env);
    trainer_env_close(&env);
    return sdt_test_finish("trainer_faults_data");
}
