/* test_loss_options - the loss and noise options of ABI 1.5 against their published formulas:
 *  - the timestep range: every draw in [min, max]; the full range draws A1111's numbers;
 *  - the noise offset: one N(0,1) per sample and channel, the same over H and W, times the
 *    strength (uniform in [0, X) with the random strength), and off at 0;
 *  - min-SNR-gamma: the epsilon and v forms against float64 (Hang et al. 2023);
 *  - zero terminal SNR: the rescaled schedule against diffusers' rescale_zero_terminal_snr in
 *    torch (Lin et al. 2023, Algorithm 1), last 0 and first unchanged;
 *  - the loss of a batch as the trainer composes it (alpha mask times min-SNR weight into the loss
 *    op's weight, L2/L1/Huber, the backward seeded with the fp16 loss scale and unscaled) against
 *    kohya's formulation in torch, its autograd gradient included (tests/train/loss_reference.py).
 * The torch parts are skipped, with a line saying so, where Debian's python3-torch is missing. */
#include <glib.h>
#include <glib/gstdio.h>

#include "kernel_test.h"
#include "sdt_test.h"
#include "torch_python.h"
#include "train/loss_options.h"
#include "train/noise_schedule.h"
#include "train/rng.h"

static void test_timestep_range(void)
{
    sdt_loss_options full = {.timestep_min = 0, .timestep_max = 999};
    for (uint64_t d = 0; d < 5000; d++)
        CHECK(sdt_loss_timestep(&full, 11, d) == (int)sdt_rng_below(11, SDT_RNG_TIMESTEP, d, SDT_DDPM_STEPS),
              "timestep: the full range must draw A1111's uniform 0..999 numbers (draw %llu)", (unsigned long long)d);
    sdt_loss_options range = {.timestep_min = 200, .timestep_max = 203};
    int counts[4] = {0};
    for (uint64_t d = 0; d < 4000; d++) {
        int t = sdt_loss_timestep(&range, 5, d);
        CHECK(t >= 200 && t <= 203, "timestep %d outside the inclusive range 200..203", t);
        if (t >= 200 && t <= 203) counts[t - 200]++;
    }
    for (int k = 0; k < 4; k++)
        CHECK(abs(counts[k] - 1000) < 150, "timestep %d drawn %d times of 4000", 200 + k, counts[k]);
    sdt_loss_options one = {.timestep_min = 999, .timestep_max = 999};
    CHECK(sdt_loss_timestep(&one, 5, 3) == 999, "timestep range 999..999 must draw 999");
}

static void test_noise_offset(void)
{
    enum { C = 4, HW = 6, N = 2000 };
    float base[C * HW], noise[C * HW];
    sdt_loss_options off = {.noise_offset = 0.0};
    sdt_rng_normal_fill(3, SDT_RNG_NOISE, 0, base, C * HW);
    memcpy(noise, base, sizeof noise);
    sdt_loss_offset_noise(&off, 3, 0, noise, C, HW);
    CHECK(memcmp(noise, base, sizeof noise) == 0, "noise offset 0 must leave the noise as it is");

    sdt_loss_options fixed = {.noise_offset = 0.1};
    double sum = 0, sum2 = 0;
    for (uint64_t d = 0; d < N; d++) {
        sdt_rng_normal_fill(3, SDT_RNG_NOISE, d * C * HW, base, C * HW);
        memcpy(noise, base, sizeof noise);
        sdt_loss_offset_noise(&fixed, 3, d, noise, C, HW);
        for (int c = 0; c < C; c++) {
            float z;
            sdt_rng_normal_fill(3, SDT_RNG_NOISE_OFFSET, d * C + (uint64_t)c, &z, 1);
            for (int i = 0; i < HW; i++) {
                double added = (double)noise[c * HW + i] - (double)base[c * HW + i];
                CHECK(fabs(added - 0.1 * z) < 1e-6, "noise offset: sample %llu channel %d adds %g, want 0.1 * %g",
                      (unsigned long long)d, c, added, (double)z);
            }
            double a = (double)noise[c * HW] - (double)base[c * HW];
            sum += a, sum2 += a * a;
        }
    }
    double mean = sum / (N * C), sd = sqrt(sum2 / (N * C) - mean * mean);
    CHECK(fabs(mean) < 0.01 && fabs(sd - 0.1) < 0.006, "noise offset 0.1: the offsets' mean %g and sd %g (want 0, 0.1)",
          mean, sd);

    sdt_loss_options random = {.noise_offset = 0.1, .noise_offset_random = true};
    double smax = 0, ssum = 0;
    for (uint64_t d = 0; d < N; d++) {
        memset(noise, 0, sizeof noise);
        sdt_loss_offset_noise(&random, 9, d, noise, C, HW);
        float z;
        sdt_rng_normal_fill(9, SDT_RNG_NOISE_OFFSET, d * C, &z, 1);
        double strength = (double)noise[0] / (double)z,
               want = 0.1 * sdt_rng_uniform(9, SDT_RNG_NOISE_OFFSET_STRENGTH, d);
        CHECK(fabs(strength - want) < 1e-5 * (1 + 1 / fabs((double)z)), "random strength of sample %llu: %g, want %g",
              (unsigned long long)d, strength, want);
        CHECK(want >= 0 && want < 0.1, "random strength %g outside [0, 0.1)", want);
        smax = fmax(smax, want), ssum += want;
    }
    CHECK(smax > 0.099 && fabs(ssum / N - 0.05) < 0.003, "random strength: max %g, mean %g (uniform in [0, 0.1))", smax,
          ssum / N);
}

