/* test_validation.c - validation, the average (EMA) and metrics.jsonl through the ABI (1.5), on
 * the demo model (an embedding trained with sdt_ti_config.train_options pointing at the options):
 *  - a run measuring the validation loss of a folder trains exactly as one without: the same
 *    losses and gradient norms bit for bit and the same embedding bytes;
 *  - two such runs measure the same validation losses (the same text in metrics.jsonl);
 *  - the step of the lowest validation loss is named in the log and its copy is written, though
 *    save_every is 0;
 *  - stop_after_no_improvement 1 with a validation every step stops the run early, says why, and
 *    the state saved holds the step it stopped at;
 *  - the average: N + N steps resumed equal 2N steps, the average's tensor in the state and the
 *    <stem>-ema.safetensors file included, and the average differs from the trained values;
 *  - metrics.jsonl has one line per step 1..2N after the resume in the same log folder (the lines
 *    the interrupted part wrote past its state are dropped, not repeated);
 *  - a resume with another validation split or ema decay (or ema off) is refused naming the option,
 *    and a forged best_loss or a removed average tensor is refused as damage. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>

#include "data/state_seal.h"
#include "trainer_fixture.h"

#define STEPS 6

typedef struct run_result {
    char embedding[FX_PATH], state[FX_PATH], log[32768];
    fx_step steps[FX_MAX_STEPS];
    int n_steps;
    sdt_status status;
} run_result;

/* Options mirroring fx_config's (sdt_ti_config.train_options replaces the inline copies). */
static void options_from(const trainer_env *env, sdt_train_options *o, const sdt_ti_config *c)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    CHECK(env->ti->train_options_defaults(o) == SDT_STATUS_OK, "train_options_defaults");
    o->model_path = c->model_path;
    o->dataset_dir = c->dataset_dir;
    o->template_file = c->template_file;
    o->log_dir = c->log_dir;
    o->width = c->width;
    o->height = c->height;
    o->device = c->device;
    o->cpu_threads = c->cpu_threads;
    o->max_steps = c->max_steps;
    o->save_every = c->save_every;
    o->preview_every = c->preview_every;
    o->write_csv_every = c->write_csv_every;
    o->seed = c->seed;
    o->resume_state_path = c->resume_state_path;
}

static void train(const trainer_env *env, sdt_ti_config *c, sdt_train_options *o, run_result *r)
{
    memset(r, 0, sizeof *r);
    c->train_options = o;
    fx_recorder rec;
    sdt_ti_trainer *t = fx_create(env, &rec);
    if (!t) return;
    r->status = fx_prepare_run(env, t, c);
    if (r->status == SDT_STATUS_OK) {
        if (snprintf(r->state, sizeof r->state, "%s.saved", rec.last_saved[SDT_FILE_TRAINING_STATE]) >= FX_PATH) return;
        CHECK(env->ti->save_state(t, r->state) == SDT_STATUS_OK, "save_state: %s", fx_last_error(env, t));
    } else {
        printf("  run failed: %s\n", fx_last_error(env, t));
    }
    snprintf(r->embedding, sizeof r->embedding, "%s", rec.last_saved[SDT_FILE_EMBEDDING]);
    memcpy(r->steps, rec.steps, sizeof rec.steps);
    r->n_steps = rec.n_steps;
    snprintf(r->log, sizeof r->log, "%s", rec.log);
    env->ti->destroy(t);
}

/* The run folder <log>/<date>/<name> (the one date folder there). */
static bool run_folder(const char *log_dir, const char *name, char *out)
{
    DIR *d = opendir(log_dir);
    bool found = false;
    for (struct dirent *e; d && !found && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        snprintf(out, FX_PATH, "%.3000s/%.100s/%.100s", log_dir, e->d_name, name);
        found = access(out, F_OK) == 0;
    }
    if (d) closedir(d);
    return found;
}

