/* test_hn_pass_cache - what a UNet pass computes once (hn_hook.h) against the per-site way
 * (sdt_hn_binding_share_context false) on the tiny UNet:
 *  - the context's chain shared by every cross-attention: the UNet's output bit for bit, d(context)
 *    and the weight gradients to float summation order, in f32 and bf16 (bf16 context too), for a
 *    chain of a trained member at strength 1 and a frozen one at 0.5, checkpointing on and off
 *    (which agree bit for bit with each other); and it really is shared (fewer Linear forwards);
 *  - a trained member drawing dropout keeps the per-site way (bit for bit the per-site result, as
 *    many Linear forwards); in eval mode the same chain is shared again;
 *  - 16-bit weight copies are made once per module and pass (counted), and never outlive a pass:
 *    weights uploaded between passes (as the optimizer's step writes them) are what the next pass
 *    computes with, after a forward alone, a training forward without its backward, or a whole
 *    step (bit for bit a fresh binding's result). */
#include <string.h>

#include "hn/hn_hook.h"
#include "hn_test_util.h"
#include "unet_test_util.h"

/* ---- counting the backend's calls ---- */
typedef int (*linear_fn)(sdt_backend *, sdt_tensor *, const sdt_tensor *, const sdt_tensor *, const sdt_tensor *);
typedef int (*convert_fn)(sdt_backend *, sdt_tensor *, const sdt_tensor *);
static linear_fn real_linear;
static convert_fn real_convert;
static int linear_calls, weight_copies;
static const sdt_hn *watched; /* convert calls reading one of its Linear weights are weight copies */

static int counting_linear(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w,
                           const sdt_tensor *b)
{
    linear_calls++;
    return real_linear(be, out, x, w, b);
}

static int counting_convert(sdt_backend *be, sdt_tensor *dst, const sdt_tensor *src)
{
    if (watched && dst->dtype != SDT_F32)
        for (int i = 0; i < sdt_hn_param_count(watched); i++) {
            const sdt_hn_param *p = sdt_hn_param_at_const(watched, i);
            if (!p->is_norm && !p->is_bias && p->value.data == src->data) weight_copies++;
        }
    return real_convert(be, dst, src);
}

static sdt_hn *make_hn(sdt_backend *be, sdt_test_rng *r, const char *name, const int *widths, int n_widths,
                       bool layer_norm, bool dropout)
{
    sdt_hn_config c = sdt_hn_config_default();
    snprintf(c.name, sizeof(c.name), "%s", name);
    c.width_count = n_widths;
    memcpy(c.widths, widths, sizeof(int) * (size_t)n_widths);
    snprintf(c.activation, sizeof(c.activation), "%s", "gelu");
    c.layer_norm = layer_norm;
    c.use_dropout = dropout;
    c.dropout_structure[1] = 0.3;
    sdt_error err = {0};
    sdt_hn *hn = sdt_hn_create(&c, be, 1, &err);
    CHECK(hn != NULL, "create %s: %s", name, err.message);
    if (!hn) exit(1);
    float *w = kt_randn(r, sdt_hn_param_numel(hn), 0.3);
    CHECK(sdt_hn_upload(hn, w, &err) && sdt_hn_enable_grads(hn, &err), "upload: %s", err.message);
    free(w);
    return hn;
}

typedef struct step_result {
    float *y, *dctx, *grads;
    int linear, copies;
} step_result;

static void step_free(step_result *r)
{
    free(r->y), free(r->dctx), free(r->grads);
    memset(r, 0, sizeof *r);
}

/* One forward (and with dctx a backward) through the binding; the trained member's gradients after. */
static step_result run(sdt_unet *u, sdt_backend *be, const sdt_unet_options *opt, ut_inputs *in, sdt_hn *trained,
                       bool backward)
{
    step_result r = {0};
    int64_t ny = in->B * sdt_unet_get_config(u)->out_channels * in->H * in->W;
    r.y = kt_alloc((size_t)ny * 4);
    if (backward) r.dctx = kt_alloc((size_t)sdt_tensor_numel(&in->ctx) * 4);
    sdt_error err = {0};
    CHECK(sdt_hn_zero_grads(trained, &err), "zero grads: %s", err.message);
    linear_calls = weight_copies = 0;
    CHECK(ut_run(u, be, opt, in, r.y, r.dctx, NULL), "UNet run");
    r.linear = linear_calls, r.copies = weight_copies;
    r.grads = hn_test_grads_of(trained);
    return r;
}

