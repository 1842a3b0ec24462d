/* test_hn_data_safety.c - work that is never lost, for a hypernetwork run and for a joint run
 * (a hypernetwork and an embedding trained together, each in its own file, one state), to the
 * standard test_data_safety.c sets for embeddings. For each kind of run, one chain of runs on
 * one set of files, each ended by kill -9 of a forked child, checked against an uninterrupted
 * reference run from copies of the same files and the same seed:
 *  1. killed at a chosen step (after at least one copy and its state): the files named are the
 *     untouched originals, the copies <name>-<step>.pt (and the embedding's) are whole (the
 *     reference's bytes), the sealed state beside them pairs with them, and temp files that a
 *     killed save leaves (beside each file, the .safetensors twin in the run folder, in the
 *     copies folders and the run folder) are removed by the next run, while other files stay;
 *  2. --resume of the log folder starts from the newest copy and ends with the reference's bytes
 *     (.pt, twin, embedding);
 *  3. killed right after the final save's state, before the trained files: the files are the
 *     ones the run started from, the state pairs with them, and the resume goes on;
 *  4. killed right after the hypernetwork's .pt, before its twin (and the embedding), and
 *  5. killed right after the twin, before a joint run's embedding: the same command again (a
 *     resume at max steps) writes every file from the state and trains nothing, and the resume
 *     further brings every file to the reference's bytes;
 *  6. a stale pair (a state from one step, the hypernetwork from another) is refused naming both
 *     files; --resume of a folder skips it for the newest state that pairs, and a folder holding
 *     only it is refused; a flipped byte in a state is refused.
 * The training seed and the step of the first kill come from the suite's seed (SDT_TEST_SEED
 * replays). */
#include <dirent.h>
#include <libgen.h>
#include <signal.h>

#include "data/state_seal.h"
#include "hn_fixture.h"

#define SNAPSHOT_EVERY 2
#define FIRST_END 8   /* the chain's steps: killed in 3..7, resumed to 8, */
#define SECOND_END 10 /* killed after the state at 10, */
#define THIRD_END 12  /* killed after the .pt at 12, */
#define FOURTH_END 13 /* killed after the twin at 13 (before a joint run's embedding), */
#define LAST_END 14   /* resumed to 14 */

/* ---- the files of one run ------------------------------------------------------------------ */

typedef struct run_files {
    char hn[FX_PATH], twin[FX_PATH], emb[FX_PATH]; /* emb "" for a hypernetwork alone */
} run_files;

/* The twin's path is beside the .pt until twin_in names the run folder. */
static void files_in(run_files *f, const char *dir, const char *hn_name, const char *emb_name)
{
    snprintf(f->hn, FX_PATH, "%.3900s/%s.pt", dir, hn_name);
    snprintf(f->twin, FX_PATH, "%.3900s/%s.safetensors", dir, hn_name);
    f->emb[0] = '\0';
    if (emb_name) snprintf(f->emb, FX_PATH, "%.3900s/%s.safetensors", dir, emb_name);
}

/* A .pt's .safetensors twin is written into the run folder (<log>/<date>/<name>), not beside it. */
static void twin_in(run_files *f, const char *run_root, const char *hn_name)
{
    CHECK(access(f->twin, F_OK) != 0, "no .safetensors twin beside the .pt: %s", f->twin);
    snprintf(f->twin, FX_PATH, "%.3900s/%s.safetensors", run_root, hn_name);
}

/* Both absent, or both present with the same bytes. */
static bool same_or_both_absent(const char *a, const char *b)
{
    bool has_a = access(a, F_OK) == 0, has_b = access(b, F_OK) == 0;
    return has_a == has_b && (!has_a || fx_same_bytes(a, b));
}

static bool same_files(const run_files *a, const run_files *b)
{
    return fx_same_bytes(a->hn, b->hn) && same_or_both_absent(a->twin, b->twin) &&
           (!a->emb[0] || fx_same_bytes(a->emb, b->emb));
}