/* metrics.jsonl of a run folder: each line's step into steps[], validation_loss text (or "") into vals. */
static int read_metrics(const char *folder, int64_t *steps, char vals[][40], int max)
{
    char path[FX_PATH];
    size_t n = 0;
    unsigned char *text = fx_read_file(fx_path(path, folder, "metrics.jsonl"), &n);
    int count = 0;
    for (char *p = (char *)text, *nl;
         text && p < (char *)text + n && (nl = memchr(p, '\n', (size_t)((char *)text + n - p))); p = nl + 1) {
        *nl = 0;
        cJSON *j = cJSON_Parse(p);
        CHECK(j != NULL, "%s line %d is JSON", path, count + 1);
        if (j && count < max) {
            steps[count] = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(j, "step"));
            const char *v = strstr(p, "\"validation_loss\":");
            vals[count][0] = 0;
            if (v) sscanf(v + 18, "%39[^,}]", vals[count]);
            CHECK(cJSON_IsNumber(cJSON_GetObjectItem(j, "loss")) &&
                      cJSON_IsNumber(cJSON_GetObjectItem(j, "learn_rate")) &&
                      cJSON_IsBool(cJSON_GetObjectItem(j, "skipped")),
                  "%s line %d has loss, learn_rate and skipped", path, count + 1);
            count++;
        }
        cJSON_Delete(j);
    }
    free(text);
    return count;
}

static bool same_tensor(const char *a, const char *b, const char *name)
{
    int64_t na, nb;
    float *x = fx_read_tensor(a, name, &na), *y = fx_read_tensor(b, name, &nb);
    bool same = x && y && na == nb && na > 0 && memcmp(x, y, (size_t)na * sizeof(float)) == 0;
    free(x);
    free(y);
    return same;
}

static void check_validation(const trainer_env *env)
{
    printf("-- validation: the trajectory is unchanged, the loss repeats, the best step's copy is kept\n");
    char dir[FX_PATH], val_dir[FX_PATH], emb0[FX_PATH], emb[3][FX_PATH], log[3][FX_PATH], buf[64];
    fx_subdir(env, dir, "val");
    fx_path(val_dir, dir, "validation");
    const char *stems[] = {"demo_000", "demo_005", "demo_009"};
    fx_copy_images(env, val_dir, stems, 3);
    if (!fx_make_embedding(env, dir, "valcat", 1, "a cat", emb0)) return;
    run_result r[3];
    for (int i = 0; i < 3; i++) {
        snprintf(buf, sizeof buf, "run%d", i);
        fx_subdir(env, emb[i], buf);
        snprintf(buf, sizeof buf, "log%d", i);
        fx_subdir(env, log[i], buf);
        char copy[FX_PATH];
        snprintf(copy, sizeof copy, "%.3000s/valcat.safetensors", emb[i]);
        CHECK(fx_copy_file(emb0, copy), "copy the embedding");
        sdt_ti_config c;
        sdt_train_options o;
        fx_config(env, &c, copy, NULL, log[i], STEPS);
        options_from(env, &o, &c);
        if (i > 0) { /* runs 1 and 2 measure a folder every 2 steps */
            o.validation_dir = val_dir;
            o.validate_every = 2;
            o.write_metrics = true;
        }
        train(env, &c, &o, &r[i]);
        CHECK(r[i].status == SDT_STATUS_OK && r[i].n_steps == STEPS, "run %d: %d steps", i, r[i].n_steps);
    }
    for (int s = 0; s < STEPS && s < r[1].n_steps; s++)
        CHECK(memcmp(&r[0].steps[s].loss, &r[1].steps[s].loss, sizeof(double)) == 0 &&
                  memcmp(&r[0].steps[s].grad_norm, &r[1].steps[s].grad_norm, sizeof(double)) == 0,
              "step %d: with validation the loss %.17g / norm %.17g, without %.17g / %.17g", s + 1, r[1].steps[s].loss,
              r[1].steps[s].grad_norm, r[0].steps[s].loss, r[0].steps[s].grad_norm);
    CHECK(same_tensor(r[0].embedding, r[1].embedding, "emb_params"), "validation changed the trained embedding");
    char f1[FX_PATH], f2[FX_PATH];
    int64_t steps1[64], steps2[64];
    char vals1[64][40], vals2[64][40];
    bool have = run_folder(log[1], "valcat", f1) && run_folder(log[2], "valcat", f2);
    CHECK(have, "the run folders exist");
    if (!have) return;
    int n1 = read_metrics(f1, steps1, vals1, 64), n2 = read_metrics(f2, steps2, vals2, 64);
    CHECK(n1 == STEPS && n2 == STEPS, "metrics.jsonl has %d and %d lines, not %d", n1, n2, STEPS);
    int measured = 0;
    double best = INFINITY;
    int64_t best_step = -1;
    for (int i = 0; i < n1 && i < n2; i++) {
        CHECK(steps1[i] == i + 1, "metrics.jsonl line %d is step %lld", i + 1, (long long)steps1[i]);
        CHECK((vals1[i][0] != 0) == (steps1[i] % 2 == 0), "step %lld: validation_loss '%s' (measured every 2 steps)",
              (long long)steps1[i], vals1[i]);
        CHECK(strcmp(vals1[i], vals2[i]) == 0, "step %lld: the validation loss of two runs differs: %s vs %s",
              (long long)steps1[i], vals1[i], vals2[i]);
        if (vals1[i][0]) {
            measured++;
            double v = strtod(vals1[i], NULL);
            CHECK(isfinite(v) && v > 0, "validation loss %s is a positive number", vals1[i]);
            if (v < best) best = v, best_step = steps1[i];
        }
    }
    CHECK(measured == STEPS / 2, "%d validations, not %d", measured, STEPS / 2);
    printf("  validation losses at 2, 4, 6: %s %s %s; lowest at step %lld\n", vals1[1], vals1[3], vals1[5],
           (long long)best_step);
    char want[128], copy[FX_PATH];
    snprintf(want, sizeof want, "the lowest validation loss was %.6f at step %lld", best, (long long)best_step);
    CHECK(strstr(r[1].log, want) != NULL, "the log names the best step: '%s'", want);
    snprintf(copy, sizeof copy, "%.3000s/embeddings/valcat-%lld.safetensors", f1, (long long)best_step);
    CHECK(access(copy, F_OK) == 0, "the best step's copy %s is kept (save_every 0)", copy);
    char csv[FX_PATH];
    size_t n = 0;
    unsigned char *text = fx_read_file(fx_path(csv, f1, "textual_inversion_loss.csv"), &n);
    CHECK(text && strstr((char *)text, ",images_per_s,validation_loss\n"),
          "the loss CSV has the validation_loss column");
    free(text);
    char f0[FX_PATH];
    text = run_folder(log[0], "valcat", f0) ? fx_read_file(fx_path(csv, f0, "textual_inversion_loss.csv"), &n) : NULL;
    CHECK(text && strstr((char *)text, ",images_per_s\n") && !strstr((char *)text, "validation"),
          "without validation the loss CSV has its old columns");
    free(text);
    CHECK(access(fx_path(csv, f0, "metrics.jsonl"), F_OK) != 0 && access(fx_path(csv, f0, "loss.png"), F_OK) != 0,
          "without write_metrics there is no metrics.jsonl or loss.png");
    CHECK(access(fx_path(csv, f1, "loss.png"), F_OK) == 0, "write_metrics draws loss.png");
}