static void test_min_snr_weight(void)
{
    const double snrs[] = {1e-4, 0.3, 1.0, 4.99, 5.0, 5.01, 170.0};
    for (size_t i = 0; i < sizeof snrs / sizeof snrs[0]; i++) {
        double s = snrs[i], clipped = s < 5.0 ? s : 5.0;
        CHECK(fabs(sdt_min_snr_weight(s, 5.0, false) - clipped / s) < 1e-15, "min-SNR epsilon at SNR %g", s);
        CHECK(fabs(sdt_min_snr_weight(s, 5.0, true) - clipped / (s + 1.0)) < 1e-15, "min-SNR v at SNR %g", s);
        CHECK(sdt_min_snr_weight(s, 0.0, false) == 1.0 && sdt_min_snr_weight(s, 0.0, true) == 1.0,
              "gamma 0 is off: weight 1");
    }
    CHECK(sdt_min_snr_weight(0.0, 5.0, true) == 0.0, "v form at zero terminal SNR: 0");
    CHECK(sdt_min_snr_weight(0.0, 5.0, false) == 1.0, "epsilon form at SNR 0: its limit, 1");
    sdt_noise_schedule s;
    sdt_noise_schedule_init_sd(&s);
    double acp = s.alphas_cumprod[500];
    CHECK(fabs(sdt_noise_schedule_snr(&s, 500) - acp / (1.0 - acp)) < 1e-15, "SNR = acp / (1 - acp)");
}

/* The schedule of loss_reference.py (torch, float64) against ours. */
static void test_zero_terminal_snr(void)
{
    sdt_noise_schedule sd, z;
    sdt_noise_schedule_init_sd(&sd);
    z = sd;
    sdt_noise_schedule_rescale_zero_terminal_snr(&z);
    CHECK(z.alphas_cumprod[999] == 0.0, "zero terminal SNR: acp[999] = %g, want 0", z.alphas_cumprod[999]);
    CHECK(fabs(z.alphas_cumprod[0] - sd.alphas_cumprod[0]) < 1e-15, "zero terminal SNR keeps acp[0]");
    for (int t = 1; t < 1000; t++)
        CHECK(z.alphas_cumprod[t] < z.alphas_cumprod[t - 1], "zero terminal SNR: acp must fall (t %d)", t);
    if (!tp_torch_available()) {
        printf("python3-torch is not available: the zero-terminal-SNR schedule is not compared with diffusers'\n");
        return;
    }
    char *script = g_build_filename(SDT_SOURCE_DIR, "tests", "train", "loss_reference.py", NULL);
    char *argv[] = {TP_PYTHON, script, "schedule", "1", NULL}, *out = NULL;
    int status = -1;
    CHECK(g_spawn_sync(NULL, argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out, NULL, &status, NULL) &&
              status == 0,
          "loss_reference.py schedule failed");
    char **lines = g_strsplit(out ? out : "", "\n", -1);
    int n = 0;
    double worst = 0;
    for (; lines[n] && lines[n][0] && n < 1000; n++) {
        double want = g_ascii_strtod(lines[n], NULL), got = z.alphas_cumprod[n];
        double err = want == 0 ? fabs(got) : fabs(got - want) / want;
        worst = fmax(worst, err);
    }
    CHECK(n == 1000, "loss_reference.py printed %d values, want 1000", n);
    CHECK(worst < 1e-9, "zero terminal SNR vs diffusers' rescale_zero_terminal_snr: worst relative error %.3g", worst);
    g_strfreev(lines);
    g_free(out);
    g_free(script);
}