/* A copy of every file of from (an absent twin stays absent) into <tmp>/<tag>/. */
static void keep_files(const hn_env *env, const run_files *from, const char *tag, run_files *to)
{
    char dir[FX_PATH];
    fx_subdir(&env->base, dir, tag);
    const char *src[3] = {from->hn, from->twin, from->emb};
    char *dst[3] = {to->hn, to->twin, to->emb};
    for (int i = 0; i < 3; i++) {
        char name[FX_PATH];
        snprintf(name, sizeof name, "%s", src[i]);
        dst[i][0] = '\0';
        if (!src[i][0]) continue;
        fx_path(dst[i], dir, basename(name));
        remove(dst[i]);
        if (access(src[i], F_OK) == 0) CHECK(fx_copy_file(src[i], dst[i]), "copy %s", src[i]);
    }
}

/* The state a run wrote under log (<log>/<date>/<name>/<name>.state.safetensors); false when none. */
static bool find_state(const char *folder, int depth, char *out)
{
    DIR *d = opendir(folder);
    if (!d) return false;
    bool found = false;
    for (struct dirent *e; !found && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[FX_PATH];
        fx_path(path, folder, e->d_name);
        size_t n = strlen(e->d_name), k = strlen(".state.safetensors");
        struct stat sb;
        if (stat(path, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode) && depth > 0 && strcmp(e->d_name, "older") != 0)
            found = find_state(path, depth - 1, out);
        else if (S_ISREG(sb.st_mode) && n > k && strcmp(e->d_name + n - k, ".state.safetensors") == 0)
            found = snprintf(out, FX_PATH, "%s", path) < FX_PATH;
    }
    closedir(d);
    return found;
}

/* ---- one chain --------------------------------------------------------------------------- */

typedef struct chain {
    const hn_env *env;
    bool joint;
    const char *mode; /* "hn", "joint": folder names and messages */
    const char *hn_name, *emb_name;
    uint64_t seed;
    int64_t kill_step;
    run_files run, ref; /* the chain's files, the reference's */
    char run_log[FX_PATH], ref_log[FX_PATH];
    char run_root[FX_PATH], ref_root[FX_PATH]; /* <log>/<date>/<name> */
} chain;

static void chain_config(const chain *ch, hn_run *r, const run_files *f, const char *log, int64_t max_steps)
{
    hn_config(ch->env, r, f->hn, log, max_steps);
    r->options.seed = ch->seed;
    r->options.save_every = SNAPSHOT_EVERY;
    if (ch->joint) {
        r->config.embedding_path = f->emb;
        r->config.embedding_learn_rate = "0.005";
        r->config.save_image_with_embedding = false;
    }
}

typedef enum kill_point { KILL_AT_STEP, KILL_AFTER_FINAL_STATE, KILL_AFTER_FINAL_HN, KILL_AFTER_FINAL_TWIN } kill_point;

typedef struct killer {
    fx_recorder rec;
    kill_point when;
    int64_t step;              /* KILL_AT_STEP: after this step's metrics; else the last step */
    int states_at_last_step;   /* the snapshot's, then the final save's */
    int hn_files_at_last_step; /* the .pt, then its twin */
} killer;

static void killer_metrics(void *u, const sdt_metrics *m)
{
    killer *k = u;
    fx_on_metrics(&k->rec, m);
    if (k->when == KILL_AT_STEP && m->step == k->step) raise(SIGKILL);
}

static void killer_file(void *u, const sdt_saved_file *f)
{
    killer *k = u;
    fx_on_file(&k->rec, f);
    if (f->step != k->step || k->when == KILL_AT_STEP) return;
    if (k->when == KILL_AFTER_FINAL_STATE && f->kind == SDT_FILE_TRAINING_STATE && ++k->states_at_last_step == 2)
        raise(SIGKILL);
    if (k->when == KILL_AFTER_FINAL_HN && f->kind == SDT_FILE_HYPERNETWORK)
        raise(SIGKILL); /* the .pt, before the twin */
    if (k->when == KILL_AFTER_FINAL_TWIN && f->kind == SDT_FILE_HYPERNETWORK && ++k->hn_files_at_last_step == 2)
        raise(SIGKILL); /* the twin, before the embedding of a joint run */
}

