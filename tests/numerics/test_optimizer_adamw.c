/* test_optimizer_adamw.c - the optimizer against a float64 torch.optim.AdamW
 * reference over several steps, and clip_grad_norm_ / clip_grad_value_ / zero_grad. */
#include "numerics_fixture.h"

static sdt_backend *be;
static sdt_test_rng rng;

/* torch.optim.AdamW (single-tensor path, amsgrad off) in float64. */
static void adamw_reference(double *p, const double *g, double *m, double *v, int64_t n, const sdt_adamw_hparams *hp,
                            int64_t step)
{
    double lr = hp->lr, b1 = hp->beta1, b2 = hp->beta2, eps = hp->eps, wd = hp->weight_decay;
    double bc1 = 1.0 - pow(b1, (double)step), bc2 = 1.0 - pow(b2, (double)step);
    for (int64_t i = 0; i < n; i++) {
        p[i] *= 1.0 - lr * wd;
        m[i] += (1.0 - b1) * (g[i] - m[i]);
        v[i] = v[i] * b2 + (1.0 - b2) * g[i] * g[i];
        double denom = sqrt(v[i]) / sqrt(bc2) + eps;
        p[i] -= lr / bc1 * m[i] / denom;
    }
}

static void test_adamw_matches_reference(float weight_decay)
{
    enum { N = 3, SIZE = 37, STEPS = 12 };
    sdt_adamw_hparams hp = sdt_adamw_hparams_torch_default();
    hp.lr = 0.01f;
    hp.weight_decay = weight_decay;
    toy t;
    toy_init(&t, be, "adamw", N, SIZE, &hp, &rng);
    double p[N * SIZE], m[N * SIZE] = {0}, v[N * SIZE] = {0}, g[N * SIZE];
    for (int i = 0; i < N; i++)
        for (int j = 0; j < SIZE; j++) p[i * SIZE + j] = t.param[i][j];
    sdt_error error = {0};
    for (int step = 1; step <= STEPS; step++) {
        float raw[N * SIZE];
        toy_zero(&t);
        toy_backward_random(&t, &rng, 1.0f, raw);
        for (int k = 0; k < N * SIZE; k++) g[k] = raw[k];
        CHECK(sdt_optimizer_step(t.opt, &error) == SDT_CORE_OK, "step %d: %s", step, error.message);
        adamw_reference(p, g, m, v, N * SIZE, &hp, step);
    }
    float got[N * SIZE];
    for (int i = 0; i < N; i++) memcpy(got + i * SIZE, t.param[i], SIZE * sizeof(float));
    double rel = sdt_rel_err_fd(got, p, N * SIZE);
    CHECK(rel < 2e-6, "wd %g: params vs float64 AdamW after %d steps: rel error.message %.3g", (double)weight_decay,
          STEPS, rel);
    sdt_tensor *mt;
    sdt_optimizer_param_views(t.opt, 1, NULL, NULL, NULL, &mt, NULL);
    double rel_m = sdt_rel_err_fd(mt->data, m + SIZE, SIZE);
    CHECK(rel_m < 1e-5, "exp_avg vs reference: rel error.message %.3g", rel_m);
    CHECK(sdt_optimizer_step_count(t.opt) == STEPS, "step count %lld", (long long)sdt_optimizer_step_count(t.opt));
    toy_free(&t);
}

static void test_clip_grad_norm(void)
{
    sdt_adamw_hparams hp = sdt_adamw_hparams_torch_default();
    toy t;
    toy_init(&t, be, "clip", 2, 50, &hp, &rng);
    sdt_error error = {0};
    float raw[100];
    toy_zero(&t);
    toy_backward_random(&t, &rng, 1.0f, raw);
    double sumsq = 0;
    for (int k = 0; k < 100; k++) sumsq += (double)raw[k] * raw[k];
    double want_norm = sqrt(sumsq), norm = 0;
    double max_norm = want_norm / 4.0;
    CHECK(sdt_optimizer_clip_grad_norm(t.opt, max_norm, false, &norm, &error) == SDT_CORE_OK, "%s", error.message);
    CHECK(fabs(norm - want_norm) <= 1e-12 * want_norm, "total norm %.17g, want %.17g", norm, want_norm);
    float coef = (float)max_norm / ((float)want_norm + 1e-6f);
    bool exact = true;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 50; j++) exact &= t.grad[i][j] == raw[i * 50 + j] * coef;
    CHECK(exact, "grads must be multiplied by max_norm / (norm + 1e-6)");
    double after;
    sdt_optimizer_grad_norm(t.opt, &after, &error);
    CHECK(fabs(after - max_norm) < 1e-5 * max_norm, "clipped norm %.9g, want %.9g", after, max_norm);
    /* below the threshold: untouched */
    float before[50];
    memcpy(before, t.grad[0], sizeof before);
    CHECK(sdt_optimizer_clip_grad_norm(t.opt, max_norm * 10, false, &norm, &error) == SDT_CORE_OK, "%s", error.message);
    CHECK(memcmp(before, t.grad[0], sizeof before) == 0, "a norm below max_norm leaves the grads alone");
    /* non-finite: torch turns the grads to NaN; error_if_nonfinite refuses */
    t.grad[1][3] = INFINITY;
    CHECK(sdt_optimizer_clip_grad_norm(t.opt, 1.0, true, &norm, &error) == SDT_CORE_NONFINITE_NORM &&
              strstr(error.message, "'clip'"),
          "error_if_nonfinite: %s", error.message);
    CHECK(sdt_optimizer_clip_grad_norm(t.opt, 1.0, false, &norm, &error) == SDT_CORE_OK && isinf(norm), "inf norm");
    CHECK(isnan(t.grad[1][3]) && t.grad[0][0] == 0.0f, "inf * 0 = NaN, finite * 0 = 0, as in torch");
    toy_free(&t);
}

