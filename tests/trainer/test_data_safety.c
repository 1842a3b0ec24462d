/* test_data_safety.c - nothing a user has is lost or silently replaced (issue 12):
 *  - the trained embedding goes to the file named, never to "<name in the metadata>.safetensors";
 *  - a second trainer on the same embedding or log folder is refused with a sentence naming the
 *    file and the other process (a forked child holds the lock);
 *  - a state older than its embedding (the stale pair) is refused and says which is newer;
 *    --resume with a log folder picks the newest state that pairs with the embedding;
 *  - a flipped byte in a state, and a NaN, a negative step or a negative AdamW second moment in a
 *    correctly sealed (forged) state, are refused;
 *  - kill -9 of a child at a chosen step: the resume loses at most one snapshot interval, and a
 *    kill between the final state and the final embedding leaves a pair that resumes; with
 *    save_state_every_seconds the state also follows the clock (the host's callback sleeps past
 *    the interval, so the behaviour, not the timing, is tested);
 *  - a kill after the final state but before the loss CSV's last row: the resume writes the row
 *    from the state, once;
 *  - temp files of a killed save are removed at the next run, other files are not;
 *  - interrupt() during preparation stops it (SDT_STATUS_INTERRUPTED) before anything is written. */
#include <cjson/cJSON.h>
#include <signal.h>

#include "data/state_seal.h"
#include "trainer_fixture.h"

#define SNAPSHOT_EVERY 2

/* ---- a trainer whose callbacks can kill the process or press interrupt ------------------- */

typedef struct probe {
    fx_recorder rec;
    const trainer_env *env;
    sdt_ti_trainer *t;
    int64_t kill_at_step;        /* raise SIGKILL after this step's metrics (0 = never) */
    int64_t sleep_after_step;    /* the metrics callback of this step sleeps past a 1 s interval */
    bool kill_after_final_state; /* raise SIGKILL once the final save's state is written */
    int64_t last_step;
    int states_at_last_step;      /* the snapshot's, then the final save's */
    const char *interrupt_on_log; /* interrupt() when a log line starts with this */
} probe;

static void probe_metrics(void *u, const sdt_metrics *m)
{
    probe *p = u;
    fx_on_metrics(&p->rec, m);
    if (p->sleep_after_step && m->step == p->sleep_after_step) usleep(1200 * 1000);
    if (p->kill_at_step && m->step == p->kill_at_step) raise(SIGKILL);
}

static void probe_file(void *u, const sdt_saved_file *f)
{
    probe *p = u;
    fx_on_file(&p->rec, f);
    if (p->kill_after_final_state && f->kind == SDT_FILE_TRAINING_STATE && f->step == p->last_step &&
        ++p->states_at_last_step == 2)
        raise(SIGKILL);
}

static void probe_log(void *u, sdt_log_level level, const char *msg)
{
    probe *p = u;
    fx_on_log(&p->rec, level, msg);
    if (p->interrupt_on_log && strncmp(msg, p->interrupt_on_log, strlen(p->interrupt_on_log)) == 0)
        p->env->ti->interrupt(p->t);
}

static sdt_ti_trainer *probe_create(const trainer_env *env, probe *p)
{
    sdt_host_callbacks cb = fx_recorder_init(&p->rec);
    cb.user_data = p;
    cb.metrics = probe_metrics;
    cb.file_saved = probe_file;
    cb.log = probe_log;
    p->env = env;
    char err[512] = "";
    CHECK(env->ti->create(&cb, &p->t, err, sizeof err) == SDT_STATUS_OK, "create: %s", err);
    return p->t;
}

static sdt_status prepare(const trainer_env *env, sdt_ti_trainer *t, const sdt_ti_config *c, int64_t *start_step)
{
    sdt_prepare_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    sdt_status st = env->ti->prepare(t, c, &info);
    if (start_step) *start_step = info.start_step;
    return st;
}

typedef struct child_run {
    const trainer_env *env;
    const sdt_ti_config *c;
    int64_t kill_at_step, sleep_after_step;
    bool kill_after_final;
} child_run;