typedef struct child_run {
    const chain *ch;
    hn_run *r;
    kill_point when;
    int64_t step;
} child_run;

static void child_train(void *arg)
{
    const child_run *c = arg;
    killer k;
    memset(&k, 0, sizeof k);
    k.when = c->when;
    k.step = c->step;
    sdt_host_callbacks cb = fx_recorder_init(&k.rec);
    cb.user_data = &k;
    cb.metrics = killer_metrics;
    cb.file_saved = killer_file;
    sdt_hn_trainer *t = NULL;
    char err[512] = "";
    if (c->ch->env->hn->create(&cb, &t, err, sizeof err) != SDT_STATUS_OK) _exit(3);
    sdt_status st = hn_prepare_run(c->ch->env, t, c->r);
    fprintf(stderr, "child: not killed, status %d: %s\n", (int)st, hn_error(c->ch->env, t));
    _exit(st == SDT_STATUS_OK ? 0 : 3);
}

/* Trains r in a forked child that is killed as asked (step: the kill step, or the run's last);
 * true when SIGKILL ended it. */
static bool train_killed(const chain *ch, hn_run *r, kill_point when, int64_t step)
{
    child_run c = {ch, r, when, step};
    return fx_signal_ending_child(child_train, &c) == SIGKILL;
}

/* --resume of the chain's log folder to max_steps in this process; start receives the step it
 * resumed from. */
static sdt_status resume_run(const chain *ch, int64_t max_steps, int64_t *start)
{
    fx_recorder rec;
    sdt_hn_trainer *t = hn_create(ch->env, &rec);
    hn_run r;
    chain_config(ch, &r, &ch->run, ch->run_log, max_steps);
    r.options.resume_state_path = ch->run_log;
    sdt_prepare_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    sdt_status st = ch->env->hn->prepare(t, &r.config, &info);
    *start = info.start_step;
    if (st == SDT_STATUS_OK) st = ch->env->hn->run(t);
    if (st != SDT_STATUS_OK) printf("  %s resume to %lld: %s\n", ch->mode, (long long)max_steps, hn_error(ch->env, t));
    ch->env->hn->destroy(t);
    return st;
}

/* The copies the chain's run folder holds are the reference's bytes, one for every step up to
 * upto and none past it. */
static void check_copies(const chain *ch, int64_t upto, const char *when)
{
    for (int64_t step = SNAPSHOT_EVERY; step <= upto + SNAPSHOT_EVERY; step += SNAPSHOT_EVERY) {
        char name[512], run_copy[FX_PATH], ref_copy[FX_PATH];
        for (int part = 0; part < (ch->joint ? 2 : 1); part++) {
            if (part == 0)
                snprintf(name, sizeof name, "hypernetworks/%s-%lld.pt", ch->hn_name, (long long)step);
            else
                snprintf(name, sizeof name, "embeddings/%s-%lld.safetensors", ch->emb_name, (long long)step);
            fx_path(run_copy, ch->run_root, name);
            fx_path(ref_copy, ch->ref_root, name);
            if (step > upto)
                CHECK(access(run_copy, F_OK) != 0, "%s, %s: a copy past step %lld: %s", ch->mode, when, (long long)upto,
                      run_copy);
            else
                CHECK(fx_same_bytes(run_copy, ref_copy), "%s, %s: the copy %s is not whole (not the reference's bytes)",
                      ch->mode, when, run_copy);
        }
    }
}

/* Each tensor of the hypernetwork .safetensors at twin is the state's, bit for bit. */
static bool twin_holds_state(const char *twin, const char *state)
{
    sdt_error error;
    sdt_safetensors *st = sdt_st_open(twin, &error);
    if (!st) return false;
    bool same = sdt_st_count(st) > 0;
    for (size_t i = 0; same && i < sdt_st_count(st); i++) {
        char name[512];
        snprintf(name, sizeof name, "hypernetwork.%s", sdt_st_at(st, i)->name);
        same = same_floats(twin, sdt_st_at(st, i)->name, state, name);
    }
    sdt_st_close(st);
    return same;
}

