/* attention.c - torch.nn.functional.scaled_dot_product_attention on the CPU
 * (scale 1/sqrt(head_dim), optional causal mask, no dropout), tiled so memory
 * stays linear in the sequence length.
 *
 * q [B, Tq, H*D], k and v [B, Tk, H*D]; a head is a column block of width D read
 * in place through a leading dimension of H*D. Forward walks key tiles with an
 * online softmax (running max and sum per row, FlashAttention's recurrence) and
 * saves each row's logsumexp. Backward recomputes each probability tile from that
 * logsumexp and uses D = rowsum(dO * O) for the softmax gradient: one pass over key
 * tiles writes dk and dv, one over query tiles writes dq (or, with heads enough for the threads, one
 * unit per head does both, each tile pair's probabilities computed once: head_unit), so no two work units
 * touch the same rows and the results do not depend on the thread count. Each unit
 * zeroes its own gradient rows and then sums into them, so the op WRITES dq, dk, dv
 * (ops.h) with exactly the bits that zeroing them and accumulating would give.
 * Workspace: two [QT, KT] tiles and a [QT, D] accumulator per thread.
 * On an AVX-512 CPU every tile product's B operand (k^T, v, ... of one head's tile) is packed once per op
 * for gemm_avx512 (attn_packed), not once per product: a key tile is read by every query tile. The packed
 * kernel gives gemm_avx512's bits, so the results are the same as unpacked (bench/NOTES.md run 39).
 * attention_bias_* (T5) run the same tiles with the caller's scale and an f32 bias added to each
 * logit tile after the scaled product; -inf bias entries mask keys, a fully masked row gives zeros.
 */
#include "cpu_context.h"
#include "cpu_gemm.h"
#include "gemm_avx512.h"
#include "vec_expf.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

enum { ATTN_QT = 64, ATTN_KT = 128 }; /* query rows and keys per tile */

typedef struct attn_geom {
    int batch, heads, tq, tk, d, hd; /* hd = heads * d, the row stride of q, k, v */
    float scale;
    bool causal;
    const float *bias; /* attention_bias_*: f32 [bias_batch, H, Tq, Tk] added to the scaled logits, or NULL */
    int bias_batch;
} attn_geom;

/* The geometry of q [B, Tq, H*D] and k [B, Tk, H*D] (checked before the op runs: op_checks.c). */
static void attn_geometry(const sdt_tensor *q, const sdt_tensor *k, int heads, bool causal, attn_geom *g)
{
    *g = (attn_geom){(int)q->shape[0],
                     heads,
                     (int)q->shape[1],
                     (int)k->shape[1],
                     (int)(q->shape[2] / heads),
                     (int)q->shape[2],
                     0,
                     causal,
                     NULL,
                     0};
    g->scale = (float)(1.0 / sqrt((double)g->d));
}

/* attention_bias_*: the bias and the caller's scale, never causal (checked: op_checks.c). */
static void attn_bias_geometry(const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *bias, int heads, float scale,
                               attn_geom *g)
{
    attn_geometry(q, k, heads, false, g);
    g->scale = scale;
    g->bias = bias ? (const float *)bias->data : NULL;
    g->bias_batch = bias ? (int)bias->shape[0] : 0;
}

/* Adds bias row i (absolute) of head (b, h), keys [k0, k0 + cols), to a tile row. */
static void add_bias_row(const attn_geom *g, int b, int h, int i, int k0, int cols, float *row)
{
    if (!g->bias) return;
    const float *src = g->bias + (((int64_t)(g->bias_batch == 1 ? 0 : b) * g->heads + h) * g->tq + i) * g->tk + k0;
    for (int j = 0; j < cols; j++) row[j] += src[j];
}

/* Offset of row t of head h of batch b in a [B, T, H*D] tensor. */
static int64_t row_offset(const attn_geom *g, int t_len, int b, int t, int h)
{
    return ((int64_t)b * t_len + t) * g->hd + (int64_t)h * g->d;
}