static void child_train(void *arg)
{
    const child_run *r = arg;
    probe p;
    memset(&p, 0, sizeof p);
    p.kill_at_step = r->kill_at_step;
    p.kill_after_final_state = r->kill_after_final;
    p.sleep_after_step = r->sleep_after_step;
    p.last_step = r->c->max_steps;
    sdt_ti_trainer *t = probe_create(r->env, &p);
    sdt_status st = t ? fx_prepare_run(r->env, t, r->c) : SDT_STATUS_INTERNAL;
    if (st != SDT_STATUS_OK) fprintf(stderr, "child: %s\n", fx_last_error(r->env, t));
    _exit(st == SDT_STATUS_OK ? 0 : 3);
}

/* Trains c in a forked child that probe settings kill; returns the signal that ended it. */
static int train_in_child(const trainer_env *env, const sdt_ti_config *c, int64_t kill_at_step, bool kill_after_final,
                          int64_t sleep_after_step)
{
    child_run r = {env, c, kill_at_step, sleep_after_step, kill_after_final};
    return fx_signal_ending_child(child_train, &r);
}

static bool contains(const char *text, const char *part)
{
    return text && strstr(text, part) != NULL;
}

/* ---- 1. the file named ------------------------------------------------------------------- */

static void check_named_file(const trainer_env *env)
{
    printf("-- the trained embedding goes to the file named, no other file is replaced\n");
    char dir[FX_PATH], made[FX_PATH], named[FX_PATH], other[FX_PATH], log[FX_PATH], before[FX_PATH];
    fx_subdir(env, dir, "named");
    if (!fx_make_embedding(env, dir, "fresh", 2, "ring", made)) return;
    fx_path(named, dir, "e_200.safetensors");
    CHECK(rename(made, named) == 0, "rename %s", made);
    if (!fx_make_embedding(env, dir, "fresh", 2, "picture", other)) return; /* an unrelated fresh.safetensors */
    fx_path(before, env->tmp, "fresh.before");
    CHECK(fx_copy_file(other, before), "copy %s", other);
    int64_t n0;
    float *initial = fx_read_embedding(named, &n0);
    sdt_ti_config c;
    fx_config(env, &c, named, NULL, fx_subdir(env, log, "named-log"), 1);
    fx_recorder rec;
    sdt_ti_trainer *t = fx_create(env, &rec);
    sdt_status st = fx_prepare_run(env, t, &c);
    CHECK(st == SDT_STATUS_OK, "training e_200: %s", fx_last_error(env, t));
    CHECK(strcmp(rec.last_saved[SDT_FILE_EMBEDDING], named) == 0, "the embedding was saved as %s, not %s",
          rec.last_saved[SDT_FILE_EMBEDDING], named);
    CHECK(fx_embedding_check(named, initial, n0, true), "%s was not trained", named);
    CHECK(fx_same_bytes(other, before), "the unrelated %s was overwritten", other);
    env->ti->destroy(t);
    free(initial);
}

/* ---- 2. locks ---------------------------------------------------------------------------- */

