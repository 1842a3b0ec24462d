/* test_shared_math - kernels/shared_math.h, the math both backends compute identically:
 * every activation's value and derivative against a float64 reference on a dense grid over
 * [-30, 30] (tails included, where the formulas that cancel - 1 + erf, 1 - tanh^2 - lose
 * every bit), the dropout stream against splitmix64 written out here, and the CPU ops
 * (activation, GEGLU, dropout) bit for bit against the shared functions, so the CPU backend
 * computes with them and not with a copy. The grid is fixed; no random inputs. */
#include "act_ref.h"
#include "kernel_test.h"
#include "shared_math.h"

#define GRID_STEP (1.0 / 64.0)
#define GRID_MAX 30.0
#define GRID_N ((int)(2 * GRID_MAX / GRID_STEP) + 1)
/* relative to the value itself (test_activation's tail tolerance); below ~1e-35 (float
 * subnormals) compare absolutely. The one absolute slack: near a root of a derivative (SiLU,
 * QuickGELU, Mish just left of 0) its terms cancel in any float formula, so there, for |x| < 4,
 * the error may be DERIV_ROOT_SLACK; the tails, where 1 + erf and 1 - tanh^2 fail, stay relative. */
#define REL_TOL 1e-5
#define ABS_TOL 1e-35
#define DERIV_ROOT_SLACK 1e-7

static float grid_x(int i)
{
    return (float)(-GRID_MAX + i * GRID_STEP);
}

/* act_ref.h's float64 reference, with GELU's CDF through erfc so the reference itself does not
 * cancel in the far negative tail. */
static double ref_value(sdt_activation act, double x)
{
    if (act == SDT_ACT_GELU) return 0.5 * x * erfc(-x / sqrt(2.0));
    return act_ref_value(act, x);
}

static double ref_derivative(sdt_activation act, double x)
{
    if (act == SDT_ACT_GELU) return 0.5 * erfc(-x / sqrt(2.0)) + x * exp(-0.5 * x * x) / sqrt(2 * M_PI);
    return act_ref_derivative(act, x);
}

static bool close_to(float got, double want, double slack)
{
    return fabs((double)got - want) <= REL_TOL * fabs(want) + ABS_TOL + slack;
}

static void check_activation_math(sdt_activation act)
{
    int bad_value = 0, bad_derivative = 0;
    for (int i = 0; i < GRID_N; i++) {
        float x = grid_x(i);
        float v = act_value(act, x);
        if (!close_to(v, ref_value(act, x), 0.0) && bad_value++ < 3)
            CHECK(0, "act %d value(%g) = %.9g, float64 reference %.9g", (int)act, (double)x, (double)v,
                  ref_value(act, x));
        if (act_ref_near_kink(x)) continue; /* the derivative there is a convention, tested by the op test */
        float d = act_derivative(act, x);
        if (!close_to(d, ref_derivative(act, x), fabsf(x) < 4.0f ? DERIV_ROOT_SLACK : 0.0) && bad_derivative++ < 3)
            CHECK(0, "act %d derivative(%g) = %.9g, float64 reference %.9g", (int)act, (double)x, (double)d,
                  ref_derivative(act, x));
    }
    CHECK(bad_value == 0 && bad_derivative == 0, "act %d: %d values and %d derivatives off the float64 reference",
          (int)act, bad_value, bad_derivative);
}

/* splitmix64 written out independently: the documented stream, u_i from its (i+1)-th output. */
static float splitmix_uniform(uint64_t seed, uint64_t i)
{
    uint64_t z = seed;
    for (uint64_t k = 0; k <= i; k++) z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)((double)(z >> 40) / 16777216.0);
}