static void check_early_stop(const trainer_env *env)
{
    printf("-- early stop after 1 validation without improvement\n");
    char dir[FX_PATH], log_dir[FX_PATH], emb[FX_PATH];
    fx_subdir(env, dir, "stop");
    fx_subdir(env, log_dir, "stop-log");
    if (!fx_make_embedding(env, dir, "stopcat", 1, "a cat", emb)) return;
    sdt_ti_config c;
    sdt_train_options o;
    fx_config(env, &c, emb, NULL, log_dir, 60);
    c.learn_rate = "0.2"; /* large steps: the validation loss soon fails to improve */
    options_from(env, &o, &c);
    o.validation_split = 0.25;
    o.validate_every = 1;
    o.stop_after_no_improvement = 1;
    run_result r;
    train(env, &c, &o, &r);
    CHECK(r.status == SDT_STATUS_OK, "the run ends normally");
    CHECK(r.n_steps > 1 && r.n_steps < 60, "it stopped early (%d steps of 60)", r.n_steps);
    CHECK(strstr(r.log, "stopping early at step") && strstr(r.log, "stop_after_no_improvement"), "the log says why");
    CHECK(strstr(r.log, "held out of the training set"), "the held-out images are named");
    CHECK(fx_file_step(r.state) == r.n_steps, "the state holds step %lld, the run stopped at %d",
          (long long)fx_file_step(r.state), r.n_steps);
    printf("  stopped after %d steps\n", r.n_steps);
}

