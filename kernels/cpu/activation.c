/* activation.c - torch.nn activations (ReLU, LeakyReLU, ELU, GELU, QuickGELU, SiLU, Tanh, Sigmoid,
 * Mish, the hard/soft/shrink family, identity), forward and accumulating backward. Formulas: kernels/shared_math.h.
 * SiLU and QuickGELU (CLIP's MLP) take their expf from cpu_expf_array, GELU (OpenCLIP's MLP) its Phi and
 * derivative from cpu_normal_cdf_array (vec_erfcf.h), a chunk at a time: the same expressions as act_value /
 * act_derivative, so the same bits, without a scalar call per element. */
#include "shared_math.h"
#include "cpu_context.h"
#include "vec_erfcf.h"
#include "vec_expf.h"

/* Values per vector call (stack buffers per thread). */
#define ACT_CHUNK 256

/* The sigmoid activations x * sigmoid(k x) (k = 1: SiLU, 1.702: QuickGELU), whose expf dominates. */
static bool act_is_sigmoid_gated(sdt_activation act)
{
    return act == SDT_ACT_SILU || act == SDT_ACT_QUICK_GELU;
}

/* k x as act_value and act_derivative form it (SiLU: x itself). */
static inline float act_gate_arg(sdt_activation act, float x)
{
    return act == SDT_ACT_QUICK_GELU ? ACT_QUICK_GELU_K * x : x;
}

/* o = x * act_sigmoid(k x) for n values. */
static void sigmoid_gated_forward(sdt_activation act, const float *x, float *o, int64_t n)
{
    float e[ACT_CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += ACT_CHUNK) {
        const int64_t m = n - i0 < ACT_CHUNK ? n - i0 : ACT_CHUNK;
        for (int64_t i = 0; i < m; i++) e[i] = -act_gate_arg(act, x[i0 + i]);
        cpu_expf_array(e, e, m);
        for (int64_t i = 0; i < m; i++) o[i0 + i] = x[i0 + i] * (1.0f / (1.0f + e[i]));
    }
}

/* gx += g * act_sigmoid(kx) * (1 + kx * act_sigmoid(-kx)) for n values. */
static void sigmoid_gated_backward(sdt_activation act, const float *x, const float *g, float *gx, int64_t n)
{
    float kx[ACT_CHUNK], en[ACT_CHUNK], ep[ACT_CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += ACT_CHUNK) {
        const int64_t m = n - i0 < ACT_CHUNK ? n - i0 : ACT_CHUNK;
        for (int64_t i = 0; i < m; i++) {
            kx[i] = act_gate_arg(act, x[i0 + i]);
            en[i] = -kx[i];
        }
        cpu_expf_array(en, en, m);
        cpu_expf_array(kx, ep, m);
        for (int64_t i = 0; i < m; i++)
            gx[i0 + i] += g[i0 + i] * ((1.0f / (1.0f + en[i])) * (1.0f + kx[i] * (1.0f / (1.0f + ep[i]))));
    }
}

/* o = act_gelu(x) for n <= ACT_CHUNK values. */
static void gelu_forward(const float *x, float *o, int64_t n)
{
    float cdf[ACT_CHUNK];
    cpu_normal_cdf_array(x, cdf, NULL, n);
    for (int64_t i = 0; i < n; i++) o[i] = x[i] * cdf[i];
}

/* gx += g * act_gelu_grad(x) for n <= ACT_CHUNK values. */
static void gelu_backward(const float *x, const float *g, float *gx, int64_t n)
{
    float cdf[ACT_CHUNK], grad[ACT_CHUNK];
    cpu_normal_cdf_array(x, cdf, grad, n);
    for (int64_t i = 0; i < n; i++) gx[i] += g[i] * grad[i];
}

/* The activations computed a chunk at a time through the vector expf / erfc. */
static bool act_is_chunked(sdt_activation act)
{
    return act_is_sigmoid_gated(act) || act == SDT_ACT_GELU;
}

/* One chunk of ACT_CHUNK values (fewer at the end) of a chunked activation, forward or backward (g). */
static void chunk_forward(sdt_activation act, const float *x, float *o, int64_t m)
{
    if (act == SDT_ACT_GELU)
        gelu_forward(x, o, m);
    else
        sigmoid_gated_forward(act, x, o, m);
}

static void chunk_backward(sdt_activation act, const float *x, const float *g, float *gx, int64_t m)
{
    if (act == SDT_ACT_GELU)
        gelu_backward(x, g, gx, m);
    else
        sigmoid_gated_backward(act, x, g, gx, m);
}

int cpu_activation_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, sdt_activation act)
{
    int64_t n = sdt_tensor_numel(x);
    if (n == 0) return 0;
    const float *xs = cpu_read_f32(be, x, 0);
    float *o = cpu_write_begin(be, out, 1, false);
    if (!xs || !o) return -1;
    if (act_is_chunked(act)) {
        const int64_t chunks = (n + ACT_CHUNK - 1) / ACT_CHUNK;
#pragma omp parallel for num_threads(cpu_threads_for(be, n)) schedule(static)
        for (int64_t c = 0; c < chunks; c++)
            chunk_forward(act, xs + c * ACT_CHUNK, o + c * ACT_CHUNK,
                          n - c * ACT_CHUNK < ACT_CHUNK ? n - c * ACT_CHUNK : ACT_CHUNK);
    } else {
#pragma omp parallel for num_threads(cpu_threads_for(be, n)) schedule(static)
        for (int64_t i = 0; i < n; i++) o[i] = act_value(act, xs[i]);
    }
    cpu_write_end(be, out, o);
    return 0;
}

int cpu_activation_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *x,
                            sdt_activation act)
{
    if (!dx) return 0;
    int64_t n = sdt_tensor_numel(x);
    if (n == 0) return 0;
    const float *xs = cpu_read_f32(be, x, 0);
    const float *g = cpu_read_f32(be, dout, 1);
    float *gx = cpu_write_begin(be, dx, 2, true);
    if (!xs || !g || !gx) return -1;
    if (act_is_chunked(act)) {
        const int64_t chunks = (n + ACT_CHUNK - 1) / ACT_CHUNK;
#pragma omp parallel for num_threads(cpu_threads_for(be, n)) schedule(static)
        for (int64_t c = 0; c < chunks; c++)
            chunk_backward(act, xs + c * ACT_CHUNK, g + c * ACT_CHUNK, gx + c * ACT_CHUNK,
                           n - c * ACT_CHUNK < ACT_CHUNK ? n - c * ACT_CHUNK : ACT_CHUNK);
    } else {
#pragma omp parallel for num_threads(cpu_threads_for(be, n)) schedule(static)
        for (int64_t i = 0; i < n; i++) gx[i] += g[i] * act_derivative(act, xs[i]);
    }
    cpu_write_end(be, dx, gx);
    return 0;
}