/* max |a - b| <= tol * max |b| */
static bool close_to(const float *a, const float *b, int64_t n, double tol, double *worst)
{
    double scale = 0, diff = 0;
    for (int64_t i = 0; i < n; i++) {
        scale = fmax(scale, fabs(b[i]));
        diff = fmax(diff, fabs((double)a[i] - b[i]));
    }
    *worst = scale > 0 ? diff / scale : diff;
    return diff <= tol * scale;
}

static void compare(const char *what, const step_result *shared, const step_result *per_site, int64_t ny, int64_t nc,
                    int64_t ng, double tol)
{
    double w1, w2;
    CHECK(!memcmp(shared->y, per_site->y, (size_t)ny * 4), "%s: sharing the context's chain changed the UNet's output",
          what);
    CHECK(close_to(shared->dctx, per_site->dctx, nc, tol, &w1), "%s: d(context) shared vs per site: %.3g", what, w1);
    CHECK(close_to(shared->grads, per_site->grads, ng, tol, &w2), "%s: weight gradients shared vs per site: %.3g", what,
          w2);
    CHECK(shared->linear < per_site->linear, "%s: the context's chain was not shared (%d Linear forwards, per site %d)",
          what, shared->linear, per_site->linear);
    printf("%s: d(context) %.2g, weight gradients %.2g apart; Linear forwards %d shared, %d per site\n", what, w1, w2,
           shared->linear, per_site->linear);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("hn_pass_cache");
    sdt_backend *be = kt_backend();
    real_linear = be->linear_forward, real_convert = be->convert;
    be->linear_forward = counting_linear, be->convert = counting_convert;
    char *dir = ut_tmpdir();
    sdt_error err = {0};
    sdt_unet_config cfg = sdt_unet_config_tiny();
    cfg.context_dim = 24; /* the cross-attention modules differ from the self-attention ones */
    sdt_weights *w = ut_random_unet(&cfg, &rng, dir, "tiny", NULL, NULL, NULL, 0);
    sdt_unet *u = sdt_unet_load(&cfg, w, &err);
    CHECK(u != NULL, "load: %s", err.message);
    if (!u) return sdt_test_finish("hn_pass_cache");
    ut_inputs in = ut_make_inputs(&cfg, &rng, 2, 8, 8, 5);
    int64_t ny = in.B * cfg.out_channels * in.H * in.W, nc = sdt_tensor_numel(&in.ctx);

    int widths_a[3] = {24, cfg.model_channels, 2 * cfg.model_channels}, widths_b[1] = {24};
    sdt_hn *a = make_hn(be, &rng, "trained", widths_a, 3, true, false);
    sdt_hn *frozen = make_hn(be, &rng, "frozen", widths_b, 1, false, false);
    sdt_hn *dropping = make_hn(be, &rng, "dropping", widths_a, 3, false, true);
    int64_t ng = sdt_hn_param_numel(a);
    sdt_hn_binding *b = sdt_hn_binding_create(be, &err);
    CHECK(b && sdt_hn_binding_add(b, a, 1.0f, true, &err) && sdt_hn_binding_add(b, frozen, 0.5f, false, &err),
          "binding: %s", err.message);
    sdt_unet_options opt = sdt_unet_options_default();
    opt.hook = sdt_hn_binding_hook(b);

    /* f32: shared vs per site, checkpointing on and off */
    sdt_hn_binding_set_step(b, 7, 1);
    step_result s = run(u, be, &opt, &in, a, true);
    sdt_hn_binding_share_context(b, false);
    step_result p = run(u, be, &opt, &in, a, true);
    compare("f32", &s, &p, ny, nc, ng, 1e-5);
    sdt_hn_binding_share_context(b, true);
    sdt_unet_options ck = opt;
    ck.checkpointing = true;
    step_result sc = run(u, be, &ck, &in, a, true);
    CHECK(!memcmp(sc.dctx, s.dctx, (size_t)nc * 4) && !memcmp(sc.grads, s.grads, (size_t)ng * 4),
          "checkpointing changed the shared chain's gradients");
    CHECK(sc.linear > s.linear, "checkpointing must recompute the UNet's blocks");
    step_free(&s), step_free(&p), step_free(&sc);

    /* a trained member with dropout: per site even when sharing is on; eval mode shares */
    sdt_hn_binding *bd = sdt_hn_binding_create(be, &err);
    CHECK(bd && sdt_hn_binding_add(bd, dropping, 1.0f, true, &err), "binding: %s", err.message);
    sdt_unet_options od = opt;
    od.hook = sdt_hn_binding_hook(bd);
    sdt_hn_binding_set_step(bd, 7, 1);
    s = run(u, be, &od, &in, dropping, true);
    sdt_hn_binding_share_context(bd, false);
    p = run(u, be, &od, &in, dropping, true);
    CHECK(!memcmp(s.y, p.y, (size_t)ny * 4) && !memcmp(s.dctx, p.dctx, (size_t)nc * 4) &&
              !memcmp(s.grads, p.grads, (size_t)sdt_hn_param_numel(dropping) * 4) && s.linear == p.linear,
          "a member drawing dropout masks must keep the per-site way");
    step_free(&s), step_free(&p);
    sdt_hn_binding_set_eval(bd);
    p = run(u, be, &od, &in, dropping, false);
    sdt_hn_binding_share_context(bd, true);
    s = run(u, be, &od, &in, dropping, false);
    CHECK(!memcmp(s.y, p.y, (size_t)ny * 4) && s.linear < p.linear,
          "eval mode (no masks) must share the context's "
          "chain and compute the same output (%d vs %d Linear forwards)",
          s.linear, p.linear);
    step_free(&s), step_free(&p);
    sdt_hn_binding_free(bd);

    /* bf16 activations and a bf16 context: shared vs per site, and 16-bit weight copies once per pass */
    uint16_t *ctx16 = kt_alloc((size_t)nc * 2);
    sdt_store_f32(in.context, ctx16, SDT_BF16, nc);
    sdt_tensor ctx_f32 = in.ctx;
    in.ctx.data = ctx16, in.ctx.dtype = SDT_BF16;
    sdt_unet_options o16 = opt;
    o16.act_dtype = SDT_BF16;
    watched = a;
    sdt_hn_binding_set_step(b, 7, 2);
    s = run(u, be, &o16, &in, a, true);
    sdt_hn_binding_share_context(b, false);
    p = run(u, be, &o16, &in, a, true);
    compare("bf16", &s, &p, ny, nc, ng, 2e-2);
    /* 3 widths x K, V x 2 Linears, each copied once in the pass (forward and backward) */
    CHECK(s.copies == 12 && p.copies == 12,
          "16-bit weight copies: %d shared, %d per site; want 12 (one per Linear "
          "weight and pass)",
          s.copies, p.copies);
    step_free(&s), step_free(&p);
    sdt_hn_binding_share_context(b, true);

    /* weights changed between passes are seen: after a whole step, a forward alone, and a training
     * forward whose backward never came; each then against a fresh binding */
    float *host = kt_alloc((size_t)ng * 4);
    CHECK(sdt_hn_download(a, host, &err), "download: %s", err.message);
    for (int round = 0; round < 3; round++) {
        sdt_unet_options o = o16;
        o.for_backward = round != 1; /* round 2: a training forward whose backward never came */
        s = run(u, be, &o, &in, a, round == 0);
        step_free(&s);
        for (int64_t i = 0; i < ng; i++) host[i] *= 1.25f; /* the optimizer's step, as far as the pass can tell */
        CHECK(sdt_hn_upload(a, host, &err), "upload: %s", err.message);
        s = run(u, be, &o16, &in, a, false);
        sdt_hn_binding *fresh = sdt_hn_binding_create(be, &err);
        CHECK(fresh && sdt_hn_binding_add(fresh, a, 1.0f, true, &err) &&
                  sdt_hn_binding_add(fresh, frozen, 0.5f, false, &err),
              "binding: %s", err.message);
        sdt_hn_binding_set_step(fresh, 7, 2);
        sdt_unet_options of = o16;
        of.hook = sdt_hn_binding_hook(fresh);
        p = run(u, be, &of, &in, a, false);
        CHECK(!memcmp(s.y, p.y, (size_t)ny * 4), "round %d: a pass computed with the weights of an earlier pass",
              round);
        step_free(&s), step_free(&p);
        sdt_hn_binding_free(fresh);
    }
    watched = NULL;
    in.ctx = ctx_f32;
    free(ctx16), free(host);

    sdt_hn_binding_free(b);
    sdt_hn_free(a), sdt_hn_free(frozen), sdt_hn_free(dropping);
    ut_free_inputs(&in);
    sdt_unet_free(u);
    sdt_weights_close(w);
    ut_cleanup(dir);
    be->linear_forward = real_linear, be->convert = real_convert;
    be->destroy(be);
    return sdt_test_finish("hn_pass_cache");
}