static void check_dropout_math(void)
{
    const uint64_t seed = 12345;
    for (uint64_t i = 0; i < 64; i++)
        CHECK(dropout_uniform(seed, i) == splitmix_uniform(seed, i), "dropout u_%llu is not splitmix64's",
              (unsigned long long)i);
    CHECK(dropout_keep_scale(0.25f) == 1.0f / 0.75f && dropout_keep_scale(1.0f) == 0.0f,
          "keep scale must be 1/(1-p), and 0 at p = 1 (zeros, not 0 * inf)");
    CHECK(dropout_mask_at(seed, 3, 0.0f, 1.0f) == 1.0f && dropout_mask_at(seed, 3, 1.0f, 0.0f) == 0.0f,
          "p = 0 keeps everything, p = 1 drops everything");
}

/* The CPU ops compute with exactly these functions: bit-for-bit equal outputs. */
static void check_cpu_ops_use_shared_math(sdt_backend *be)
{
    enum { N = GRID_N };
    float *x = kt_alloc(N * sizeof(float)), *y = kt_alloc(N * sizeof(float));
    float *dy = kt_alloc(N * sizeof(float)), *dx = kt_alloc(N * sizeof(float));
    for (int i = 0; i < N; i++) x[i] = grid_x(i), dy[i] = 1.0f;
    sdt_tensor tx = kt_f32(x, 1, N, 0, 0, 0), ty = kt_f32(y, 1, N, 0, 0, 0);
    sdt_tensor tdy = kt_f32(dy, 1, N, 0, 0, 0), tdx = kt_f32(dx, 1, N, 0, 0, 0);
    for (int a = 0; a < SDT_ACT_COUNT; a++) {
        sdt_activation act = (sdt_activation)a;
        memset(dx, 0, N * sizeof(float));
        CHECK(be->activation_forward(be, &ty, &tx, act) == 0 && be->activation_backward(be, &tdx, &tdy, &tx, act) == 0,
              "act %d failed: %s", a, be->error.message);
        int differ = 0;
        for (int i = 0; i < N; i++) differ += y[i] != act_value(act, x[i]) || dx[i] != act_derivative(act, x[i]);
        CHECK(differ == 0, "act %d: the CPU op differs from shared_math.h at %d of %d points", a, differ, N);
    }

    /* GEGLU gates with the shared GELU: value 1 everywhere, gate = the grid */
    enum { C = N };
    float *gx = kt_alloc(2 * C * sizeof(float)), *gy = kt_alloc(C * sizeof(float));
    for (int i = 0; i < C; i++) gx[i] = 1.0f, gx[C + i] = x[i];
    sdt_tensor tgx = kt_f32(gx, 2, 1, 2 * C, 0, 0), tgy = kt_f32(gy, 2, 1, C, 0, 0);
    CHECK(be->geglu_forward(be, &tgy, &tgx) == 0, "geglu failed: %s", be->error.message);
    int differ = 0;
    for (int i = 0; i < C; i++) differ += gy[i] != act_gelu(x[i]);
    CHECK(differ == 0, "geglu: the CPU op differs from shared_math.h's GELU at %d points", differ);

    /* dropout's mask is the shared one */
    const float p = 0.3f;
    const uint64_t seed = 777;
    float *mask = kt_alloc(N * sizeof(float));
    sdt_tensor tmask = kt_f32(mask, 1, N, 0, 0, 0);
    CHECK(be->dropout_forward(be, &ty, &tmask, &tx, p, seed) == 0, "dropout failed: %s", be->error.message);
    differ = 0;
    for (int i = 0; i < N; i++) differ += mask[i] != dropout_mask_at(seed, (uint64_t)i, p, dropout_keep_scale(p));
    CHECK(differ == 0, "dropout: the CPU mask differs from shared_math.h's at %d points", differ);

    free(x), free(y), free(dy), free(dx), free(gx), free(gy), free(mask);
}

int main(void)
{
    printf("shared_math: fixed grid [-%g, %g] step %g, dropout seeds 12345 and 777\n", GRID_MAX, GRID_MAX, GRID_STEP);
    for (int a = 0; a < SDT_ACT_COUNT; a++) check_activation_math((sdt_activation)a);
    check_dropout_math();
    sdt_backend *be = kt_backend();
    check_cpu_ops_use_shared_math(be);
    be->destroy(be);
    return sdt_test_finish("shared_math (activations, dropout mask; CPU ops use them)");
}
