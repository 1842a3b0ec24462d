/* norm.cu - layernorm, groupnorm, softmax and the embedding lookup on the GPU.
 * Row statistics use one block per row/group; parameter gradients reduce per
 * column in a fixed order so they are deterministic. Semantics: kernels/ops.h. */
#include "cuda_ops.h"

#define NT 256
#define GN_SCRATCH_SLOT 7 /* groupnorm's per-channel statistics */

/* Sum over the block; every thread gets the result. */
__device__ float block_sum(float v)
{
    __shared__ float s[NT];
    __syncthreads();
    s[threadIdx.x] = v;
    __syncthreads();
    for (int w = NT / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    return s[0];
}
__device__ float block_max(float v)
{
    __shared__ float s[NT];
    __syncthreads();
    s[threadIdx.x] = v;
    __syncthreads();
    for (int w = NT / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) s[threadIdx.x] = fmaxf(s[threadIdx.x], s[threadIdx.x + w]);
        __syncthreads();
    }
    return s[0];
}

/* Mean and rstd of the n values at x[base..], for every thread of the block: two passes, so a
 * large mean does not cancel the variance; biased variance, as PyTorch's norms use. */
__device__ void block_stats(const void *x, int xdt, int64_t base, int64_t n, float eps, float *mean, float *rstd)
{
    float s = 0;
    for (int64_t i = threadIdx.x; i < n; i += NT) s += ld(x, xdt, base + i);
    float mu = block_sum(s) / (float)n;
    float q = 0;
    for (int64_t i = threadIdx.x; i < n; i += NT) {
        float d = ld(x, xdt, base + i) - mu;
        q += d * d;
    }
    *mean = mu;
    *rstd = rsqrtf(block_sum(q) / (float)n + eps);
}

/* ------------------------------------------------------------- layernorm */

__global__ void ln_fwd_k(void *out, int odt, float *mean, float *rstd, const void *x, int xdt, const void *g, int gdt,
                         const void *b, int bdt, int64_t C, float eps)
{
    int64_t r = blockIdx.x, base = r * C;
    float mu, rs;
    block_stats(x, xdt, base, C, eps, &mu, &rs);
    for (int64_t c = threadIdx.x; c < C; c += NT) {
        float y = (ld(x, xdt, base + c) - mu) * rs;
        if (g) y = y * ld(g, gdt, c);
        if (b) y += ld(b, bdt, c);
        st(out, odt, base + c, y);
    }
    if (threadIdx.x == 0) {
        mean[r] = mu;
        rstd[r] = rs;
    }
}

__global__ void ln_bwd_dx_k(void *dx, int dxt, const void *dy, int dyt, const void *x, int xdt, const void *g, int gdt,
                            const float *mean, const float *rstd, int64_t C)
{
    int64_t r = blockIdx.x, base = r * C;
    float mu = mean[r], rs = rstd[r], s1 = 0, s2 = 0;
    for (int64_t c = threadIdx.x; c < C; c += NT) {
        float dyg = ld(dy, dyt, base + c) * (g ? ld(g, gdt, c) : 1.0f);
        s1 += dyg;
        s2 += dyg * (ld(x, xdt, base + c) - mu) * rs;
    }
    float m1 = block_sum(s1) / (float)C, m2 = block_sum(s2) / (float)C;
    for (int64_t c = threadIdx.x; c < C; c += NT) {
        float xh = (ld(x, xdt, base + c) - mu) * rs;
        float dyg = ld(dy, dyt, base + c) * (g ? ld(g, gdt, c) : 1.0f);
        acc(dx, dxt, base + c, rs * (dyg - m1 - xh * m2));
    }
}

/* One thread per column, rows in order: deterministic gamma/beta grads. */
__global__ void ln_bwd_params_k(void *dg, int dgt, void *db, int dbt, const void *dy, int dyt, const void *x, int xdt,
                                const float *mean, const float *rstd, int64_t N, int64_t C)
{
    GRID_STRIDE(c, C)
    {
        float sg = 0, sb = 0;
        for (int64_t r = 0; r < N; r++) {
            float d = ld(dy, dyt, r * C + c);
            sg += d * (ld(x, xdt, r * C + c) - mean[r]) * rstd[r];
            sb += d;
        }
        if (dg) acc(dg, dgt, c, sg);
        if (db) acc(db, dbt, c, sb);
    }
}