static void check_locks(const trainer_env *env)
{
    printf("-- a second trainer on the same embedding or log folder is refused, naming the other process\n");
    char dir[FX_PATH], emb[FX_PATH], copy_dir[FX_PATH], copy[FX_PATH], log[FX_PATH];
    fx_subdir(env, dir, "locks");
    if (!fx_make_embedding(env, dir, "locked", 2, "ring", emb)) return;
    fx_subdir(env, log, "locks-log");
    int ready[2], go[2];
    CHECK(pipe(ready) == 0 && pipe(go) == 0, "pipe");
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) { /* holds a prepared trainer (and its locks) until told to go */
        sdt_ti_config c;
        fx_config(env, &c, emb, NULL, log, 1);
        fx_recorder rec;
        sdt_ti_trainer *t = fx_create(env, &rec);
        char ok = prepare(env, t, &c, NULL) == SDT_STATUS_OK ? 'y' : 'n';
        if (ok != 'y') fprintf(stderr, "child: %s\n", fx_last_error(env, t));
        if (write(ready[1], &ok, 1) != 1) _exit(3);
        char byte;
        if (read(go[0], &byte, 1) != 1) _exit(3);
        _exit(0);
    }
    char ok = 'n';
    CHECK(read(ready[0], &ok, 1) == 1 && ok == 'y', "the child could not prepare");
    char pid_text[32];
    snprintf(pid_text, sizeof pid_text, "process %ld", (long)child);

    sdt_ti_config c;
    fx_config(env, &c, emb, NULL, log, 1);
    fx_recorder rec;
    sdt_ti_trainer *t = fx_create(env, &rec);
    sdt_status st = prepare(env, t, &c, NULL);
    const char *why = fx_last_error(env, t);
    CHECK(st == SDT_STATUS_BAD_STATE && contains(why, emb) && contains(why, pid_text),
          "same embedding: status %d, sentence: %s", (int)st, why);

    /* Another file, same log folder (the same name): the folder is locked. */
    fx_subdir(env, copy_dir, "locks-copy");
    fx_path(copy, copy_dir, "locked.safetensors");
    CHECK(fx_copy_file(emb, copy), "copy %s", emb);
    fx_config(env, &c, copy, NULL, log, 1);
    st = prepare(env, t, &c, NULL);
    why = fx_last_error(env, t);
    CHECK(st == SDT_STATUS_BAD_STATE && contains(why, log) && contains(why, pid_text),
          "same log folder: status %d, sentence: %s", (int)st, why);

    CHECK(write(go[1], "g", 1) == 1, "pipe");
    int status;
    waitpid(child, &status, 0);
    /* The child is gone (its kernel locks with it): the same job now prepares. */
    fx_config(env, &c, emb, NULL, log, 1);
    CHECK(prepare(env, t, &c, NULL) == SDT_STATUS_OK, "after the other run ended: %s", fx_last_error(env, t));
    /* In one process too: a second handle is refused while the first holds the job. */
    fx_recorder rec2;
    sdt_ti_trainer *t2 = fx_create(env, &rec2);
    st = prepare(env, t2, &c, NULL);
    CHECK(st == SDT_STATUS_BAD_STATE && contains(fx_last_error(env, t2), "another trainer in this process"),
          "second handle: status %d, sentence: %s", (int)st, fx_last_error(env, t2));
    env->ti->destroy(t2);
    env->ti->destroy(t);
    close(ready[0]), close(ready[1]), close(go[0]), close(go[1]);
}

/* ---- 3. stale pairs and --resume with a folder ---------------------------------------------- */

static void check_stale_pair(const trainer_env *env)
{
    printf("-- a state older than its embedding is refused; a log folder resumes from the newest pair\n");
    char dir[FX_PATH], emb[FX_PATH], log1[FX_PATH], log2[FX_PATH], old_state[FX_PATH];
    fx_subdir(env, dir, "stale");
    if (!fx_make_embedding(env, dir, "stale", 2, "ring", emb)) return;
    fx_subdir(env, log1, "stale-log1");
    fx_subdir(env, log2, "stale-log2");
    sdt_ti_config c;
    fx_recorder rec;
    sdt_ti_trainer *t = fx_create(env, &rec);
    fx_config(env, &c, emb, NULL, log1, 2);
    CHECK(fx_prepare_run(env, t, &c) == SDT_STATUS_OK, "to step 2: %s", fx_last_error(env, t));
    snprintf(old_state, sizeof old_state, "%s", rec.last_saved[SDT_FILE_TRAINING_STATE]);
    fx_config(env, &c, emb, NULL, log2, 4); /* on, without --resume: the embedding is at 4, log1's state at 2 */
    CHECK(fx_prepare_run(env, t, &c) == SDT_STATUS_OK, "to step 4: %s", fx_last_error(env, t));

    fx_config(env, &c, emb, NULL, log2, 6);
    c.resume_state_path = old_state;
    sdt_status st = prepare(env, t, &c, NULL);
    const char *why = fx_last_error(env, t);
    CHECK(st == SDT_STATUS_VALIDATION && contains(why, "(step 4) is newer than this state (step 2)"),
          "stale pair: status %d, sentence: %s", (int)st, why);
    CHECK(rec.saved[SDT_FILE_SETTINGS] == 2, "a refused resume wrote a settings file (%d written)",
          rec.saved[SDT_FILE_SETTINGS]);
    c.resume_state_path = log1;
    st = prepare(env, t, &c, NULL);
    CHECK(st == SDT_STATUS_NOT_FOUND && contains(fx_last_error(env, t), "can continue this embedding"),
          "log folder with only the stale state: status %d, sentence: %s", (int)st, fx_last_error(env, t));
    int64_t start = -1;
    c.resume_state_path = env->tmp; /* both log folders below it: the newest pair is log2's */
    st = prepare(env, t, &c, &start);
    CHECK(st == SDT_STATUS_OK && start == 4, "resume from the parent folder: status %d, start %lld: %s", (int)st,
          (long long)start, fx_last_error(env, t));
    env->ti->destroy(t);
}