/* Keys of row i (absolute) that are visible within the key tile [k0, k0 + cols). */
static int visible_keys(const attn_geom *g, int i, int k0, int cols)
{
    if (!g->causal) return cols;
    const int n = i - k0 + 1;
    return n < 0 ? 0 : n < cols ? n : cols;
}

/* One tile of work: head (b, h) and rows [r0, r0 + rows) of the tiled side. */
typedef struct attn_unit {
    int b, h, r0, rows;
} attn_unit;

static int unit_count(const attn_geom *g, int t_len, int tile)
{
    return g->batch * g->heads * ((t_len + tile - 1) / tile);
}

static attn_unit unit_at(const attn_geom *g, int t_len, int tile, int index)
{
    const int tiles = (t_len + tile - 1) / tile, bh = index / tiles, r0 = (index % tiles) * tile;
    return (attn_unit){bh / g->heads, bh % g->heads, r0, t_len - r0 < tile ? t_len - r0 : tile};
}

/* One operand's tiles, every head's, packed once for gemm_avx512_packed: the B of the tile products.
 * Tile t of head (b, h) covers rows [t * tile, ...) of a [B, T, H*D] tensor; `trans` packs those rows as
 * op(B) = rows^T [D, rows] (q k^T, dout v^T), otherwise as op(B) = rows [rows, D] (p v, ds k, p^T dout).
 * data NULL: not packed (no AVX-512F, blas_gemm_only, or no memory): the products read the tensor through
 * cpu_sgemm. */
typedef struct attn_packed {
    const float *src;
    int t_len, tile, tiles; /* tiles per head */
    bool trans;
    size_t tile_floats;
    float *data;
} attn_packed;

static void pack_tiles(sdt_backend *be, const attn_geom *g, const float *src, int t_len, int tile, bool trans,
                       attn_packed *pk)
{
    *pk = (attn_packed){src, t_len, tile, (t_len + tile - 1) / tile, trans, 0, NULL};
    /* cpu_sgemm's rule for our kernel: not where the backend sends every GEMM to BLAS (blas_gemm_only) */
    if (be->blas_gemm_only || !gemm_avx512_available() || g->d <= 0 || g->d > GEMM_AVX512_MAX_K) return;
    pk->tile_floats = trans ? gemm_avx512_packed_floats(tile, g->d) : gemm_avx512_packed_floats(g->d, tile);
    const int64_t count = (int64_t)g->batch * g->heads * pk->tiles;
    const size_t bytes = sizeof(float) * pk->tile_floats * (size_t)count;
    pk->data = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!pk->data) return;
#pragma omp parallel for num_threads(cpu_threads_for(be, (int64_t)t_len * g->hd * g->batch)) schedule(static)
    for (int64_t n = 0; n < count; n++) {
        const int t = (int)(n % pk->tiles), bh = (int)(n / pk->tiles), r0 = t * tile;
        const int rows = t_len - r0 < tile ? t_len - r0 : tile;
        const float *rows_at = src + row_offset(g, t_len, bh / g->heads, r0, bh % g->heads);
        float *dst = pk->data + pk->tile_floats * (size_t)n;
        if (trans)
            gemm_avx512_pack_b(true, rows, g->d, rows_at, g->hd, dst);
        else
            gemm_avx512_pack_b(false, g->d, rows, rows_at, g->hd, dst);
    }
}

static void free_tiles(attn_packed *pk)
{
    free(pk->data);
    pk->data = NULL;
}

/* C [m, n] = alpha op(A) B + beta C where B is tile r0 / tile of head (b, h) in pk (n = rows of the tile when
 * trans, else D; k the other): packed when pk has it, else cpu_sgemm on the tensor itself (same bits). */
static void tile_product(sdt_backend *be, const attn_geom *g, const attn_packed *pk, int b, int h, int r0, bool trans_a,
                         int m, int n, int k, float alpha, const float *a, int lda, float beta, float *c, int ldc)
{
    if (pk->data) {
        const int64_t index = ((int64_t)b * g->heads + h) * pk->tiles + r0 / pk->tile;
        gemm_avx512_packed(trans_a, m, n, k, alpha, a, lda, pk->data + pk->tile_floats * (size_t)index, beta, c, ldc);
        return;
    }
    cpu_sgemm(be, trans_a, pk->trans, m, n, k, alpha, a, lda, pk->src + row_offset(g, pk->t_len, b, r0, h), g->hd, beta,
              c, ldc);
}