/* Copies the state at step `at` while the run goes on (it is written with each copy). */
typedef struct state_grab {
    int64_t at;
    char src[FX_PATH], dst[FX_PATH];
    bool done;
} state_grab;

static void grab_state(fx_recorder *rec, const sdt_metrics *m)
{
    state_grab *g = rec->user;
    /* step at+1's metrics come after step at's copy and state */
    if (m->step == g->at + 1 && !g->done) {
        pthread_mutex_lock(&rec->mu);
        snprintf(g->src, sizeof g->src, "%s", rec->last_saved[SDT_FILE_TRAINING_STATE]);
        pthread_mutex_unlock(&rec->mu);
        g->done = fx_copy_file(g->src, g->dst);
    }
}

static void check_average_resume(const trainer_env *env)
{
    printf("-- the average (ema 0.7): %d steps vs %d + %d, metrics.jsonl continued\n", STEPS, STEPS / 2, STEPS / 2);
    char dir_a[FX_PATH], dir_b[FX_PATH], log_a[FX_PATH], log_b[FX_PATH], emb_a[FX_PATH], emb_b[FX_PATH];
    fx_subdir(env, dir_a, "ema-a");
    fx_subdir(env, dir_b, "ema-b");
    fx_subdir(env, log_a, "ema-log-a");
    fx_subdir(env, log_b, "ema-log-b");
    if (!fx_make_embedding(env, dir_a, "emacat", 2, "a cat", emb_a)) return;
    char pristine[FX_PATH];
    snprintf(emb_b, sizeof emb_b, "%.3000s/emacat.safetensors", dir_b);
    snprintf(pristine, sizeof pristine, "%.3000s/untrained.safetensors.bak", dir_b);
    CHECK(fx_copy_file(emb_a, emb_b) && fx_copy_file(emb_a, pristine), "copy the embedding");
    sdt_ti_config c;
    sdt_train_options o;
    run_result whole, rest;
    fx_config(env, &c, emb_a, NULL, log_a, STEPS);
    options_from(env, &o, &c);
    o.ema_decay = 0.7;
    o.write_metrics = true;
    o.validation_split = 0.25; /* the validation loss repeats across the resume too */
    o.validate_every = 2;
    train(env, &c, &o, &whole);
    CHECK(whole.status == SDT_STATUS_OK, "the whole run");

    /* The first half runs on past its state (step 3, written with the copy) to step 5, as a run
     * killed after step 5 would have; the resume from step 3 must drop steps 4 and 5's lines. */
    fx_config(env, &c, emb_b, NULL, log_b, STEPS - 1);
    c.save_every = STEPS / 2;
    options_from(env, &o, &c);
    o.ema_decay = 0.7;
    o.write_metrics = true;
    o.validation_split = 0.25; /* the validation loss repeats across the resume too */
    o.validate_every = 2;
    state_grab grab = {STEPS / 2, "", "", false};
    snprintf(grab.dst, sizeof grab.dst, "%.3000s/at-3.state.safetensors", dir_b);
    {
        fx_recorder rec;
        sdt_ti_trainer *t = fx_create(env, &rec);
        if (!t) return;
        rec.on_step = grab_state;
        rec.user = &grab;
        c.train_options = &o;
        CHECK(fx_prepare_run(env, t, &c) == SDT_STATUS_OK, "the first part: %s", fx_last_error(env, t));
        env->ti->destroy(t);
    }
    CHECK(grab.done, "the state of step %d was copied", STEPS / 2);
    if (!grab.done) return;
    CHECK(fx_copy_file(pristine, emb_b), "the embedding as the run began"); /* a kill before step 5's final save */
    fx_config(env, &c, emb_b, NULL, log_b, STEPS);
    c.resume_state_path = grab.dst;
    options_from(env, &o, &c);
    o.ema_decay = 0.7;
    o.write_metrics = true;
    o.validation_split = 0.25; /* the validation loss repeats across the resume too */
    o.validate_every = 2;
    train(env, &c, &o, &rest);
    CHECK(rest.status == SDT_STATUS_OK && rest.n_steps == STEPS / 2, "the resumed run: %d steps", rest.n_steps);
    if (rest.status != SDT_STATUS_OK || whole.status != SDT_STATUS_OK) return;

    CHECK(same_tensor(whole.state, rest.state, "emb_params"), "the trained values differ after the resume");
    CHECK(same_tensor(whole.state, rest.state, "ema.embedding"), "the average in the state differs after the resume");
    char ema_whole[FX_PATH], ema_rest[FX_PATH];
    snprintf(ema_whole, sizeof ema_whole, "%.3000s/emacat-ema.safetensors", dir_a);
    snprintf(ema_rest, sizeof ema_rest, "%.3000s/emacat-ema.safetensors", dir_b);
    CHECK(same_tensor(ema_whole, ema_rest, "emb_params"), "the -ema files differ after the resume");
    CHECK(!same_tensor(ema_whole, emb_a, "emb_params"), "the average equals the trained values");
    /* the average file against the average in the state: the same values */
    int64_t n1, n2;
    float *a = fx_read_tensor(ema_whole, "emb_params", &n1), *b = fx_read_tensor(whole.state, "ema.embedding", &n2);
    CHECK(a && b && n1 == n2 && memcmp(a, b, (size_t)n1 * sizeof(float)) == 0,
          "the -ema file holds the state's average");
    free(a);
    free(b);

    char folder[FX_PATH];
    int64_t steps[64];
    char vals[64][40];
    int n = run_folder(log_b, "emacat", folder) ? read_metrics(folder, steps, vals, 64) : 0;
    CHECK(n == STEPS, "metrics.jsonl after the resume has %d lines, not %d", n, STEPS);
    for (int i = 0; i < n; i++) CHECK(steps[i] == i + 1, "line %d is step %lld", i + 1, (long long)steps[i]);
    int64_t steps_whole[64];
    char vals_whole[64][40];
    int nw = run_folder(log_a, "emacat", folder) ? read_metrics(folder, steps_whole, vals_whole, 64) : 0;
    for (int i = 0; i < n && i < nw; i++)
        CHECK(strcmp(vals[i], vals_whole[i]) == 0 && (vals[i][0] != 0) == (steps[i] % 2 == 0),
              "step %lld: validation loss '%s' after the resume, '%s' without", (long long)steps[i], vals[i],
              vals_whole[i]);
    const char *best_whole = strstr(whole.log, "the lowest validation loss was"),
               *best_rest = strstr(rest.log, "the lowest validation loss was");
    CHECK(best_whole && best_rest && strncmp(best_whole, best_rest, 50) == 0,
          "the best step is the same after the resume (%.50s vs %.50s)", best_whole ? best_whole : "-",
          best_rest ? best_rest : "-");
}