static void write_floats(const char *dir, const char *name, const float *x, int64_t n)
{
    char *path = g_build_filename(dir, name, NULL);
    CHECK(g_file_set_contents(path, (const char *)x, (gssize)(n * (int64_t)sizeof(float)), NULL), "writing %s", path);
    g_free(path);
}

/* One batch as train_job_step.c composes it: its inputs, our loss and unscaled gradient. */
typedef struct batch_case {
    sdt_loss_type type;
    double gamma;
    bool v, ztsnr;
    float delta, scale;
    char *dir;
    double loss;
    float grad[3 * 4 * 5 * 6];
} batch_case;

enum { CB = 3, CC = 4, CH = 5, CW = 6, CHW = CH * CW, CN = CB * CC * CHW };

static void run_batch_case(sdt_backend *be, sdt_test_rng *r, batch_case *k)
{
    float *pred = kt_randn(r, CN, 1.0), *target = kt_randn(r, CN, 1.0), mask[CB * CHW], weight[CN];
    const float t[CB] = {3.0f, 480.0f, 999.0f};
    for (int i = 0; i < CB * CHW; i++) mask[i] = (float)sdt_test_uniform(r);
    sdt_noise_schedule s;
    sdt_noise_schedule_init_sd(&s);
    if (k->ztsnr) sdt_noise_schedule_rescale_zero_terminal_snr(&s);
    for (int b = 0; b < CB; b++) {
        float snr_w = (float)sdt_min_snr_weight(sdt_noise_schedule_snr(&s, (int)t[b]), k->gamma, k->v);
        for (int c = 0; c < CC; c++)
            for (int i = 0; i < CHW; i++) weight[(b * CC + c) * CHW + i] = mask[b * CHW + i] * snr_w;
    }
    sdt_tensor tp = kt_f32(pred, 4, CB, CC, CH, CW), ty = tp, tw = tp, tg = tp;
    ty.data = target, tw.data = weight, tg.data = k->grad;
    memset(k->grad, 0, sizeof k->grad);
    int rc;
    if (k->type == SDT_LOSS_L2)
        rc = be->mse_loss_forward(be, &k->loss, &tp, &ty, &tw) ||
             be->mse_loss_backward(be, &tg, k->scale, &tp, &ty, &tw);
    else {
        sdt_robust_loss kind = k->type == SDT_LOSS_L1 ? SDT_ROBUST_LOSS_L1 : SDT_ROBUST_LOSS_HUBER;
        rc = be->robust_loss_forward(be, &k->loss, &tp, &ty, &tw, kind, k->delta) ||
             be->robust_loss_backward(be, &tg, k->scale, &tp, &ty, &tw, kind, k->delta);
    }
    CHECK(rc == 0, "the batch loss failed: %s", be->error.message);
    for (int i = 0; i < CN; i++) k->grad[i] /= k->scale; /* the scaler's unscale */
    g_mkdir(k->dir, 0700);
    write_floats(k->dir, "pred", pred, CN);
    write_floats(k->dir, "target", target, CN);
    write_floats(k->dir, "mask", mask, CB * CHW);
    write_floats(k->dir, "timesteps", t, CB);
    free(pred);
    free(target);
}

static void compare_batch_case(const batch_case *k, double want)
{
    const char *name = sdt_loss_type_name(k->type), *form = k->v ? "v" : "eps",
               *z = k->ztsnr ? ", zero terminal SNR" : "";
    char *gpath = g_build_filename(k->dir, "grad", NULL);
    gchar *gdata = NULL;
    gsize glen = 0;
    CHECK(g_file_get_contents(gpath, &gdata, &glen, NULL) && glen == sizeof k->grad, "reading torch's gradient %s",
          gpath);
    if (gdata && glen == sizeof k->grad) {
        const float *ref = (const float *)(const void *)gdata;
        double num = 0, den = 0;
        for (int i = 0; i < CN; i++) {
            num += ((double)k->grad[i] - ref[i]) * ((double)k->grad[i] - ref[i]);
            den += (double)ref[i] * ref[i];
        }
        double rel = sqrt(num / (den > 0 ? den : 1));
        CHECK(rel < 1e-5, "%s, gamma %g (%s%s), scale %g: gradient vs torch autograd rel err %.3g", name, k->gamma,
              form, z, (double)k->scale, rel);
    }
    CHECK(fabs(k->loss - want) <= 1e-5 * fabs(want), "%s, gamma %g (%s%s): loss %.9g, torch %.9g", name, k->gamma, form,
          z, k->loss, want);
    const char *names[] = {"pred", "target", "mask", "timesteps", "grad"};
    for (int i = 0; i < 5; i++) {
        char *p = g_build_filename(k->dir, names[i], NULL);
        g_remove(p);
        g_free(p);
    }
    g_rmdir(k->dir);
    g_free(gdata);
    g_free(gpath);
}

