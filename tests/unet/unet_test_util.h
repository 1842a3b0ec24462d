/* unet_test_util.h - shared by the UNet tests (header only): random UNet
 * checkpoints written through the project's safetensors writer into a temp
 * folder, a CPU backend, host tensors and a "loss" L = sum(w * unet(...)). */
#ifndef SDT_UNET_TEST_UTIL_H
#define SDT_UNET_TEST_UTIL_H

#include "sdt_error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernel_test.h"
#include "safetensors.h"
#include "sdt_test.h"
#include "unet.h"

typedef struct ut_param {
    char *key;
    int ndim;
    int64_t shape[4];
    float *data;
} ut_param;

typedef struct ut_params {
    ut_param *p;
    size_t n, cap;
    sdt_test_rng *rng;
    const char *skip_key;     /* leave this key out (missing-key test) */
    const char *misshape_key; /* write this key with its first dim + 1 */
} ut_params;

/* When set, the first element of this key is written as NaN (anomaly test). */
static const char *ut_poison_key = NULL;

static inline bool ut_collect(void *user, const sdt_param_info *info)
{
    ut_params *ps = user;
    if (ps->skip_key && !strcmp(info->key, ps->skip_key)) return true;
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? 2 * ps->cap : 256;
        ps->p = realloc(ps->p, ps->cap * sizeof *ps->p);
        if (!ps->p) return false;
    }
    ut_param *p = &ps->p[ps->n++];
    p->key = strdup(info->key);
    p->ndim = info->ndim;
    int64_t numel = 1;
    for (int i = 0; i < info->ndim; i++) {
        p->shape[i] = info->shape[i];
        if (i == 0 && ps->misshape_key && !strcmp(info->key, ps->misshape_key)) p->shape[i]++;
        numel *= p->shape[i];
    }
    p->data = kt_alloc((size_t)numel * sizeof(float));
    /* Random everywhere, also where the generator would write ones/zeros, so
     * every norm scale and bias takes part in the checks. */
    for (int64_t i = 0; i < numel; i++) {
        double z = sdt_test_normal(ps->rng);
        switch (info->init) {
            case SDT_INIT_NORMAL:
                p->data[i] = (float)(info->std * z);
                break;
            case SDT_INIT_ONES:
                p->data[i] = (float)(1.0 + 0.2 * z);
                break;
            case SDT_INIT_ZEROS:
                p->data[i] = (float)(0.1 * z);
                break;
        }
    }
    if (ut_poison_key && !strcmp(info->key, ut_poison_key)) p->data[0] = NAN;
    return true;
}

static inline void ut_params_free(ut_params *ps)
{
    for (size_t i = 0; i < ps->n; i++) {
        free(ps->p[i].key);
        free(ps->p[i].data);
    }
    free(ps->p);
}

/* A temp folder for this test run; removed by ut_cleanup. */
static inline char *ut_tmpdir(void)
{
    char tmpl[] = "/tmp/sdt-unet-test-XXXXXX";
    char *d = mkdtemp(tmpl);
    if (!d) {
        fprintf(stderr, "cannot create a temp folder in /tmp\n");
        exit(1);
    }
    return strdup(d);
}

/* Writes a random UNet of config c to dir/name.safetensors and opens it as weights. */
static inline sdt_weights *ut_random_unet(const sdt_unet_config *c, sdt_test_rng *rng, const char *dir,
                                          const char *name, const char *skip_key, const char *misshape_key,
                                          char *path_out, size_t path_size)
{
    sdt_error error = {0};
    ut_params ps = {.rng = rng, .skip_key = skip_key, .misshape_key = misshape_key};
    if (!sdt_unet_enumerate_params(c, ut_collect, &ps, &error)) {
        fprintf(stderr, "enumerate: %s\n", error.message);
        exit(1);
    }
    sdt_st_write_item *items = kt_alloc(ps.n * sizeof *items);
    for (size_t i = 0; i < ps.n; i++) {
        items[i].name = ps.p[i].key;
        items[i].dtype = SDT_ST_F32;
        items[i].ndim = ps.p[i].ndim;
        items[i].shape = ps.p[i].shape;
        items[i].data = ps.p[i].data;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, name);
    if (path_out) snprintf(path_out, path_size, "%s", path);
    if (!sdt_st_write(path, items, ps.n, NULL, 0, &error)) {
        fprintf(stderr, "write: %s\n", error.message);
        exit(1);
    }
    free(items);
    ut_params_free(&ps);
    sdt_weights *w = sdt_weights_open(path, &error);
    if (!w) {
        fprintf(stderr, "open: %s\n", error.message);
        exit(1);
    }
    return w;
}

