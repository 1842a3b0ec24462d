/* model_test_util.h - shared by the model tests: a CPU backend, temp checkpoints,
 * tensors copied to float64 for the reference implementations (header only). */
#ifndef SDT_MODEL_TEST_UTIL_H
#define SDT_MODEL_TEST_UTIL_H

#include "sdt_error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "arena.h"
#include "checkpoint_gen.h"
#include "clip_text.h"
#include "ops.h"
#include "safetensors.h"
#include "sdt_test.h"
#include "weights.h"

/* Removes a generated folder with everything in it. */
static inline void mt_remove_folder(const char *dir)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        char *p = g_build_filename(dir, name, NULL);
        if (g_file_test(p, G_FILE_TEST_IS_DIR))
            mt_remove_folder(p);
        else
            g_remove(p);
        g_free(p);
    }
    if (d) g_dir_close(d);
    g_rmdir(dir);
}

static inline void *mt_alloc(size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory allocating %zu bytes\n", bytes);
        exit(1);
    }
    return p;
}

/* Two threads: the CI machine has two cores. SDT_TEST_THREADS overrides it. */
static inline sdt_backend *mt_backend(void)
{
    const char *e = getenv("SDT_TEST_THREADS");
    sdt_backend *be = sdt_backend_cpu_create(e ? atoi(e) : 2);
    if (!be) {
        fprintf(stderr, "could not create the CPU backend\n");
        exit(1);
    }
    return be;
}

/* A unique path in the temp folder; the caller unlinks it. */
static inline void mt_temp_path(char *out, size_t size, const char *tag)
{
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    static int counter = 0;
    snprintf(out, size, "%s/sdt-models-%s-%ld-%d.safetensors", dir, tag, (long)getpid(), counter++);
}

/* A safetensors file at path holding the tensors of w except skip (NULL: all of them), plus the n_extra
 * tensors extra under extra_names: a checkpoint with one tensor missing, misshaped or added. */
static inline void mt_copy_without(const sdt_weights *w, const char *path, const char *skip,
                                   const char *const *extra_names, const sdt_tensor *extra, int n_extra)
{
    size_t n = sdt_weights_count(w);
    sdt_st_write_item *items = mt_alloc(sizeof(*items) * (n + (size_t)n_extra));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *key = sdt_weights_key(w, i);
        if (skip && !strcmp(key, skip)) continue;
        items[k++] = sdt_st_item_from_tensor(key, sdt_weights_get(w, key));
    }
    for (int i = 0; i < n_extra; i++) items[k++] = sdt_st_item_from_tensor(extra_names[i], &extra[i]);
    sdt_error err = {0};
    CHECK(sdt_st_write(path, items, k, NULL, 0, &err), "writing %s: %s", path, err.message);
    free(items);
}

/* A random F32 checkpoint of a preset family with every parameter perturbed (norm
 * weights and biases too), one LDM file, the whole model. */
static inline sdt_ckpt_spec mt_ckpt_spec(sd_family family, uint64_t seed)
{
    sdt_ckpt_spec spec;
    memset(&spec, 0, sizeof(spec));
    spec.config = sd_config_preset(family);
    spec.dtype = SDT_F32;
    spec.seed = seed;
    spec.perturb_all = true;
    return spec;
}

/* Writes mt_ckpt_spec's checkpoint (or its text encoder or VAE only) and opens it.
 * Exits on failure (nothing to test). */
static inline sdt_weights *mt_make_weights(const char *path, sd_family family, uint64_t seed, bool text_only,
                                           bool vae_only)
{
    sdt_ckpt_spec spec = mt_ckpt_spec(family, seed);
    spec.text_only = text_only;
    spec.vae_only = vae_only;
    sdt_error error = {0};
    if (!sdt_ckpt_generate(path, &spec, &error)) {
        fprintf(stderr, "generating %s failed: %s\n", path, error.message);
        exit(1);
    }
    sdt_weights *w = sdt_weights_open(path, &error);
    if (!w) {
        fprintf(stderr, "opening %s failed: %s\n", path, error.message);
        exit(1);
    }
    return w;
}

/* A CPU tensor's values as float64 (any float dtype). */
static inline double *mt_to_double(const sdt_tensor *t)
{
    int64_t n = sdt_tensor_numel(t);
    float *f = mt_alloc((size_t)n * sizeof(float));
    sdt_load_f32(t->data, t->dtype, f, n);
    double *d = mt_alloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++) d[i] = f[i];
    free(f);
    return d;
}

static inline sdt_tensor mt_tensor(void *data, sdt_dtype dt, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    return sdt_tensor_4d(data, dt, ndim, d0, d1, d2, d3);
}

static inline double mt_max_abs_diff(const float *a, const float *b, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > m || d != d) m = d;
    }
    return m;
}

/* An encoder's context (skip: clip_text_inputs.clip_skip) and, when it has one, pooled output for a fixed prompt. */
static inline bool mt_encoder_outputs(const clip_text_model *m, sdt_backend *be, int skip, float *context,
                                      float *pooled, sdt_error *error)
{
    int32_t ids[77] = {998, 5, 17, 300, 999};
    sdt_tensor tok = mt_tensor(ids, SDT_I32, 2, 1, 77, 0, 0);
    clip_text_inputs in = {.tokens = &tok, .act_dtype = SDT_F32, .clip_skip = skip};
    sdt_arena meas, arena;
    clip_text_acts acts;
    sdt_arena_init_measure(&meas, be);
    if (!clip_text_forward(m, be, &meas, &in, &acts, error)) return false;
    if (!sdt_arena_init(&arena, be, meas.peak)) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "arena");
    bool ok = clip_text_forward(m, be, &arena, &in, &acts, error);
    if (ok) {
        memcpy(context, acts.out.data, (size_t)77 * m->cfg.width * sizeof(float));
        if (pooled) memcpy(pooled, acts.pooled.data, (size_t)m->cfg.projection_dim * sizeof(float));
    }
    sdt_arena_release(&arena);
    return ok;
}

#endif
