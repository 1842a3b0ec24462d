/* test_sdxl_text_gpu.c - SDXL's text conditioning (sdxl_text.h: CLIP-L and bigG, the context, bigG's
 * pooled output of each first chunk, both embeddings' row gradients) on the CUDA backend against the
 * CPU backend: a tiny SDXL checkpoint, the same prompts, rows and output gradients; f32 weights and
 * activations (tight), f16 and bf16 weights and activations (16-bit storage). Skips (77) when the CUDA
 * module or a GPU is absent. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint_gen.h"
#include "clip_text.h"
#include "gpu_module.h"
#include "sd_model.h"
#include "sdt_test.h"
#include "sdxl_text.h"
#include "sdxl_test_prompts.h"
#include "tokenizer.h"
#include "weights.h"

enum { B = 2, K = 2, T = 77, R = 2, N = B * K };

typedef struct host_problem {
    int32_t tokens_l[N * T], tokens_g[N * T];
    clip_override ov[4];
    float *rows_l, *rows_g, *dcontext, *dpooled;
    int cl, cg, p;
} host_problem;

typedef struct result {
    float *context, *pooled, *drows_l, *drows_g;
} result;

static sdt_tensor on(sdt_backend *be, const void *host, sdt_dtype host_dt, sdt_dtype dt, int ndim, int64_t d0,
                     int64_t d1, int64_t d2)
{
    int64_t shape[3] = {d0, d1, d2};
    sdt_tensor t = sdt_tensor_make(NULL, dt, be->device, ndim, shape);
    size_t bytes = sdt_tensor_nbytes(&t);
    void *staged = malloc(bytes);
    if (host_dt == SDT_I32)
        memcpy(staged, host, bytes);
    else
        sdt_store_f32(host, staged, dt, sdt_tensor_numel(&t));
    t.data = be->alloc(be, bytes);
    be->upload(be, t.data, staged, bytes);
    free(staged);
    return t;
}

/* The conditioning forward and backward on be with weights w (already on be, in dt) and activations in dt. */
static bool run(sdt_backend *be, const sdt_weights *w, sdt_dtype dt, const host_problem *p, result *out,
                sdt_error *error)
{
    clip_config lc, gc;
    clip_text_model l, g;
    if (!clip_config_detect_at(w, CLIP_SLOT_SDXL_L, &lc, error) || !clip_text_load(&l, &lc, w, error) ||
        !clip_config_detect_at(w, CLIP_SLOT_SDXL_G, &gc, error) || !clip_text_load(&g, &gc, w, error))
        return false;
    sdt_tensor tl = on(be, p->tokens_l, SDT_I32, SDT_I32, 2, N, T, 0),
               tg = on(be, p->tokens_g, SDT_I32, SDT_I32, 2, N, T, 0);
    sdt_tensor rl = on(be, p->rows_l, SDT_F32, SDT_F32, 2, R, p->cl, 0),
               rg = on(be, p->rows_g, SDT_F32, SDT_F32, 2, R, p->cg, 0);
    sdt_tensor dc = on(be, p->dcontext, SDT_F32, dt, 3, B, K * T, p->cl + p->cg),
               dp = on(be, p->dpooled, SDT_F32, dt, 2, B, p->p, 0);
    float *zl = calloc((size_t)R * p->cl, sizeof(float)), *zg = calloc((size_t)R * p->cg, sizeof(float));
    sdt_tensor drl = on(be, zl, SDT_F32, SDT_F32, 2, R, p->cl, 0), drg = on(be, zg, SDT_F32, SDT_F32, 2, R, p->cg, 0);
    free(zl), free(zg);
    sdt_sdxl_text_inputs in = {.tokens_l = &tl,
                               .tokens_g = &tg,
                               .chunks = K,
                               .rows_l = &rl,
                               .rows_g = &rg,
                               .overrides = p->ov,
                               .n_overrides = 4,
                               .act_dtype = dt};
    sdt_arena meas, arena;
    sdt_sdxl_text_acts acts;
    sdt_arena_init_measure(&meas, be);
    bool ok = sdt_sdxl_text_forward(&l, &g, be, &meas, &in, &acts, error) &&
              sdt_sdxl_text_backward(&l, &g, be, &meas, &acts, &dc, &dp, &drl, &drg, error);
    if (ok && !sdt_arena_init(&arena, be, meas.peak))
        ok = sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "arena");
    else if (ok) {
        ok = sdt_sdxl_text_forward(&l, &g, be, &arena, &in, &acts, error) &&
             sdt_sdxl_text_backward(&l, &g, be, &arena, &acts, &dc, &dp, &drl, &drg, error);
        if (ok) {
            out->context = gpu_test_download(be, &acts.context);
            out->pooled = gpu_test_download(be, &acts.pooled);
            out->drows_l = gpu_test_download(be, &drl);
            out->drows_g = gpu_test_download(be, &drg);
        }
        sdt_arena_release(&arena);
    }
    sdt_tensor *all[8] = {&tl, &tg, &rl, &rg, &dc, &dp, &drl, &drg};
    for (int i = 0; i < 8; i++) be->free(be, all[i]->data);
    return ok;
}