/* A copy of the state src at dst as a forger would write it: the tensor `drop` left out (NULL:
 * none), the training record's validation.best_loss set to best_loss (NULL: kept), and a seal that
 * matches, so only the checks of the contents can catch it. */
static bool forge_state(const char *src, const char *dst, const char *drop, const char *best_loss)
{
    sdt_error err;
    sdt_safetensors *st = sdt_st_open(src, &err);
    if (!st) return false;
    size_t n = sdt_st_count(st), n_meta = sdt_st_metadata_count(st), k = 0, m = 0;
    sdt_st_write_item items[16];
    sdt_st_kv meta[32];
    char *training = NULL;
    bool ok = n <= 16 && n_meta < 32;
    for (size_t i = 0; ok && i < n; i++) {
        const sdt_st_entry *e = sdt_st_at(st, i);
        if (!drop || strcmp(e->name, drop) != 0)
            items[k++] = (sdt_st_write_item){e->name, e->dtype, e->ndim, e->shape, e->data};
    }
    for (size_t i = 0; ok && i < n_meta; i++) {
        const char *key = sdt_st_metadata_key(st, i), *v = sdt_st_metadata_get(st, key);
        if (best_loss && strcmp(key, "training") == 0) {
            cJSON *j = cJSON_Parse(v);
            cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "validation"), "best_loss",
                                                   cJSON_CreateString(best_loss));
            v = training = cJSON_PrintUnformatted(j);
            cJSON_Delete(j);
        }
        if (strcmp(key, SDT_STATE_SEAL_KEY) != 0) meta[m++] = (sdt_st_kv){key, v};
    }
    char seal[SDT_SHA256_HEX];
    if (ok) {
        sdt_state_seal_compute(items, k, meta, m, seal);
        meta[m++] = (sdt_st_kv){SDT_STATE_SEAL_KEY, seal};
        ok = sdt_st_write(dst, items, k, meta, m, &err);
    }
    free(training);
    sdt_st_close(st);
    return ok;
}