/* A random UNet of config c written as dir/name and loaded (*w keeps its weights); NULL after a
 * failed CHECK. */
static inline sdt_unet *ut_load_random_unet(const sdt_unet_config *c, sdt_test_rng *rng, const char *dir,
                                            const char *name, sdt_weights **w)
{
    sdt_error error = {0};
    *w = ut_random_unet(c, rng, dir, name, NULL, NULL, NULL, 0);
    sdt_unet *u = sdt_unet_load(c, *w, &error);
    CHECK(u != NULL, "%s load: %s", name, error.message);
    return u;
}

/* The tiny model SD2-style: linear attention projections, transformer depth 2. */
static inline sdt_unet_config ut_config_tiny_linear(void)
{
    sdt_unet_config c = sdt_unet_config_tiny();
    c.linear_proj = true;
    c.transformer_depth[0] = 2;
    c.middle_depth = 2;
    return c;
}

/* A test's check of one UNet config (label names it in messages). */
typedef void (*ut_config_check)(const sdt_unet_config *cfg, const char *label, sdt_test_rng *rng, sdt_backend *be,
                                const char *dir);

/* check on the three tiny configs the UNet tests cover: SD 1.5's shape, SD2's linear projections, SDXL's. */
static inline void ut_check_tiny_configs(ut_config_check check, sdt_test_rng *rng, sdt_backend *be, const char *dir)
{
    sdt_unet_config tiny = sdt_unet_config_tiny();
    check(&tiny, "tiny", rng, be, dir);
    sdt_unet_config tiny2 = ut_config_tiny_linear();
    check(&tiny2, "tiny-linear", rng, be, dir);
    sdt_unet_config tiny_xl = sdt_unet_config_tiny_sdxl();
    check(&tiny_xl, "tiny-sdxl", rng, be, dir);
}

static inline void ut_cleanup(char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    free(dir);
}

/* Inputs of one UNet call, host f32. y (SDXL's vector conditioning) only for a config with
 * label_emb; d_y_out, when set, receives d(y) from ut_run's backward. */
typedef struct ut_inputs {
    int64_t B, H, W, T;
    float *latents, *timesteps, *context, *dy, *y, *d_y_out;
    sdt_tensor lat, ts, ctx, yt;
} ut_inputs;

static inline const sdt_tensor *ut_y(const ut_inputs *in)
{
    return in->y ? &in->yt : NULL;
}

static inline ut_inputs ut_make_inputs(const sdt_unet_config *c, sdt_test_rng *r, int64_t B, int64_t H, int64_t W,
                                       int64_t T)
{
    ut_inputs in = {.B = B, .H = H, .W = W, .T = T};
    in.latents = kt_randn(r, B * c->in_channels * H * W, 1.0);
    in.timesteps = kt_alloc((size_t)B * sizeof(float));
    for (int64_t b = 0; b < B; b++) in.timesteps[b] = (float)(1.0 + 998.0 * sdt_test_uniform(r));
    in.context = kt_randn(r, B * T * c->context_dim, 1.0);
    in.dy = kt_randn(r, B * c->out_channels * H * W, 1.0);
    in.lat = kt_f32(in.latents, 4, B, c->in_channels, H, W);
    in.ts = kt_f32(in.timesteps, 1, B, 0, 0, 0);
    in.ctx = kt_f32(in.context, 3, B, T, c->context_dim, 0);
    if (c->adm_in_channels > 0) {
        in.y = kt_randn(r, B * c->adm_in_channels, 1.0);
        in.yt = kt_f32(in.y, 2, B, c->adm_in_channels, 0, 0);
    }
    return in;
}

static inline void ut_free_inputs(ut_inputs *in)
{
    free(in->latents);
    free(in->timesteps);
    free(in->context);
    free(in->dy);
    free(in->y);
}

/* Measures forward (+ backward) and returns an arena of exactly that size. */
static inline size_t ut_measure(sdt_unet *u, sdt_backend *be, const sdt_unet_options *opt, ut_inputs *in, bool backward)
{
    sdt_arena m;
    sdt_arena_init_measure(&m, be);
    sdt_error error = {0};
    sdt_tensor out, dctx = in->ctx, d_y = in->yt;
    if (!sdt_unet_forward(u, be, &m, opt, &in->lat, &in->ts, &in->ctx, ut_y(in), &out, &error)) {
        fprintf(stderr, "measure forward: %s\n", error.message);
        exit(1);
    }
    if (backward) {
        sdt_tensor dy = out;
        if (!sdt_unet_backward(u, be, &m, &dy, &dctx, in->d_y_out ? &d_y : NULL, &error)) {
            fprintf(stderr, "measure backward: %s\n", error.message);
            exit(1);
        }
    }
    return m.peak;
}