/* ---- 4. damaged states -------------------------------------------------------------------- */

/* Rewrites a state as a forger would: value into element 1 of tensor `name` (NULL: none), and
 * when step is not NULL the step in the metadata and the training record; then a seal that
 * matches, so only the checks of the contents can catch it. */
static bool write_forged_state(const char *src, const char *dst, const char *name, float value, const char *step)
{
    sdt_error err;
    sdt_safetensors *st = sdt_st_open(src, &err);
    if (!st) return false;
    size_t n = sdt_st_count(st), n_meta = sdt_st_metadata_count(st);
    sdt_st_write_item items[8];
    sdt_st_kv meta[32];
    float *copies[8] = {0};
    if (n > 8 || n_meta > 31) return false;
    for (size_t i = 0; i < n; i++) {
        const sdt_st_entry *e = sdt_st_at(st, i);
        copies[i] = malloc(e->nbytes);
        memcpy(copies[i], e->data, e->nbytes);
        if (name && strcmp(e->name, name) == 0) copies[i][1] = value;
        items[i] = (sdt_st_write_item){e->name, e->dtype, e->ndim, e->shape, copies[i]};
    }
    char *training = NULL;
    size_t k = 0;
    for (size_t i = 0; i < n_meta; i++) {
        const char *key = sdt_st_metadata_key(st, i), *v = sdt_st_metadata_get(st, key);
        if (step && strcmp(key, "step") == 0) v = step;
        if (step && strcmp(key, "training") == 0) {
            cJSON *j = cJSON_Parse(v);
            cJSON_ReplaceItemInObjectCaseSensitive(j, "step", cJSON_CreateNumber((double)strtoll(step, NULL, 10)));
            v = training = cJSON_PrintUnformatted(j);
            cJSON_Delete(j);
        }
        if (strcmp(key, SDT_STATE_SEAL_KEY) != 0) meta[k++] = (sdt_st_kv){key, v};
    }
    char seal[SDT_SHA256_HEX];
    sdt_state_seal_compute(items, n, meta, k, seal);
    meta[k++] = (sdt_st_kv){SDT_STATE_SEAL_KEY, seal};
    bool ok = sdt_st_write(dst, items, n, meta, k, &err);
    for (size_t i = 0; i < n; i++) free(copies[i]);
    free(training);
    sdt_st_close(st);
    return ok;
}

