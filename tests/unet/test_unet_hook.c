/* The K/V hook: called at every attention layer with the right widths and
 * kinds, identity when it does nothing, and gradients through it (to the
 * context and to the hook's own parameters) consistent with finite
 * differences, also under checkpointing. The test hook is
 * out = in + alpha[width] * tanh(in), one alpha per context width like
 * A1111's per-width hypernetwork modules. The pass callback is told forward
 * begins/ends and backward begins/ends, in that order, never while measuring, with the
 * context and d(context); a hook that hands cross sites memory of its own (unet.h) gives
 * the same output and gradients as one that writes out. */
#include <string.h>

#include "unet_test_util.h"

#define MAX_SITES 256
#define MAX_WIDTHS 4

typedef struct test_hook {
    int widths[MAX_WIDTHS];
    double alpha[MAX_WIDTHS];
    double d_alpha[MAX_WIDTHS];
    bool cross_only;
    int forward_calls, backward_calls, recompute_calls;
    int64_t max_rows[MAX_WIDTHS]; /* the most K/V rows a site of the width had */
    sdt_unet_hook_site seen[MAX_SITES];
    int seen_count;
    bool bad_site;
    /* the pass callback */
    sdt_unet_pass_event events[16];
    int event_count;
    bool bad_pass;
    const void *context_data;
    bool own_memory; /* cross sites: out->data points at a block of the hook's own */
    float *own[MAX_SITES];
    int own_count;
} test_hook;

static void free_own(test_hook *h)
{
    for (int i = 0; i < h->own_count; i++) free(h->own[i]);
    h->own_count = 0;
}

static bool hook_pass(void *user, const sdt_unet_hook_pass *pass, sdt_error *error)
{
    (void)error;
    test_hook *h = user;
    if (h->event_count < 16) h->events[h->event_count++] = pass->event;
    if (!pass->context || (pass->event >= SDT_UNET_PASS_BACKWARD_BEGIN && !pass->d_context)) h->bad_pass = true;
    if (pass->event == SDT_UNET_PASS_FORWARD_BEGIN) {
        free_own(h); /* the last pass's blocks are no longer read */
        h->context_data = pass->context->data;
    } else if (pass->context->data != h->context_data)
        h->bad_pass = true;
    return true;
}

static int width_slot(test_hook *h, int width)
{
    for (int i = 0; i < MAX_WIDTHS; i++)
        if (h->widths[i] == width) return i;
    for (int i = 0; i < MAX_WIDTHS; i++)
        if (!h->widths[i]) {
            h->widths[i] = width;
            return i;
        }
    return -1;
}

static bool hook_wants(void *user, const sdt_unet_hook_site *site)
{
    test_hook *h = user;
    return !h->cross_only || site->cross;
}

static bool hook_forward(void *user, const sdt_unet_hook_site *site, const sdt_tensor *in, sdt_tensor *out,
                         bool recompute, sdt_error *error)
{
    test_hook *h = user;
    int s = width_slot(h, site->width);
    if (s < 0 || in->shape[in->ndim - 1] != site->width || !sdt_tensor_same_shape(in, out)) h->bad_site = true;
    if (s < 0) return sdt_fail(error, SDT_ERR_INTERNAL, "the test hook has no slot left for width %d", site->width);
    h->forward_calls++;
    int64_t rows = sdt_tensor_numel(in) / site->width;
    if (rows > h->max_rows[s]) h->max_rows[s] = rows;
    if (recompute)
        h->recompute_calls++;
    else if (h->seen_count < MAX_SITES)
        h->seen[h->seen_count++] = *site;
    const float *x = in->data;
    float *y = out->data;
    if (h->own_memory && site->cross && h->own_count < MAX_SITES) {
        if (in->data != h->context_data) h->bad_pass = true;
        y = h->own[h->own_count++] = kt_alloc((size_t)sdt_tensor_nbytes(out));
        memset(out->data, 0xff, sdt_tensor_nbytes(out)); /* NaN: the UNet must read the hook's block */
        out->data = y;
    }
    for (int64_t i = 0, n = sdt_tensor_numel(in); i < n; i++) y[i] = (float)(x[i] + h->alpha[s] * tanh(x[i]));
    return true;
}

static bool hook_backward(void *user, const sdt_unet_hook_site *site, const sdt_tensor *in, const sdt_tensor *d_out,
                          sdt_tensor *d_in, sdt_error *error)
{
    test_hook *h = user;
    int s = width_slot(h, site->width);
    if (s < 0) return sdt_fail(error, SDT_ERR_INTERNAL, "the test hook has no slot left for width %d", site->width);
    h->backward_calls++;
    const float *x = in->data, *dy = d_out->data;
    float *dx = d_in->data;
    for (int64_t i = 0, n = sdt_tensor_numel(in); i < n; i++) {
        double t = tanh(x[i]);
        dx[i] += (float)(dy[i] * (1 + h->alpha[s] * (1 - t * t)));
        h->d_alpha[s] += dy[i] * t;
    }
    return true;
}

