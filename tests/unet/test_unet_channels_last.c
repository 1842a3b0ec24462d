/* The UNet run channels-last (tensor.h; what the CUDA backend prefers) against the same UNet run
 * NCHW, on the CPU: the output, d(context) and (SDXL) d(y) bit for bit (the CPU's channels-last
 * ops stage through NCHW copies, so any difference is a layout slip in the UNet: a view, a missed
 * transpose, a wrong output layout). Tiny SD (1x1 conv projections), tiny SD with linear
 * projections (SD 2), a 9-channel (inpainting) input and tiny SDXL; f32 and f16 activations; with
 * gradient checkpointing; with a hook at every attention's K/V input (a hypernetwork's place); and with the conv filters laid out channels-last by
 * sdt_weights_materialize, as they reach a GPU, under either activation layout. */
#include <string.h>

#include "host_convert.h"
#include "unet_test_util.h"

/* A hook at every K/V input (a hypernetwork's place): out = 1.5 in, so d_in += 1.5 d_out. */
static bool hook_forward(void *user, const sdt_unet_hook_site *site, const sdt_tensor *in, sdt_tensor *out,
                         bool recompute, sdt_error *error)
{
    sdt_backend *be = user;
    (void)site, (void)recompute;
    if (be->convert(be, out, in) == 0 && be->scale(be, out, 1.5f) == 0) return true;
    *error = be->error;
    return false;
}

static bool hook_backward(void *user, const sdt_unet_hook_site *site, const sdt_tensor *in, const sdt_tensor *d_out,
                          sdt_tensor *d_in, sdt_error *error)
{
    sdt_backend *be = user;
    (void)site, (void)in;
    if (be->axpy(be, d_in, 1.5f, d_out) == 0) return true;
    *error = be->error;
    return false;
}

typedef struct results {
    float *y, *dctx, *dy;
} results;

static results run(sdt_unet *u, sdt_backend *be, bool channels_last, const sdt_unet_options *opt, ut_inputs *in,
                   int64_t ny, int64_t nc, int64_t n_y, const char *label)
{
    results r = {kt_alloc((size_t)ny * 4), kt_alloc((size_t)nc * 4), n_y ? kt_alloc((size_t)n_y * 4) : NULL};
    be->prefers_channels_last = channels_last;
    in->d_y_out = r.dy;
    CHECK(ut_run(u, be, opt, in, r.y, r.dctx, NULL), "%s: runs", label);
    be->prefers_channels_last = false;
    return r;
}

static void same(const results *a, const results *b, int64_t ny, int64_t nc, int64_t n_y, const char *label)
{
    CHECK(!memcmp(a->y, b->y, (size_t)ny * 4), "%s: the output differs from the NCHW run's", label);
    CHECK(!memcmp(a->dctx, b->dctx, (size_t)nc * 4), "%s: d(context) differs from the NCHW run's", label);
    CHECK(!n_y || !memcmp(a->dy, b->dy, (size_t)n_y * 4), "%s: d(y) differs from the NCHW run's", label);
}

static void drop(results *r)
{
    free(r->y), free(r->dctx), free(r->dy);
}

/* The materialized copy holds the UNet's filters channels-last (and nothing else): conv_in's checked element by element. */
static void check_materialized(const sdt_weights *file, const sdt_weights *dev, const char *label)
{
    const char *key = SDT_UNET_KEY_PREFIX "input_blocks.0.0.weight";
    const sdt_tensor *f = sdt_weights_get(file, key), *d = sdt_weights_get(dev, key);
    const sdt_tensor *bias = sdt_weights_get(dev, SDT_UNET_KEY_PREFIX "input_blocks.0.0.bias");
    if (!f || !d || !bias) {
        CHECK(false, "%s: conv_in's tensors are missing", label);
        return;
    }
    CHECK(d->channels_last && !f->channels_last && !bias->channels_last, "%s: only the filter is marked channels-last",
          label);
    int64_t n = sdt_tensor_numel(f);
    float *want = kt_alloc((size_t)n * 4);
    sdt_host_permute_channels(f->data, want, 4, f->shape[0], f->shape[1], f->shape[2] * f->shape[3], true);
    int64_t OC = f->shape[0], C = f->shape[1], K = f->shape[2] * f->shape[3], bad = 0;
    for (int64_t o = 0; o < OC; o++) /* this test's own index: [OC, KH*KW, C] */
        for (int64_t c = 0; c < C; c++)
            for (int64_t k = 0; k < K; k++)
                bad += ((const float *)d->data)[(o * K + k) * C + c] != ((const float *)f->data)[(o * C + c) * K + k];
    CHECK(bad == 0 && !memcmp(want, d->data, (size_t)n * 4), "%s: conv_in's filter is not the file's in KRSC order",
          label);
    free(want);
}

