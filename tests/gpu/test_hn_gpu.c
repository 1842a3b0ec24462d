/* test_hn_gpu.c - a hypernetwork module on the CUDA backend against the CPU backend:
 * same seed, same weights; forward, d(input) and every weight gradient, with layer
 * norm and dropout (the same masks on both backends), f32 K/V inputs (the f32 path) and
 * f16/bf16 ones (the 16-bit path: 16-bit GEMMs and activations), for a handful of
 * activations. Skips (77) when the CUDA module or a GPU is absent. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_module.h"
#include "hn/hn_module.h"
#include "sdt_test.h"

#define WIDTH 64
#define ROWS 77

static sdt_backend *cpu, *gpu;

/* A host f32 array as a tensor of dtype dt on backend be ([ROWS, WIDTH]). */
static sdt_tensor on(sdt_backend *be, const float *host, sdt_dtype dt)
{
    int64_t shape[2] = {ROWS, WIDTH};
    sdt_tensor t = sdt_tensor_make(NULL, dt, be->device, 2, shape);
    size_t bytes = sdt_tensor_nbytes(&t);
    void *staged = malloc(bytes);
    sdt_store_f32(host, staged, dt, ROWS * WIDTH);
    t.data = be->alloc(be, bytes);
    be->upload(be, t.data, staged, bytes);
    free(staged);
    return t;
}

static void check_case(sdt_test_rng *r, const char *activation, bool norm, bool dropout, sdt_dtype dt)
{
    sdt_error err;
    sdt_error_clear(&err);
    char what[512];
    snprintf(what, sizeof(what), "%s%s%s %s", activation, norm ? " +norm" : "", dropout ? " +dropout" : "",
             sdt_dtype_name(dt));
    sdt_hn_config c = sdt_hn_config_default();
    snprintf(c.name, sizeof(c.name), "gpu");
    c.width_count = 1, c.widths[0] = WIDTH;
    snprintf(c.activation, sizeof(c.activation), "%s", activation);
    c.layer_norm = norm, c.use_dropout = dropout, c.activate_output = true;
    c.dropout_structure[1] = 0.3, c.dropout_structure[2] = 0.1;
    c.init = SDT_HN_INIT_KAIMING_UNIFORM;
    sdt_hn *hc = sdt_hn_create(&c, cpu, 5, &err), *hg = sdt_hn_create(&c, gpu, 5, &err);
    CHECK(hc && hg && sdt_hn_enable_grads(hc, &err) && sdt_hn_enable_grads(hg, &err), "%s: create: %s", what,
          err.message);
    if (!hc || !hg) return;
    float *x = malloc(ROWS * WIDTH * sizeof(float)), *dy = malloc(ROWS * WIDTH * sizeof(float));
    sdt_test_fill_normal(r, x, ROWS * WIDTH, 1.0);
    sdt_test_fill_normal(r, dy, ROWS * WIDTH, 1.0);
    float *zeros = calloc(ROWS * WIDTH, sizeof(float));
    sdt_tensor xc = on(cpu, x, dt), xg = on(gpu, x, dt), yc = on(cpu, zeros, dt), yg = on(gpu, zeros, dt);
    sdt_tensor dyc = on(cpu, dy, dt), dyg = on(gpu, dy, dt), dxc = on(cpu, zeros, SDT_F32),
               dxg = on(gpu, zeros, SDT_F32);
    size_t work_bytes = sdt_hn_module_workspace_bytes(&c, WIDTH, ROWS);
    void *wc = cpu->alloc(cpu, work_bytes), *wg = gpu->alloc(gpu, work_bytes);
    sdt_hn_run run = {.training = dropout, .dropout_seed = sdt_test_next(r)};
    CHECK(sdt_hn_module_forward(hc, WIDTH, SDT_UNET_K, &run, 0.9f, &xc, &yc, wc, &err) &&
              sdt_hn_module_forward(hg, WIDTH, SDT_UNET_K, &run, 0.9f, &xg, &yg, wg, &err) &&
              sdt_hn_module_backward(hc, WIDTH, SDT_UNET_K, &run, 0.9f, &xc, &dyc, &dxc, true, wc, &err) &&
              sdt_hn_module_backward(hg, WIDTH, SDT_UNET_K, &run, 0.9f, &xg, &dyg, &dxg, true, wg, &err),
          "%s: run: %s", what, err.message);
    /* 16-bit inputs run the 16-bit path on both backends (16-bit GEMM operands and activations):
     * a different summation order can flip a rounding to the dtype, one ulp of 2^-11 / 2^-8 */
    double tol = dt == SDT_F32 ? 1e-4 : dt == SDT_F16 ? 4e-3 : 2e-2;
    float *a = gpu_test_download(gpu, &yg), *b = gpu_test_download(cpu, &yc);
    double e_fwd = gpu_test_rel(a, b, ROWS * WIDTH);
    CHECK(e_fwd < tol, "%s: forward rel err %.3g", what, e_fwd);
    free(a), free(b);
    a = gpu_test_download(gpu, &dxg), b = gpu_test_download(cpu, &dxc);
    double e_din = gpu_test_rel(a, b, ROWS * WIDTH);
    CHECK(e_din < tol, "%s: d_in rel err %.3g", what, e_din);
    printf("%s: rel err forward %.2g d_in %.2g (tol %.0e)\n", what, e_fwd, e_din, tol);
    free(a), free(b);
    for (int i = 0; i < sdt_hn_param_count(hc); i++) {
        const sdt_hn_param *pc = sdt_hn_param_at(hc, i), *pg = sdt_hn_param_at(hg, i);
        if (pc->kind != SDT_UNET_K) continue;
        a = gpu_test_download(gpu, &pg->grad), b = gpu_test_download(cpu, &pc->grad);
        double e = gpu_test_rel(a, b, sdt_tensor_numel(&pc->grad));
        CHECK(e < tol, "%s: grad %s rel err %.3g", what, pc->name, e);
        free(a), free(b);
    }
    sdt_tensor *ts[] = {&xc, &yc, &dyc, &dxc};
    for (int i = 0; i < 4; i++) cpu->free(cpu, ts[i]->data);
    sdt_tensor *tg[] = {&xg, &yg, &dyg, &dxg};
    for (int i = 0; i < 4; i++) gpu->free(gpu, tg[i]->data);
    cpu->free(cpu, wc), gpu->free(gpu, wg);
    free(x), free(dy), free(zeros);
    sdt_hn_free(hc), sdt_hn_free(hg);
}

int main(void)
{
    if (!(gpu = gpu_test_backend("hn_gpu"))) return SDT_TEST_SKIP;
    cpu = sdt_backend_cpu_create(0);
    sdt_test_rng r = sdt_test_rng_from_env("hn_gpu");
    /* smooth ones: at a kink a last-bit difference between cuBLAS and the CPU GEMM flips a derivative */
    const char *acts[] = {"linear", "gelu", "silu", "mish", "tanhshrink", "sigmoid"};
    for (size_t a = 0; a < sizeof(acts) / sizeof(acts[0]); a++)
        for (int variant = 0; variant < 4; variant++) check_case(&r, acts[a], variant & 1, variant & 2, SDT_F32);
    check_case(&r, "silu", true, true, SDT_F16);
    check_case(&r, "linear", false, false, SDT_F16);
    check_case(&r, "gelu", false, true, SDT_BF16);
    check_case(&r, "silu", true, false, SDT_BF16);
    check_case(&r, "linear", false, false, SDT_BF16);
    gpu->destroy(gpu);
    cpu->destroy(cpu);
    return sdt_test_finish("hn_gpu");
}
