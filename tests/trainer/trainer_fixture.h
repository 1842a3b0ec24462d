/* trainer_fixture.h - what the trainer-level tests share (header only): the plugin loaded as a
 * host loads it, the demo assets the build makes, a private temp folder, a callback table that
 * records what the plugin reports, a config preset for fast CPU runs, and file helpers.
 *
 * Every test program takes the same arguments (tests/trainer/CMakeLists.txt passes them):
 *   argv[1] libsdtrain.so   argv[2] the demo folder (model/, dataset/)
 *   argv[3] the templates folder   argv[4] sdt-make-checkpoint (may be "-")
 * Compile with _GNU_SOURCE (nftw, mkdtemp). Set SDT_TEST_KEEP=1 to keep the temp folder for a look after a failure. */
#ifndef SDT_TEST_TRAINER_FIXTURE_H
#define SDT_TEST_TRAINER_FIXTURE_H

#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plugin_open.h"
#include "safetensors.h"
#include "sdt_test.h"

#define FX_PATH 4096

typedef struct trainer_env {
    const char *plugin, *demo_dir, *templates_dir, *make_checkpoint;
    char model[FX_PATH], dataset[FX_PATH];
    char tmp[FX_PATH];
    void *lib;
    const sdt_entry *entry;
    const sdt_ti_factory *ti;
} trainer_env;

/* ---- paths and files ----------------------------------------------------------------- */

static inline const char *fx_path(char *buf, const char *a, const char *b)
{
    if (snprintf(buf, FX_PATH, "%s/%s", a, b) >= FX_PATH) buf[0] = '\0';
    return buf;
}

static inline bool fx_mkdir(const char *path)
{
    return mkdir(path, 0777) == 0 || access(path, F_OK) == 0;
}

/* A new folder under the test's temp folder. */
static inline const char *fx_subdir(const trainer_env *env, char *buf, const char *name)
{
    fx_path(buf, env->tmp, name);
    CHECK(fx_mkdir(buf), "mkdir %s", buf);
    return buf;
}

static inline unsigned char *fx_read_file(const char *path, size_t *n)
{
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(size > 0 ? (size_t)size + 1 : 1);
    if (buf && size > 0 && fread(buf, 1, (size_t)size, f) != (size_t)size) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        *n = (size_t)(size > 0 ? size : 0);
        buf[*n] = 0;
    }
    return buf;
}

static inline bool fx_write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static inline bool fx_copy_file(const char *src, const char *dst)
{
    size_t n;
    unsigned char *b = fx_read_file(src, &n);
    bool ok = b && fx_write_file(dst, b, n);
    free(b);
    return ok;
}