/* out rows and lse of one query tile: online softmax over key tiles. s [QT, KT], o [QT, D]. */
static void forward_unit(sdt_backend *be, const attn_geom *g, attn_unit u, const float *q, const attn_packed *kt,
                         const attn_packed *vn, float *out, float *lse, float *s, float *o)
{
    float m[ATTN_QT], l[ATTN_QT];
    for (int i = 0; i < u.rows; i++) m[i] = -INFINITY, l[i] = 0.0f;
    memset(o, 0, sizeof(float) * (size_t)u.rows * g->d);
    const int last_row = u.r0 + u.rows - 1;
    for (int k0 = 0; k0 < g->tk && !(g->causal && k0 > last_row); k0 += ATTN_KT) {
        const int cols = g->tk - k0 < ATTN_KT ? g->tk - k0 : ATTN_KT;
        tile_product(be, g, kt, u.b, u.h, k0, false, u.rows, cols, g->d, g->scale,
                     q + row_offset(g, g->tq, u.b, u.r0, u.h), g->hd, 0.0f, s, ATTN_KT);
        for (int i = 0; i < u.rows; i++) {
            float *row = s + (int64_t)i * ATTN_KT;
            const int valid = visible_keys(g, u.r0 + i, k0, cols);
            add_bias_row(g, u.b, u.h, u.r0 + i, k0, valid, row);
            float mx = m[i];
            for (int j = 0; j < valid; j++) mx = row[j] > mx ? row[j] : mx;
            if (mx == -INFINITY) { /* every key so far masked by the bias: nothing to add yet */
                for (int j = 0; j < cols; j++) row[j] = 0.0f;
                continue;
            }
            const float corr = m[i] == -INFINITY ? 0.0f : expf(m[i] - mx);
            float sum = 0.0f;
            for (int j = 0; j < valid; j++) row[j] -= mx;
            cpu_expf_array(row, row, valid); /* expf's bits, 4 lanes at a time (vec_expf.h) */
            for (int j = 0; j < valid; j++) sum += row[j];
            for (int j = valid; j < cols; j++) row[j] = 0.0f;
            l[i] = l[i] * corr + sum;
            m[i] = mx;
            if (corr != 1.0f)
                for (int e = 0; e < g->d; e++) o[(int64_t)i * g->d + e] *= corr;
        }
        tile_product(be, g, vn, u.b, u.h, k0, false, u.rows, g->d, cols, 1.0f, s, ATTN_KT, 1.0f, o, g->d);
    }
    for (int i = 0; i < u.rows; i++) {
        float *dst = out + row_offset(g, g->tq, u.b, u.r0 + i, u.h);
        const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f; /* a fully masked row gives zeros, lse -inf */
        for (int e = 0; e < g->d; e++) dst[e] = o[(int64_t)i * g->d + e] * inv;
        if (lse) lse[((int64_t)u.b * g->heads + u.h) * g->tq + u.r0 + i] = m[i] + logf(l[i]);
    }
}

/* Runs forward over every query tile; out and lse are f32 (lse may be NULL). */
static int forward_all(sdt_backend *be, const char *op, const attn_geom *g, const float *q, const float *k,
                       const float *v, float *out, float *lse)
{
    const int units = unit_count(g, g->tq, ATTN_QT), threads = cpu_threads_for(be, (int64_t)g->tq * g->tk);
    const size_t per_thread = (size_t)ATTN_QT * ATTN_KT + (size_t)ATTN_QT * g->d;
    float *work = malloc(sizeof(float) * per_thread * (size_t)threads);
    if (!work) return cpu_fail_oom(be, op, sizeof(float) * per_thread * (size_t)threads);
    attn_packed kt, vn; /* k^T for q k^T, v for p v */
    pack_tiles(be, g, k, g->tk, ATTN_KT, true, &kt);
    pack_tiles(be, g, v, g->tk, ATTN_KT, false, &vn);
#pragma omp parallel for num_threads(threads) schedule(dynamic) if (units > 1)
    for (int n = 0; n < units; n++) {
        float *s = work + per_thread * (size_t)omp_get_thread_num();
        forward_unit(be, g, unit_at(g, g->tq, ATTN_QT, n), q, &kt, &vn, out, lse, s, s + ATTN_QT * ATTN_KT);
    }
    free_tiles(&kt);
    free_tiles(&vn);
    free(work);
    return 0;
}

