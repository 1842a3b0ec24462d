/* test_locks.c - one run per trained file, whatever name reaches it (issue 20):
 *  - a hypernetwork's twins (x.pt and x.safetensors) are one lock: a run on either refuses the other;
 *  - a symbolic link to an embedding is locked as the file it names, and training through the link
 *    writes that file and keeps the link;
 *  - a hard link to an embedding is refused while a run holds the file by its other name;
 *  - a run refused before it starts sweeps what a killed run left beside its file (a lock file no
 *    process holds, temp files of an interrupted save), and leaves alone what a live run holds;
 *  - a run refused after it locked its files (its model does not exist) sweeps the killed run's
 *    run folder too (temp files, .sdtrain.lock);
 *  - the average's <stem>-ema file is locked: a run on star.pt with ema and one on star-ema.pt
 *    exclude each other.
 * The second trainer is in the same process: flock excludes open files, not processes, so the
 * sentence says "another trainer in this process". */
#include <sys/stat.h>

#include "hn_fixture.h"

static bool contains(const char *s, const char *part)
{
    return s && part && strstr(s, part) != NULL;
}

static sdt_status ti_prepare(const hn_env *env, sdt_ti_trainer *t, const sdt_ti_config *c)
{
    sdt_prepare_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    return env->base.ti->prepare(t, c, &info);
}

static sdt_status hn_prepare(const hn_env *env, sdt_hn_trainer *t, hn_run *r)
{
    r->config.train_options = &r->options;
    sdt_prepare_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    return env->hn->prepare(t, &r->config, &info);
}

static void check_twin_pair(const hn_env *env)
{
    printf("-- x.pt and x.safetensors are one lock\n");
    char dir[FX_PATH], log[FX_PATH], log2[FX_PATH], pt[FX_PATH], twin[FX_PATH];
    run_dirs(env, "twins", dir, log);
    fx_subdir(&env->base, log2, "twins-log2");
    if (!make_hn(env, dir, "pair", "128, 64", false, pt)) return;
    /* one step writes the .safetensors twin into the run folder; a copy beside the .pt (the layout
     * before the twin moved, or a user's copy) is the name a second run could take */
    fx_recorder rec;
    sdt_hn_trainer *t = hn_create(env, &rec);
    hn_run r;
    hn_config(env, &r, pt, log, 1);
    CHECK(hn_prepare_run(env, t, &r) == SDT_STATUS_OK, "one step on %s: %s", pt, hn_error(env, t));
    env->hn->destroy(t);
    snprintf(twin, sizeof twin, "%.*s.safetensors", (int)(strlen(pt) - 3), pt);
    CHECK(rec.saved[SDT_FILE_HYPERNETWORK] == 2 && strcmp(rec.last_saved[SDT_FILE_HYPERNETWORK], twin) != 0,
          "the twin went to the run folder (%s)", rec.last_saved[SDT_FILE_HYPERNETWORK]);
    CHECK(fx_copy_file(rec.last_saved[SDT_FILE_HYPERNETWORK], twin), "the twin copied beside the .pt as %s", twin);

    const char *names[2][2] = {{pt, twin}, {twin, pt}};
    for (int k = 0; k < 2; k++) {
        fx_recorder ra, rb;
        sdt_hn_trainer *a = hn_create(env, &ra), *b = hn_create(env, &rb);
        hn_run first, second;
        hn_config(env, &first, names[k][0], log, 3);
        hn_config(env, &second, names[k][1], log2, 3);
        CHECK(hn_prepare(env, a, &first) == SDT_STATUS_OK, "prepare on %s: %s", names[k][0], hn_error(env, a));
        sdt_status st = hn_prepare(env, b, &second);
        const char *why = hn_error(env, b);
        printf("  %s held, %s: %d %s\n", names[k][0], names[k][1], (int)st, why);
        CHECK(st == SDT_STATUS_BAD_STATE && contains(why, "another trainer in this process"),
              "a run on %s while %s is prepared: status %d, sentence: %s", names[k][1], names[k][0], (int)st, why);
        env->hn->destroy(b);
        env->hn->destroy(a);
    }
}

