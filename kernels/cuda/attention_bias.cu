/* attention_bias.cu - attention with an additive f32 logit bias and an explicit scale (T5's relative
 * position bias) on the GPU. Semantics: kernels/ops.h; the CPU's kernels/cpu/attention.c is the reference.
 *
 * Correctness first, not speed: one block per (query row, head, batch) for the forward and dQ, one per
 * (key row, head, batch) for dK and dV, each holding that row's logits in shared memory (so Tk, or Tq for
 * dK/dV, is at most ATTN_BIAS_MAX_T) and summing in a fixed order: the bits repeat, no atomics. T5's
 * sequences are 77-512 tokens; a tiled tensor-core version is later work (the encoder is frozen and, when
 * no T5 row trains, runs once per prompt). */
#include "cuda_ops.h"

enum { AB_THREADS = 128, ATTN_BIAS_MAX_T = 4096 };

typedef struct ab_args {
    int B, H, Tq, Tk, D;
    float scale;
    const float *bias;
    int bias_batch;
} ab_args;

static __device__ float ab_block_reduce(float v, float *shared, bool take_max)
{
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int s = AB_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            shared[threadIdx.x] = take_max ? fmaxf(shared[threadIdx.x], shared[threadIdx.x + s])
                                           : shared[threadIdx.x] + shared[threadIdx.x + s];
        __syncthreads();
    }
    float r = shared[0];
    __syncthreads();
    return r;
}

/* scale q_i . k_j + bias[b, h, i, j] */
static __device__ float ab_logit(const ab_args &a, const void *q, int qt, const void *k, int kt, int b, int h, int i,
                                 int j)
{
    const int64_t HD = (int64_t)a.H * a.D;
    const int64_t qo = ((int64_t)b * a.Tq + i) * HD + (int64_t)h * a.D,
                  ko = ((int64_t)b * a.Tk + j) * HD + (int64_t)h * a.D;
    float s = 0.0f;
    for (int e = 0; e < a.D; e++) s += ld(q, qt, qo + e) * ld(k, kt, ko + e);
    s *= a.scale;
    if (a.bias) s += a.bias[(((int64_t)(a.bias_batch == 1 ? 0 : b) * a.H + h) * a.Tq + i) * a.Tk + j];
    return s;
}

/* grid (Tq, H, B): out row i and its lse. */
__global__ void ab_forward_k(ab_args a, void *out, int ot, float *lse, const void *q, int qt, const void *k, int kt,
                             const void *v, int vt)
{
    extern __shared__ float p[]; /* [Tk] then [AB_THREADS] for reductions */
    float *red = p + a.Tk;
    const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < a.Tk; j += AB_THREADS) {
        p[j] = ab_logit(a, q, qt, k, kt, b, h, i, j);
        mx = fmaxf(mx, p[j]);
    }
    mx = ab_block_reduce(mx, red, true);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < a.Tk; j += AB_THREADS) sum += (p[j] = mx == -INFINITY ? 0.0f : __expf(p[j] - mx));
    sum = ab_block_reduce(sum, red, false);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    const int64_t HD = (int64_t)a.H * a.D;
    for (int e = threadIdx.x; e < a.D; e += AB_THREADS) {
        float o = 0.0f;
        for (int j = 0; j < a.Tk; j++) o += p[j] * ld(v, vt, ((int64_t)b * a.Tk + j) * HD + (int64_t)h * a.D + e);
        st(out, ot, ((int64_t)b * a.Tq + i) * HD + (int64_t)h * a.D + e, o * inv);
    }
    if (lse && threadIdx.x == 0) lse[((int64_t)b * a.H + h) * a.Tq + i] = mx + logf(sum);
}

/* delta[b, h, i] = dout_i . out_i */
__global__ void ab_delta_k(ab_args a, float *delta, const void *dout, int dt, const void *out, int ot)
{
    const int64_t rows = (int64_t)a.B * a.H * a.Tq, HD = (int64_t)a.H * a.D;
    GRID_STRIDE(r, rows)
    {
        const int i = (int)(r % a.Tq), h = (int)(r / a.Tq % a.H), b = (int)(r / ((int64_t)a.Tq * a.H));
        const int64_t o = ((int64_t)b * a.Tq + i) * HD + (int64_t)h * a.D;
        float s = 0.0f;
        for (int e = 0; e < a.D; e++) s += ld(dout, dt, o + e) * ld(out, ot, o + e);
        delta[r] = s;
    }
}