static int forward_op(sdt_backend *be, const char *op, const attn_geom *gp, sdt_tensor *out, sdt_tensor *lse,
                      const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *v)
{
    const attn_geom g = *gp;
    const float *qf = cpu_read_f32(be, q, 0);
    const float *kf = cpu_read_f32(be, k, 1);
    const float *vf = cpu_read_f32(be, v, 2);
    float *of = cpu_write_begin(be, out, 3, false);
    if (!qf || !kf || !vf || !of) return cpu_fail_oom(be, op, sdt_tensor_nbytes(q) * 4);
    if (forward_all(be, op, &g, qf, kf, vf, of, lse ? (float *)lse->data : NULL)) return -1;
    cpu_write_end(be, out, of);
    return 0;
}

int cpu_attention_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *lse, const sdt_tensor *q, const sdt_tensor *k,
                          const sdt_tensor *v, int heads, bool causal)
{
    attn_geom g;
    attn_geometry(q, k, heads, causal, &g);
    return forward_op(be, "attention_forward", &g, out, lse, q, k, v);
}

int cpu_attention_bias_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *lse, const sdt_tensor *q,
                               const sdt_tensor *k, const sdt_tensor *v, const sdt_tensor *bias, int heads, float scale)
{
    attn_geom g;
    attn_bias_geometry(q, k, bias, heads, scale, &g);
    return forward_op(be, "attention_bias_forward", &g, out, lse, q, k, v);
}

/* What backward reads, all f32. */
typedef struct attn_bwd {
    const float *q, *k, *v, *dout, *lse, *delta; /* delta [B, H, Tq] = rowsum(dout * out) */
    float *dq, *dk, *dv;
    attn_packed kt, vt, kn, qn, dout_n; /* the tile products' B operands: k^T, v^T, k, q, dout */
} attn_bwd;

/* For query tile [q0, q0 + rows) and key tile [k0, k0 + cols): p = exp(scale q k^T - lse)
 * (masked entries 0) and, when ds is given, ds = p * (dout v^T - delta). Tiles are [QT, KT]. */
static void probs_tile(sdt_backend *be, const attn_geom *g, const attn_bwd *a, int b, int h, int q0, int rows, int k0,
                       int cols, float *p, float *ds)
{
    tile_product(be, g, &a->kt, b, h, k0, false, rows, cols, g->d, g->scale, a->q + row_offset(g, g->tq, b, q0, h),
                 g->hd, 0.0f, p, ATTN_KT);
    if (ds)
        tile_product(be, g, &a->vt, b, h, k0, false, rows, cols, g->d, 1.0f, a->dout + row_offset(g, g->tq, b, q0, h),
                     g->hd, 0.0f, ds, ATTN_KT);
    const int64_t stat = ((int64_t)b * g->heads + h) * g->tq + q0;
    for (int i = 0; i < rows; i++) {
        float *pr = p + (int64_t)i * ATTN_KT, *dr = ds ? ds + (int64_t)i * ATTN_KT : NULL;
        const int valid = visible_keys(g, q0 + i, k0, cols);
        const float lse = a->lse[stat + i], delta = a->delta[stat + i];
        add_bias_row(g, b, h, q0 + i, k0, valid, pr);
        if (lse == -INFINITY) {
            for (int j = 0; j < valid; j++) pr[j] = 0.0f;
        } else {
            for (int j = 0; j < valid; j++) pr[j] -= lse;
            cpu_expf_array(pr, pr, valid); /* expf's bits, 4 lanes at a time (vec_expf.h) */
        }
        for (int j = valid; j < cols; j++) pr[j] = 0.0f;
        if (dr)
            for (int j = 0; j < cols; j++) dr[j] = pr[j] * (dr[j] - delta);
    }
}

