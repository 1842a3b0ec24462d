/* test_hn_hook - hypernetworks on the tiny UNet through the K/V hook binding: a zero
 * hypernetwork is the identity bit for bit; a chain applies its members in order at
 * their strengths; d(context) and the trained member's weight gradients match finite
 * differences with dropout on (fixed step key); checkpointing changes nothing; the
 * same step key redraws the same masks, another key others; a frozen member gets no
 * gradient; a failure inside the hook (its workspace refused) reaches the UNet's caller
 * as the hook's own sentence and status, with the attention layer named. */
#include <string.h>

#include "hn/hn_hook.h"
#include "hn_test_util.h"
#include "unet_test_util.h"

static sdt_hn *make_hn(sdt_backend *be, sdt_test_rng *r, const char *name, const int *widths, int n_widths,
                       const char *activation, bool layer_norm, bool dropout, double scale)
{
    sdt_hn_config c = sdt_hn_config_default();
    snprintf(c.name, sizeof(c.name), "%s", name);
    c.width_count = n_widths;
    memcpy(c.widths, widths, sizeof(int) * (size_t)n_widths);
    snprintf(c.activation, sizeof(c.activation), "%s", activation);
    c.layer_norm = layer_norm;
    c.use_dropout = dropout;
    c.dropout_structure[1] = 0.3;
    sdt_error err;
    sdt_error_clear(&err);
    sdt_hn *hn = sdt_hn_create(&c, be, 1, &err);
    CHECK(hn != NULL, "create %s: %s", name, err.message);
    if (!hn) exit(1);
    float *w = kt_randn(r, sdt_hn_param_numel(hn), scale);
    CHECK(sdt_hn_upload(hn, w, &err), "upload: %s", err.message);
    free(w);
    return hn;
}

/* Loss with one weight of hn moved by delta. */
static double loss_with_weight(sdt_unet *u, sdt_backend *be, const sdt_unet_options *opt, ut_inputs *in, sdt_hn *hn,
                               float *host, int64_t index, double delta)
{
    sdt_error err;
    sdt_error_clear(&err);
    float saved = host[index];
    host[index] = (float)(saved + delta);
    CHECK(sdt_hn_upload(hn, host, &err), "upload: %s", err.message);
    double L = ut_loss(u, be, opt, in);
    host[index] = saved;
    CHECK(sdt_hn_upload(hn, host, &err), "upload: %s", err.message);
    return L;
}

static void check_direct_chain(sdt_hn_binding *b, sdt_hn *first, sdt_hn *second, int width, sdt_test_rng *r)
{
    sdt_error err;
    sdt_error_clear(&err);
    const sdt_unet_kv_hook *hook = sdt_hn_binding_hook(b);
    int64_t n = 2 * 3 * width;
    float *x = kt_randn(r, n, 1.0), *y = kt_alloc((size_t)n * 4), *mid = kt_alloc((size_t)n * 4);
    float *want = kt_alloc((size_t)n * 4);
    sdt_tensor tx = kt_f32(x, 3, 2, 3, width, 0), ty = kt_f32(y, 3, 2, 3, width, 0);
    sdt_tensor tmid = kt_f32(mid, 3, 2, 3, width, 0), twant = kt_f32(want, 3, 2, 3, width, 0);
    sdt_unet_hook_site site = {.layer = 3, .kind = SDT_UNET_V, .width = width, .cross = true};
    CHECK(hook->wants(hook->user, &site), "the binding must want width %d", width);
    sdt_unet_hook_site other = {.layer = 0, .kind = SDT_UNET_K, .width = width + 1, .cross = false};
    CHECK(!hook->wants(hook->user, &other), "the binding must not want a width without modules");
    sdt_hn_binding_set_eval(b);
    CHECK(hook->forward(hook->user, &site, &tx, &ty, false, &err), "hook forward: %s", err.message);
    size_t work_bytes = sdt_hn_module_workspace_bytes(sdt_hn_get_config(first), width, 6);
    size_t w2 = sdt_hn_module_workspace_bytes(sdt_hn_get_config(second), width, 6);
    void *work = kt_alloc(work_bytes > w2 ? work_bytes : w2);
    sdt_hn_run eval = {0};
    CHECK(sdt_hn_module_forward(first, width, SDT_UNET_V, &eval, 1.0f, &tx, &tmid, work, &err) &&
              sdt_hn_module_forward(second, width, SDT_UNET_V, &eval, 0.5f, &tmid, &twant, work, &err),
          "module forward: %s", err.message);
    CHECK(memcmp(y, want, (size_t)n * 4) == 0, "the chain must apply its members in order at their strengths");
    free(x), free(y), free(mid), free(want), free(work);
}