static const void *dat(const sdt_tensor *t) { return t ? t->data : NULL; }
static int dty(const sdt_tensor *t) { return t ? t->dtype : 0; }

int cuda_layernorm_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd, const sdt_tensor *x,
                           const sdt_tensor *gamma, const sdt_tensor *beta, float eps)
{
    int64_t C = x->shape[x->ndim - 1], N = sdt_tensor_numel(x) / C;
    if (sdt_tensor_numel(mean) != N || sdt_tensor_numel(rstd) != N)
        return cuda_fail(be, "layernorm: mean/rstd must have %lld rows", (long long)N);
    ln_fwd_k<<<(unsigned)N, NT, 0, ctx_of(be)->stream>>>(out->data, out->dtype, (float *)mean->data, (float *)rstd->data,
                                                         x->data, x->dtype, dat(gamma), dty(gamma), dat(beta), dty(beta), C, eps);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_layernorm_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta, const sdt_tensor *dout,
                            const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *mean, const sdt_tensor *rstd)
{
    int64_t C = x->shape[x->ndim - 1], N = sdt_tensor_numel(x) / C;
    cudaStream_t s = ctx_of(be)->stream;
    if (dx) {
        ln_bwd_dx_k<<<(unsigned)N, NT, 0, s>>>(dx->data, dx->dtype, dout->data, dout->dtype, x->data, x->dtype, dat(gamma),
                                               dty(gamma), (const float *)mean->data, (const float *)rstd->data, C);
        CUDA_LAUNCHED(be);
    }
    if (dgamma || dbeta) {
        ln_bwd_params_k<<<grid_for(C, 128), 128, 0, s>>>(dgamma ? dgamma->data : NULL, dty(dgamma), dbeta ? dbeta->data : NULL,
                                                         dty(dbeta), dout->data, dout->dtype, x->data, x->dtype,
                                                         (const float *)mean->data, (const float *)rstd->data, N, C);
        CUDA_LAUNCHED(be);
    }
    return 0;
}

/* ------------------------------------------------------------- groupnorm */
/* x [B, C, S]; a group is cpg consecutive channels: cpg*S contiguous values.
 * One block per (batch, channel), so even batch 1 fills the GPU (32 groups would be 32
 * blocks): the first kernel writes each channel's statistics (forward: mean and M2, two
 * passes over the channel; backward: the two sums dx needs), the second combines the
 * channels of its group in channel order (deterministic, no atomics) and writes its channel. */

/* Chan's combination of cpg channels of S values each: group mean and rstd (biased variance). */
__device__ void gn_group_stats(const float2 *chan, int64_t c0, int64_t cpg, int64_t S, float eps, float *mean, float *rstd)
{
    float mu = 0;
    for (int64_t k = 0; k < cpg; k++) mu += chan[c0 + k].x;
    mu /= (float)cpg;
    float m2 = 0;
    for (int64_t k = 0; k < cpg; k++) {
        float d = chan[c0 + k].x - mu;
        m2 += chan[c0 + k].y + (float)S * d * d;
    }
    *mean = mu;
    *rstd = rsqrtf(m2 / (float)(cpg * S) + eps);
}

/* chan[b*C + c] = (mean, M2) of channel c of batch b. */
__global__ void gn_chan_stats_k(float2 *chan, const void *x, int xdt, int64_t S)
{
    int64_t base = (int64_t)blockIdx.x * S;
    float s = 0;
    for (int64_t i = threadIdx.x; i < S; i += NT) s += ld(x, xdt, base + i);
    float mu = block_sum(s) / (float)S, q = 0;
    for (int64_t i = threadIdx.x; i < S; i += NT) {
        float d = ld(x, xdt, base + i) - mu;
        q += d * d;
    }
    q = block_sum(q);
    if (threadIdx.x == 0) chan[blockIdx.x] = make_float2(mu, q);
}

__global__ void gn_fwd_k(void *out, int odt, float *mean, float *rstd, const float2 *chan, const void *x, int xdt, const void *g,
                         int gdt, const void *b, int bdt, int64_t C, int64_t S, int G, float eps)
{
    int64_t bc = blockIdx.x, c = bc % C, cpg = C / G, base = bc * S;
    float mu, rs;
    gn_group_stats(chan, bc - c % cpg, cpg, S, eps, &mu, &rs);
    float scale = g ? ld(g, gdt, c) * rs : rs, shift = (b ? ld(b, bdt, c) : 0.0f) - mu * scale;
    for (int64_t i = threadIdx.x; i < S; i += NT) st(out, odt, base + i, ld(x, xdt, base + i) * scale + shift);
    if (threadIdx.x == 0 && c % cpg == 0) {
        int64_t bg = bc / cpg;
        mean[bg] = mu;
        rstd[bg] = rs;
    }
}

