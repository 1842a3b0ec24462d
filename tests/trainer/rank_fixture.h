/* rank_fixture.h - what the data-parallel trainer tests share (header only, on top of hn_fixture.h;
 * the program links tests/common/thread_comm.c and exports its symbols): test_parallel's ranks as
 * threads, each a trainer of one rank, and test_inproc's trainers of several devices. The ranks'
 * communicators are the ranks-as-threads double (tests/common/thread_comm.h) that this program hands
 * to the test build of the plugin through the hook sdt_test_comm_provider (plugin/testhooks/test_hooks.h).
 * Include it once per program: it defines that exported hook. */
#ifndef SDT_TEST_TRAINER_RANK_FIXTURE_H
#define SDT_TEST_TRAINER_RANK_FIXTURE_H

#include <dirent.h>

#include "thread_comm.h"
#include "hn_fixture.h"

#define RANK_FX_MAX_RANKS 4

static sdt_comm *g_comms[RANK_FX_MAX_RANKS];
static int g_world;

/* The hook the test build of the plugin looks up (exported: ENABLE_EXPORTS, and visible although the
 * tree compiles with hidden visibility). */
__attribute__((visibility("default"))) sdt_comm *sdt_test_comm_provider(int rank, int world_size);
sdt_comm *sdt_test_comm_provider(int rank, int world_size)
{
    return world_size == g_world && rank >= 0 && rank < g_world ? g_comms[rank] : NULL;
}

/* Runs fn(args[i]) for each of n trainers on a thread of its own, over a job of world ranks as threads
 * (world 0: no communicator); fail_rank >= 0 fails at its collective fail_call. */
static inline void rank_fx_run_threads(void *(*fn)(void *), void *const *args, int n, int world, int fail_rank,
                                       int fail_call)
{
    thread_comm_world *w = world > 0 ? thread_comm_world_new(world, 60000, g_comms) : NULL;
    CHECK(world == 0 || w != NULL, "thread_comm_world_new");
    if (world > 0 && !w) return;
    g_world = world;
    if (w && fail_rank >= 0) thread_comm_world_fail_at(w, fail_rank, fail_call, "injected failure");
    pthread_t threads[RANK_FX_MAX_RANKS];
    for (int i = 0; i < n; i++) CHECK(pthread_create(&threads[i], NULL, fn, args[i]) == 0, "thread");
    for (int i = 0; i < n; i++) pthread_join(threads[i], NULL);
    g_world = 0;
    thread_comm_world_free(w);
}

/* A run's embedding (a copy of src, written to emb) and log folder (log) under <tmp>/<tag>. */
static inline void rank_fx_dirs(const trainer_env *env, const char *tag, const char *src, char *emb, char *log)
{
    char dir[FX_PATH], name[64];
    snprintf(name, sizeof name, "%s", tag);
    fx_subdir(env, dir, name);
    fx_path(emb, dir, "twin.safetensors");
    CHECK(fx_copy_file(src, emb), "copy %s", src);
    snprintf(name, sizeof name, "%.59s/log", tag); /* the tags are short */
    fx_subdir(env, log, name);
}

/* The shared options of one rank's (or one trainer's) run: fx_fast_options at seed 1234, deterministic,
 * the per-rank batch, the job's world and rank, a minute for a collective, and the state to resume. */
static inline void rank_fx_options(const trainer_env *env, const sdt_trainer_factory *tr, sdt_train_options *o,
                                   char template_path[FX_PATH], const char *log, int64_t steps, int batch, int world,
                                   int rank, const char *resume)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    tr->train_options_defaults(o);
    fx_fast_options(env, o, template_path, log, steps, 1234);
    o->deterministic = true;
    o->batch_size = (uint32_t)batch;
    o->world_size = world;
    o->rank = rank;
    o->comm_timeout_seconds = 60;
    o->resume_state_path = resume;
}

/* The embedding part training emb in place, without the image copy. */
static inline void rank_fx_embedding_part(const sdt_trainer_factory *tr, sdt_embedding_part *e, const char *emb)
{
    memset(e, 0, sizeof *e);
    e->struct_size = sizeof *e;
    tr->embedding_part_defaults(e);
    e->embedding_path = emb;
    e->save_image_with_embedding = false;
}

/* Files (not folders) under dir and its sub-folders whose name holds name_part (NULL: every file); -1 when dir
 * cannot be opened. */
static inline int rank_fx_count_files(const char *dir, const char *name_part)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char path[FX_PATH];
        struct stat st;
        fx_path(path, dir, de->d_name);
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            int inside = rank_fx_count_files(path, name_part);
            n += inside > 0 ? inside : 0;
        } else if (!name_part || strstr(de->d_name, name_part)) {
            n++;
        }
    }
    closedir(d);
    return n;
}

/* Files whose name holds ".tmp-" (an unfinished atomic save) under dir (0 when there is no dir). */
static inline int rank_fx_count_temp_files(const char *dir)
{
    int n = rank_fx_count_files(dir, ".tmp-");
    return n > 0 ? n : 0;
}

/* The largest difference between tensor `name` of two safetensors files (INFINITY when either lacks it,
 * or the sizes differ, or a difference is NaN); *n receives a's count (may be NULL). */
static inline double rank_fx_max_abs_diff(const char *a, const char *b, const char *name, int64_t *n)
{
    int64_t na = 0, nb = 0;
    float *x = fx_read_tensor(a, name, &na), *y = fx_read_tensor(b, name, &nb);
    double worst = (x && y && na == nb) ? 0 : INFINITY;
    for (int64_t i = 0; x && y && na == nb && i < na; i++) {
        double d = fabs((double)x[i] - (double)y[i]);
        if (d > worst || isnan(d)) worst = isnan(d) ? INFINITY : d;
    }
    if (n) *n = na;
    free(x);
    free(y);
    return worst;
}

#endif