/* The state beside the files: sealed, at step, naming the files, and paired with them: the
 * embedding's values hash to the state's (saved or start) hash, the twin, when at the state's
 * step, holds the state's values. */
static void check_state_pairs(const chain *ch, int64_t step, const char *when)
{
    char state[FX_PATH];
    if (!find_state(ch->run_log, 3, state)) {
        CHECK(false, "%s, %s: no state under %s", ch->mode, when, ch->run_log);
        return;
    }
    sdt_error error;
    sdt_error_clear(&error);
    sdt_safetensors *st = sdt_st_open(state, &error);
    CHECK(st && sdt_state_seal_check(st, &error), "%s, %s: the state %s is not whole: %s", ch->mode, when, state,
          error.message);
    if (!st) return;
    const char *hn_file = sdt_st_metadata_get(st, "hypernetwork_file");
    CHECK(fx_file_step(state) == step, "%s, %s: the state is at step %lld, not %lld", ch->mode, when,
          (long long)fx_file_step(state), (long long)step);
    CHECK(hn_file && strcmp(hn_file, ch->run.hn) == 0, "%s, %s: the state names %s, not %s", ch->mode, when,
          hn_file ? hn_file : "no hypernetwork", ch->run.hn);
    if (fx_file_step(ch->run.twin) == step)
        CHECK(twin_holds_state(ch->run.twin, state), "%s, %s: the twin %s is at the state's step but not its values",
              ch->mode, when, ch->run.twin);
    if (ch->joint) {
        int64_t n = 0;
        float *v = fx_read_embedding(ch->run.emb, &n);
        char sha[SDT_SHA256_HEX] = "";
        if (v) sdt_vectors_sha256(v, (size_t)n, sha);
        free(v);
        const char *saved = sdt_st_metadata_get(st, "embedding_sha256"),
                   *start = sdt_st_metadata_get(st, "embedding_start_sha256");
        const char *emb_file = sdt_st_metadata_get(st, "embedding_file");
        CHECK(emb_file && strcmp(emb_file, ch->run.emb) == 0 && sha[0] && saved && start &&
                  (strcmp(sha, saved) == 0 || strcmp(sha, start) == 0),
              "%s, %s: the embedding %s is neither the one the state was saved with nor the one its run started from",
              ch->mode, when, ch->run.emb);
    }
    sdt_st_close(st);
}

/* A temp file of a killed save ("<file>.tmp-XXXXXX") at each place a run writes, and one that is
 * not the run's; the paths in temps (the last is the other file). */
#define N_TEMPS 7
static int plant_temps(const chain *ch, char temps[N_TEMPS][FX_PATH])
{
    int n = 0;
    char dir[FX_PATH];
    snprintf(temps[n++], FX_PATH, "%.4000s.tmp-Ab12Cd", ch->run.hn);
    snprintf(temps[n++], FX_PATH, "%.4000s.tmp-Ab12Cd", ch->run.twin);
    snprintf(temps[n++], FX_PATH, "%.3000s/%s.state.safetensors.tmp-Ab12Cd", ch->run_root, ch->hn_name);
    snprintf(temps[n++], FX_PATH, "%.3000s/hypernetworks/%s-2.pt.tmp-Ab12Cd", ch->run_root, ch->hn_name);
    if (ch->joint) {
        snprintf(temps[n++], FX_PATH, "%.4000s.tmp-Ab12Cd", ch->run.emb);
        snprintf(temps[n++], FX_PATH, "%.3000s/embeddings/%s-2.safetensors.tmp-Ab12Cd", ch->run_root, ch->emb_name);
    }
    snprintf(dir, sizeof dir, "%s", ch->run.hn);
    fx_path(temps[n++], dirname(dir), "notes.txt.tmp-Ab12Cd");
    for (int i = 0; i < n; i++) CHECK(fx_write_file(temps[i], "x", 1), "write %s", temps[i]);
    return n;
}

