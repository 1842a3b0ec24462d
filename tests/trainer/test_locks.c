/* test_locks.c - one run per trained file, whatever name reaches it (issue 20):
 *  - a hypernetwork's twins (x.pt and x.safetensors) are one lock: a run on either refuses the other;
 *  - a symbolic link to an embedding is locked as the file it names, and training through the link
 *    writes that file and keeps the link;
 *  - a hard link to an embedding is refused while a run holds the file by its other name;
 *  - a run refused before it starts sweeps what a killed run left beside its file (a lock file no
 *    process holds, temp files of an interrupted save), and leaves alone what a live run holds.
 * The second trainer is in the same process: flock excludes open files, not processes, so the
 * sentence says "another trainer in this process". */
#include <sys/stat.h>

#include "hn_fixture.h"

static bool contains(const char *s, const char *part) { return s && part && strstr(s, part) != NULL; }

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
    /* one step writes the .safetensors twin beside the .pt */
    fx_recorder rec;
    sdt_hn_trainer *t = hn_create(env, &rec);
    hn_run r;
    hn_config(env, &r, pt, log, 1);
    CHECK(hn_prepare_run(env, t, &r) == SDT_STATUS_OK, "one step on %s: %s", pt, hn_error(env, t));
    env->hn->destroy(t);
    snprintf(twin, sizeof twin, "%.*s.safetensors", (int)(strlen(pt) - 3), pt);
    struct stat sb;
    CHECK(stat(twin, &sb) == 0, "the twin %s was not written", twin);

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
    CHECK(fx_prepare_run(&env->base, b, &cb) == SDT_STATUS_OK, "training through the link: %s", fx_last_error(&env->base, b));
    env->base.ti->destroy(b);
    struct stat sb;
    CHECK(lstat(link_path, &sb) == 0 && S_ISLNK(sb.st_mode), "the symbolic link %s was replaced by a regular file", link_path);
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

int main(int argc, char **argv)
{
    hn_env env;
    if (!hn_env_open(&env, argc, argv, "trainer_locks")) return trainer_env_abandon(&env.base);
    check_twin_pair(&env);
    check_symlink(&env);
    check_hard_link(&env);
    check_refused_run_sweeps(&env);
    trainer_env_close(&env.base);
    return sdt_test_finish("trainer_locks");
}