static void check_symlink(const hn_env *env)
{
    printf("-- a symbolic link is locked and written as the file it names, and kept\n");
    char dir[FX_PATH], log[FX_PATH], log2[FX_PATH], emb[FX_PATH], link_path[FX_PATH];
    fx_subdir(&env->base, dir, "symlink");
    fx_subdir(&env->base, log, "symlink-log");
    fx_subdir(&env->base, log2, "symlink-log2");
    if (!fx_make_embedding(&env->base, dir, "real", 1, "ring", emb)) return;
    fx_path(link_path, dir, "link.safetensors");
    CHECK(symlink("real.safetensors", link_path) == 0, "symlink %s", link_path);

    fx_recorder ra, rb;
    sdt_ti_trainer *a = fx_create(&env->base, &ra), *b = fx_create(&env->base, &rb);
    sdt_ti_config ca, cb;
    fx_config(&env->base, &ca, emb, NULL, log, 2);
    fx_config(&env->base, &cb, link_path, NULL, log2, 2);
    CHECK(ti_prepare(env, a, &ca) == SDT_STATUS_OK, "prepare on %s: %s", emb, fx_last_error(&env->base, a));
    sdt_status st = ti_prepare(env, b, &cb);
    const char *why = fx_last_error(&env->base, b);
    printf("  real held, the link: %d %s\n", (int)st, why);
    CHECK(st == SDT_STATUS_BAD_STATE && contains(why, "real.safetensors"),
          "a run through the link while the file is prepared: status %d, sentence: %s", (int)st, why);
    env->base.ti->destroy(a);
    env->base.ti->destroy(b);

    /* through the link alone: the file it names is trained, the link stays a link */
    b = fx_create(&env->base, &rb);
    CHECK(fx_prepare_run(&env->base, b, &cb) == SDT_STATUS_OK, "training through the link: %s",
          fx_last_error(&env->base, b));
    env->base.ti->destroy(b);
    struct stat sb;
    CHECK(lstat(link_path, &sb) == 0 && S_ISLNK(sb.st_mode), "the symbolic link %s was replaced by a regular file",
          link_path);
    CHECK(fx_file_step(emb) == 2, "the file the link names is at step %lld, not 2", (long long)fx_file_step(emb));
}

static void check_hard_link(const hn_env *env)
{
    printf("-- a hard link reaches a held file: refused\n");
    char dir[FX_PATH], log[FX_PATH], log2[FX_PATH], emb[FX_PATH], other[FX_PATH];
    fx_subdir(&env->base, dir, "hardlink");
    fx_subdir(&env->base, log, "hardlink-log");
    fx_subdir(&env->base, log2, "hardlink-log2");
    if (!fx_make_embedding(&env->base, dir, "first", 1, "ring", emb)) return;
    fx_path(other, dir, "second.safetensors");
    CHECK(link(emb, other) == 0, "link %s", other);
    fx_recorder ra, rb;
    sdt_ti_trainer *a = fx_create(&env->base, &ra), *b = fx_create(&env->base, &rb);
    sdt_ti_config ca, cb;
    fx_config(&env->base, &ca, emb, NULL, log, 2);
    fx_config(&env->base, &cb, other, NULL, log2, 2);
    CHECK(ti_prepare(env, a, &ca) == SDT_STATUS_OK, "prepare on %s: %s", emb, fx_last_error(&env->base, a));
    sdt_status st = ti_prepare(env, b, &cb);
    const char *why = fx_last_error(&env->base, b);
    printf("  first held, its hard link: %d %s\n", (int)st, why);
    CHECK(st == SDT_STATUS_BAD_STATE && contains(why, "hard link") && contains(why, "second.safetensors"),
          "a run on the hard link while the file is prepared: status %d, sentence: %s", (int)st, why);
    env->base.ti->destroy(a);
    env->base.ti->destroy(b);
}

static void check_refused_run_sweeps(const hn_env *env)
{
    printf("-- a refused run sweeps a killed run's lock and temp files, not a live run's\n");
    char dir[FX_PATH], log[FX_PATH], emb[FX_PATH], lock[FX_PATH + 16], temp[FX_PATH + 16];
    fx_subdir(&env->base, dir, "sweep");
    fx_subdir(&env->base, log, "sweep-log");
    if (!fx_make_embedding(&env->base, dir, "left", 1, "ring", emb)) return;
    snprintf(lock, sizeof lock, "%s.lock", emb);
    snprintf(temp, sizeof temp, "%s.tmp-Ab12Cd", emb);
    CHECK(fx_write_file(lock, "99999\n", 6) && fx_write_file(temp, "half", 4), "plant %s and %s", lock, temp);
    /* refused before it starts: the learning rate does not parse */
    fx_recorder rec;
    sdt_ti_trainer *t = fx_create(&env->base, &rec);
    sdt_ti_config c;
    fx_config(&env->base, &c, emb, NULL, log, 2);
    c.learn_rate = "fast";
    CHECK(ti_prepare(env, t, &c) != SDT_STATUS_OK, "a learning rate of 'fast' was accepted");
    env->base.ti->destroy(t);
    CHECK(access(lock, F_OK) != 0, "the lock file no process holds (%s) is still there after a refused run", lock);
    CHECK(access(temp, F_OK) != 0, "the killed save's temp file (%s) is still there after a refused run", temp);
    CHECK(access(emb, F_OK) == 0, "the embedding itself was removed");

    /* a live run's lock and temp name are left alone by a refused second run */
    fx_recorder ra;
    sdt_ti_trainer *a = fx_create(&env->base, &ra);
    fx_config(&env->base, &c, emb, NULL, log, 2);
    CHECK(ti_prepare(env, a, &c) == SDT_STATUS_OK, "prepare on %s: %s", emb, fx_last_error(&env->base, a));
    CHECK(fx_write_file(temp, "live", 4), "plant %s", temp);
    t = fx_create(&env->base, &rec);
    c.learn_rate = "fast";
    CHECK(ti_prepare(env, t, &c) != SDT_STATUS_OK, "a learning rate of 'fast' was accepted");
    env->base.ti->destroy(t);
    CHECK(access(lock, F_OK) == 0, "a refused run removed the lock file of a prepared run");
    CHECK(access(temp, F_OK) == 0, "a refused run removed a temp file beside a file another run holds");
    env->base.ti->destroy(a);
    unlink(temp);
}