/* part[b*C + c] = (sum of dy*g, sum of dy*g*xhat) over channel c of batch b. */
__global__ void gn_bwd_sums_k(float2 *part, const void *dy, int dyt, const void *x, int xdt, const void *g, int gdt,
                              const float *mean, const float *rstd, int64_t C, int64_t S, int G)
{
    int64_t bc = blockIdx.x, c = bc % C, bg = bc / (C / G), base = bc * S;
    float mu = mean[bg], rs = rstd[bg], gc = g ? ld(g, gdt, c) : 1.0f, s1 = 0, s2 = 0;
    for (int64_t i = threadIdx.x; i < S; i += NT) {
        float d = ld(dy, dyt, base + i);
        s1 += d;
        s2 += d * (ld(x, xdt, base + i) - mu);
    }
    s1 = block_sum(s1);
    s2 = block_sum(s2);
    if (threadIdx.x == 0) part[bc] = make_float2(gc * s1, gc * s2 * rs);
}

__global__ void gn_bwd_dx_k(void *dx, int dxt, const void *dy, int dyt, const void *x, int xdt, const void *g, int gdt,
                            const float *mean, const float *rstd, const float2 *part, int64_t C, int64_t S, int G)
{
    int64_t bc = blockIdx.x, c = bc % C, cpg = C / G, bg = bc / cpg, base = bc * S, c0 = bc - c % cpg;
    float m1 = 0, m2 = 0;
    for (int64_t k = 0; k < cpg; k++) {
        m1 += part[c0 + k].x;
        m2 += part[c0 + k].y;
    }
    float n = (float)(cpg * S), mu = mean[bg], rs = rstd[bg], gc = g ? ld(g, gdt, c) : 1.0f;
    m1 /= n;
    m2 /= n;
    for (int64_t i = threadIdx.x; i < S; i += NT) {
        float xh = (ld(x, xdt, base + i) - mu) * rs;
        acc(dx, dxt, base + i, rs * (ld(dy, dyt, base + i) * gc - m1 - xh * m2));
    }
}

/* One block per channel: sums over batch and spatial. */
__global__ void gn_bwd_params_k(void *dg, int dgt, void *db, int dbt, const void *dy, int dyt, const void *x, int xdt,
                                const float *mean, const float *rstd, int64_t B, int64_t C, int64_t S, int G)
{
    int64_t c = blockIdx.x, grp = c / (C / G);
    float sg = 0, sb = 0;
    for (int64_t k = threadIdx.x; k < B * S; k += NT) {
        int64_t b = k / S, s = k % S, i = (b * C + c) * S + s;
        float d = ld(dy, dyt, i);
        sg += d * (ld(x, xdt, i) - mean[b * G + grp]) * rstd[b * G + grp];
        sb += d;
    }
    sg = block_sum(sg);
    sb = block_sum(sb);
    if (threadIdx.x == 0) {
        if (dg) acc(dg, dgt, c, sg);
        if (db) acc(db, dbt, c, sb);
    }
}

static int gn_shape(sdt_backend *be, const sdt_tensor *x, int groups, int64_t *B, int64_t *C, int64_t *S)
{
    *B = x->shape[0];
    *C = x->shape[1];
    *S = sdt_tensor_numel(x) / (*B * *C);
    if (groups <= 0 || *C % groups) return cuda_fail(be, "groupnorm: %lld channels do not split into %d groups", (long long)*C, groups);
    return 0;
}