static void check_damaged_state(const trainer_env *env)
{
    printf("-- a flipped byte and a NaN in a state are refused\n");
    char dir[FX_PATH], emb[FX_PATH], log[FX_PATH], state[FX_PATH], bad[FX_PATH];
    fx_subdir(env, dir, "damaged");
    if (!fx_make_embedding(env, dir, "damaged", 2, "ring", emb)) return;
    sdt_ti_config c;
    fx_recorder rec;
    sdt_ti_trainer *t = fx_create(env, &rec);
    fx_config(env, &c, emb, NULL, fx_subdir(env, log, "damaged-log"), 2);
    CHECK(fx_prepare_run(env, t, &c) == SDT_STATUS_OK, "to step 2: %s", fx_last_error(env, t));
    snprintf(state, sizeof state, "%s", rec.last_saved[SDT_FILE_TRAINING_STATE]);
    fx_path(bad, dir, "bad.state.safetensors");
    fx_config(env, &c, emb, NULL, log, 4);
    c.resume_state_path = bad;

    for (int place = 0; place < FX_FLIP_PLACES; place++) {
        size_t at;
        CHECK(fx_write_flipped(state, bad, place, &at), "write %s from %s", bad, state);
        sdt_status st = prepare(env, t, &c, NULL);
        const char *why = fx_last_error(env, t);
        CHECK(st != SDT_STATUS_OK && (contains(why, "damaged") || contains(why, bad)),
              "byte %zu flipped: status %d, sentence: %s", at, (int)st, why);
    }
    const char *names[2] = {"emb_params", "adamw_v"};
    for (int i = 0; i < 2; i++) {
        CHECK(write_forged_state(state, bad, names[i], NAN, NULL), "write %s", bad);
        sdt_status st = prepare(env, t, &c, NULL);
        const char *why = fx_last_error(env, t);
        CHECK(st != SDT_STATUS_OK && contains(why, names[i]) && contains(why, "NaN"),
              "NaN in %s: status %d, "
              "sentence: %s",
              names[i], (int)st, why);
    }
    /* Issue 20: values no run writes, under a recomputed seal: a negative step would index the
     * data order and the schedule before their start, a negative second moment puts a NaN in
     * AdamW's square root. Both are refused as damage, before anything is written. */
    CHECK(write_forged_state(state, bad, NULL, 0, "-3"), "write %s", bad);
    sdt_status st = prepare(env, t, &c, NULL);
    const char *why = fx_last_error(env, t);
    CHECK(st == SDT_STATUS_BAD_FORMAT && contains(why, "damaged") && contains(why, "step"),
          "forged step -3: status %d, "
          "sentence: %s",
          (int)st, why);
    CHECK(write_forged_state(state, bad, "adamw_v", -0.25f, NULL), "write %s", bad);
    st = prepare(env, t, &c, NULL);
    why = fx_last_error(env, t);
    CHECK(st == SDT_STATUS_BAD_FORMAT && contains(why, "damaged") && contains(why, "adamw_v") &&
              contains(why, "negative"),
          "forged negative adamw_v: status %d, sentence: %s", (int)st, why);
    env->ti->destroy(t);
}

/* ---- 5. kill -9 --------------------------------------------------------------------------- */