static void check_variant(sdt_backend *be, sdt_test_rng *rng, const char *dir, sdt_unet_config cfg, const char *label)
{
    sdt_error error = {0};
    sdt_weights *w = NULL;
    sdt_unet *u = ut_load_random_unet(&cfg, rng, dir, "cl", &w);
    if (!u) return;
    ut_inputs in = ut_make_inputs(&cfg, rng, 2, 8, 12, 5); /* not square: a height and width swapped shows */
    int64_t ny = in.B * cfg.out_channels * in.H * in.W, nc = sdt_tensor_numel(&in.ctx),
            n_y = in.y ? sdt_tensor_numel(&in.yt) : 0;
    char what[160];
    for (int f16 = 0; f16 < 2; f16++) {
        sdt_unet_options opt = sdt_unet_options_default();
        opt.act_dtype = f16 ? SDT_F16 : SDT_F32;
        results ref = run(u, be, false, &opt, &in, ny, nc, n_y, label);
        results cl = run(u, be, true, &opt, &in, ny, nc, n_y, label);
        snprintf(what, sizeof what, "%s %s channels-last", label, sdt_dtype_name(opt.act_dtype));
        same(&ref, &cl, ny, nc, n_y, what);
        opt.checkpointing = true;
        results ck = run(u, be, true, &opt, &in, ny, nc, n_y, label);
        snprintf(what, sizeof what, "%s %s channels-last with checkpointing", label, sdt_dtype_name(opt.act_dtype));
        same(&ref, &ck, ny, nc, n_y, what);
        drop(&cl), drop(&ck);
        /* a hook at every attention's K/V input, checkpointing on */
        sdt_unet_kv_hook hook = {.user = be, .forward = hook_forward, .backward = hook_backward};
        opt.hook = &hook;
        results href = run(u, be, false, &opt, &in, ny, nc, n_y, label);
        results hcl = run(u, be, true, &opt, &in, ny, nc, n_y, label);
        snprintf(what, sizeof what, "%s %s channels-last with a K/V hook", label, sdt_dtype_name(opt.act_dtype));
        same(&href, &hcl, ny, nc, n_y, what);
        CHECK(memcmp(href.y, ref.y, (size_t)ny * 4) != 0, "%s: the hook changed nothing", what);
        drop(&ref), drop(&href), drop(&hcl);
    }
    /* the filters as a GPU gets them: materialized for a backend that prefers channels-last */
    be->prefers_channels_last = true;
    sdt_weights *dev = sdt_weights_materialize(w, be, SDT_F32, &error);
    be->prefers_channels_last = false;
    CHECK(dev != NULL, "%s: materialize: %s", label, error.message);
    sdt_unet *ud = dev ? sdt_unet_load(&cfg, dev, &error) : NULL;
    CHECK(!dev || ud, "%s: load the materialized weights: %s", label, error.message);
    if (ud) {
        check_materialized(w, dev, label);
        sdt_unet_options opt = sdt_unet_options_default();
        results ref = run(u, be, false, &opt, &in, ny, nc, n_y, label);
        for (int cl = 0; cl < 2; cl++) {
            results r = run(ud, be, cl, &opt, &in, ny, nc, n_y, label);
            snprintf(what, sizeof what, "%s channels-last filters, %s activations", label,
                     cl ? "channels-last" : "NCHW");
            same(&ref, &r, ny, nc, n_y, what);
            drop(&r);
        }
        drop(&ref);
        sdt_unet_free(ud);
    }
    if (dev) sdt_weights_close(dev);
    ut_free_inputs(&in);
    sdt_unet_free(u);
    sdt_weights_close(w);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("unet_channels_last");
    sdt_backend *be = kt_backend();
    char *dir = ut_tmpdir();
    check_variant(be, &rng, dir, sdt_unet_config_tiny(), "tiny SD");
    check_variant(be, &rng, dir, ut_config_tiny_linear(), "tiny SD, linear projections");
    sdt_unet_config inpaint = sdt_unet_config_tiny();
    inpaint.in_channels = 9;
    check_variant(be, &rng, dir, inpaint, "tiny SD, 9-channel input");
    check_variant(be, &rng, dir, sdt_unet_config_tiny_sdxl(), "tiny SDXL");
    ut_cleanup(dir);
    be->destroy(be);
    return sdt_test_finish("unet_channels_last");
}
