/* embedding.c - torch.nn.Embedding lookup plus an optional learned position
 * embedding (CLIP's token_embedding + position_embedding) on the CPU.
 *
 * tokens i32 [B, T], table [V, C], pos [P, C] with P >= T (row t is added at
 * position t), out [B, T, C]. Backward scatter-adds dout into the rows of
 * dtable that the tokens picked (repeats add up) and sums dout over the batch
 * into dpos.
 */
#include "cpu_context.h"

/* Every id must lie in [0, vocab) (the shapes are checked before the op runs: op_checks.c;
 * the ids only here, where they can be read). Checked before anything is read or written. */
static int embedding_check_ids(sdt_backend *be, const char *op, const sdt_tensor *tokens, int64_t vocab)
{
    const int32_t *ids = tokens->data;
    for (int64_t i = 0; i < sdt_tensor_numel(tokens); i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return cpu_fail(be, SDT_ERR_INVALID_ARGUMENT,
                            "%s: token id %d at index %lld is outside the vocabulary [0, %lld); "
                            "check the tokenizer and the embedding table.",
                            op, (int)ids[i], (long long)i, (long long)vocab);
    return 0;
}

int cpu_embedding_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *tokens, const sdt_tensor *table,
                          const sdt_tensor *pos)
{
    const char *op = "embedding_forward";
    if (embedding_check_ids(be, op, tokens, table->shape[0])) return -1;
    const int64_t bt = sdt_tensor_numel(tokens), t = tokens->shape[1], c = table->shape[1];
    const int32_t *ids = tokens->data;
    const float *tf = cpu_read_f32(be, table, 0);
    const float *pf = cpu_read_f32(be, pos, 1);
    float *of = cpu_write_begin(be, out, 2, false);
    if (!tf || (pos && !pf) || !of) return cpu_fail_oom(be, op, sdt_tensor_nbytes(out));
#pragma omp parallel for num_threads(cpu_threads_for(be, bt *c)) schedule(static)
    for (int64_t i = 0; i < bt; i++) {
        const float *row = tf + (int64_t)ids[i] * c;
        const float *prow = pf ? pf + (i % t) * c : NULL;
        float *orow = of + i * c;
        for (int64_t j = 0; j < c; j++) orow[j] = row[j] + (prow ? prow[j] : 0.0f);
    }
    cpu_write_end(be, out, of);
    return 0;
}

int cpu_embedding_backward(sdt_backend *be, sdt_tensor *dtable, sdt_tensor *dpos, const sdt_tensor *dout,
                           const sdt_tensor *tokens)
{
    const char *op = "embedding_backward";
    if (!dtable && !dpos) return 0;
    if (dtable && embedding_check_ids(be, op, tokens, dtable->shape[0])) return -1;
    const int64_t b = tokens->shape[0], t = tokens->shape[1], c = dout->shape[2];
    const float *dof = cpu_read_f32(be, dout, 0);
    float *dtf = cpu_write_begin(be, dtable, 1, true);
    float *dpf = cpu_write_begin(be, dpos, 2, true);
    if (!dof || (dtable && !dtf) || (dpos && !dpf)) return cpu_fail_oom(be, op, sdt_tensor_nbytes(dout));
    const int32_t *ids = dtable ? tokens->data : NULL;
    /* Threads own column blocks, so repeated token ids never race. */
#pragma omp parallel for num_threads(cpu_threads_for(be, b *t *c)) schedule(static)
    for (int64_t j0 = 0; j0 < c; j0 += 32) {
        const int64_t j1 = j0 + 32 < c ? j0 + 32 : c;
        for (int64_t i = 0; i < b * t; i++) {
            const float *drow = dof + i * c;
            if (dtf) {
                float *trow = dtf + (int64_t)ids[i] * c;
                for (int64_t j = j0; j < j1; j++) trow[j] += drow[j];
            }
            if (dpf) {
                float *prow = dpf + (i % t) * c;
                for (int64_t j = j0; j < j1; j++) prow[j] += drow[j];
            }
        }
    }
    cpu_write_end(be, dtable, dtf);
    cpu_write_end(be, dpos, dpf);
    return 0;
}