static sdt_unet_kv_hook make_hook(test_hook *h)
{
    sdt_unet_kv_hook k = {
        .user = h, .wants = hook_wants, .forward = hook_forward, .backward = hook_backward, .pass = hook_pass};
    return k;
}

static void check_sites(sdt_unet *u, test_hook *h, const char *label)
{
    const sdt_unet_config *cfg = sdt_unet_get_config(u);
    int count = sdt_unet_attention_count(u);
    int expect = 0;
    for (int l = 0; l < count; l++) {
        sdt_unet_hook_site s;
        CHECK(sdt_unet_attention_site(u, l, &s), "site %d", l);
        if (h->cross_only && !s.cross) continue;
        for (int kind = 0; kind < 2; kind++, expect++) {
            if (expect >= h->seen_count) break;
            const sdt_unet_hook_site *got = &h->seen[expect];
            CHECK(got->layer == l && (int)got->kind == kind && got->cross == s.cross && got->width == s.width,
                  "%s: call %d was layer %d kind %d width %d, expected layer %d kind %d width %d", label, expect,
                  got->layer, (int)got->kind, got->width, l, kind, s.width);
        }
        CHECK(s.cross == (l % 2 == 1), "%s: attention %d should be %s", label, l, l % 2 ? "attn2" : "attn1");
        if (s.cross)
            CHECK(s.width == cfg->context_dim, "%s: cross width %d", label, s.width);
        else
            CHECK(s.width % cfg->model_channels == 0, "%s: self width %d", label, s.width);
    }
    CHECK(h->seen_count == expect, "%s: hook called %d times in forward, expected %d", label, h->seen_count, expect);
    CHECK(!h->bad_site, "%s: a hook call had inconsistent shapes", label);
}

/* The sizes inspect and the hypernetwork sentences name (from the config alone) are exactly the
 * widths the built UNet's sites have, the context's first. */
static void check_kv_widths(sdt_unet *u)
{
    int widths[SDT_UNET_MAX_KV_WIDTHS];
    int n = sdt_unet_config_kv_widths(sdt_unet_get_config(u), widths);
    CHECK(n > 0 && widths[0] == sdt_unet_get_config(u)->context_dim, "the context's width comes first (%d)",
          n ? widths[0] : -1);
    bool listed_seen[SDT_UNET_MAX_KV_WIDTHS] = {false};
    for (int l = 0; l < sdt_unet_attention_count(u); l++) {
        sdt_unet_hook_site s;
        if (!sdt_unet_attention_site(u, l, &s)) continue;
        int at = -1;
        for (int i = 0; i < n; i++)
            if (widths[i] == s.width) at = i;
        CHECK(at >= 0, "attention %d's width %d is not among the config's sizes", l, s.width);
        if (at >= 0) listed_seen[at] = true;
    }
    for (int i = 0; i < n; i++) CHECK(listed_seen[i], "the config's size %d has no attention", widths[i]);
    sdt_unet_config sd1 = sdt_unet_config_sd1();
    char text[128];
    sdt_unet_config_describe_kv_widths(&sd1, text, sizeof text);
    CHECK(strcmp(text, "768 (cross-attention context 768), 320, 640 and 1280") == 0, "SD 1.x sizes: %s", text);
}

/* The rows each width's sites take are what the config predicts (the hypernetwork's workspace is sized
 * by it): batch x the level's H x W, or the context's tokens; and the published configs' numbers. */
static void check_kv_tokens(const sdt_unet_config *cfg, const test_hook *h, int64_t B, int64_t H, int64_t W, int64_t T)
{
    for (int i = 0; i < MAX_WIDTHS && h->widths[i]; i++) {
        int64_t want = B * sdt_unet_config_kv_tokens(cfg, h->widths[i], H, W, T);
        CHECK(h->max_rows[i] == want, "width %d: the sites took up to %lld rows, the config predicts %lld",
              h->widths[i], (long long)h->max_rows[i], (long long)want);
    }
    sdt_unet_config xl = sdt_unet_config_sdxl(), sd1 = sdt_unet_config_sd1();
    CHECK(sdt_unet_config_kv_tokens(&xl, 320, 128, 128, 77) == 0, "SDXL's first level has no attention");
    CHECK(sdt_unet_config_kv_tokens(&xl, 640, 128, 128, 77) == 64 * 64, "SDXL 640: 64x64");
    CHECK(sdt_unet_config_kv_tokens(&xl, 1280, 128, 128, 77) == 32 * 32, "SDXL 1280: 32x32");
    CHECK(sdt_unet_config_kv_tokens(&xl, 2048, 128, 128, 154) == 154, "SDXL 2048: the context's tokens");
    CHECK(sdt_unet_config_kv_tokens(&sd1, 640, 65, 63, 77) == 33 * 32,
          "SD 1.x 640 at 65x63: 33x32 (stride-2 rounding)");
    CHECK(sdt_unet_config_kv_tokens(&sd1, 1280, 64, 64, 77) == 16 * 16,
          "SD 1.x 1280: level 2's 16x16 over the middle's 8x8");
    CHECK(sdt_unet_config_kv_tokens(&sd1, 100, 64, 64, 77) == 0, "no attention is 100 wide");
}

