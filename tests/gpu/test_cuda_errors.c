/* test_cuda_errors.c - the CUDA backend decides an error's code where the failure happens, and
 * computes the math written once in kernels/shared_math.h:
 *  - an allocation past the card's memory fails as OUT_OF_MEMORY (a host then says "use a smaller
 *    batch"), not as a device failure; a bad argument is INVALID_ARGUMENT, as on the CPU;
 *  - GELU and tanh's derivative in the far tails match the CPU backend (CUDA once computed them
 *    with 1 + erf and 1 - tanh^2, which give 0 there);
 *  - GELU's forward (the activation and GEGLU) is the CPU backend's bit for bit on a dense grid: both
 *    compute shared_math.h's own erfc (shared_erfcf), not libm's and CUDA's erfcf, which differ;
 *  - the dropout mask is the CPU backend's bit for bit, p = 1 included (all zeros).
 * Fixed inputs, no random draws. Skips (77) when the CUDA module or a GPU is absent. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_module.h"
#include "ops.h"
#include "sdt_test.h"

enum { N = 12 };
static const float tails[N] = {-30, -12, -9, -6, -4, -0.5f, 0.5f, 4, 6, 9, 12, 30};

static sdt_tensor on(sdt_backend *be, const float *host)
{
    int64_t shape[1] = {N};
    sdt_tensor t = sdt_tensor_make(be->alloc(be, N * sizeof(float)), SDT_F32, be->device, 1, shape);
    if (host)
        be->upload(be, t.data, host, N * sizeof(float));
    else
        be->zero(be, &t);
    return t;
}

static void read_back(sdt_backend *be, const sdt_tensor *t, float *host)
{
    be->synchronize(be);
    be->download(be, host, t->data, N * sizeof(float));
}

/* act forward and backward (dout = 1) on both backends, element by element. */
static void check_tails(sdt_backend *cpu, sdt_backend *gpu, sdt_activation act, const char *name)
{
    float ones[N], y[2][N], d[2][N];
    for (int i = 0; i < N; i++) ones[i] = 1.0f;
    sdt_backend *bes[2] = {cpu, gpu};
    for (int b = 0; b < 2; b++) {
        sdt_backend *be = bes[b];
        sdt_tensor x = on(be, tails), dout = on(be, ones), out = on(be, NULL), dx = on(be, NULL);
        CHECK(be->activation_forward(be, &out, &x, act) == 0 && be->activation_backward(be, &dx, &dout, &x, act) == 0,
              "%s on %s failed: %s", name, be->name, be->error.message);
        read_back(be, &out, y[b]);
        read_back(be, &dx, d[b]);
        be->free(be, x.data), be->free(be, dout.data), be->free(be, out.data), be->free(be, dx.data);
    }
    for (int i = 0; i < N; i++) {
        CHECK(fabsf(y[1][i] - y[0][i]) <= 1e-4f * fabsf(y[0][i]), "%s(%g): cuda %.9g, cpu %.9g", name, (double)tails[i],
              (double)y[1][i], (double)y[0][i]);
        CHECK(fabsf(d[1][i] - d[0][i]) <= 1e-4f * fabsf(d[0][i]), "%s'(%g): cuda %.9g, cpu %.9g", name,
              (double)tails[i], (double)d[1][i], (double)d[0][i]);
    }
}

/* GELU forward, as an activation and as GEGLU's gate (value 1), on the grid [-12, 12] step 1/512 (the
 * erfc's subnormal and zero ranges included): the same bits on both backends. */