/* A resume that changes what the run trains or averages is refused, naming the option, both values
 * and the fix; a forged lowest loss or a missing average are damage (issue 29). */
static void check_resume_options(const trainer_env *env)
{
    printf("-- a resume with another validation split or ema, or a damaged validation or average record, is refused\n");
    char dir[FX_PATH], log[FX_PATH], emb[FX_PATH], pristine[FX_PATH], state[FX_PATH], forged[FX_PATH];
    fx_subdir(env, dir, "opts");
    fx_subdir(env, log, "opts-log");
    if (!fx_make_embedding(env, dir, "optcat", 2, "a cat", emb)) return;
    snprintf(pristine, sizeof pristine, "%.3000s/untrained.bak", dir);
    snprintf(state, sizeof state, "%.3000s/at-2.state.safetensors", dir);
    CHECK(fx_copy_file(emb, pristine), "copy the embedding");
    sdt_ti_config c;
    sdt_train_options o;
    fx_config(env, &c, emb, NULL, log, 2);
    options_from(env, &o, &c);
    o.ema_decay = 0.7;
    o.validation_split = 0.25;
    o.validate_every = 1;
    run_result r;
    train(env, &c, &o, &r);
    CHECK(r.status == SDT_STATUS_OK && fx_copy_file(r.state, state), "the run to resume: %s", r.log);
    if (r.status != SDT_STATUS_OK) return;
    struct {
        double split, ema;
        const char *drop, *best_loss, *want1, *want2;
    } cases[] = {
        {0.5, 0.7, NULL, NULL, "validation_split (--validation-split) 0.25, and this resume asks for 0.5",
         "resume with --validation-split 0.25"},
        {0.25, 0.9, NULL, NULL, "ema_decay (--ema) 0.7, and this resume asks for 0.9", "resume with --ema 0.7"},
        {0.25, 0, NULL, NULL, "ema_decay (--ema) 0.7, and this resume asks for off", "start afresh with off"},
        {0.25, 0.7, NULL, "abc", "validation.best_loss = \"abc\", which no run writes (the file is damaged)", NULL},
        {0.25, 0.7, "ema.embedding", NULL, "tensor 'ema.embedding' is missing, but the state records ema_decay 0.7",
         "damaged"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool forge = cases[i].drop || cases[i].best_loss;
        snprintf(forged, sizeof forged, "%.3000s/forged-%zu.state.safetensors", dir, i);
        CHECK(!forge || forge_state(state, forged, cases[i].drop, cases[i].best_loss), "forge case %zu", i);
        CHECK(fx_copy_file(pristine, emb), "the embedding as the run began");
        fx_config(env, &c, emb, NULL, log, 4);
        c.resume_state_path = forge ? forged : state;
        options_from(env, &o, &c);
        o.ema_decay = cases[i].ema;
        o.validation_split = cases[i].split;
        o.validate_every = 1;
        c.train_options = &o;
        fx_recorder rec;
        sdt_ti_trainer *t = fx_create(env, &rec);
        if (!t) return;
        sdt_status st = fx_prepare_run(env, t, &c);
        const char *why = fx_last_error(env, t);
        CHECK(st != SDT_STATUS_OK && strstr(why, cases[i].want1) && (!cases[i].want2 || strstr(why, cases[i].want2)),
              "case %zu: status %d, sentence: %s", i, (int)st, why);
        CHECK(!strstr(rec.log, "its run had no ema_decay"), "case %zu: the log gives a false reason: %s", i, rec.log);
        env->ti->destroy(t);
    }
}

int main(int argc, char **argv)
{
    trainer_env env;
    if (!trainer_env_open(&env, argc, argv, "trainer_validation")) return trainer_env_abandon(&env);
    check_validation(&env);
    check_early_stop(&env);
    check_average_resume(&env);
    check_resume_options(&env);
    trainer_env_close(&env);
    return sdt_test_finish("trainer_validation");
}