static void test_batch_loss_against_torch(void)
{
    if (!tp_torch_available()) {
        printf("python3-torch is not available: the batch loss is not compared with kohya's torch formulation\n");
        return;
    }
    sdt_test_rng r = sdt_test_rng_from_env("loss_options");
    sdt_backend *be = kt_backend();
    char *dir = g_dir_make_tmp("sdt-loss-XXXXXX", NULL);
    CHECK(dir != NULL, "a temporary folder");
    enum { K = 12 };
    static batch_case cases[K];
    const sdt_loss_type types[] = {SDT_LOSS_L2, SDT_LOSS_L1, SDT_LOSS_HUBER};
    GPtrArray *argv = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(argv, g_strdup(TP_PYTHON));
    g_ptr_array_add(argv, g_build_filename(SDT_SOURCE_DIR, "tests", "train", "loss_reference.py", NULL));
    g_ptr_array_add(argv, g_strdup("loss"));
    for (int i = 0; i < K; i++) {
        batch_case *k = &cases[i];
        const batch_case forms[4] = {
            {.gamma = 0.0, .delta = 1.0f, .scale = 1.0f},               /* the masked loss alone */
            {.gamma = 5.0, .delta = 0.5f, .scale = 65536.0f},           /* epsilon min-SNR, an fp16 scale */
            {.gamma = 5.0, .v = true, .delta = 1.0f, .scale = 1024.0f}, /* v min-SNR */
            {.gamma = 1.0, .v = true, .ztsnr = true, .delta = 0.3f, .scale = 65536.0f}, /* v at zero terminal SNR */
        };
        *k = forms[i % 4];
        k->type = types[i / 4];
        k->dir = g_strdup_printf("%s/case%d", dir, i);
        run_batch_case(be, &r, k);
        char num[3][32];
        g_ascii_dtostr(num[0], sizeof num[0], k->gamma);
        g_ascii_dtostr(num[1], sizeof num[1], k->delta);
        g_ascii_dtostr(num[2], sizeof num[2], k->scale);
        const char *rest[] = {
            "3",    "4",   "5", "6", num[0], k->v ? "1" : "0", k->ztsnr ? "1" : "0", sdt_loss_type_name(k->type),
            num[1], num[2]};
        g_ptr_array_add(argv, g_strdup(k->dir));
        for (int a = 0; a < 10; a++) g_ptr_array_add(argv, g_strdup(rest[a]));
    }
    g_ptr_array_add(argv, NULL);
    char *out = NULL, *err = NULL;
    int status = -1;
    CHECK(g_spawn_sync(NULL, (char **)argv->pdata, NULL, 0, NULL, NULL, &out, &err, &status, NULL) && status == 0,
          "loss_reference.py loss failed: %s", err ? err : "");
    char **lines = g_strsplit(out ? out : "", "\n", -1);
    for (int i = 0; i < K; i++) {
        bool have = (int)g_strv_length(lines) > i && lines[i][0];
        CHECK(have, "loss_reference.py printed no loss for case %d", i);
        compare_batch_case(&cases[i], have ? g_ascii_strtod(lines[i], NULL) : NAN);
        g_free(cases[i].dir);
    }
    g_strfreev(lines);
    g_ptr_array_unref(argv);
    g_free(out);
    g_free(err);
    g_rmdir(dir);
    g_free(dir);
    be->destroy(be);
}

int main(void)
{
    test_timestep_range();
    test_noise_offset();
    test_min_snr_weight();
    test_zero_terminal_snr();
    test_batch_loss_against_torch();
    return sdt_test_finish("loss_options");
}
