/* embedding.cu - token and position embedding lookup on the GPU. Semantics: kernels/ops.h. */
#include "norm_stats.cuh"

__global__ void emb_fwd_k(void *out, int odt, const int32_t *tok, const void *table, int tdt, const void *pos, int pdt,
                          int64_t T, int64_t C, int64_t n)
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

/* Every id must lie in [0, vocab) (the shapes are checked before the op runs: kernels/op_checks.c;
 * the ids only here, where they can be read), before a table row is read or written. */
static int check_token_ids(sdt_backend *be, const char *op, const sdt_tensor *tokens, int64_t vocab)
{
    int64_t BT = sdt_tensor_numel(tokens);
    if (BT == 0) return 0;
    cuda_ctx *c = ctx_of(be);
    CUDA_TRY(be, cudaMemsetAsync(c->flag, 0, sizeof(int), c->stream));
    check_tokens_k<<<grid_for(BT, 256), 256, 0, c->stream>>>((const int32_t *)tokens->data, BT, vocab, c->flag);
    CUDA_LAUNCHED(be);
    int bad = 0;
    if (cuda_download(be, &bad, c->flag, sizeof(int))) return -1;
    if (bad)
        return cuda_fail(be, SDT_ERR_INVALID_ARGUMENT,
                         "%s: a token id is outside the vocabulary [0, %lld); check the tokenizer and the "
                         "embedding table.",
                         op, (long long)vocab);
    return 0;
}

int cuda_embedding_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *tokens, const sdt_tensor *table,
                           const sdt_tensor *pos)
{
    int64_t BT = sdt_tensor_numel(tokens), C = table->shape[1], T = tokens->shape[tokens->ndim - 1];
    cuda_ctx *c = ctx_of(be);
    if (check_token_ids(be, "embedding_forward", tokens, table->shape[0])) return -1;
    emb_fwd_k<<<grid_for(BT * C, 256), 256, 0, c->stream>>>(out->data, out->dtype, (const int32_t *)tokens->data,
                                                            table->data, table->dtype, dat(pos), dty(pos), T, C,
                                                            BT * C);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_embedding_backward(sdt_backend *be, sdt_tensor *dtable, sdt_tensor *dpos, const sdt_tensor *dout,
                            const sdt_tensor *tokens)
{
    int64_t BT = sdt_tensor_numel(tokens), C = dout->shape[dout->ndim - 1], T = tokens->shape[tokens->ndim - 1];
    cudaStream_t s = ctx_of(be)->stream;
    if (dtable) {
        /* atomicAdd accumulates f32 only: a CUDA limit, refused here rather than in the shared checks */
        if (dtable->dtype != SDT_F32)
            return cuda_fail(be, SDT_ERR_INVALID_ARGUMENT,
                             "embedding_backward: the CUDA backend accumulates dtable in f32 only; pass an "
                             "f32 dtable.");
        if (check_token_ids(be, "embedding_backward", tokens, dtable->shape[0])) return -1;
        emb_bwd_table_k<<<grid_for(BT * C, 256), 256, 0, s>>>((float *)dtable->data, (const int32_t *)tokens->data,
                                                              dout->data, dout->dtype, C, BT * C);
        CUDA_LAUNCHED(be);
    }
    if (dpos) {
        emb_bwd_pos_k<<<grid_for(T * C, 256), 256, 0, s>>>(dpos->data, dpos->dtype, dout->data, dout->dtype, BT / T, T,
                                                           C);
        CUDA_LAUNCHED(be);
    }
    return 0;
}