/* p_ij and ds_ij = p_ij (dout_i . v_j - delta_i) */
static __device__ void ab_prob(const ab_args &a, const void *q, int qt, const void *k, int kt, const void *v, int vt,
                               const void *dout, int dt, const float *lse, const float *delta, int b, int h, int i,
                               int j, float *p, float *ds)
{
    const int64_t r = ((int64_t)b * a.H + h) * a.Tq + i, HD = (int64_t)a.H * a.D;
    const float l = lse[r];
    *p = l == -INFINITY ? 0.0f : __expf(ab_logit(a, q, qt, k, kt, b, h, i, j) - l);
    const int64_t go = ((int64_t)b * a.Tq + i) * HD + (int64_t)h * a.D,
                  vo = ((int64_t)b * a.Tk + j) * HD + (int64_t)h * a.D;
    float dp = 0.0f;
    for (int e = 0; e < a.D; e++) dp += ld(dout, dt, go + e) * ld(v, vt, vo + e);
    *ds = *p * (dp - delta[r]);
}

/* grid (Tq, H, B): dq row i (written). */
__global__ void ab_dq_k(ab_args a, void *dq, int dqt, const void *q, int qt, const void *k, int kt, const void *v,
                        int vt, const void *dout, int dt, const float *lse, const float *delta)
{
    extern __shared__ float ds[];
    const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    for (int j = threadIdx.x; j < a.Tk; j += AB_THREADS) {
        float p;
        ab_prob(a, q, qt, k, kt, v, vt, dout, dt, lse, delta, b, h, i, j, &p, &ds[j]);
    }
    __syncthreads();
    const int64_t HD = (int64_t)a.H * a.D;
    for (int e = threadIdx.x; e < a.D; e += AB_THREADS) {
        float s = 0.0f;
        for (int j = 0; j < a.Tk; j++) s += ds[j] * ld(k, kt, ((int64_t)b * a.Tk + j) * HD + (int64_t)h * a.D + e);
        st(dq, dqt, ((int64_t)b * a.Tq + i) * HD + (int64_t)h * a.D + e, s * a.scale);
    }
}

/* grid (Tk, H, B): dk and dv row j (written). */
__global__ void ab_dkdv_k(ab_args a, void *dk, int dkt, void *dv, int dvt, const void *q, int qt, const void *k, int kt,
                          const void *v, int vt, const void *dout, int dt, const float *lse, const float *delta)
{
    extern __shared__ float pd[]; /* p [Tq], ds [Tq] */
    float *p = pd, *ds = pd + a.Tq;
    const int j = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    for (int i = threadIdx.x; i < a.Tq; i += AB_THREADS)
        ab_prob(a, q, qt, k, kt, v, vt, dout, dt, lse, delta, b, h, i, j, &p[i], &ds[i]);
    __syncthreads();
    const int64_t HD = (int64_t)a.H * a.D;
    for (int e = threadIdx.x; e < a.D; e += AB_THREADS) {
        float sv = 0.0f, sk = 0.0f;
        for (int i = 0; i < a.Tq; i++) {
            const int64_t qo = ((int64_t)b * a.Tq + i) * HD + (int64_t)h * a.D + e;
            sv += p[i] * ld(dout, dt, qo);
            sk += ds[i] * ld(q, qt, qo);
        }
        const int64_t ko = ((int64_t)b * a.Tk + j) * HD + (int64_t)h * a.D + e;
        if (dv) st(dv, dvt, ko, sv);
        if (dk) st(dk, dkt, ko, sk * a.scale);
    }
}

static ab_args ab_make(const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *bias, int heads, float scale)
{
    ab_args a;
    a.B = (int)q->shape[0], a.H = heads, a.Tq = (int)q->shape[1], a.Tk = (int)k->shape[1];
    a.D = (int)(q->shape[2] / heads), a.scale = scale;
    a.bias = bias ? (const float *)bias->data : NULL;
    a.bias_batch = bias ? (int)bias->shape[0] : 0;
    return a;
}