/* The reference: uninterrupted to FIRST_END (its bytes kept), then resumed to LAST_END. */
static bool run_reference(chain *ch, run_files *at_first_end, run_files *at_last_end)
{
    fx_recorder rec;
    sdt_hn_trainer *t = hn_create(ch->env, &rec);
    hn_run r;
    chain_config(ch, &r, &ch->ref, ch->ref_log, FIRST_END);
    sdt_status st = hn_prepare_run(ch->env, t, &r);
    CHECK(st == SDT_STATUS_OK, "%s reference to %d: %s", ch->mode, FIRST_END, hn_error(ch->env, t));
    ch->env->hn->destroy(t);
    char state[FX_PATH];
    if (st != SDT_STATUS_OK || !find_state(ch->ref_log, 3, state)) return false;
    snprintf(ch->ref_root, FX_PATH, "%s", dirname(state));
    twin_in(&ch->ref, ch->ref_root, ch->hn_name);
    char tag[64];
    snprintf(tag, sizeof tag, "%s-ref%d", ch->mode, FIRST_END);
    keep_files(ch->env, &ch->ref, tag, at_first_end);
    t = hn_create(ch->env, &rec);
    chain_config(ch, &r, &ch->ref, ch->ref_log, LAST_END);
    r.options.resume_state_path = ch->ref_log;
    st = hn_prepare_run(ch->env, t, &r);
    CHECK(st == SDT_STATUS_OK, "%s reference resumed to %d: %s", ch->mode, LAST_END, hn_error(ch->env, t));
    ch->env->hn->destroy(t);
    snprintf(tag, sizeof tag, "%s-ref%d", ch->mode, LAST_END);
    keep_files(ch->env, &ch->ref, tag, at_last_end);
    return st == SDT_STATUS_OK;
}

/* 5: stale pairs and a damaged state, once the chain's files are at LAST_END. older: a copy of
 * the state at the first kill's copy (older_step). */
static void check_refusals(const chain *ch, const char *older, int64_t older_step)
{
    fx_recorder rec;
    sdt_hn_trainer *t = hn_create(ch->env, &rec);
    hn_run r;
    chain_config(ch, &r, &ch->run, ch->run_log, LAST_END + 2);
    sdt_prepare_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    r.options.resume_state_path = older;
    sdt_status st = ch->env->hn->prepare(t, &r.config, &info);
    const char *why = hn_error(ch->env, t);
    char newer[128];
    snprintf(newer, sizeof newer, "(step %d) is newer than this state (step %lld)", LAST_END, (long long)older_step);
    CHECK(st == SDT_STATUS_VALIDATION && strstr(why, older) && strstr(why, ch->run.hn) && strstr(why, newer),
          "%s: the stale pair (state at %lld, hypernetwork at %d): status %d, sentence: %s", ch->mode,
          (long long)older_step, LAST_END, (int)st, why);
    char older_dir[FX_PATH];
    snprintf(older_dir, sizeof older_dir, "%s", older);
    r.options.resume_state_path = dirname(older_dir);
    st = ch->env->hn->prepare(t, &r.config, &info);
    why = hn_error(ch->env, t);
    CHECK(st == SDT_STATUS_NOT_FOUND && strstr(why, "can continue this hypernetwork") && strstr(why, ch->run.hn),
          "%s: a folder holding only the stale state: status %d, sentence: %s", ch->mode, (int)st, why);

    char state[FX_PATH], bad[FX_PATH];
    CHECK(find_state(ch->run_log, 3, state), "%s: no state", ch->mode);
    snprintf(bad, sizeof bad, "%.3900s/%s-bad.state.safetensors", ch->env->base.tmp, ch->mode);
    r.options.resume_state_path = bad;
    for (int place = 0; place < FX_FLIP_PLACES; place++) {
        size_t at;
        CHECK(fx_write_flipped(state, bad, place, &at), "%s: write %s from %s", ch->mode, bad, state);
        st = ch->env->hn->prepare(t, &r.config, &info);
        why = hn_error(ch->env, t);
        CHECK(st != SDT_STATUS_OK && (strstr(why, "damaged") || strstr(why, bad)),
              "%s: byte %zu of the state flipped: "
              "status %d, sentence: %s",
              ch->mode, at, (int)st, why);
    }
    ch->env->hn->destroy(t);
}

