/* Tests the RNG, the DDPM noise schedule and the DDIM preview sampler. */
#include "train/ddim_sampler.h"
#include "train/noise_schedule.h"
#include "train/rng.h"
#include "sdt_test.h"

#include <string.h>

static void test_rng(void)
{
    /* Counter-based: the same (seed, stream, counter) gives the same value, chunked or not. */
    float whole[64], part[64];
    sdt_rng_normal_fill(42, SDT_RNG_NOISE, 100, whole, 64);
    sdt_rng_normal_fill(42, SDT_RNG_NOISE, 100, part, 20);
    sdt_rng_normal_fill(42, SDT_RNG_NOISE, 120, part + 20, 44);
    CHECK(memcmp(whole, part, sizeof(whole)) == 0, "rng: chunked normal fill differs from one fill");
    CHECK(sdt_rng_bits(1, SDT_RNG_NOISE, 0) != sdt_rng_bits(1, SDT_RNG_TIMESTEP, 0), "rng: streams collide");
    CHECK(sdt_rng_bits(1, SDT_RNG_NOISE, 0) != sdt_rng_bits(2, SDT_RNG_NOISE, 0), "rng: seeds collide");
    /* Moments of 200k normals and uniformity of below(). */
    enum { N = 200000 };
    static float buf[N];
    sdt_rng_normal_fill(7, SDT_RNG_NOISE, 0, buf, N);
    double m = 0, v = 0;
    for (int i = 0; i < N; i++) m += buf[i];
    m /= N;
    for (int i = 0; i < N; i++) v += (buf[i] - m) * (buf[i] - m);
    v /= N;
    CHECK(fabs(m) < 0.01 && fabs(v - 1) < 0.02, "rng: normal mean %g var %g", m, v);
    int counts[7] = {0};
    for (int i = 0; i < 70000; i++) counts[sdt_rng_below(9, SDT_RNG_TIMESTEP, (uint64_t)i, 7)]++;
    for (int k = 0; k < 7; k++) CHECK(abs(counts[k] - 10000) < 500, "rng: below(7) bucket %d has %d", k, counts[k]);
}

static void test_schedule(void)
{
    sdt_noise_schedule s;
    sdt_noise_schedule_init_sd(&s);
    CHECK(fabs(s.alphas_cumprod[0] - 0.99915) < 1e-12, "schedule: acp[0] = %.10f, want 1 - 0.00085",
          s.alphas_cumprod[0]);
    /* Lin et al. 2023 (zero terminal SNR) report sqrt(acp[999]) = 0.068265 for SD: acp = 0.0046601. */
    CHECK(fabs(s.alphas_cumprod[999] - 0.068265 * 0.068265) < 2e-7, "schedule: acp[999] = %.7f", s.alphas_cumprod[999]);
    for (int t = 1; t < 1000; t++)
        if (!(s.alphas_cumprod[t] < s.alphas_cumprod[t - 1])) {
            CHECK(0, "schedule: not decreasing at %d", t);
            break;
        }
    /* v = sqrt(a) eps - sqrt(1-a) x0 and x_t = sqrt(a) x0 + sqrt(1-a) eps invert to x0 = sqrt(a) x_t - sqrt(1-a) v. */
    float x0[5] = {0.5f, -1, 2, 0, 0.25f}, eps[5] = {1, 0.3f, -0.7f, 2, -1}, xt[5], v[5];
    sdt_q_sample(&s, 500, x0, eps, xt, 5);
    sdt_training_target(&s, 500, true, x0, eps, v, 5);
    double a = s.alphas_cumprod[500];
    for (int i = 0; i < 5; i++) {
        double rec = sqrt(a) * xt[i] - sqrt(1 - a) * v[i];
        CHECK(fabs(rec - x0[i]) < 1e-5, "schedule: v-prediction identity broken at %d (%g vs %g)", i, rec, x0[i]);
    }
    float target[5];
    sdt_training_target(&s, 500, false, x0, eps, target, 5);
    CHECK(memcmp(target, eps, sizeof(eps)) == 0, "schedule: epsilon target is not the noise");
}

/* An ideal denoiser for data that is a single point: the cond target is one point, the uncond another. */
typedef struct {
    const sdt_noise_schedule *s;
    const float *cond_x0, *uncond_x0;
    int64_t n;
    bool v;
    int calls;
} ideal_model;

static void ideal_output(const ideal_model *m, const float *target, const float *x, int t, float *out)
{
    double a = m->s->alphas_cumprod[t], sa = sqrt(a), sb = sqrt(1 - a);
    for (int64_t i = 0; i < m->n; i++) {
        double e = (x[i] - sa * target[i]) / sb;
        out[i] = (float)(m->v ? sa * e - sb * target[i] : e);
    }
}

static int ideal_denoise(void *user, const float *x, double timestep, float *cond, float *uncond)
{
    ideal_model *m = user;
    int t = (int)timestep;
    m->calls++;
    ideal_output(m, m->cond_x0, x, t, cond);
    if (uncond) ideal_output(m, m->uncond_x0, x, t, uncond);
    return 0;
}

static void test_ddim(void)
{
    sdt_noise_schedule s;
    sdt_noise_schedule_init_sd(&s);
    CHECK(sdt_ddim_timestep(20, 0) == 951 && sdt_ddim_timestep(20, 19) == 1, "ddim: leading timesteps %d..%d",
          sdt_ddim_timestep(20, 0), sdt_ddim_timestep(20, 19));
    enum { N = 16 };
    float target[N], other[N], x[N], scratch[3 * N];
    for (int i = 0; i < N; i++) target[i] = (float)(i % 5) * 0.3f - 0.6f, other[i] = -target[i];
    for (int pass = 0; pass < 2; pass++) {
        ideal_model m = {&s, target, other, N, pass == 1, 0};
        sdt_rng_normal_fill(3, SDT_RNG_PREVIEW, 0, x, N);
        sdt_ddim_config cfg = {20, 1.0f, pass == 1};
        CHECK(sdt_ddim_sample(&s, &cfg, x, N, scratch, ideal_denoise, &m) == 0, "ddim: sample failed");
        CHECK(m.calls == 20, "ddim: %d model calls for 20 steps", m.calls);
        /* The final step lands on acp[0] = 0.99915: within ~0.03 of the data point. */
        double err = 0;
        for (int i = 0; i < N; i++) err = fmax(err, fabs(x[i] - sqrt(s.alphas_cumprod[0]) * target[i]));
        CHECK(err < 0.12, "ddim(%s): ideal denoiser lands %g away from the data point", pass ? "v" : "eps", err);
    }
    /* Guidance: with cfg 1 the uncond branch is not evaluated; with cfg 2 the result
     * extrapolates: x0 = uncond + 2 (cond - uncond) = 2 target - other = 3 target. */
    ideal_model m = {&s, target, other, N, false, 0};
    sdt_rng_normal_fill(4, SDT_RNG_PREVIEW, 0, x, N);
    sdt_ddim_config cfg = {50, 2.0f, false};
    CHECK(sdt_ddim_sample(&s, &cfg, x, N, scratch, ideal_denoise, &m) == 0, "ddim: guided sample failed");
    double err = 0;
    for (int i = 0; i < N; i++) err = fmax(err, fabs(x[i] - 3 * target[i]));
    CHECK(err < 0.25, "ddim: cfg 2 result %g away from the extrapolated point", err);
}

int main(void)
{
    test_rng();
    test_schedule();
    test_ddim();
    return sdt_test_finish("train_diffusion");
}