static void check_kill(const trainer_env *env)
{
    printf("-- kill -9 mid-run and between the final saves: the resume loses at most one snapshot interval\n");
    char dir[FX_PATH], emb[FX_PATH], log[FX_PATH], tmp[FX_PATH], keep[FX_PATH], before[FX_PATH];
    fx_subdir(env, dir, "kill");
    if (!fx_make_embedding(env, dir, "killed", 2, "ring", emb)) return;
    fx_path(before, env->tmp, "killed.before");
    CHECK(fx_copy_file(emb, before), "copy %s", emb);
    fx_subdir(env, log, "kill-log");
    sdt_ti_config c;
    fx_config(env, &c, emb, NULL, log, 8);
    c.save_every = SNAPSHOT_EVERY;
    CHECK(train_in_child(env, &c, 5, false, 0) == SIGKILL, "the child was not killed at step 5");
    CHECK(fx_same_bytes(emb, before), "the killed run changed %s", emb);

    /* What a save killed mid-write leaves behind: removed by the next run; other files stay. */
    snprintf(tmp, sizeof tmp, "%.4000s.tmp-Ab12Cd", emb);
    fx_path(keep, dir, "notes.txt.tmp-Ab12Cd");
    CHECK(fx_write_file(tmp, "x", 1) && fx_write_file(keep, "x", 1), "write temp files");

    probe p;
    memset(&p, 0, sizeof p);
    sdt_ti_trainer *t = probe_create(env, &p);
    c.resume_state_path = log;
    int64_t start = -1;
    sdt_status st = prepare(env, t, &c, &start);
    CHECK(st == SDT_STATUS_OK && start == 4, "resume after kill at 5 (snapshots every %d): status %d, start %lld: %s",
          SNAPSHOT_EVERY, (int)st, (long long)start, fx_last_error(env, t));
    CHECK(access(tmp, F_OK) != 0, "the stale temp file %s was not removed", tmp);
    CHECK(access(keep, F_OK) == 0, "%s (not a temp file of this run) was removed", keep);
    env->ti->destroy(t);

    /* Killed once the final save wrote the state, before the embedding replaces the file (the
     * last step is a snapshot step too, whose state comes first). */
    c.resume_state_path = log;
    CHECK(train_in_child(env, &c, 0, true, 0) == SIGKILL, "the child was not killed after the final state");
    CHECK(fx_same_bytes(emb, before), "the embedding changed before the kill");
    CHECK(fx_file_step(emb) == 0, "the embedding is not at step 0");
    /* Resumed with the same max steps: nothing is left to train, and the final files are written. */
    memset(&p, 0, sizeof p);
    t = probe_create(env, &p);
    st = prepare(env, t, &c, &start);
    CHECK(st == SDT_STATUS_OK && start == 8,
          "resume at max steps after the kill between the final saves: status %d, start "
          "%lld: %s",
          (int)st, (long long)start, fx_last_error(env, t));
    CHECK(st == SDT_STATUS_OK && env->ti->run(t) == SDT_STATUS_OK, "run at max steps: %s", fx_last_error(env, t));
    CHECK(contains(p.rec.log, "nothing is left to train"), "the log does not say that nothing is left to train");
    CHECK(fx_file_step(emb) == 8, "the embedding is at step %lld after the run at max steps, not 8",
          (long long)fx_file_step(emb));
    env->ti->destroy(t);
    memset(&p, 0, sizeof p);
    t = probe_create(env, &p);
    fx_config(env, &c, emb, NULL, log, 10);
    c.resume_state_path = log;
    st = prepare(env, t, &c, &start);
    CHECK(st == SDT_STATUS_OK && start == 8, "resume after the kill between the final saves: status %d, start %lld: %s",
          (int)st, (long long)start, fx_last_error(env, t));
    CHECK(st == SDT_STATUS_OK && env->ti->run(t) == SDT_STATUS_OK, "run: %s", fx_last_error(env, t));
    CHECK(fx_file_step(emb) == 10, "the embedding is at step %lld after the resumed run, not 10",
          (long long)fx_file_step(emb));
    env->ti->destroy(t);
}

/* The rows of a loss CSV after its header (a cut-off last row counts), and the first of them in first. */
static int csv_rows(const char *path, char *first, size_t size)
{
    size_t n;
    char *text = (char *)fx_read_file(path, &n);
    int rows = 0;
    first[0] = '\0';
    for (char *line = text ? strchr(text, '\n') : NULL; line && line[1]; line = strchr(line + 1, '\n'))
        if (rows++ == 0) snprintf(first, size, "%.*s", (int)strcspn(line + 1, "\n"), line + 1);
    free(text);
    return rows;
}

/* Killed after the final state, before the loss CSV's last row (write_csv_every skipped it): the
 * resume at max steps writes that row from the state, once, as the uninterrupted run does (issue 29). */
static void check_kill_before_csv(const trainer_env *env)
{
    printf("-- kill -9 after the final state, before the loss CSV: the resume writes the CSV's row, once\n");
    char dir[FX_PATH], emb[FX_PATH], log[FX_PATH], csv[FX_PATH + 64], row[256], again[256];
    fx_subdir(env, dir, "kill-csv");
    if (!fx_make_embedding(env, dir, "csvkill", 2, "ring", emb)) return;
    fx_subdir(env, log, "kill-csv-log");
    sdt_ti_config c;
    fx_config(env, &c, emb, NULL, log, 3);
    c.save_every = 3; /* the last step's copy writes a state, then the final save's: killed there */
    c.write_csv_every = 500;
    CHECK(train_in_child(env, &c, 0, true, 0) == SIGKILL, "the child was not killed after the final state");
    char date[16];
    fx_today(date);
    snprintf(csv, sizeof csv, "%.3000s/%s/csvkill/textual_inversion_loss.csv", log, date);
    CHECK(access(csv, F_OK) != 0, "the killed run wrote %s before its final save", csv);
    c.resume_state_path = log;
    for (int k = 0; k < 2; k++) { /* a second resume from the same state must not repeat the row */
        fx_recorder rec;
        sdt_ti_trainer *t = fx_create(env, &rec);
        CHECK(fx_prepare_run(env, t, &c) == SDT_STATUS_OK, "resume %d at max steps: %s", k, fx_last_error(env, t));
        env->ti->destroy(t);
        int rows = csv_rows(csv, k ? again : row, sizeof row);
        CHECK(rows == 1 && strncmp(k ? again : row, "3,", 2) == 0,
              "resume %d: %s has %d row(s) after its header, the first "
              "'%s'; the uninterrupted run writes one, of step 3",
              k, csv, rows, k ? again : row);
    }
    CHECK(strcmp(row, again) == 0, "the row written again differs: '%s' then '%s'", row, again);
}