static void check_gelu_bits(sdt_backend *cpu, sdt_backend *gpu)
{
    enum { G = 12 * 2 * 512 + 1 };
    float *x = malloc(sizeof(float) * G), *gx = malloc(sizeof(float) * 2 * G);
    float *y[2] = {malloc(sizeof(float) * G), malloc(sizeof(float) * G)};
    float *gy[2] = {malloc(sizeof(float) * G), malloc(sizeof(float) * G)};
    if (!x || !gx || !y[0] || !y[1] || !gy[0] || !gy[1]) {
        CHECK(0, "out of host memory");
        return;
    }
    for (int i = 0; i < G; i++) x[i] = -12.0f + (float)i / 512.0f, gx[i] = 1.0f, gx[G + i] = x[i];
    int64_t shape[1] = {G}, gshape[2] = {1, 2 * G}, oshape[2] = {1, G};
    sdt_backend *bes[2] = {cpu, gpu};
    for (int b = 0; b < 2; b++) {
        sdt_backend *be = bes[b];
        sdt_tensor tx = sdt_tensor_make(be->alloc(be, G * sizeof(float)), SDT_F32, be->device, 1, shape);
        sdt_tensor ty = sdt_tensor_make(be->alloc(be, G * sizeof(float)), SDT_F32, be->device, 1, shape);
        sdt_tensor tg = sdt_tensor_make(be->alloc(be, 2 * G * sizeof(float)), SDT_F32, be->device, 2, gshape);
        sdt_tensor to = sdt_tensor_make(be->alloc(be, G * sizeof(float)), SDT_F32, be->device, 2, oshape);
        be->upload(be, tx.data, x, G * sizeof(float));
        be->upload(be, tg.data, gx, 2 * G * sizeof(float));
        CHECK(be->activation_forward(be, &ty, &tx, SDT_ACT_GELU) == 0 && be->geglu_forward(be, &to, &tg) == 0,
              "gelu on %s failed: %s", be->name, be->error.message);
        be->synchronize(be);
        be->download(be, y[b], ty.data, G * sizeof(float));
        be->download(be, gy[b], to.data, G * sizeof(float));
        be->free(be, tx.data), be->free(be, ty.data), be->free(be, tg.data), be->free(be, to.data);
    }
    int differ = 0, geglu_differ = 0;
    for (int i = 0; i < G; i++) {
        if (memcmp(&y[0][i], &y[1][i], sizeof(float)) != 0 && differ++ < 3)
            printf("  gelu(%a): cpu %a, cuda %a\n", (double)x[i], (double)y[0][i], (double)y[1][i]);
        geglu_differ += memcmp(&gy[0][i], &gy[1][i], sizeof(float)) != 0;
    }
    CHECK(differ == 0 && geglu_differ == 0,
          "GELU's forward differs between the backends: activation at %d, GEGLU at %d "
          "of %d points (both must compute shared_erfcf)",
          differ, geglu_differ, (int)G);
    free(x), free(gx), free(y[0]), free(y[1]), free(gy[0]), free(gy[1]);
}

static void check_dropout(sdt_backend *cpu, sdt_backend *gpu, float p)
{
    float mask[2][N];
    sdt_backend *bes[2] = {cpu, gpu};
    for (int b = 0; b < 2; b++) {
        sdt_backend *be = bes[b];
        sdt_tensor x = on(be, tails), out = on(be, NULL), m = on(be, NULL);
        CHECK(be->dropout_forward(be, &out, &m, &x, p, 20261126) == 0, "dropout p=%g on %s failed: %s", (double)p,
              be->name, be->error.message);
        read_back(be, &m, mask[b]);
        be->free(be, x.data), be->free(be, out.data), be->free(be, m.data);
    }
    CHECK(memcmp(mask[0], mask[1], sizeof mask[0]) == 0, "dropout p=%g: the CUDA mask differs from the CPU's",
          (double)p);
}

static void check_codes(sdt_backend *cpu, sdt_backend *gpu)
{
    /* more than any card holds: the failure is the allocation's, so OUT_OF_MEMORY */
    void *p = gpu->alloc(gpu, (size_t)1 << 50);
    CHECK(p == NULL && gpu->error.code == SDT_ERR_OUT_OF_MEMORY,
          "a 1 PiB allocation must fail as OUT_OF_MEMORY, got %s: %s", sdt_error_code_name(gpu->error.code),
          gpu->error.message);
    if (p) gpu->free(gpu, p);

    /* a probability outside [0, 1] is the caller's mistake on both backends */
    sdt_backend *bes[2] = {cpu, gpu};
    for (int b = 0; b < 2; b++) {
        sdt_backend *be = bes[b];
        sdt_tensor x = on(be, tails), out = on(be, NULL), m = on(be, NULL);
        CHECK(be->dropout_forward(be, &out, &m, &x, 1.5f, 1) != 0 && be->error.code == SDT_ERR_INVALID_ARGUMENT,
              "dropout p=1.5 on %s must fail as INVALID_ARGUMENT, got %s: %s", be->name,
              sdt_error_code_name(be->error.code), be->error.message);
        be->free(be, x.data), be->free(be, out.data), be->free(be, m.data);
    }
}

int main(void)
{
    sdt_backend *gpu = gpu_test_backend("cuda_errors");
    if (!gpu) return SDT_TEST_SKIP;
    sdt_backend *cpu = sdt_backend_cpu_create(0);
    printf("cuda_errors: fixed inputs, dropout seed 20261126\n");
    check_tails(cpu, gpu, SDT_ACT_GELU, "gelu");
    check_tails(cpu, gpu, SDT_ACT_TANH, "tanh");
    check_tails(cpu, gpu, SDT_ACT_MISH, "mish");
    check_gelu_bits(cpu, gpu);
    check_dropout(cpu, gpu, 0.3f);
    check_dropout(cpu, gpu, 1.0f);
    check_codes(cpu, gpu);
    gpu->destroy(gpu);
    cpu->destroy(cpu);
    return sdt_test_finish("cuda_errors");
}