/* A run refused late (a model path that does not exist, after its files are locked) still sweeps
 * what a killed run left: temp files beside its file and in the run folder it would use, and that
 * folder's lock file (issue 29). */
static void check_refused_run_sweeps_run_folder(const hn_env *env)
{
    printf("-- a run refused for its model sweeps a killed run's run folder: temp files and .sdtrain.lock\n");
    char dir[FX_PATH], log[FX_PATH], emb[FX_PATH], run[FX_PATH], copies[FX_PATH + 16];
    char planted[4][FX_PATH + 64];
    fx_subdir(&env->base, dir, "sweep-late");
    fx_subdir(&env->base, log, "sweep-late-log");
    if (!fx_make_embedding(&env->base, dir, "late", 1, "ring", emb)) return;
    char date[16];
    fx_today(date);
    snprintf(run, sizeof run, "%.3000s/%s", log, date);
    CHECK(fx_mkdir(run), "mkdir %s", run);
    snprintf(run, sizeof run, "%.3000s/%s/late", log, date);
    snprintf(copies, sizeof copies, "%s/embeddings", run);
    CHECK(fx_mkdir(run) && fx_mkdir(copies), "mkdir %s", copies);
    snprintf(planted[0], sizeof planted[0], "%s/.sdtrain.lock", run);
    snprintf(planted[1], sizeof planted[1], "%s/late.state.safetensors.tmp-Ab12Cd", run);
    snprintf(planted[2], sizeof planted[2], "%s/late-2.safetensors.tmp-Ef34Gh", copies);
    snprintf(planted[3], sizeof planted[3], "%s.tmp-Ij56Kl", emb);
    for (int i = 0; i < 4; i++) CHECK(fx_write_file(planted[i], "99999\n", 6), "plant %s", planted[i]);
    fx_recorder rec;
    sdt_ti_trainer *t = fx_create(&env->base, &rec);
    sdt_ti_config c;
    fx_config(&env->base, &c, emb, NULL, log, 2);
    c.model_path = "/nonexistent/sdtrain-model";
    CHECK(ti_prepare(env, t, &c) != SDT_STATUS_OK, "a model path that does not exist was accepted");
    env->base.ti->destroy(t);
    for (int i = 0; i < 4; i++)
        CHECK(access(planted[i], F_OK) != 0, "%s is still there after a refused run", planted[i]);
    CHECK(access(emb, F_OK) == 0 && access(copies, F_OK) == 0, "the embedding or the copies folder was removed");
}

/* The average's file (<stem>-ema<ext>) is locked under its own name: a run training that file and
 * a run whose average goes there exclude each other, in either order (issue 29). */
static void check_average_lock(const hn_env *env)
{
    printf("-- the -ema file is locked: a run on star.pt with ema and a run on star-ema.pt exclude each other\n");
    char dir[FX_PATH], log[FX_PATH], log2[FX_PATH], star[FX_PATH], star_ema[FX_PATH];
    run_dirs(env, "ema-lock", dir, log);
    fx_subdir(&env->base, log2, "ema-lock-log2");
    if (!make_hn(env, dir, "star", "128, 64", false, star) ||
        !make_hn(env, dir, "star-ema", "128, 64", false, star_ema))
        return;
    for (int order = 0; order < 2; order++) {
        hn_run with_ema, plain;
        hn_config(env, &with_ema, star, order ? log2 : log, 2);
        with_ema.options.ema_decay = 0.9;
        hn_config(env, &plain, star_ema, order ? log : log2, 2);
        hn_run *first = order ? &plain : &with_ema, *second = order ? &with_ema : &plain;
        fx_recorder ra, rb;
        sdt_hn_trainer *a = hn_create(env, &ra), *b = hn_create(env, &rb);
        if (!a || !b) return;
        CHECK(hn_prepare(env, a, first) == SDT_STATUS_OK, "order %d: the first run: %s", order, hn_error(env, a));
        sdt_status st = hn_prepare(env, b, second);
        char want[FX_PATH + 64];
        snprintf(want, sizeof want, "%s is being written by another trainer in this process", star_ema);
        CHECK(st == SDT_STATUS_BAD_STATE && contains(hn_error(env, b), want), "order %d: status %d, sentence: %s",
              order, (int)st, hn_error(env, b));
        env->hn->destroy(b);
        env->hn->destroy(a);
    }
}

int main(int argc, char **argv)
{
    hn_env env;
    if (!hn_env_open(&env, argc, argv, "trainer_locks")) return trainer_env_abandon(&env.base);
    check_twin_pair(&env);
    check_symlink(&env);
    check_hard_link(&env);
    check_refused_run_sweeps(&env);
    check_refused_run_sweeps_run_folder(&env);
    check_average_lock(&env);
    trainer_env_close(&env.base);
    return sdt_test_finish("trainer_locks");
}