/* Zeroes rows [r0, r0 + rows) of head (b, h) of a [B, t_len, H*D] gradient: the unit that owns
 * them then sums into zeros, which writes the gradient without reading the caller's values. */
static void zero_unit_rows(const attn_geom *g, float *grad, int t_len, attn_unit u)
{
    for (int i = 0; i < u.rows; i++)
        memset(grad + row_offset(g, t_len, u.b, u.r0 + i, u.h), 0, sizeof(float) * (size_t)g->d);
}

/* dk and dv rows of one key tile, over every query tile that sees it. */
static void dkdv_unit(sdt_backend *be, const attn_geom *g, const attn_bwd *a, attn_unit u, float *p, float *ds)
{
    if (a->dv) zero_unit_rows(g, a->dv, g->tk, u);
    if (a->dk) zero_unit_rows(g, a->dk, g->tk, u);
    for (int q0 = g->causal ? u.r0 / ATTN_QT * ATTN_QT : 0; q0 < g->tq; q0 += ATTN_QT) {
        const int rows = g->tq - q0 < ATTN_QT ? g->tq - q0 : ATTN_QT;
        probs_tile(be, g, a, u.b, u.h, q0, rows, u.r0, u.rows, p, a->dk ? ds : NULL);
        if (a->dv) /* dv += p^T dout */
            tile_product(be, g, &a->dout_n, u.b, u.h, q0, true, u.rows, g->d, rows, 1.0f, p, ATTN_KT, 1.0f,
                         a->dv + row_offset(g, g->tk, u.b, u.r0, u.h), g->hd);
        if (a->dk) /* dk += scale ds^T q */
            tile_product(be, g, &a->qn, u.b, u.h, q0, true, u.rows, g->d, rows, g->scale, ds, ATTN_KT, 1.0f,
                         a->dk + row_offset(g, g->tk, u.b, u.r0, u.h), g->hd);
    }
}

/* dq rows of one query tile, over every key tile it sees. */
static void dq_unit(sdt_backend *be, const attn_geom *g, const attn_bwd *a, attn_unit u, float *p, float *ds)
{
    const int last_row = u.r0 + u.rows - 1;
    zero_unit_rows(g, a->dq, g->tq, u);
    for (int k0 = 0; k0 < g->tk && !(g->causal && k0 > last_row); k0 += ATTN_KT) {
        const int cols = g->tk - k0 < ATTN_KT ? g->tk - k0 : ATTN_KT;
        probs_tile(be, g, a, u.b, u.h, u.r0, u.rows, k0, cols, p, ds);
        tile_product(be, g, &a->kn, u.b, u.h, k0, false, u.rows, g->d, cols, g->scale, ds, ATTN_KT, 1.0f,
                     a->dq + row_offset(g, g->tq, u.b, u.r0, u.h), g->hd);
    }
}

/* dq, dk and dv of one whole head (b, h) in one pass: each (key tile, query tile) pair's p and ds are
 * computed once instead of once in each of dkdv_unit and dq_unit. Key tiles go in order on the outside and
 * query tiles in order inside, so dk and dv of a key tile sum over query tiles in order (as dkdv_unit) and
 * dq of a query tile over key tiles in order (as dq_unit), over the same pairs: the same sums, the same bits. */