/* Every trained file of the run (the .pt, its twin, the embedding) is at step, and the state pairs. */
static void check_files_at(const chain *ch, int64_t step, const char *when)
{
    sdt_hypernetwork_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    fx_recorder rec;
    sdt_hn_trainer *t = hn_create(ch->env, &rec);
    CHECK(ch->env->hn->inspect(t, ch->run.hn, &info, NULL, 0, NULL) == SDT_STATUS_OK && info.step == step,
          "%s, %s: the .pt is at step %lld, not %lld: %s", ch->mode, when, (long long)info.step, (long long)step,
          hn_error(ch->env, t));
    ch->env->hn->destroy(t);
    CHECK(fx_file_step(ch->run.twin) == step, "%s, %s: the twin is at step %lld, not %lld", ch->mode, when,
          (long long)fx_file_step(ch->run.twin), (long long)step);
    if (ch->joint)
        CHECK(fx_file_step(ch->run.emb) == step, "%s, %s: the embedding is at step %lld, not %lld", ch->mode, when,
              (long long)fx_file_step(ch->run.emb), (long long)step);
    check_state_pairs(ch, step, when);
}

static void check_chain(const hn_env *env, bool joint, uint64_t seed, int64_t kill_step)
{
    chain ch;
    memset(&ch, 0, sizeof ch);
    ch.env = env;
    ch.joint = joint;
    ch.mode = joint ? "joint" : "hn";
    ch.hn_name = joint ? "safejointhn" : "safehn";
    ch.emb_name = joint ? "safejointemb" : NULL;
    ch.seed = seed;
    ch.kill_step = kill_step;
    printf("-- %s run: kill -9 at step %lld, after the final state, after the final .pt\n",
           joint ? "joint (hypernetwork + embedding)" : "hypernetwork", (long long)kill_step);
    char src[FX_PATH], run_dir[FX_PATH], ref_dir[FX_PATH], tag[64], made_hn[FX_PATH], made_emb[FX_PATH];
    snprintf(tag, sizeof tag, "%s-src", ch.mode);
    fx_subdir(&env->base, src, tag);
    bool made = joint ? make_joint_pair(env, src, "safejoint", 2, made_hn, made_emb)
                      : make_hn(env, src, ch.hn_name, "128, 64", true, made_hn);
    if (!made) return;
    run_files original;
    files_in(&original, src, ch.hn_name, ch.emb_name);
    snprintf(tag, sizeof tag, "%s-run", ch.mode);
    files_in(&ch.run, fx_subdir(&env->base, run_dir, tag), ch.hn_name, ch.emb_name);
    snprintf(tag, sizeof tag, "%s-ref", ch.mode);
    files_in(&ch.ref, fx_subdir(&env->base, ref_dir, tag), ch.hn_name, ch.emb_name);
    snprintf(tag, sizeof tag, "%s-run-log", ch.mode);
    fx_subdir(&env->base, ch.run_log, tag);
    snprintf(tag, sizeof tag, "%s-ref-log", ch.mode);
    fx_subdir(&env->base, ch.ref_log, tag);
    CHECK(fx_copy_file(original.hn, ch.run.hn) && fx_copy_file(original.hn, ch.ref.hn), "copy %s", original.hn);
    if (joint)
        CHECK(fx_copy_file(original.emb, ch.run.emb) && fx_copy_file(original.emb, ch.ref.emb), "copy %s",
              original.emb);
    run_files ref_first, ref_last;
    if (!run_reference(&ch, &ref_first, &ref_last)) return;

    /* 1. killed mid-run */
    hn_run r;
    chain_config(&ch, &r, &ch.run, ch.run_log, FIRST_END);
    CHECK(train_killed(&ch, &r, KILL_AT_STEP, kill_step), "%s: the child was not killed at step %lld", ch.mode,
          (long long)kill_step);
    /* a step's metrics come before its copy: killed there, the newest copy is the one before */
    int64_t copied = (kill_step - 1) / SNAPSHOT_EVERY * SNAPSHOT_EVERY;
    char state[FX_PATH], older[FX_PATH], older_dir[FX_PATH];
    CHECK(find_state(ch.run_log, 3, state), "%s: killed at step %lld, no state was left", ch.mode,
          (long long)kill_step);
    char state_dir[FX_PATH];
    snprintf(state_dir, sizeof state_dir, "%s", state);
    snprintf(ch.run_root, FX_PATH, "%s", dirname(state_dir));
    twin_in(&ch.run, ch.run_root, ch.hn_name);
    CHECK(same_files(&ch.run, &original), "%s: the run killed at step %lld changed the files named", ch.mode,
          (long long)kill_step);
    check_copies(&ch, copied, "killed mid-run");
    check_state_pairs(&ch, copied, "killed mid-run");
    /* the state of this copy, kept in the log folder (older/): stale once the files move on */
    fx_path(older_dir, ch.run_log, "older");
    CHECK(fx_mkdir(older_dir), "mkdir %s", older_dir);
    snprintf(older, sizeof older, "%.3900s/%s.state.safetensors", older_dir, ch.hn_name);
    CHECK(fx_copy_file(state, older), "copy %s", state);
    char temps[N_TEMPS][FX_PATH];
    int n_temps = plant_temps(&ch, temps);

    /* 2. resumed from the folder to FIRST_END: the reference's bytes; the temp files gone */
    int64_t start = -1;
    CHECK(resume_run(&ch, FIRST_END, &start) == SDT_STATUS_OK && start == copied,
          "%s: resumed from step %lld, not %lld "
          "(the newest copy before the kill)",
          ch.mode, (long long)start, (long long)copied);
    for (int i = 0; i < n_temps; i++)
        CHECK((access(temps[i], F_OK) == 0) == (i == n_temps - 1), "%s: %s %s", ch.mode, temps[i],
              i == n_temps - 1 ? "(not a temp file of the run) was removed"
                               : "(a killed save's temp file) was not removed");
    CHECK(same_files(&ch.run, &ref_first), "%s: resumed to %d, the files differ from the uninterrupted run's", ch.mode,
          FIRST_END);
    check_copies(&ch, FIRST_END, "resumed");

    /* 3. killed after the final state, before the trained files */
    run_files before;
    snprintf(tag, sizeof tag, "%s-before3", ch.mode);
    keep_files(env, &ch.run, tag, &before);
    chain_config(&ch, &r, &ch.run, ch.run_log, SECOND_END);
    r.options.resume_state_path = ch.run_log;
    CHECK(train_killed(&ch, &r, KILL_AFTER_FINAL_STATE, SECOND_END),
          "%s: the child was not killed after the final state", ch.mode);
    CHECK(same_files(&ch.run, &before), "%s: killed after the final state, the files named changed", ch.mode);
    check_state_pairs(&ch, SECOND_END, "killed after the final state");
    check_copies(&ch, SECOND_END, "killed after the final state");
    /* the same command again: nothing is left to train, and the trained files are written from the state */
    CHECK(resume_run(&ch, SECOND_END, &start) == SDT_STATUS_OK && start == SECOND_END,
          "%s: killed after the final state, "
          "the resume at max steps %d started at %lld",
          ch.mode, SECOND_END, (long long)start);
    check_files_at(&ch, SECOND_END, "resumed at max steps after the kill after the final state");

    /* 4. killed after the final .pt, before the twin (and the embedding) */
    snprintf(tag, sizeof tag, "%s-before4", ch.mode);
    keep_files(env, &ch.run, tag, &before);
    chain_config(&ch, &r, &ch.run, ch.run_log, THIRD_END);
    r.options.resume_state_path = ch.run_log;
    CHECK(train_killed(&ch, &r, KILL_AFTER_FINAL_HN, THIRD_END), "%s: the child was not killed after the final .pt",
          ch.mode);
    sdt_hypernetwork_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    fx_recorder rec;
    sdt_hn_trainer *t = hn_create(env, &rec);
    CHECK(env->hn->inspect(t, ch.run.hn, &info, NULL, 0, NULL) == SDT_STATUS_OK && info.step == THIRD_END &&
              info.all_finite,
          "%s: the .pt saved before the kill reads back at step %d: %s", ch.mode, THIRD_END, hn_error(env, t));
    env->hn->destroy(t);
    CHECK(fx_same_bytes(ch.run.twin, before.twin) && (!joint || fx_same_bytes(ch.run.emb, before.emb)),
          "%s: the files not yet saved when the child was killed changed", ch.mode);
    check_state_pairs(&ch, THIRD_END, "killed after the final .pt");
    /* the same command again: the twin and the embedding are written from the state, nothing trains */
    CHECK(resume_run(&ch, THIRD_END, &start) == SDT_STATUS_OK && start == THIRD_END,
          "%s: killed after the final .pt, the "
          "resume at max steps %d started at %lld",
          ch.mode, THIRD_END, (long long)start);
    check_files_at(&ch, THIRD_END, "resumed at max steps after the kill after the final .pt");

    /* 5. killed after the twin, before a joint run's embedding; the same command again finishes the files */
    chain_config(&ch, &r, &ch.run, ch.run_log, FOURTH_END);
    r.options.resume_state_path = ch.run_log;
    CHECK(train_killed(&ch, &r, KILL_AFTER_FINAL_TWIN, FOURTH_END), "%s: the child was not killed after the final twin",
          ch.mode);
    check_state_pairs(&ch, FOURTH_END, "killed after the final twin");
    CHECK(resume_run(&ch, FOURTH_END, &start) == SDT_STATUS_OK && start == FOURTH_END,
          "%s: killed after the final twin, "
          "the resume at max steps %d started at %lld",
          ch.mode, FOURTH_END, (long long)start);
    check_files_at(&ch, FOURTH_END, "resumed at max steps after the kill after the final twin");

    /* resumed to LAST_END: every file (the twin and the embedding too) is the reference's */
    CHECK(resume_run(&ch, LAST_END, &start) == SDT_STATUS_OK && start == FOURTH_END,
          "%s: resumed from step %lld, not %d", ch.mode, (long long)start, FOURTH_END);
    CHECK(fx_same_bytes(ch.run.hn, ref_last.hn), "%s: the .pt at step %d differs from the uninterrupted run's", ch.mode,
          LAST_END);
    CHECK(fx_same_bytes(ch.run.twin, ref_last.twin),
          "%s: the twin %s at step %d (step %lld) differs from the uninterrupted "
          "run's",
          ch.mode, ch.run.twin, LAST_END, (long long)fx_file_step(ch.run.twin));
    if (joint)
        CHECK(fx_same_bytes(ch.run.emb, ref_last.emb),
              "%s: the embedding at step %d (step %lld) differs from the uninterrupted "
              "run's",
              ch.mode, LAST_END, (long long)fx_file_step(ch.run.emb));
    check_copies(&ch, LAST_END, "at the end");
    check_state_pairs(&ch, LAST_END, "at the end");

    /* 6. the older state is stale now */
    check_refusals(&ch, older, copied);
}

int main(int argc, char **argv)
{
    hn_env env;
    if (!hn_env_open(&env, argc, argv, "trainer_hn_data_safety")) return trainer_env_abandon(&env.base);
    sdt_test_rng rng = sdt_test_rng_from_env("trainer_hn_data_safety");
    for (int joint = 0; joint <= 1; joint++) {
        uint64_t seed = sdt_test_next(&rng) % 100000;
        /* after the first copy and before the last step: 3 .. FIRST_END - 1 */
        int64_t kill_step = SNAPSHOT_EVERY + 1 + (int64_t)(sdt_test_next(&rng) % (FIRST_END - SNAPSHOT_EVERY - 1));
        printf("%s: training seed %llu, first kill at step %lld\n", joint ? "joint" : "hypernetwork",
               (unsigned long long)seed, (long long)kill_step);
        check_chain(&env, joint != 0, seed, kill_step);
    }
    trainer_env_close(&env.base);
    return sdt_test_finish("trainer_hn_data_safety");
}