static void test_clip_grad_value_and_zero(void)
{
    sdt_adamw_hparams hp = sdt_adamw_hparams_torch_default();
    toy t;
    toy_init(&t, be, "value", 1, 64, &hp, &rng);
    sdt_error error = {0};
    float raw[64];
    toy_zero(&t);
    toy_backward_random(&t, &rng, 1.0f, raw);
    t.grad[0][5] = NAN;
    CHECK(sdt_optimizer_clip_grad_value(t.opt, 0.5f, &error) == SDT_CORE_OK, "%s", error.message);
    bool ok = true;
    for (int j = 0; j < 64; j++) {
        if (j == 5) continue;
        float want = raw[j] > 0.5f ? 0.5f : (raw[j] < -0.5f ? -0.5f : raw[j]);
        ok &= t.grad[0][j] == want;
    }
    CHECK(ok && isnan(t.grad[0][5]), "clip_grad_value clamps to [-0.5, 0.5] and keeps NaN");
    CHECK(sdt_optimizer_clip_grad_value(t.opt, 0.0f, &error) == SDT_CORE_INVALID_ARGUMENT, "clip value 0 is refused");
    CHECK(sdt_optimizer_zero_grad(t.opt, &error) == SDT_CORE_OK, "%s", error.message);
    ok = true;
    for (int j = 0; j < 64; j++) ok &= t.grad[0][j] == 0.0f;
    CHECK(ok && sdt_optimizer_backward_count(t.opt) == 0, "zero_grad zeroes and forgets the backward");
    toy_free(&t);
}

/* Resume: a fresh optimizer given the params, m, v and step count continues exactly. */
static void test_resume(void)
{
    sdt_adamw_hparams hp = sdt_adamw_hparams_torch_default();
    toy a, b;
    toy_init(&a, be, "before", 1, 16, &hp, &rng);
    toy_init(&b, be, "after", 1, 16, &hp, NULL);
    sdt_error error = {0};
    for (int s = 0; s < 3; s++) {
        toy_zero(&a);
        toy_backward_random(&a, &rng, 1.0f, NULL);
        sdt_optimizer_step(a.opt, &error);
    }
    sdt_tensor *ma, *va, *mb, *vb;
    sdt_optimizer_param_views(a.opt, 0, NULL, NULL, NULL, &ma, &va);
    sdt_optimizer_param_views(b.opt, 0, NULL, NULL, NULL, &mb, &vb);
    memcpy(b.param[0], a.param[0], 16 * sizeof(float));
    memcpy(mb->data, ma->data, 16 * sizeof(float));
    memcpy(vb->data, va->data, 16 * sizeof(float));
    sdt_optimizer_set_step_count(b.opt, sdt_optimizer_step_count(a.opt));
    float raw[16];
    toy_zero(&a);
    toy_zero(&b);
    toy_backward_random(&a, &rng, 1.0f, raw);
    memcpy(b.grad[0], raw, sizeof raw);
    sdt_optimizer_note_backward(b.opt, 1.0f);
    sdt_optimizer_step(a.opt, &error);
    sdt_optimizer_step(b.opt, &error);
    CHECK(memcmp(a.param[0], b.param[0], sizeof raw) == 0 && sdt_optimizer_step_count(b.opt) == 4,
          "a resumed optimizer must continue bit for bit (bias correction uses the restored step)");
    toy_free(&a);
    toy_free(&b);
}

int main(void)
{
    rng = sdt_test_rng_from_env("optimizer_adamw");
    be = kt_backend();
    test_adamw_matches_reference(0.0f);
    test_adamw_matches_reference(0.01f);
    test_clip_grad_norm();
    test_clip_grad_value_and_zero();
    test_resume();
    be->destroy(be);
    return sdt_test_finish("optimizer_adamw");
}