/* The backend's allocator while a test starves it: every request refused. */
static void *refuse_alloc(sdt_backend *be, size_t bytes)
{
    (void)be, (void)bytes;
    return NULL;
}

/* A binding whose workspace cannot be allocated: the UNet forward and the hook's backward fail
 * with the binding's sentence (OUT_OF_MEMORY, the fix), the forward naming the layer. */
static void check_hook_error_reaches_caller(sdt_unet *u, sdt_backend *be, sdt_hn *hn, ut_inputs *in)
{
    sdt_error err = {0};
    sdt_hn_binding *b = sdt_hn_binding_create(be, &err);
    CHECK(b && sdt_hn_binding_add(b, hn, 1.0f, false, &err), "binding: %s", err.message);
    if (!b) return;
    sdt_hn_binding_set_eval(b);
    sdt_unet_options opt = sdt_unet_options_default();
    opt.for_backward = false;
    opt.hook = sdt_hn_binding_hook(b);
    sdt_arena arena;
    CHECK(sdt_arena_init(&arena, be, ut_measure(u, be, &opt, in, false)), "arena");
    void *(*alloc)(sdt_backend *, size_t) = be->alloc;
    be->alloc = refuse_alloc; /* the arena is in place: only the binding asks for memory now */
    sdt_tensor out;
    bool ok = sdt_unet_forward(u, be, &arena, &opt, &in->lat, &in->ts, &in->ctx, NULL, &out, &err);
    CHECK(!ok, "a forward whose hypernetwork workspace was refused must fail");
    CHECK(err.code == SDT_ERR_OUT_OF_MEMORY, "the hook's status must reach the caller: %s (%s)",
          sdt_error_code_name(err.code), err.message);
    CHECK(strstr(err.message, "hypernetwork workspace") && strstr(err.message, "smaller batch"),
          "the hook's sentence must reach the caller: %s", err.message);
    CHECK(strstr(err.message, "attention layer") && strstr(err.message, "input of"),
          "the UNet must name the layer in front of the hook's sentence: %s", err.message);
    printf("a starved hook, as the caller sees it: %s\n", err.message);

    const int width = sdt_hn_get_config(hn)->widths[0];
    float *x = kt_alloc((size_t)width * 4), *dx = kt_alloc((size_t)width * 4);
    sdt_tensor tx = kt_f32(x, 3, 1, 1, width, 0), tdx = kt_f32(dx, 3, 1, 1, width, 0);
    sdt_unet_hook_site site = {.layer = 0, .kind = SDT_UNET_K, .width = width, .cross = true};
    sdt_error_clear(&err);
    CHECK(!opt.hook->backward(opt.hook->user, &site, &tx, &tx, &tdx, &err) && err.code == SDT_ERR_OUT_OF_MEMORY &&
              strstr(err.message, "hypernetwork workspace"),
          "the hook's backward must fail with its sentence: %s", err.message);
    be->alloc = alloc;
    free(x), free(dx);
    sdt_arena_release(&arena);
    sdt_hn_binding_free(b);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("hn_hook");
    sdt_backend *be = kt_backend();
    char *dir = ut_tmpdir();
    sdt_error err;
    sdt_error_clear(&err);
    sdt_unet_config cfg = sdt_unet_config_tiny();
    cfg.context_dim = 24; /* distinct from the UNet widths, so cross- and self-attention modules differ */
    sdt_weights *w = ut_random_unet(&cfg, &rng, dir, "tiny", NULL, NULL, NULL, 0);
    sdt_unet *u = sdt_unet_load(&cfg, w, &err);
    CHECK(u != NULL, "load: %s", err.message);
    if (!u) return sdt_test_finish("hn_hook");
    ut_inputs in = ut_make_inputs(&cfg, &rng, 2, 8, 8, 4);
    int64_t ny = in.B * cfg.out_channels * in.H * in.W, nc = sdt_tensor_numel(&in.ctx);
    float *y0 = kt_alloc((size_t)ny * 4), *y1 = kt_alloc((size_t)ny * 4), *y2 = kt_alloc((size_t)ny * 4);
    float *g1 = kt_alloc((size_t)nc * 4), *g2 = kt_alloc((size_t)nc * 4);
    sdt_unet_options plain = sdt_unet_options_default();
    CHECK(ut_run(u, be, &plain, &in, y0, NULL, NULL), "plain run");

    /* A trained hypernetwork on cross- and self-attention widths, and a frozen one after it. */
    int widths_a[3] = {24, cfg.model_channels, 2 * cfg.model_channels}, widths_b[1] = {24};
    sdt_hn *a =
        make_hn(be, &rng, "trained", widths_a, 3, "gelu", true, true, 0.3); /* smooth: kinks are test_hn_module's */
    sdt_hn *bn = make_hn(be, &rng, "frozen", widths_b, 1, "sigmoid", false, false, 0.3);
    CHECK(sdt_hn_enable_grads(a, &err) && sdt_hn_enable_grads(bn, &err), "grads: %s", err.message);
    sdt_hn_binding *b = sdt_hn_binding_create(be, &err);
    CHECK(b && sdt_hn_binding_add(b, a, 1.0f, true, &err) && sdt_hn_binding_add(b, bn, 0.5f, false, &err),
          "binding: %s", err.message);
    CHECK(!sdt_hn_binding_add(b, a, 1.0f, true, &err) && strstr(err.message, "already in the chain"),
          "adding a member twice must be refused: %s", err.message);
    CHECK(!sdt_hn_binding_set_strength(b, 5, 1.0f, &err) && strstr(err.message, "does not exist"),
          "a bad chain index must be refused: %s", err.message);
    CHECK(sdt_hn_binding_reserve(b, in.B * in.H * in.W, &err), "reserve: %s", err.message);
    check_direct_chain(b, a, bn, 24, &rng);
    check_hook_error_reaches_caller(u, be, a, &in);

    sdt_unet_options opt = plain;
    opt.hook = sdt_hn_binding_hook(b);
    /* zero weights: f(x) = 0, the UNet is unchanged bit for bit */
    {
        int64_t na = sdt_hn_param_numel(a), nb = sdt_hn_param_numel(bn);
        float *saved_a = kt_alloc((size_t)na * 4), *saved_b = kt_alloc((size_t)nb * 4);
        float *zeros = kt_alloc((size_t)(na > nb ? na : nb) * 4);
        CHECK(sdt_hn_download(a, saved_a, &err) && sdt_hn_download(bn, saved_b, &err) &&
                  sdt_hn_upload(a, zeros, &err) && sdt_hn_upload(bn, zeros, &err),
              "zeroing: %s", err.message);
        sdt_hn_binding_set_step(b, 11, 0);
        CHECK(ut_run(u, be, &opt, &in, y1, NULL, NULL), "zero hypernetwork run");
        CHECK(!memcmp(y0, y1, (size_t)ny * 4), "a zero hypernetwork must leave the UNet unchanged");
        CHECK(sdt_hn_upload(a, saved_a, &err) && sdt_hn_upload(bn, saved_b, &err), "restore");
        free(saved_a), free(saved_b), free(zeros);
    }

    /* dropout keys: the same step key twice gives the same output, another key another */
    sdt_hn_binding_set_step(b, 11, 5);
    CHECK(ut_run(u, be, &opt, &in, y1, NULL, NULL), "keyed run");
    CHECK(ut_run(u, be, &opt, &in, y2, NULL, NULL), "keyed run again");
    CHECK(!memcmp(y1, y2, (size_t)ny * 4), "the same step key must redraw the same masks");
    CHECK(memcmp(y0, y1, (size_t)ny * 4) != 0, "the hypernetworks had no effect");
    sdt_hn_binding_set_step(b, 11, 6);
    CHECK(ut_run(u, be, &opt, &in, y2, NULL, NULL), "other key run");
    CHECK(memcmp(y1, y2, (size_t)ny * 4) != 0, "another step key must draw other masks");

    /* gradients at key (11, 5) */
    sdt_hn_binding_set_step(b, 11, 5);
    opt.for_backward = true;
    CHECK(ut_run(u, be, &opt, &in, NULL, g1, NULL), "hooked backward");
    float *ga = hn_test_grads_of(a), *gb = hn_test_grads_of(bn);
    int64_t moved = 0;
    for (int64_t i = 0; i < sdt_hn_param_numel(bn); i++) moved += gb[i] != 0.0f;
    CHECK(moved == 0, "the frozen member's gradients moved (%lld)", (long long)moved);

    /* d(context) along a random direction vs a central difference */
    double dot, fd, gnorm;
    ut_context_direction(u, be, &opt, &in, g1, nc, &rng, &dot, &fd, &gnorm);
    printf("d(context) along a direction: analytic %.6g, finite difference %.6g\n", dot, fd);
    CHECK(fabs(fd - dot) / sqrt(gnorm) < 2e-3, "d(context): analytic %g vs fd %g", dot, fd);

    /* a few weights of the trained member, on each width (fourth-order differences) */
    int64_t numel = sdt_hn_param_numel(a);
    float *host = kt_alloc((size_t)numel * 4);
    CHECK(sdt_hn_download(a, host, &err), "download: %s", err.message);
    int64_t at = 0;
    int checked = 0;
    for (int i = 0; i < sdt_hn_param_count(a); i++) {
        const sdt_hn_param *p = sdt_hn_param_at(a, i);
        int64_t n = sdt_tensor_numel(&p->value);
        /* the first weight and the last bias of every module */
        bool pick = (p->position == 0 && !p->is_bias) || (i + 1 == sdt_hn_param_count(a)) ||
                    (i + 1 < sdt_hn_param_count(a) && sdt_hn_param_at(a, i + 1)->kind != p->kind);
        if (pick) {
            int64_t index = at + (int64_t)(sdt_test_uniform(&rng) * (double)n);
            const double h = 1e-2;
            double f1 = loss_with_weight(u, be, &opt, &in, a, host, index, h) -
                        loss_with_weight(u, be, &opt, &in, a, host, index, -h);
            double f2 = loss_with_weight(u, be, &opt, &in, a, host, index, 2 * h) -
                        loss_with_weight(u, be, &opt, &in, a, host, index, -2 * h);
            double fa = (8 * f1 - f2) / (12 * h);
            CHECK(fabs(fa - ga[index]) <= 3e-3 * fmax(fabs(fa), 1.0), "d(%s[%lld]): analytic %g vs fd %g", p->name,
                  (long long)(index - at), (double)ga[index], fa);
            checked++;
        }
        at += n;
    }
    CHECK(checked == 2 * 2 * 3, "checked %d weights, expected one weight and one bias per module", checked);

    /* checkpointing reruns the hook (recompute) and changes nothing */
    CHECK(sdt_hn_zero_grads(a, &err), "zero grads: %s", err.message);
    sdt_unet_options ck = opt;
    ck.checkpointing = true;
    CHECK(ut_run(u, be, &ck, &in, NULL, g2, NULL), "checkpointed backward");
    CHECK(!memcmp(g1, g2, (size_t)nc * 4), "checkpointing changed d(context)");
    float *ga2 = hn_test_grads_of(a);
    CHECK(!memcmp(ga, ga2, (size_t)numel * 4), "checkpointing changed the weight gradients");

    free(ga), free(ga2), free(gb), free(host);
    free(y0), free(y1), free(y2), free(g1), free(g2);
    sdt_hn_binding_free(b);
    sdt_hn_free(a), sdt_hn_free(bn);
    ut_free_inputs(&in);
    sdt_unet_free(u);
    sdt_weights_close(w);
    ut_cleanup(dir);
    be->destroy(be);
    return sdt_test_finish("hn_hook");
}