int cuda_groupnorm_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd, const sdt_tensor *x,
                           const sdt_tensor *gamma, const sdt_tensor *beta, int groups, float eps)
{
    int64_t B, C, S;
    if (gn_shape(be, x, groups, &B, &C, &S)) return -1;
    float2 *chan = (float2 *)cuda_scratch(be, GN_SCRATCH_SLOT, (size_t)(B * C) * sizeof(float2));
    if (!chan) return -1;
    cudaStream_t s = ctx_of(be)->stream;
    gn_chan_stats_k<<<(unsigned)(B * C), NT, 0, s>>>(chan, x->data, x->dtype, S);
    CUDA_LAUNCHED(be);
    gn_fwd_k<<<(unsigned)(B * C), NT, 0, s>>>(out->data, out->dtype, (float *)mean->data, (float *)rstd->data, chan, x->data,
                                              x->dtype, dat(gamma), dty(gamma), dat(beta), dty(beta), C, S, groups, eps);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_groupnorm_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta, const sdt_tensor *dout,
                            const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *mean, const sdt_tensor *rstd,
                            int groups)
{
    int64_t B, C, S;
    if (gn_shape(be, x, groups, &B, &C, &S)) return -1;
    cudaStream_t s = ctx_of(be)->stream;
    if (dx) {
        float2 *part = (float2 *)cuda_scratch(be, GN_SCRATCH_SLOT, (size_t)(B * C) * sizeof(float2));
        if (!part) return -1;
        gn_bwd_sums_k<<<(unsigned)(B * C), NT, 0, s>>>(part, dout->data, dout->dtype, x->data, x->dtype, dat(gamma), dty(gamma),
                                                       (const float *)mean->data, (const float *)rstd->data, C, S, groups);
        CUDA_LAUNCHED(be);
        gn_bwd_dx_k<<<(unsigned)(B * C), NT, 0, s>>>(dx->data, dx->dtype, dout->data, dout->dtype, x->data, x->dtype, dat(gamma),
                                                     dty(gamma), (const float *)mean->data, (const float *)rstd->data, part, C, S,
                                                     groups);
        CUDA_LAUNCHED(be);
    }
    if (dgamma || dbeta) {
        gn_bwd_params_k<<<(unsigned)C, NT, 0, s>>>(dgamma ? dgamma->data : NULL, dty(dgamma), dbeta ? dbeta->data : NULL,
                                                   dty(dbeta), dout->data, dout->dtype, x->data, x->dtype,
                                                   (const float *)mean->data, (const float *)rstd->data, B, C, S, groups);
        CUDA_LAUNCHED(be);
    }
    return 0;
}

/* --------------------------------------------------------------- softmax */

/* causal_T > 0 masks column j > (row % causal_T): used by attention, rows are (b, h, i).
 * out2 (may be NULL) receives the same probabilities in another dtype, so attention gets its
 * fp32 copy and its 16-bit GEMM operand from one pass. In place (out == x) is safe: each
 * thread reads its elements before writing them. */
__global__ void softmax_k(void *out, int odt, void *out2, int o2dt, const void *x, int xdt, int64_t C, int64_t causal_T,
                          float scale)
{
    int64_t r = blockIdx.x, base = r * C;
    int64_t limit = causal_T > 0 ? (r % causal_T) + 1 : C;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < limit; c += NT) m = fmaxf(m, scale * ld(x, xdt, base + c));
    m = block_max(m);
    float s = 0;
    for (int64_t c = threadIdx.x; c < limit; c += NT) s += expf(scale * ld(x, xdt, base + c) - m);
    s = block_sum(s);
    for (int64_t c = threadIdx.x; c < C; c += NT) {
        float p = c < limit ? expf(scale * ld(x, xdt, base + c) - m) / s : 0.0f;
        st(out, odt, base + c, p);
        if (out2) st(out2, o2dt, base + c, p);
    }
}

/* dx = scale * y * (dy - sum(dy * y)); accumulate when acc_mode, overwrite otherwise. */
__global__ void softmax_bwd_k(void *dx, int dxt, const void *dy, int dyt, const void *y, int ydt, int64_t C, float scale,
                              int acc_mode)
{
    int64_t r = blockIdx.x, base = r * C;
    float s = 0;
    for (int64_t c = threadIdx.x; c < C; c += NT) s += ld(dy, dyt, base + c) * ld(y, ydt, base + c);
    s = block_sum(s);
    for (int64_t c = threadIdx.x; c < C; c += NT) {
        float v = scale * ld(y, ydt, base + c) * (ld(dy, dyt, base + c) - s);
        if (acc_mode) acc(dx, dxt, base + c, v);
        else st(dx, dxt, base + c, v);
    }
}

