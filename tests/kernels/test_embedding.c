/* test_embedding.c - embedding (torch.nn.Embedding + learned position embedding)
 * forward and backward on the CPU: repeated token ids must add up in dtable,
 * dpos sums over the batch, and out-of-range ids are refused with a sentence. */
#include "op_check.h"

typedef struct emb_ref {
    int64_t b, t, c;
    const int32_t *ids;
    double *table, *pos; /* pos may be NULL */
    const double *dout;
} emb_ref;

static void emb_forward_ref(const emb_ref *r, double *out)
{
    for (int64_t i = 0; i < r->b * r->t; i++)
        for (int64_t j = 0; j < r->c; j++)
            out[i * r->c + j] = r->table[r->ids[i] * r->c + j] + (r->pos ? r->pos[(i % r->t) * r->c + j] : 0.0);
}

static double emb_loss(const double *param, void *ctx)
{
    (void)param;
    const emb_ref *r = ctx;
    double *out = op_zeros_d(r->b * r->t * r->c);
    emb_forward_ref(r, out);
    double l = sdt_fd_dot(out, r->dout, r->b * r->t * r->c);
    free(out);
    return l;
}

static void emb_backward_ref(const emb_ref *r, double *dtable, double *dpos)
{
    for (int64_t i = 0; i < r->b * r->t; i++)
        for (int64_t j = 0; j < r->c; j++) {
            dtable[r->ids[i] * r->c + j] += r->dout[i * r->c + j];
            dpos[(i % r->t) * r->c + j] += r->dout[i * r->c + j];
        }
}

/* vocab small relative to B*T so ids repeat; pos has npos >= t rows. */
static void run_case(sdt_backend *be, sdt_test_rng *rng, int64_t b, int64_t t, int64_t c, int64_t vocab, int64_t npos,
                     bool use_pos, sdt_dtype tdtype)
{
    char what[112];
    snprintf(what, sizeof what, "embedding tokens[%lld,%lld] table[%lld,%lld]%s table:%s", (long long)b, (long long)t,
             (long long)vocab, (long long)c, use_pos ? " +pos" : "", sdt_dtype_name(tdtype));
    const int64_t bt = b * t, nt = vocab * c, np = npos * c, no = bt * c;
    int32_t *ids = malloc((size_t)bt * sizeof *ids);
    for (int64_t i = 0; i < bt; i++) ids[i] = (int32_t)(sdt_test_next(rng) % (uint64_t)vocab);
    float *table = kt_randn(rng, nt, 1.0), *pos = kt_randn(rng, np, 1.0);
    void *t16 = op_store_as(table, nt, tdtype);
    const int64_t is[2] = {b, t}, ts[2] = {vocab, c}, ps[2] = {npos, c}, os[3] = {b, t, c};
    sdt_tensor tids = sdt_tensor_make(ids, SDT_I32, SDT_DEVICE_CPU, 2, is);
    sdt_tensor ttab = sdt_tensor_make(t16, tdtype, SDT_DEVICE_CPU, 2, ts);
    sdt_tensor tpos = op_tensor(pos, 2, ps);
    float *out = kt_randn(rng, no, 1.0);
    sdt_tensor tout = op_tensor(out, 3, os);
    CHECK(be->embedding_forward(be, &tout, &tids, &ttab, use_pos ? &tpos : NULL) == 0, "%s forward failed: %s", what,
          be->error.message);
    float *dout = kt_randn(rng, no, 1.0);
    emb_ref r = {b, t, c, ids, kt_to_double(table, nt), use_pos ? kt_to_double(pos, np) : NULL, kt_to_double(dout, no)};
    double *ref = op_zeros_d(no);
    emb_forward_ref(&r, ref);
    op_check_forward(what, out, ref, no);

    kt_grad g_dt = kt_grad_make(rng, nt), g_dp = kt_grad_make(rng, np);
    sdt_tensor tdout = op_tensor(dout, 3, os);
    for (int pass = 0; pass < 2; pass++) {
        sdt_tensor tdt = op_tensor(op_grad_buf(&g_dt, pass), 2, ts), tdp = op_tensor(op_grad_buf(&g_dp, pass), 2, ps);
        CHECK(be->embedding_backward(be, &tdt, use_pos ? &tdp : NULL, &tdout, &tids) == 0, "%s backward failed: %s",
              what, be->error.message);
    }
    double *gt = op_zeros_d(nt), *gp = op_zeros_d(np);
    emb_backward_ref(&r, gt, gp);
    char name[160];
    snprintf(name, sizeof name, "%s dtable", what);
    op_check_grad(name, &g_dt, gt, emb_loss, &r, r.table);
    if (use_pos) {
        snprintf(name, sizeof name, "%s dpos", what);
        op_check_grad(name, &g_dp, gp, emb_loss, &r, r.pos);
    }
    op_store_free(t16, table);
    free(ids);
    free(table);
    free(pos);
    free(out);
    free(dout);
    free(ref);
    kt_grad_free(&g_dt);
    kt_grad_free(&g_dp);
    free(gt);
    free(gp);
    free(r.table);
    free(r.pos);
    free((void *)r.dout);
}

static void check_rejects(sdt_backend *be)
{
    float buf[64] = {0};
    int32_t ids[4] = {0, 1, 5, 2};
    const int64_t is[2] = {1, 4}, ts[2] = {5, 3}, ps[2] = {3, 3}, os[3] = {1, 4, 3};
    sdt_tensor tids = sdt_tensor_make(ids, SDT_I32, SDT_DEVICE_CPU, 2, is);
    sdt_tensor tab = op_tensor(buf, 2, ts), pos = op_tensor(buf, 2, ps), out = op_tensor(buf, 3, os);
    op_check_rejects(be, be->embedding_forward(be, &out, &tids, &tab, NULL), "embedding_forward",
                     "token id 5 with a vocabulary of 5");
    op_check_rejects(be, be->embedding_backward(be, &tab, NULL, &out, &tids), "embedding_backward",
                     "token id 5 with a vocabulary of 5");
    ids[2] = -1;
    op_check_rejects(be, be->embedding_forward(be, &out, &tids, &tab, NULL), "embedding_forward", "token id -1");
    ids[2] = 4;
    op_check_rejects(be, be->embedding_forward(be, &out, &tids, &tab, &pos), "embedding_forward",
                     "pos with fewer rows than tokens");
    sdt_tensor ftok = op_tensor(buf, 2, is);
    op_check_rejects(be, be->embedding_forward(be, &out, &ftok, &tab, NULL), "embedding_forward", "float tokens");
}

int main(void)
{
    printf("op: embedding\n");
    sdt_test_rng rng = sdt_test_rng_from_env("test_embedding");
    sdt_backend *be = kt_backend();
    run_case(be, &rng, 2, 7, 5, 3, 7, true, SDT_F32); /* 14 tokens over 3 ids: repeats */
    run_case(be, &rng, 1, 1, 1, 1, 1, true, SDT_F32);
    run_case(be, &rng, 3, 5, 37, 11, 9, true, SDT_F32); /* pos longer than T (CLIP's 77 rows) */
    run_case(be, &rng, 2, 3, 6, 4, 3, false, SDT_F32);
    run_case(be, &rng, 2, 4, 9, 5, 4, true, SDT_F16);
    check_rejects(be);
    be->destroy(be);
    return sdt_test_finish("test_embedding");
}