static double loss_with_alpha(sdt_unet *u, sdt_backend *be, const sdt_unet_options *opt, ut_inputs *in, test_hook *h,
                              int slot, double delta)
{
    double saved = h->alpha[slot];
    h->alpha[slot] = saved + delta;
    double L = ut_loss(u, be, opt, in);
    h->alpha[slot] = saved;
    return L;
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("unet_hook");
    sdt_backend *be = kt_backend();
    char *dir = ut_tmpdir();
    sdt_error error = {0};
    sdt_unet_config cfg = sdt_unet_config_tiny();
    cfg.context_dim = 24; /* distinct from every UNet width, so per-width alphas separate cross from self */
    sdt_weights *w = ut_random_unet(&cfg, &rng, dir, "tiny", NULL, NULL, NULL, 0);
    sdt_unet *u = sdt_unet_load(&cfg, w, &error);
    CHECK(u != NULL, "load: %s", error.message);
    if (!u) return sdt_test_finish("unet_hook");
    ut_inputs in = ut_make_inputs(&cfg, &rng, 2, 8, 8, 4);
    int64_t ny = in.B * cfg.out_channels * in.H * in.W, nc = sdt_tensor_numel(&in.ctx);
    float *y0 = kt_alloc((size_t)ny * 4), *y1 = kt_alloc((size_t)ny * 4);
    float *g0 = kt_alloc((size_t)nc * 4), *g1 = kt_alloc((size_t)nc * 4), *g2 = kt_alloc((size_t)nc * 4);
    sdt_unet_options plain = sdt_unet_options_default();
    CHECK(ut_run(u, be, &plain, &in, y0, g0, NULL), "plain run");

    /* alpha = 0: identity, bit for bit; every site seen once per forward, in order. */
    test_hook h = {0};
    sdt_unet_kv_hook hook = make_hook(&h);
    sdt_unet_options opt = plain;
    opt.hook = &hook;
    opt.for_backward = false;
    CHECK(ut_run(u, be, &opt, &in, y1, NULL, NULL), "identity hook run");
    check_kv_tokens(&cfg, &h, in.B, in.H, in.W, in.T);
    CHECK(!memcmp(y0, y1, (size_t)ny * 4), "an identity hook changed the output");
    check_sites(u, &h, "all sites");
    check_kv_widths(u);
    test_hook hc = {.cross_only = true};
    sdt_unet_kv_hook hookc = make_hook(&hc);
    opt.hook = &hookc;
    CHECK(ut_run(u, be, &opt, &in, y1, NULL, NULL), "cross-only hook run");
    check_sites(u, &hc, "cross only");

    /* A real transform: d(context) through the hooks vs finite differences. */
    memset(&h, 0, sizeof h);
    int slots[3] = {width_slot(&h, cfg.context_dim), width_slot(&h, cfg.model_channels),
                    width_slot(&h, 2 * cfg.model_channels)};
    h.alpha[slots[0]] = 0.7;
    h.alpha[slots[1]] = -0.4;
    h.alpha[slots[2]] = 0.5;
    opt.hook = &hook;
    opt.for_backward = true;
    CHECK(ut_run(u, be, &opt, &in, y1, g1, NULL), "hooked backward");
    CHECK(memcmp(y0, y1, (size_t)ny * 4) != 0, "the hook had no effect on the output");
    CHECK(h.backward_calls == 2 * sdt_unet_attention_count(u), "backward calls %d, expected %d", h.backward_calls,
          2 * sdt_unet_attention_count(u));
    double dalpha[3];
    for (int k = 0; k < 3; k++) dalpha[k] = h.d_alpha[slots[k]];
    double dot, fd, gnorm;
    ut_context_direction(u, be, &opt, &in, g1, nc, &rng, &dot, &fd, &gnorm);
    printf("hooked d(context) along a direction: analytic %.6g, finite difference %.6g\n", dot, fd);
    CHECK(fabs(fd - dot) / sqrt(gnorm) < 1e-3, "hooked d(context): analytic %g vs fd %g", dot, fd);

    /* The hook's own parameter gradients (what a hypernetwork trains) vs finite differences. */
    const double step = 3e-2;
    for (int k = 0; k < 3; k++) {
        /* Fourth-order central difference: alpha is a strong lever, so the h^2 term of the
         * plain central difference is visible at steps where f32 roundoff is not. */
        double f1 = loss_with_alpha(u, be, &opt, &in, &h, slots[k], step) -
                    loss_with_alpha(u, be, &opt, &in, &h, slots[k], -step);
        double f2 = loss_with_alpha(u, be, &opt, &in, &h, slots[k], 2 * step) -
                    loss_with_alpha(u, be, &opt, &in, &h, slots[k], -2 * step);
        double fa = (8 * f1 - f2) / (12 * step);
        printf("d(alpha[width %d]): analytic %.6g, finite difference %.6g\n", h.widths[slots[k]], dalpha[k], fa);
        CHECK(fabs(fa - dalpha[k]) <= 2e-3 * fmax(fabs(fa), 1.0), "d(alpha[width %d]) %g vs fd %g", h.widths[slots[k]],
              dalpha[k], fa);
    }

    /* Checkpointing: the hook is rerun (recompute = true) and everything is identical. */
    double before[MAX_WIDTHS];
    memcpy(before, h.d_alpha, sizeof before);
    memset(h.d_alpha, 0, sizeof h.d_alpha);
    h.recompute_calls = 0;
    sdt_unet_options ck = opt;
    ck.checkpointing = true;
    CHECK(ut_run(u, be, &ck, &in, NULL, g2, NULL), "checkpointed hooked backward");
    CHECK(!memcmp(g1, g2, (size_t)nc * 4), "checkpointing changed the hooked d(context)");
    for (int k = 0; k < MAX_WIDTHS; k++)
        CHECK(h.d_alpha[k] == before[k], "checkpointing changed d(alpha) slot %d: %g vs %g", k, h.d_alpha[k],
              before[k]);
    CHECK(h.recompute_calls == 2 * sdt_unet_attention_count(u), "recompute calls %d, expected %d", h.recompute_calls,
          2 * sdt_unet_attention_count(u));
    CHECK(memcmp(g0, g1, (size_t)nc * 4) != 0, "the hook did not change d(context)");

    /* The pass events: forward then backward, in order, none from ut_run's measuring; a forward alone. */
    h.event_count = 0;
    float *y2 = kt_alloc((size_t)ny * 4);
    CHECK(ut_run(u, be, &opt, &in, y2, g2, NULL), "a pass with a backward");
    CHECK(h.event_count == 4 && h.events[0] == SDT_UNET_PASS_FORWARD_BEGIN &&
              h.events[1] == SDT_UNET_PASS_FORWARD_END && h.events[2] == SDT_UNET_PASS_BACKWARD_BEGIN &&
              h.events[3] == SDT_UNET_PASS_BACKWARD_END,
          "a training pass must tell forward begins, ends, backward begins, ends (%d events)", h.event_count);
    h.event_count = 0;
    sdt_unet_options fwd = opt;
    fwd.for_backward = false;
    CHECK(ut_run(u, be, &fwd, &in, y2, NULL, NULL), "a forward alone");
    CHECK(h.event_count == 2 && h.events[0] == SDT_UNET_PASS_FORWARD_BEGIN && h.events[1] == SDT_UNET_PASS_FORWARD_END,
          "a forward alone must tell forward begins and ends (%d events)", h.event_count);
    CHECK(!h.bad_pass, "the pass callback got no context, no d(context), or another context than the sites'");
    /* The cross sites hand the UNet blocks of the hook's own: the same output and gradients, also recomputed. */
    h.own_memory = true;
    memset(h.d_alpha, 0, sizeof h.d_alpha);
    CHECK(ut_run(u, be, &ck, &in, y2, g2, NULL), "a hook handing its own memory");
    CHECK(!memcmp(y1, y2, (size_t)ny * 4) && !memcmp(g1, g2, (size_t)nc * 4) && h.own_count > 0 && !h.bad_pass,
          "the UNet must read the hook's own block where the hook points out (%d blocks)", h.own_count);
    for (int k = 0; k < MAX_WIDTHS; k++)
        CHECK(h.d_alpha[k] == before[k], "the hook's own memory changed d(alpha) slot %d", k);
    free_own(&h);
    free(y2);

    free(y0);
    free(y1);
    free(g0);
    free(g1);
    free(g2);
    ut_free_inputs(&in);
    sdt_unet_free(u);
    sdt_weights_close(w);
    ut_cleanup(dir);
    be->destroy(be);
    return sdt_test_finish("unet_hook");
}