int cuda_softmax_rows(sdt_backend *be, void *out, int odt, void *out2, int o2dt, const void *x, int xdt, int64_t rows, int64_t C,
                      int64_t causal_T, float scale)
{
    softmax_k<<<(unsigned)rows, NT, 0, ctx_of(be)->stream>>>(out, odt, out2, o2dt, x, xdt, C, causal_T, scale);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_softmax_rows_backward(sdt_backend *be, void *dx, int dxt, const void *dy, int dyt, const void *y, int ydt, int64_t rows,
                               int64_t C, float scale, bool accumulate)
{
    softmax_bwd_k<<<(unsigned)rows, NT, 0, ctx_of(be)->stream>>>(dx, dxt, dy, dyt, y, ydt, C, scale, accumulate);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_softmax_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x)
{
    int64_t C = x->shape[x->ndim - 1];
    return cuda_softmax_rows(be, out->data, out->dtype, NULL, 0, x->data, x->dtype, sdt_tensor_numel(x) / C, C, 0, 1.0f);
}

int cuda_softmax_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *out)
{
    if (!dx) return 0;
    int64_t C = out->shape[out->ndim - 1];
    return cuda_softmax_rows_backward(be, dx->data, dx->dtype, dout->data, dout->dtype, out->data, out->dtype,
                                      sdt_tensor_numel(out) / C, C, 1.0f, true);
}

/* ------------------------------------------------------------- embedding */

__global__ void emb_fwd_k(void *out, int odt, const int32_t *tok, const void *table, int tdt, const void *pos, int pdt, int64_t T,
                          int64_t C, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        int64_t bt = i / C, c = i % C, t = bt % T;
        float v = ld(table, tdt, (int64_t)tok[bt] * C + c);
        if (pos) v += ld(pos, pdt, t * C + c);
        st(out, odt, i, v);
    }
}

__global__ void emb_bwd_table_k(float *dtable, const int32_t *tok, const void *dy, int dyt, int64_t C, int64_t n)
{
    GRID_STRIDE(i, n) atomicAdd(&dtable[(int64_t)tok[i / C] * C + i % C], ld(dy, dyt, i));
}

__global__ void emb_bwd_pos_k(void *dpos, int dpt, const void *dy, int dyt, int64_t B, int64_t T, int64_t C)
{
    GRID_STRIDE(i, T * C)
    {
        float s = 0;
        for (int64_t b = 0; b < B; b++) s += ld(dy, dyt, b * T * C + i);
        acc(dpos, dpt, i, s);
    }
}

__global__ void check_tokens_k(const int32_t *tok, int64_t n, int64_t V, int *flag)
{
    GRID_STRIDE(i, n) if (tok[i] < 0 || tok[i] >= V) *flag = 1;
}

int cuda_embedding_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *tokens, const sdt_tensor *table,
                           const sdt_tensor *pos)
{
    int64_t BT = sdt_tensor_numel(tokens), C = table->shape[1], T = tokens->shape[tokens->ndim - 1];
    cuda_ctx *c = ctx_of(be);
    CUDA_TRY(be, cudaMemsetAsync(c->flag, 0, sizeof(int), c->stream));
    check_tokens_k<<<grid_for(BT, 256), 256, 0, c->stream>>>((const int32_t *)tokens->data, BT, table->shape[0], c->flag);
    int bad = 0;
    if (cuda_download(be, &bad, c->flag, sizeof(int))) return -1;
    if (bad) return cuda_fail(be, "embedding: a token id is outside the vocabulary of %lld entries", (long long)table->shape[0]);
    emb_fwd_k<<<grid_for(BT * C, 256), 256, 0, c->stream>>>(out->data, out->dtype, (const int32_t *)tokens->data, table->data,
                                                           table->dtype, dat(pos), dty(pos), T, C, BT * C);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_embedding_backward(sdt_backend *be, sdt_tensor *dtable, sdt_tensor *dpos, const sdt_tensor *dout,
                            const sdt_tensor *tokens)
{
    int64_t BT = sdt_tensor_numel(tokens), C = dout->shape[dout->ndim - 1], T = tokens->shape[tokens->ndim - 1];
    cudaStream_t s = ctx_of(be)->stream;
    if (dtable) {
        if (dtable->dtype != SDT_F32) return cuda_fail(be, "embedding backward: the table gradient must be f32");
        emb_bwd_table_k<<<grid_for(BT * C, 256), 256, 0, s>>>((float *)dtable->data, (const int32_t *)tokens->data, dout->data,
                                                             dout->dtype, C, BT * C);
        CUDA_LAUNCHED(be);
    }
    if (dpos) {
        emb_bwd_pos_k<<<grid_for(T * C, 256), 256, 0, s>>>(dpos->data, dpos->dtype, dout->data, dout->dtype, BT / T, T, C);
        CUDA_LAUNCHED(be);
    }
    return 0;
}