static void check_state_interval(const trainer_env *env)
{
    printf("-- save_state_every_seconds: the state also follows the clock, without any copy\n");
    char dir[FX_PATH], emb[FX_PATH], log[FX_PATH];
    fx_subdir(env, dir, "interval");
    if (!fx_make_embedding(env, dir, "interval", 2, "ring", emb)) return;
    for (int every = 0; every <= 1; every++) {
        snprintf(log, sizeof log, "%.4000s/interval-log%d", env->tmp, every);
        CHECK(fx_mkdir(log), "mkdir %s", log);
        sdt_ti_config c;
        fx_config(env, &c, emb, NULL, log, 6);
        c.save_state_every_seconds = every;
        CHECK(train_in_child(env, &c, 2, false, 1) == SIGKILL, "the child was not killed at step 2");
        fx_recorder rec;
        sdt_ti_trainer *t = fx_create(env, &rec);
        c.resume_state_path = log;
        int64_t start = -1;
        sdt_status st = prepare(env, t, &c, &start);
        if (every)
            CHECK(st == SDT_STATUS_OK && start == 2,
                  "interval 1 s, 1.2 s between steps 1 and 2, killed at 2: status %d, "
                  "start %lld: %s",
                  (int)st, (long long)start, fx_last_error(env, t));
        else
            CHECK(st == SDT_STATUS_NOT_FOUND, "no interval and no copies: no state to resume (status %d: %s)", (int)st,
                  fx_last_error(env, t));
        env->ti->destroy(t);
    }
}

/* ---- 6. interrupt during preparation ------------------------------------------------------ */

static void check_interrupt_in_prepare(const trainer_env *env)
{
    printf("-- interrupt() during preparation stops it before anything is written\n");
    char dir[FX_PATH], emb[FX_PATH], log[FX_PATH];
    fx_subdir(env, dir, "prep-int");
    if (!fx_make_embedding(env, dir, "prepint", 2, "ring", emb)) return;
    probe p;
    memset(&p, 0, sizeof p);
    p.interrupt_on_log = "reading the dataset";
    sdt_ti_trainer *t = probe_create(env, &p);
    sdt_ti_config c;
    fx_config(env, &c, emb, NULL, fx_subdir(env, log, "prep-int-log"), 2);
    sdt_status st = prepare(env, t, &c, NULL);
    CHECK(st == SDT_STATUS_INTERRUPTED && contains(fx_last_error(env, t), "nothing was trained"),
          "status %d, sentence: %s", (int)st, fx_last_error(env, t));
    CHECK(p.rec.saved[SDT_FILE_SETTINGS] == 0, "a settings file was written");
    CHECK(!contains(p.rec.log, "encoded 12 training images"), "the dataset was encoded anyway");
    /* The next prepare starts clean and trains. */
    p.interrupt_on_log = NULL;
    CHECK(fx_prepare_run(env, t, &c) == SDT_STATUS_OK, "after the interrupted preparation: %s", fx_last_error(env, t));
    env->ti->destroy(t);
}

int main(int argc, char **argv)
{
    trainer_env env;
    if (!trainer_env_open(&env, argc, argv, "data_safety")) return trainer_env_abandon(&env);
    check_locks(&env); /* forks first, before this process has threads */
    check_kill(&env);
    check_kill_before_csv(&env);
    check_state_interval(&env);
    check_named_file(&env);
    check_stale_pair(&env);
    check_damaged_state(&env);
    check_interrupt_in_prepare(&env);
    trainer_env_close(&env);
    return sdt_test_finish("trainer_data_safety");
}