static int ab_limits(sdt_backend *be, const char *op, const ab_args &a)
{
    if (a.Tq > ATTN_BIAS_MAX_T || a.Tk > ATTN_BIAS_MAX_T || a.B > 65535 || a.H > 65535)
        return cuda_fail(be, SDT_ERR_INVALID_ARGUMENT,
                         "%s: the CUDA kernel takes at most %d tokens per side and 65535 heads and batch rows, but the "
                         "call has Tq %d, Tk %d, %d heads, batch %d; shorten the sequence.",
                         op, ATTN_BIAS_MAX_T, a.Tq, a.Tk, a.H, a.B);
    return 0;
}

static int ab_forward(sdt_backend *be, const ab_args &a, void *out, int ot, float *lse, const sdt_tensor *q,
                      const sdt_tensor *k, const sdt_tensor *v)
{
    dim3 grid((unsigned)a.Tq, (unsigned)a.H, (unsigned)a.B);
    size_t smem = sizeof(float) * ((size_t)a.Tk + AB_THREADS);
    ab_forward_k<<<grid, AB_THREADS, smem, STREAM(be)>>>(a, out, ot, lse, q->data, q->dtype, k->data, k->dtype, v->data,
                                                         v->dtype);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_attention_bias_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *lse, const sdt_tensor *q,
                                const sdt_tensor *k, const sdt_tensor *v, const sdt_tensor *bias, int heads,
                                float scale)
{
    ab_args a = ab_make(q, k, bias, heads, scale);
    if (ab_limits(be, "attention_bias_forward", a)) return -1;
    if ((int64_t)a.B * a.Tq * a.Tk == 0) return 0;
    return ab_forward(be, a, out->data, out->dtype, lse ? (float *)lse->data : NULL, q, k, v);
}

int cuda_attention_bias_backward(sdt_backend *be, sdt_tensor *dq, sdt_tensor *dk, sdt_tensor *dv,
                                 const sdt_tensor *dout, const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *v,
                                 const sdt_tensor *out, const sdt_tensor *lse, const sdt_tensor *bias, int heads,
                                 float scale)
{
    ab_args a = ab_make(q, k, bias, heads, scale);
    if (ab_limits(be, "attention_bias_backward", a)) return -1;
    if ((!dq && !dk && !dv) || (int64_t)a.B * a.Tq * a.Tk == 0) return 0;
    const int64_t rows = (int64_t)a.B * a.H * a.Tq;
    const void *o = out ? out->data : NULL;
    int ot = out ? out->dtype : SDT_F32;
    const float *l = lse ? (const float *)lse->data : NULL;
    if (!lse) { /* forward saved nothing: recompute out (f32) and lse */
        float *obuf = (float *)cuda_scratch(be, 8, (size_t)sdt_tensor_numel(q) * sizeof(float));
        float *lbuf = (float *)cuda_scratch(be, 9, (size_t)rows * sizeof(float));
        if (!obuf || !lbuf) return -1;
        if (ab_forward(be, a, obuf, SDT_F32, lbuf, q, k, v)) return -1;
        o = obuf, ot = SDT_F32, l = lbuf;
    }
    float *delta = (float *)cuda_scratch(be, 3, (size_t)rows * sizeof(float));
    if (!delta) return -1;
    ab_delta_k LAUNCH(be, rows)(a, delta, dout->data, dout->dtype, o, ot);
    CUDA_LAUNCHED(be);
    if (dq) {
        dim3 grid((unsigned)a.Tq, (unsigned)a.H, (unsigned)a.B);
        ab_dq_k<<<grid, AB_THREADS, sizeof(float) * (size_t)a.Tk, STREAM(be)>>>(
            a, dq->data, dq->dtype, q->data, q->dtype, k->data, k->dtype, v->data, v->dtype, dout->data, dout->dtype, l,
            delta);
        CUDA_LAUNCHED(be);
    }
    if (dk || dv) {
        dim3 grid((unsigned)a.Tk, (unsigned)a.H, (unsigned)a.B);
        ab_dkdv_k<<<grid, AB_THREADS, sizeof(float) * 2 * (size_t)a.Tq, STREAM(be)>>>(
            a, dk ? dk->data : NULL, dk ? dk->dtype : SDT_F32, dv ? dv->data : NULL, dv ? dv->dtype : SDT_F32, q->data,
            q->dtype, k->data, k->dtype, v->data, v->dtype, dout->data, dout->dtype, l, delta);
        CUDA_LAUNCHED(be);
    }
    return 0;
}