static void make_problem(sdt_test_rng *rng, host_problem *p, const sd_config *cfg)
{
    p->cl = cfg->clip.width, p->cg = cfg->clip2.width, p->p = cfg->clip2.projection_dim;
    sdxl_test_chunks(rng, cfg->clip.vocab, clip_pad_id(&cfg->clip2, cfg->clip.vocab - 1), N, T, p->tokens_l,
                     p->tokens_g);
    clip_override ov[4] = {{0, 2, 0}, {1, 3, 0}, {2, 1, 0}, {2, 2, 1}};
    memcpy(p->ov, ov, sizeof ov);
    size_t nc = (size_t)B * K * T * (p->cl + p->cg);
    p->rows_l = malloc((size_t)R * p->cl * sizeof(float));
    p->rows_g = malloc((size_t)R * p->cg * sizeof(float));
    p->dcontext = malloc(nc * sizeof(float));
    p->dpooled = malloc((size_t)B * p->p * sizeof(float));
    sdt_test_fill_normal(rng, p->rows_l, (int64_t)R * p->cl, 0.05);
    sdt_test_fill_normal(rng, p->rows_g, (int64_t)R * p->cg, 0.05);
    sdt_test_fill_normal(rng, p->dcontext, (int64_t)nc, 1.0);
    sdt_test_fill_normal(rng, p->dpooled, (int64_t)B * p->p, 1.0);
}

int main(void)
{
    sdt_backend *gpu = gpu_test_backend("gpu_sdxl_text");
    if (!gpu) return SDT_TEST_SKIP;
    sdt_backend *cpu = sdt_backend_cpu_create(0);
    sdt_test_rng rng = sdt_test_rng_from_env("gpu_sdxl_text");
    char path[256];
    snprintf(path, sizeof path, "%s/sdt-gpu-sdxl-text-%ld.safetensors", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (long)getpid());
    sdt_ckpt_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.config = sd_config_preset(SD_FAMILY_TINY_SDXL);
    spec.dtype = SDT_F32;
    spec.seed = sdt_test_next(&rng);
    spec.perturb_all = true;
    spec.text_only = true;
    sdt_error error = {0};
    sdt_weights *w = sdt_ckpt_generate(path, &spec, &error) ? sdt_weights_open(path, &error) : NULL;
    CHECK(w != NULL, "the tiny SDXL checkpoint: %s", error.message);
    if (w) {
        host_problem p;
        make_problem(&rng, &p, &spec.config);
        result ref;
        bool ref_ok = run(cpu, w, SDT_F32, &p, &ref, &error);
        CHECK(ref_ok, "CPU reference: %s", error.message);
        const sdt_dtype dts[3] = {SDT_F32, SDT_F16, SDT_BF16};
        const double tol[3] = {1e-4, 2e-2, 6e-2};
        for (int i = 0; ref_ok && i < 3; i++) {
            sdt_weights *wg = sdt_weights_materialize(w, gpu, dts[i], &error);
            result r;
            if (!wg || !run(gpu, wg, dts[i], &p, &r, &error)) {
                CHECK(false, "%s on the GPU: %s", sdt_dtype_name(dts[i]), error.message);
            } else {
                size_t nc = (size_t)B * K * T * (p.cl + p.cg);
                double ec = gpu_test_rel(r.context, ref.context, (int64_t)nc),
                       ep = gpu_test_rel(r.pooled, ref.pooled, (int64_t)B * p.p);
                double el = gpu_test_rel(r.drows_l, ref.drows_l, (int64_t)R * p.cl),
                       eg = gpu_test_rel(r.drows_g, ref.drows_g, (int64_t)R * p.cg);
                printf("%s: context %.3g, pooled %.3g, d(clip_l) %.3g, d(clip_g) %.3g (tolerance %.0e)\n",
                       sdt_dtype_name(dts[i]), ec, ep, el, eg, tol[i]);
                CHECK(ec <= tol[i] && ep <= tol[i] && el <= tol[i] && eg <= tol[i],
                      "%s: the GPU differs from the CPU (context %.3g, pooled %.3g, rows %.3g / %.3g)",
                      sdt_dtype_name(dts[i]), ec, ep, el, eg);
                free(r.context), free(r.pooled), free(r.drows_l), free(r.drows_g);
            }
            sdt_weights_close(wg);
        }
        if (ref_ok) free(ref.context), free(ref.pooled), free(ref.drows_l), free(ref.drows_g);
        free(p.rows_l), free(p.rows_g), free(p.dcontext), free(p.dpooled);
        sdt_weights_close(w);
    }
    unlink(path);
    gpu->destroy(gpu);
    cpu->destroy(cpu);
    return sdt_test_finish("gpu_sdxl_text");
}