/* true when both files exist and hold the same bytes. */
static inline bool fx_same_bytes(const char *a, const char *b)
{
    size_t na, nb;
    unsigned char *x = fx_read_file(a, &na), *y = fx_read_file(b, &nb);
    bool same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

/* Today's local date as a run names its date folder (<log>/<YYYY-MM-DD>/<name>). */
static inline void fx_today(char date[16])
{
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(date, 16, "%Y-%m-%d", &tm);
}

/* The places where a damaged state is tried: a byte of the tensor data, and one of the header (its JSON). */
#define FX_FLIP_PLACES 2
/* Writes to dst a copy of src with one byte flipped at place (0 .. FX_FLIP_PLACES - 1); *at gets its offset. */
static inline bool fx_write_flipped(const char *src, const char *dst, int place, size_t *at)
{
    size_t n;
    unsigned char *bytes = fx_read_file(src, &n);
    bool ok = bytes && n > 64;
    *at = ok ? (place == 0 ? n - 5 : 40) : 0;
    if (ok) {
        bytes[*at] ^= 0x01;
        ok = fx_write_file(dst, bytes, n);
    }
    free(bytes);
    return ok;
}

/* A dataset folder holding the demo images (and captions) with these stems, e.g. "demo_003". */
static inline void fx_copy_images(const trainer_env *env, const char *dst, const char *const *stems, int n)
{
    CHECK(fx_mkdir(dst), "mkdir %s", dst);
    for (int i = 0; i < n; i++) {
        char src[FX_PATH], out[FX_PATH];
        const char *ext[2] = {".png", ".txt"};
        for (int k = 0; k < 2; k++) {
            snprintf(src, sizeof src, "%.3900s/%.100s%s", env->dataset, stems[i], ext[k]);
            snprintf(out, sizeof out, "%.3900s/%.100s%s", dst, stems[i], ext[k]);
            CHECK(fx_copy_file(src, out), "copy %s -> %s", src, out);
        }
    }
}

static inline int fx_remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* A copy of one float tensor of a safetensors file (NULL when absent); *n = its element count. */
static inline float *fx_read_tensor(const char *path, const char *name, int64_t *n)
{
    sdt_error error = {0};
    *n = 0;
    sdt_safetensors *st = sdt_st_open(path, &error);
    CHECK(st != NULL, "open %s: %s", path, error.message);
    if (!st) return NULL;
    const sdt_st_entry *e = sdt_st_find(st, name);
    float *out = NULL;
    if (e && e->dtype == SDT_ST_F32) {
        out = malloc(e->nbytes ? e->nbytes : 1);
        memcpy(out, e->data, e->nbytes);
        *n = (int64_t)(e->nbytes / sizeof(float));
    }
    CHECK(out != NULL, "%s: no f32 tensor '%s'", path, name);
    sdt_st_close(st);
    return out;
}

/* A copy of one metadata value (NULL when absent). */
static inline char *fx_read_metadata(const char *path, const char *key)
{
    sdt_error error;
    sdt_safetensors *st = sdt_st_open(path, &error);
    if (!st) return NULL;
    const char *v = sdt_st_metadata_get(st, key);
    char *out = v ? strdup(v) : NULL;
    sdt_st_close(st);
    return out;
}

/* The "step" metadata of a .safetensors file the plugin wrote (an embedding, a twin, a state), or -1. */
static inline int64_t fx_file_step(const char *path)
{
    char *s = fx_read_metadata(path, "step");
    int64_t step = s ? strtoll(s, NULL, 10) : -1;
    free(s);
    return step;
}

static inline bool fx_all_finite(const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

/* Overwrites element `index` of tensor `name` (f32 or f16) in a safetensors file with value. */
static inline bool fx_poke_f32(const char *path, const char *name, int64_t index, float value)
{
    sdt_error error;
    sdt_safetensors *st = sdt_st_open(path, &error);
    if (!st) return false;
    const sdt_st_entry *e = sdt_st_find(st, name);
    int dtype = e ? (int)e->dtype : -1;
    uint64_t offset = e ? e->offset : 0, nbytes = e ? e->nbytes : 0;
    sdt_st_close(st);
    size_t es = dtype == SDT_ST_F32 ? 4 : dtype == SDT_ST_F16 ? 2 : 0;
    if (!es || (uint64_t)(index + 1) * es > nbytes) return false;
    size_t n;
    unsigned char *bytes = fx_read_file(path, &n);
    if (!bytes || n < 8) return false;
    uint64_t header = 0;
    for (int i = 7; i >= 0; i--) header = header << 8 | bytes[i];
    size_t at = 8 + (size_t)header + (size_t)offset + (size_t)index * es;
    if (es == 4) {
        memcpy(bytes + at, &value, 4);
    } else {
        uint16_t h = isnan(value) ? 0x7E00 : 0x7C00 | (value < 0 ? 0x8000 : 0); /* tests poke NaN or Inf only */
        bytes[at] = (unsigned char)(h & 0xff), bytes[at + 1] = (unsigned char)(h >> 8);
    }
    bool ok = fx_write_file(path, bytes, n);
    free(bytes);
    return ok;
}

/* A copy of the demo model (diffusers folder) at out, to damage. */
static inline void fx_copy_model(const trainer_env *env, const char *out)
{
    fx_mkdir(out);
    const char *parts[4][3] = {{"text_encoder", "model.safetensors", NULL},
                               {"unet", "diffusion_pytorch_model.safetensors", NULL},
                               {"vae", "diffusion_pytorch_model.safetensors", NULL},
                               {"tokenizer", "vocab.json", "merges.txt"}};
    for (int i = 0; i < 4; i++) {
        char src[FX_PATH], dst[FX_PATH], a[FX_PATH], b[FX_PATH];
        snprintf(src, sizeof src, "%.2000s/%s", env->model, parts[i][0]);
        snprintf(dst, sizeof dst, "%.2000s/%s", out, parts[i][0]);
        fx_mkdir(dst);
        for (int k = 1; k < 3 && parts[i][k]; k++)
            CHECK(fx_copy_file(fx_path(a, src, parts[i][k]), fx_path(b, dst, parts[i][k])), "copy %s", a);
    }
}

/* ---- the environment ------------------------------------------------------------------- */

static inline bool trainer_env_open(trainer_env *env, int argc, char **argv, const char *name)
{
    memset(env, 0, sizeof *env);
    if (argc < 4) {
        fprintf(stderr, "usage: %s libsdtrain.so DEMO_DIR TEMPLATES_DIR [sdt-make-checkpoint]\n", name);
        return false;
    }
    env->plugin = argv[1];
    env->demo_dir = argv[2];
    env->templates_dir = argv[3];
    env->make_checkpoint = argc > 4 && strcmp(argv[4], "-") != 0 ? argv[4] : NULL;
    fx_path(env->model, env->demo_dir, "model");
    fx_path(env->dataset, env->demo_dir, "dataset");
    char probe[FX_PATH];
    if (access(fx_path(probe, env->model, "unet"), F_OK) != 0 || access(env->dataset, F_OK) != 0) {
        printf("%s: the demo model or dataset is not built (%s); skipping\n", name, env->demo_dir);
        return false;
    }
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(env->tmp, sizeof env->tmp, "%s/sdt-%s-XXXXXX", base, name);
    if (!mkdtemp(env->tmp)) {
        CHECK(false, "mkdtemp %s", env->tmp);
        return false;
    }
    env->entry = sdt_test_plugin_load(env->plugin, &env->lib);
    if (!env->entry) return false;
    env->ti = (const sdt_ti_factory *)env->entry->get_factory(SDT_FACTORY_TEXTUAL_INVERSION);
    CHECK(env->ti != NULL, "no %s factory", SDT_FACTORY_TEXTUAL_INVERSION);
    return env->ti != NULL;
}

static inline void trainer_env_close(trainer_env *env)
{
    if (env->entry) env->entry->deinit();
    if (env->lib) dlclose(env->lib);
    if (env->tmp[0] && !getenv("SDT_TEST_KEEP"))
        nftw(env->tmp, fx_remove_one, 16, FTW_DEPTH | FTW_PHYS);
    else if (env->tmp[0])
        printf("kept %s\n", env->tmp);
}

/* main's exit code when trainer_env_open failed: 1 after a failed check, else the skip code. */
static inline int trainer_env_abandon(trainer_env *env)
{
    trainer_env_close(env);
    return sdt_test_failures ? 1 : SDT_TEST_SKIP;
}

/* ---- what the plugin reports ------------------------------------------------------------ */

#define FX_MAX_STEPS 256

typedef struct fx_step {
    int64_t step, skipped;
    double loss, learn_rate, loss_scale, grad_norm;
    uint32_t precision;
    bool fallback;
} fx_step;

typedef struct fx_recorder {
    pthread_mutex_t mu;
    fx_step steps[FX_MAX_STEPS];
    int n_steps;
    char log[32768];
    size_t log_len;
    int warnings;
    char last_saved[16][FX_PATH]; /* by sdt_file_kind */
    int saved[16];
    /* optional: called after recording each step (on the training thread) */
    void (*on_step)(struct fx_recorder *r, const sdt_metrics *m);
    void *user;
} fx_recorder;

static inline void fx_on_log(void *u, sdt_log_level level, const char *msg)
{
    fx_recorder *r = u;
    pthread_mutex_lock(&r->mu);
    if (level >= SDT_LOG_WARNING) r->warnings++;
    int n = snprintf(r->log + r->log_len, sizeof r->log - r->log_len, "[%d] %s\n", (int)level, msg);
    if (n > 0 && r->log_len + (size_t)n < sizeof r->log) r->log_len += (size_t)n;
    pthread_mutex_unlock(&r->mu);
    if (getenv("SDT_TEST_VERBOSE")) fprintf(stderr, "plugin [%d]: %s\n", (int)level, msg);
}

static inline void fx_on_metrics(void *u, const sdt_metrics *m)
{
    fx_recorder *r = u;
    pthread_mutex_lock(&r->mu);
    if (r->n_steps < FX_MAX_STEPS)
        r->steps[r->n_steps++] = (fx_step){m->step,       m->skipped_steps, m->loss,      m->learn_rate,
                                           m->loss_scale, m->grad_norm,     m->precision, m->fallback_fired};
    pthread_mutex_unlock(&r->mu);
    if (getenv("SDT_TEST_VERBOSE"))
        fprintf(stderr, "step %lld loss %g lr %g scale %g norm %g prec %u fb %d skipped %lld\n", (long long)m->step,
                m->loss, m->learn_rate, m->loss_scale, m->grad_norm, m->precision, m->fallback_fired,
                (long long)m->skipped_steps);
    if (r->on_step) r->on_step(r, m);
}

static inline void fx_on_file(void *u, const sdt_saved_file *f)
{
    fx_recorder *r = u;
    pthread_mutex_lock(&r->mu);
    if (f->kind < 16) {
        r->saved[f->kind]++;
        snprintf(r->last_saved[f->kind], FX_PATH, "%s", f->path);
    }
    pthread_mutex_unlock(&r->mu);
}

static inline sdt_host_callbacks fx_recorder_init(fx_recorder *r)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    sdt_host_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.struct_size = sizeof cb;
    cb.user_data = r;
    cb.log = fx_on_log;
    cb.metrics = fx_on_metrics;
    cb.file_saved = fx_on_file;
    return cb;
}

/* ---- trainers ------------------------------------------------------------------------------ */

static inline const char *fx_last_error(const trainer_env *env, const sdt_ti_trainer *t)
{
    static _Thread_local char buf[2048];
    buf[0] = 0;
    env->ti->get_last_error(t, buf, sizeof buf, NULL);
    return buf;
}

static inline sdt_ti_trainer *fx_create(const trainer_env *env, fx_recorder *rec)
{
    sdt_host_callbacks cb = fx_recorder_init(rec);
    sdt_ti_trainer *t = NULL;
    char err[512] = "";
    CHECK(env->ti->create(&cb, &t, err, sizeof err) == SDT_STATUS_OK && t, "create: %s", err);
    return t;
}

/* A new embedding <dir>/<name>.safetensors from the demo model; path in out (FX_PATH). */
static inline bool fx_make_embedding(const trainer_env *env, const char *dir, const char *name, uint32_t vectors,
                                     const char *init_text, char *out)
{
    fx_recorder rec;
    sdt_ti_trainer *t = fx_create(env, &rec);
    if (!t) return false;
    sdt_embedding_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.struct_size = sizeof spec;
    spec.vectors_per_token = vectors;
    spec.name = name;
    spec.init_text = init_text;
    spec.model_path = env->model;
    spec.output_dir = dir;
    spec.overwrite = true;
    sdt_status st = env->ti->create_embedding(t, &spec, out, FX_PATH, NULL);
    CHECK(st == SDT_STATUS_OK, "create_embedding %s: %s", name, fx_last_error(env, t));
    env->ti->destroy(t);
    return st == SDT_STATUS_OK;
}

/* The fast preset: 64x64, CPU with one thread (runs share 2 cores), fp32, every row in the
 * CSV, no previews or copies, the subject template with [filewords]. */
static inline void fx_config(const trainer_env *env, sdt_ti_config *c, const char *embedding, const char *dataset,
                             const char *log_dir, int64_t max_steps)
{
    static _Thread_local char template_path[FX_PATH];
    memset(c, 0, sizeof *c);
    c->struct_size = sizeof *c;
    env->ti->config_defaults(c);
    fx_path(template_path, env->templates_dir, "subject_filewords.txt");
    c->embedding_path = embedding;
    c->model_path = env->model;
    c->dataset_dir = dataset ? dataset : env->dataset;
    c->template_file = template_path;
    c->log_dir = log_dir;
    c->width = c->height = 64;
    c->device = SDT_DEVICE_CHOICE_CPU;
    c->cpu_threads = 1;
    c->max_steps = max_steps;
    c->save_every = 0;
    c->preview_every = 0;
    c->write_csv_every = 1;
    c->save_image_with_embedding = false;
    c->seed = 1234;
}

/* The fast preset on the shared options of the newer factories (fx_config's on sdt_ti_config): the demo model
 * and dataset, 64x64, CPU with one thread, every CSV row, no previews or copies, the subject template (its path
 * written into template_path, which must outlive the run). */
static inline void fx_fast_options(const trainer_env *env, sdt_train_options *o, char template_path[FX_PATH],
                                   const char *log_dir, int64_t max_steps, uint64_t seed)
{
    fx_path(template_path, env->templates_dir, "subject_filewords.txt");
    o->model_path = env->model;
    o->dataset_dir = env->dataset;
    o->template_file = template_path;
    o->log_dir = log_dir;
    o->width = o->height = 64;
    o->device = SDT_DEVICE_CHOICE_CPU;
    o->cpu_threads = 1;
    o->max_steps = max_steps;
    o->save_every = 0;
    o->preview_every = 0;
    o->write_csv_every = 1;
    o->seed = seed;
}

/* prepare + run; returns the first status that is not OK (or run's status). */
static inline sdt_status fx_prepare_run(const trainer_env *env, sdt_ti_trainer *t, const sdt_ti_config *c)
{
    sdt_prepare_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    sdt_status st = env->ti->prepare(t, c, &info);
    if (st != SDT_STATUS_OK) return st;
    return env->ti->run(t);
}

/* The embedding tensor of a file written by the plugin. */
static inline float *fx_read_embedding(const char *path, int64_t *n)
{
    return fx_read_tensor(path, "emb_params", n);
}

/* Whether the embedding file at path is finite, has initial's n0 values and holds
 * exactly them (changed = false) or differs from them (changed = true). */
static inline bool fx_embedding_check(const char *path, const float *initial, int64_t n0, bool changed)
{
    int64_t n;
    float *final = fx_read_embedding(path, &n);
    bool ok = final && initial && n == n0 && fx_all_finite(final, n) &&
              (memcmp(final, initial, (size_t)n * 4) != 0) == changed;
    free(final);
    return ok;
}

/* Runs child(arg) in a forked process (a run that a test kills from inside; the child _exits when
 * it is not killed) and returns the signal that ended it: 0 when it exited, -1 when fork failed. */
static inline int fx_signal_ending_child(void (*child)(void *arg), void *arg)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        child(arg);
        _exit(0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -1;
    return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

#endif
