/* test_scaler_checks.c - every safety check of the optimizer and the scaler: its own
 * status code, and a sentence that names the optimizer (and says what to do). */
#include "numerics_fixture.h"

static sdt_backend *be;
static sdt_test_rng rng;
static sdt_error error = {0};

#define EXPECT(call, code, name)                                                                                       \
    do {                                                                                                               \
        error.message[0] = '\0';                                                                                       \
        sdt_core_status got_ = (call);                                                                                 \
        CHECK(got_ == (code), "%s: got %s, want %s (%s)", #call, sdt_core_status_name(got_), #code, error.message);    \
        CHECK(strstr(error.message, "'" name "'") != NULL, "%s: the sentence must name '%s': %s", #code, name,         \
              error.message);                                                                                          \
    } while (0)

/* A scaler attached to a fresh toy, after one scale_loss. */
static sdt_scaler *scaler_for(toy *t, const char *name)
{
    sdt_adamw_hparams hp = sdt_adamw_hparams_torch_default();
    toy_init(t, be, name, 1, 4, &hp, &rng);
    sdt_scaler *sc = make_scaler(be, 1024.0f, 2.0, 0.5, 2000, false, NULL, NULL);
    double scaled;
    sdt_scaler_attach(sc, t->opt, &error);
    sdt_scaler_scale_loss(sc, 1.0, 1, &scaled, &error);
    return sc;
}

static void test_no_trainable_params(void)
{
    sdt_adamw_hparams hp = sdt_adamw_hparams_torch_default();
    sdt_optimizer *opt = sdt_optimizer_create(be, "frozen-embedding", &hp, &error);
    float w[4] = {1, 2, 3, 4};
    sdt_tensor tw = sdt_tensor_make(w, SDT_F32, SDT_DEVICE_CPU, 1, (int64_t[]){4});
    CHECK(sdt_optimizer_add_param(opt, "vec", &tw, NULL, false, &error) == SDT_CORE_OK, "frozen param: %s",
          error.message);
    EXPECT(sdt_optimizer_prepare(opt, &error), SDT_CORE_NO_TRAINABLE_PARAMS, "frozen-embedding");
    sdt_scaler *sc = make_scaler(be, 1024.0f, 2.0, 0.5, 2000, false, NULL, NULL);
    sdt_scaler_attach(sc, opt, &error);
    EXPECT(sdt_scaler_prepare(sc, &error), SDT_CORE_NO_TRAINABLE_PARAMS, "frozen-embedding");
    double scaled;
    sdt_scaler_scale_loss(sc, 1.0, 1, &scaled, &error);
    EXPECT(sdt_scaler_step(sc, opt, NULL, &error), SDT_CORE_NO_TRAINABLE_PARAMS, "frozen-embedding");
    sdt_scaler_destroy(sc);
    sdt_optimizer_destroy(opt);
    /* an empty hypernetwork: nothing registered at all */
    opt = sdt_optimizer_create(be, "empty-hypernetwork", &hp, &error);
    EXPECT(sdt_optimizer_prepare(opt, &error), SDT_CORE_NO_TRAINABLE_PARAMS, "empty-hypernetwork");
    sdt_optimizer_destroy(opt);
    sc = make_scaler(be, 1024.0f, 2.0, 0.5, 2000, false, NULL, NULL);
    CHECK(sdt_scaler_prepare(sc, &error) == SDT_CORE_NO_TRAINABLE_PARAMS, "a scaler without optimizers cannot prepare");
    sdt_scaler_destroy(sc);
}

static void test_no_backward(void)
{
    toy t;
    sdt_scaler *sc = scaler_for(&t, "emb");
    toy_zero(&t);
    EXPECT(sdt_scaler_step(sc, t.opt, NULL, &error), SDT_CORE_NO_BACKWARD, "emb");
    EXPECT(sdt_scaler_unscale(sc, t.opt, &error), SDT_CORE_NO_BACKWARD, "emb");
    CHECK(sdt_scaler_stage_of(sc, t.opt) == SDT_SCALER_READY, "a refused unscale must not change the stage");
    /* after a full iteration, a step without a new backward is refused too */
    float raw = 1.0f;
    CHECK(scaled_iteration(sc, &t, 1, &raw, NULL, NULL, &error) == SDT_CORE_OK, "iteration: %s", error.message);
    EXPECT(sdt_scaler_step(sc, t.opt, NULL, &error), SDT_CORE_NO_BACKWARD, "emb");
    EXPECT(sdt_optimizer_step(t.opt, &error), SDT_CORE_NO_BACKWARD, "emb");
    sdt_scaler_destroy(sc);
    toy_free(&t);
}

static void test_stage_errors(void)
{
    toy t;
    sdt_scaler *sc = scaler_for(&t, "hyper");
    toy_zero(&t);
    toy_backward_fill(&t, 1024.0f, 1.0f);
    CHECK(sdt_scaler_unscale(sc, t.opt, &error) == SDT_CORE_OK, "unscale: %s", error.message);
    float g = t.grad[0][0];
    EXPECT(sdt_scaler_unscale(sc, t.opt, &error), SDT_CORE_UNSCALE_TWICE, "hyper");
    CHECK(t.grad[0][0] == g, "a refused second unscale must not touch the grads");
    CHECK(sdt_scaler_step(sc, t.opt, NULL, &error) == SDT_CORE_OK, "step: %s", error.message);
    EXPECT(sdt_scaler_unscale(sc, t.opt, &error), SDT_CORE_UNSCALE_AFTER_STEP, "hyper");
    EXPECT(sdt_scaler_step(sc, t.opt, NULL, &error), SDT_CORE_STEP_TWICE, "hyper");
    /* forgot update(): the next iteration's step is E10 again */
    toy_zero(&t);
    toy_backward_fill(&t, 1024.0f, 1.0f);
    EXPECT(sdt_scaler_step(sc, t.opt, NULL, &error), SDT_CORE_STEP_TWICE, "hyper");
    CHECK(sdt_scaler_update(sc, NULL, &error) == SDT_CORE_OK, "update: %s", error.message);
    EXPECT(sdt_scaler_update(sc, NULL, &error), SDT_CORE_UPDATE_WITHOUT_RECORDS, "hyper");
    sdt_scaler_destroy(sc);
    toy_free(&t);
}

static void test_not_scaled(void)
{
    toy t;
    sdt_adamw_hparams hp = sdt_adamw_hparams_torch_default();
    toy_init(&t, be, "early", 1, 2, &hp, &rng);
    sdt_scaler *sc = make_scaler(be, 1024.0f, 2.0, 0.5, 2000, false, NULL, NULL);
    sdt_scaler_attach(sc, t.opt, &error);
    toy_backward_fill(&t, 1.0f, 1.0f);
    EXPECT(sdt_scaler_unscale(sc, t.opt, &error), SDT_CORE_NOT_SCALED, "early");
    EXPECT(sdt_scaler_step(sc, t.opt, NULL, &error), SDT_CORE_NOT_SCALED, "early");
    EXPECT(sdt_scaler_update(sc, NULL, &error), SDT_CORE_NOT_SCALED, "early");
    sdt_scaler_destroy(sc);
    toy_free(&t);
}

static void test_not_owned_and_ownership(void)
{
    toy a, b, c;
    sdt_scaler *sa = scaler_for(&a, "mine");
    sdt_adamw_hparams hp = sdt_adamw_hparams_torch_default();
    toy_init(&b, be, "stranger", 1, 4, &hp, &rng);
    toy_backward_fill(&b, 1024.0f, 1.0f);
    EXPECT(sdt_scaler_step(sa, b.opt, NULL, &error), SDT_CORE_NOT_OWNED, "stranger");
    CHECK(strstr(error.message, "'mine'") != NULL, "NOT_OWNED must also name the scaler's own optimizer: %s",
          error.message);
    EXPECT(sdt_scaler_unscale(sa, b.opt, &error), SDT_CORE_NOT_OWNED, "stranger");
    /* one scaler per optimizer by default */
    EXPECT(sdt_scaler_attach(sa, b.opt, &error), SDT_CORE_INVALID_CONFIG, "stranger");
    /* an optimizer already scaled by another scaler */
    sdt_scaler *sb = make_scaler(be, 1024.0f, 2.0, 0.5, 2000, false, NULL, NULL);
    EXPECT(sdt_scaler_attach(sb, a.opt, &error), SDT_CORE_ALREADY_OWNED, "mine");
    /* a parameter owned by two optimizers of one shared scaler */
    sdt_scaler *shared = make_scaler(be, 1024.0f, 2.0, 0.5, 2000, true, NULL, NULL);
    toy_init(&c, be, "first", 1, 4, &hp, &rng);
    sdt_optimizer *second = sdt_optimizer_create(be, "second", &hp, &error);
    CHECK(sdt_optimizer_add_param(second, "alias", &c.pt[0], &c.gt[0], true, &error) == SDT_CORE_OK, "add alias");
    CHECK(sdt_scaler_attach(shared, c.opt, &error) == SDT_CORE_OK, "attach first: %s", error.message);
    EXPECT(sdt_scaler_attach(shared, second, &error), SDT_CORE_SHARED_PARAM, "second");
    CHECK(strstr(error.message, "'first'") && strstr(error.message, "alias"),
          "the sentence names both optimizers and the parameter: %s", error.message);
    CHECK(sdt_optimizer_find_shared_param(second, c.opt) != NULL, "find_shared_param sees the alias");
    /* registered twice in one optimizer */
    EXPECT(sdt_optimizer_add_param(c.opt, "again", &c.pt[0], &c.gt[0], true, &error), SDT_CORE_DUPLICATE_PARAM,
           "first");
    /* destroying a scaler releases its optimizers */
    sdt_scaler_destroy(sa);
    CHECK(sdt_scaler_attach(sb, a.opt, &error) == SDT_CORE_OK, "after the owner is gone, attach works: %s",
          error.message);
    sdt_optimizer_destroy(second);
    sdt_scaler_destroy(sb);
    sdt_scaler_destroy(shared);
    toy_free(&a);
    toy_free(&b);
    toy_free(&c);
}

static void test_fp16_master(void)
{
    sdt_adamw_hparams hp = sdt_adamw_hparams_torch_default();
    sdt_optimizer *opt = sdt_optimizer_create(be, "half", &hp, &error);
    uint16_t h[4] = {0};
    float g[4] = {0}, p[4] = {0};
    uint16_t hg[4] = {0};
    sdt_tensor th = sdt_tensor_make(h, SDT_F16, SDT_DEVICE_CPU, 1, (int64_t[]){4});
    sdt_tensor tg = sdt_tensor_make(g, SDT_F32, SDT_DEVICE_CPU, 1, (int64_t[]){4});
    sdt_tensor tp = sdt_tensor_make(p, SDT_F32, SDT_DEVICE_CPU, 1, (int64_t[]){4});
    sdt_tensor thg = sdt_tensor_make(hg, SDT_F16, SDT_DEVICE_CPU, 1, (int64_t[]){4});
    EXPECT(sdt_optimizer_add_param(opt, "w16", &th, &tg, true, &error), SDT_CORE_FP16_MASTER, "half");
    CHECK(strstr(error.message, "fp32") != NULL, "the fix (fp32 master) must be in the sentence: %s", error.message);
    EXPECT(sdt_optimizer_add_param(opt, "g16", &tp, &thg, true, &error), SDT_CORE_FP16_MASTER, "half");
    sdt_optimizer_destroy(opt);
}

static void test_empty_batch(void)
{
    toy t;
    sdt_scaler *sc = scaler_for(&t, "batchless");
    double scaled;
    EXPECT(sdt_scaler_scale_loss(sc, 1.0, 0, &scaled, &error), SDT_CORE_EMPTY_BATCH, "batchless");
    sdt_scaler_destroy(sc);
    toy_free(&t);
}

static void test_no_gradient_flow(void)
{
    toy t;
    sdt_scaler *sc = scaler_for(&t, "placeholder");
    toy_zero(&t);
    toy_backward_fill(&t, 1024.0f, 0.0f); /* backward ran, every gradient exactly zero */
    float *p0 = toy_snapshot(&t);
    EXPECT(sdt_scaler_step(sc, t.opt, NULL, &error), SDT_CORE_NO_GRADIENT_FLOW, "placeholder");
    CHECK(strstr(error.message, "[name]") != NULL, "the sentence must point at the template / truncation: %s",
          error.message);
    CHECK(toy_params_equal(&t, p0) && sdt_optimizer_step_count(t.opt) == 0, "no update without gradient flow");
    free(p0);
    sdt_scaler_destroy(sc);
    toy_free(&t);
}

static void test_grads_still_scaled(void)
{
    toy t;
    sdt_scaler *sc = scaler_for(&t, "clipper");
    toy_zero(&t);
    toy_backward_fill(&t, 1024.0f, 1.0f);
    double norm;
    EXPECT(sdt_optimizer_clip_grad_norm(t.opt, 1.0, false, &norm, &error), SDT_CORE_GRADS_STILL_SCALED, "clipper");
    EXPECT(sdt_optimizer_clip_grad_value(t.opt, 1.0f, &error), SDT_CORE_GRADS_STILL_SCALED, "clipper");
    EXPECT(sdt_optimizer_step(t.opt, &error), SDT_CORE_GRADS_STILL_SCALED, "clipper");
    CHECK(sdt_scaler_unscale(sc, t.opt, &error) == SDT_CORE_OK, "unscale: %s", error.message);
    CHECK(sdt_optimizer_clip_grad_norm(t.opt, 1.0, false, &norm, &error) == SDT_CORE_OK, "clip after unscale: %s",
          error.message);
    sdt_scaler_destroy(sc);
    toy_free(&t);
}

static void test_config_validation(void)
{
    struct {
        const char *field;
        sdt_scaler_config cfg;
    } bad[16];
    int n = 0;
    sdt_scaler_config d = sdt_scaler_config_default();
#define BAD(field_, expr_)                                                                                             \
    do {                                                                                                               \
        bad[n].field = field_;                                                                                         \
        bad[n].cfg = d;                                                                                                \
        expr_;                                                                                                         \
        n++;                                                                                                           \
    } while (0)
    BAD("init_scale", bad[n].cfg.init_scale = 0.0f);
    BAD("init_scale", bad[n].cfg.init_scale = -8.0f);
    BAD("init_scale", bad[n].cfg.init_scale = NAN);
    BAD("init_scale", bad[n].cfg.init_scale = INFINITY);
    BAD("init_scale", bad[n].cfg.init_scale = ldexpf(1.0f, -149)); /* 1/scale overflows fp32 */
    BAD("growth_factor", bad[n].cfg.growth_factor = 1.0);
    BAD("growth_factor", bad[n].cfg.growth_factor = 0.5);
    BAD("backoff_factor", bad[n].cfg.backoff_factor = 1.0);
    BAD("backoff_factor", bad[n].cfg.backoff_factor = 0.0);
    BAD("backoff_factor", bad[n].cfg.backoff_factor = -0.5);
    BAD("growth_interval", bad[n].cfg.growth_interval = 0);
    BAD("growth_interval", bad[n].cfg.growth_interval = -3);
    BAD("hysteresis", bad[n].cfg.hysteresis = 0);
    BAD("min_scale", bad[n].cfg.min_scale = -1.0f);
    BAD("min_scale", bad[n].cfg.min_scale = 1e9f);
#undef BAD
    for (int i = 0; i < n; i++) {
        error.message[0] = '\0';
        sdt_scaler *sc = sdt_scaler_create(be, &bad[i].cfg, NULL, NULL, &error);
        CHECK(sc == NULL, "config %d (%s) must be refused", i, bad[i].field);
        CHECK(strstr(error.message, bad[i].field) != NULL, "config %d: the sentence must name %s: %s", i, bad[i].field,
              error.message);
        CHECK(sdt_scaler_config_validate(&bad[i].cfg, &error) == SDT_CORE_INVALID_CONFIG, "validate %d", i);
        sdt_scaler_destroy(sc);
    }
    CHECK(sdt_scaler_config_validate(&d, &error) == SDT_CORE_OK, "the defaults are valid");
    sdt_adamw_hparams hp = sdt_adamw_hparams_torch_default();
    hp.beta1 = 1.0f;
    CHECK(sdt_optimizer_create(be, "betas", &hp, &error) == NULL && strstr(error.message, "'betas'"),
          "beta1 = 1 must be refused");
}

int main(void)
{
    rng = sdt_test_rng_from_env("scaler_checks");
    be = kt_backend();
    test_no_trainable_params();
    test_no_backward();
    test_stage_errors();
    test_not_scaled();
    test_not_owned_and_ownership();
    test_fp16_master();
    test_empty_batch();
    test_no_gradient_flow();
    test_grads_still_scaled();
    test_config_validation();
    for (int s = 0; s < SDT_CORE_STATUS_COUNT; s++)
        CHECK(strncmp(sdt_core_status_name((sdt_core_status)s), "SDT_CORE_", 9) == 0, "status %d has a name", s);
    be->destroy(be);
    return sdt_test_finish("scaler_checks");
}