static void head_unit(sdt_backend *be, const attn_geom *g, const attn_bwd *a, int b, int h, float *p, float *ds)
{
    if (a->dq)
        for (int q0 = 0; q0 < g->tq; q0 += ATTN_QT)
            zero_unit_rows(g, a->dq, g->tq, (attn_unit){b, h, q0, g->tq - q0 < ATTN_QT ? g->tq - q0 : ATTN_QT});
    for (int k0 = 0; k0 < g->tk; k0 += ATTN_KT) {
        const attn_unit u = {b, h, k0, g->tk - k0 < ATTN_KT ? g->tk - k0 : ATTN_KT};
        if (a->dv) zero_unit_rows(g, a->dv, g->tk, u);
        if (a->dk) zero_unit_rows(g, a->dk, g->tk, u);
        for (int q0 = g->causal ? k0 / ATTN_QT * ATTN_QT : 0; q0 < g->tq; q0 += ATTN_QT) {
            const int rows = g->tq - q0 < ATTN_QT ? g->tq - q0 : ATTN_QT;
            probs_tile(be, g, a, b, h, q0, rows, k0, u.rows, p, a->dk || a->dq ? ds : NULL);
            if (a->dv) /* dv += p^T dout */
                tile_product(be, g, &a->dout_n, b, h, q0, true, u.rows, g->d, rows, 1.0f, p, ATTN_KT, 1.0f,
                             a->dv + row_offset(g, g->tk, b, k0, h), g->hd);
            if (a->dk) /* dk += scale ds^T q */
                tile_product(be, g, &a->qn, b, h, q0, true, u.rows, g->d, rows, g->scale, ds, ATTN_KT, 1.0f,
                             a->dk + row_offset(g, g->tk, b, k0, h), g->hd);
            if (a->dq && !(g->causal && k0 > q0 + rows - 1)) /* dq += scale ds k, over dq_unit's key tiles */
                tile_product(be, g, &a->kn, b, h, k0, false, rows, g->d, u.rows, g->scale, ds, ATTN_KT, 1.0f,
                             a->dq + row_offset(g, g->tq, b, q0, h), g->hd);
        }
    }
}