/* out (host copy, may be NULL) = unet(in); d_context (may be NULL) = J^T dy. Returns false on error (printed). */
static inline bool ut_run(sdt_unet *u, sdt_backend *be, const sdt_unet_options *opt, ut_inputs *in, float *out_host,
                          float *dctx_host, size_t *peak)
{
    sdt_unet_options o = *opt;
    o.for_backward = opt->for_backward || dctx_host;
    size_t need = ut_measure(u, be, &o, in, dctx_host != NULL);
    sdt_arena a;
    if (!sdt_arena_init(&a, be, need)) return false;
    sdt_error error = {0};
    sdt_tensor out;
    bool ok = sdt_unet_forward(u, be, &a, &o, &in->lat, &in->ts, &in->ctx, ut_y(in), &out, &error);
    if (ok && out_host) sdt_load_f32(out.data, out.dtype, out_host, sdt_tensor_numel(&out));
    if (ok && dctx_host) {
        memset(dctx_host, 0, sdt_tensor_nbytes(&in->ctx));
        sdt_tensor dctx = kt_f32(dctx_host, 3, in->B, in->T, in->ctx.shape[2], 0);
        sdt_tensor dy = kt_f32(in->dy, 4, out.shape[0], out.shape[1], out.shape[2], out.shape[3]);
        sdt_tensor d_y = in->yt;
        if (in->d_y_out) {
            memset(in->d_y_out, 0, sdt_tensor_nbytes(&in->yt));
            d_y.data = in->d_y_out;
        }
        ok = sdt_unet_backward(u, be, &a, &dy, &dctx, in->d_y_out ? &d_y : NULL, &error);
    }
    if (!ok) fprintf(stderr, "unet: %s\n", error.message);
    if (ok && !sdt_arena_fits(&a)) {
        fprintf(stderr, "arena overflowed although measured\n");
        ok = false;
    }
    if (peak) *peak = a.peak;
    sdt_arena_release(&a);
    return ok;
}

/* L = sum(dy * unet(in)) in double. */
static inline double ut_loss(sdt_unet *u, sdt_backend *be, const sdt_unet_options *opt, ut_inputs *in)
{
    int64_t n = in->B * sdt_unet_get_config(u)->out_channels * in->H * in->W;
    float *y = kt_alloc((size_t)n * sizeof *y);
    sdt_unet_options o = *opt;
    o.for_backward = false;
    double L = NAN;
    if (ut_run(u, be, &o, in, y, NULL, NULL)) {
        L = 0;
        for (int64_t i = 0; i < n; i++) L += (double)in->dy[i] * y[i];
    }
    free(y);
    return L;
}

/* The gradient g (nc values) of ut_loss over in->context along a random unit direction v, against a central
 * difference of ut_loss (step 3e-2): *analytic = v . g, *fd the difference quotient, *gnorm = |g|^2 (what a
 * test's tolerance scales with). The context is restored. */
static inline void ut_context_direction(sdt_unet *u, sdt_backend *be, const sdt_unet_options *opt, ut_inputs *in,
                                        const float *g, int64_t nc, sdt_test_rng *rng, double *analytic, double *fd,
                                        double *gnorm)
{
    double *v = kt_alloc((size_t)nc * sizeof *v), dot = 0, norm = 0, gn = 0;
    for (int64_t i = 0; i < nc; i++) {
        v[i] = sdt_test_normal(rng);
        norm += v[i] * v[i];
    }
    float *saved = kt_copy(in->context, nc);
    for (int64_t i = 0; i < nc; i++) {
        v[i] /= sqrt(norm);
        dot += v[i] * g[i];
        gn += (double)g[i] * g[i];
    }
    const double step = 3e-2;
    for (int64_t i = 0; i < nc; i++) in->context[i] = (float)(saved[i] + step * v[i]);
    double up = ut_loss(u, be, opt, in);
    for (int64_t i = 0; i < nc; i++) in->context[i] = (float)(saved[i] - step * v[i]);
    double down = ut_loss(u, be, opt, in);
    memcpy(in->context, saved, (size_t)nc * sizeof(float));
    *analytic = dot, *fd = (up - down) / (2 * step), *gnorm = gn;
    free(v);
    free(saved);
}

#endif