static int backward_op(sdt_backend *be, const char *op, const attn_geom *gp, sdt_tensor *dq, sdt_tensor *dk,
                       sdt_tensor *dv, const sdt_tensor *dout, const sdt_tensor *q, const sdt_tensor *k,
                       const sdt_tensor *v, const sdt_tensor *out, const sdt_tensor *lse)
{
    const attn_geom g = *gp;
    if (!dq && !dk && !dv) return 0;
    attn_bwd a = {cpu_read_f32(be, q, 1),
                  cpu_read_f32(be, k, 2),
                  cpu_read_f32(be, v, 3),
                  cpu_read_f32(be, dout, 0),
                  NULL,
                  NULL,
                  cpu_write_begin(be, dq, 5, false),
                  cpu_write_begin(be, dk, 6, false),
                  cpu_write_begin(be, dv, 7, false),
                  {0},
                  {0},
                  {0},
                  {0},
                  {0}};
    const int64_t rows_total = (int64_t)g.batch * g.heads * g.tq, nq = (int64_t)g.batch * g.tq * g.hd;
    const int threads = cpu_threads_for(be, (int64_t)g.tq * g.tk);
    const size_t per_thread = 2 * (size_t)ATTN_QT * ATTN_KT;
    /* stats: delta, then (when forward saved nothing) lse and an f32 out */
    float *stats = malloc(sizeof(float) * (size_t)(rows_total * (lse ? 1 : 2) + (lse ? 0 : nq)));
    float *work = malloc(sizeof(float) * per_thread * (size_t)threads);
    const float *of = lse ? cpu_read_f32(be, out, 4) : stats + 2 * rows_total;
    if (!a.q || !a.k || !a.v || !a.dout || !of || (dq && !a.dq) || (dk && !a.dk) || (dv && !a.dv) || !stats || !work) {
        free(stats);
        free(work);
        return cpu_fail_oom(be, op, sizeof(float) * per_thread * (size_t)threads);
    }
    a.delta = stats;
    a.lse = lse ? (const float *)lse->data : stats + rows_total;
    int rc = lse ? 0 : forward_all(be, op, &g, a.q, a.k, a.v, (float *)of, (float *)a.lse);
#pragma omp parallel for num_threads(cpu_threads_for(be, nq)) schedule(static)
    for (int64_t r = 0; r < rows_total; r++) { /* r = (b * H + h) * Tq + t */
        const int t = (int)(r % g.tq), bh = (int)(r / g.tq);
        const int64_t off = row_offset(&g, g.tq, bh / g.heads, t, bh % g.heads);
        double sum = 0;
        for (int e = 0; e < g.d; e++) sum += (double)a.dout[off + e] * of[off + e];
        stats[r] = (float)sum;
    }
    const int kunits = unit_count(&g, g.tk, ATTN_KT), qunits = unit_count(&g, g.tq, ATTN_QT);
    if (rc == 0) { /* every B the passes' tile products read, packed once */
        pack_tiles(be, &g, a.k, g.tk, ATTN_KT, true, &a.kt);
        pack_tiles(be, &g, a.v, g.tk, ATTN_KT, true, &a.vt);
        if (dq) pack_tiles(be, &g, a.k, g.tk, ATTN_KT, false, &a.kn);
        if (dk) pack_tiles(be, &g, a.q, g.tq, ATTN_QT, false, &a.qn);
        if (dv) pack_tiles(be, &g, a.dout, g.tq, ATTN_QT, false, &a.dout_n);
    }
    /* Whole heads as units (p and ds once per tile pair) when there are enough heads to keep the threads busy;
     * otherwise tiles as units, in two passes. Either way the same bits. */
    const int heads_total = g.batch * g.heads;
    const bool whole_heads = threads == 1 || heads_total >= 4 * threads;
    if (rc == 0 && whole_heads) {
#pragma omp parallel for num_threads(threads) schedule(dynamic) if (heads_total > 1)
        for (int n = 0; n < heads_total; n++) {
            float *p = work + per_thread * (size_t)omp_get_thread_num();
            head_unit(be, &g, &a, n / g.heads, n % g.heads, p, p + ATTN_QT * ATTN_KT);
        }
    } else if (rc == 0 && (dk || dv)) {
#pragma omp parallel for num_threads(threads) schedule(dynamic) if (kunits > 1)
        for (int n = 0; n < kunits; n++) {
            float *p = work + per_thread * (size_t)omp_get_thread_num();
            dkdv_unit(be, &g, &a, unit_at(&g, g.tk, ATTN_KT, n), p, p + ATTN_QT * ATTN_KT);
        }
    }
    if (rc == 0 && dq && !whole_heads) {
#pragma omp parallel for num_threads(threads) schedule(dynamic) if (qunits > 1)
        for (int n = 0; n < qunits; n++) {
            float *p = work + per_thread * (size_t)omp_get_thread_num();
            dq_unit(be, &g, &a, unit_at(&g, g.tq, ATTN_QT, n), p, p + ATTN_QT * ATTN_KT);
        }
    }
    free_tiles(&a.kt), free_tiles(&a.vt), free_tiles(&a.kn), free_tiles(&a.qn), free_tiles(&a.dout_n);
    free(stats);
    free(work);
    if (rc) return rc;
    cpu_write_end(be, dq, a.dq);
    cpu_write_end(be, dk, a.dk);
    cpu_write_end(be, dv, a.dv);
    return 0;
}

int cpu_attention_backward(sdt_backend *be, sdt_tensor *dq, sdt_tensor *dk, sdt_tensor *dv, const sdt_tensor *dout,
                           const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *v, const sdt_tensor *out,
                           const sdt_tensor *lse, int heads, bool causal)
{
    attn_geom g;
    attn_geometry(q, k, heads, causal, &g);
    return backward_op(be, "attention_backward", &g, dq, dk, dv, dout, q, k, v, out, lse);
}

int cpu_attention_bias_backward(sdt_backend *be, sdt_tensor *dq, sdt_tensor *dk, sdt_tensor *dv, const sdt_tensor *dout,
                                const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *v, const sdt_tensor *out,
                                const sdt_tensor *lse, const sdt_tensor *bias, int heads, float scale)
{
    attn_geom g;
    attn_bias_geometry(q, k, bias, heads, scale, &g);
    return backward_op(be, "attention_bias_backward", &g, dq, dk, dv, dout, q, k, v, out, lse);
}
