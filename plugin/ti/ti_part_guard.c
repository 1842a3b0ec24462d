/* ti_part_guard.c - the divergence guard: after every optimizer step the embedding's longest
 * vector is compared with the model's typical token vector. An embedding far outside that scale
 * means the optimisation blew up (a learning rate far too high does it in one step, and in fp32
 * nothing turns NaN: the loss just stalls); the step is undone, vectors and AdamW moments, so
 * the saved state is the last good one, and the run stops with a sentence saying what to change. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_text_rules.h"
#include "ti/ti_part.h"

/* The mean L2 norm of (up to 4096 evenly spaced) rows of a text encoder's token embedding, read
 * from the checkpoint file: the scale a healthy embedding vector stays near. */
static double token_norm_of(const sdt_train_job *job, const clip_config *cfg)
{
    clip_text_model m;
    sdt_error ignored; /* no norm means no divergence guard, never a failed run */
    if (!clip_text_load(&m, cfg, job->rt.file, &ignored)) return 0;
    int64_t rows = m.tok_emb.shape[0], width = m.tok_emb.shape[1];
    int64_t stride = rows > 4096 ? rows / 4096 : 1;
    float *row = malloc((size_t)width * sizeof(float));
    double sum = 0;
    int64_t counted = 0;
    for (int64_t r = 0; row && r < rows; r += stride, counted++) {
        sdt_load_f32((const uint8_t *)m.tok_emb.data + (size_t)(r * width) * sdt_dtype_size(m.tok_emb.dtype),
                     m.tok_emb.dtype, row, width);
        sum += sdt_embedding_vector_norm(row, width);
    }
    free(row);
    return counted ? sum / (double)counted : 0;
}

void ti_part_token_norms(const sdt_train_job *job, double *norm, double *norm_g)
{
    *norm = token_norm_of(job, &job->rt.cfg.clip);
    *norm_g = sd_text_rules_of(&job->rt.cfg).sdxl ? token_norm_of(job, &job->rt.cfg.clip2) : 0;
}

/* A vector this many times longer than the model's typical token vector is no longer a prompt
 * word: past the first LayerNorm only its direction counts and its gradient shrinks as 1/norm,
 * so training has stalled. Healthy runs stay within a few times; the factor leaves a wide margin. */
#define TI_DIVERGENCE_FACTOR 1000.0

typedef enum undo_op { UNDO_SAVE, UNDO_RESTORE } undo_op;

/* Copies the embedding and its AdamW moments to or from job->undo. */
static bool undo_copy(ti_part *tp, undo_op op, sdt_error *error)
{
    sdt_tensor *param, *grad, *m, *v;
    const char *name;
    if (!sdt_optimizer_param_views(tp->opt, 0, &name, &param, &grad, &m, &v)) {
        sdt_fail(error, SDT_ERR_INTERNAL, "the optimizer has no parameter (a bug: please report)");
        return false;
    }
    sdt_backend *be = tp->be;
    size_t bytes = sdt_tensor_nbytes(param), n = bytes / sizeof(float);
    sdt_tensor *parts[3] = {param, m, v};
    for (int i = 0; i < 3; i++) {
        int rc = op == UNDO_SAVE ? be->download(be, tp->undo + (size_t)i * n, parts[i]->data, bytes)
                                 : be->upload(be, parts[i]->data, tp->undo + (size_t)i * n, bytes);
        if (rc) {
            sdt_fail(error, be->error.code, "copying the embedding's state on the %s backend failed: %s", be->name,
                     be->error.message);
            return false;
        }
    }
    return true;
}

/* The longest row of columns [from, from + width) of a [rows, stride] table. */
static double largest_row_norm(const float *x, int rows, int stride, int from, int width)
{
    double largest = 0;
    for (int r = 0; r < rows; r++) {
        double norm = sdt_embedding_vector_norm(x + (size_t)r * stride + from, width);
        if (!(norm <= largest)) largest = norm; /* NaN wins */
    }
    return largest;
}

/* One encoder's half of the rows (an SD 1.x/2.x embedding has one: the whole row). */
typedef struct guard_table {
    const char *what; /* "" or " (clip_g)" */
    int from, width;
    double token_norm;
} guard_table;

/* After a step: an embedding that left the scale of prompt vectors means the optimisation
 * diverged. The step is undone (so the saved state is the last good one) and the run stops. */
bool ti_part_check_divergence(void *user, int64_t step_number, double lr, sdt_error *error)
{
    ti_part *tp = user;
    int l = tp->emb.clip_l_dim ? tp->emb.clip_l_dim : tp->emb.dim;
    guard_table tables[2] = {{tp->emb.clip_l_dim ? " (clip_l)" : "", 0, l, tp->token_norm},
                             {" (clip_g)", l, tp->emb.dim - l, tp->token_norm_g}};
    int n_tables = tp->emb.clip_l_dim ? 2 : 1;
    if (!(tp->token_norm > 0)) return true;
    if (!ti_part_download_vectors(tp, error)) return false;
    for (int t = 0; t < n_tables; t++) {
        const guard_table *g = &tables[t];
        if (!(g->token_norm > 0)) continue;
        double now = largest_row_norm(tp->emb.vectors, tp->emb.n_vectors, tp->emb.dim, g->from, g->width);
        double limit = TI_DIVERGENCE_FACTOR * g->token_norm;
        if (now <= limit) continue;
        double before = largest_row_norm(tp->undo, tp->emb.n_vectors, tp->emb.dim, g->from, g->width);
        if (!undo_copy(tp, UNDO_RESTORE, error)) return false;
        sdt_optimizer_set_step_count(tp->opt, sdt_optimizer_step_count(tp->opt) - 1);
        sdt_fail(
            error, SDT_ERR_NUMERICAL,
            "Step %lld: the embedding diverged: one step at learning rate %g moved its longest "
            "vector%s from norm %.3g to %.3g, over %.0f times the model's typical token vector (%.3g), where a prompt "
            "vector stops working. The optimisation blew up, not the data: lower the learning rate (the usual is 0.005), "
            "add a warm-up (e.g. \"1e-4:100, 0.005\"), or clip gradients (clip mode norm, value 1.0). The step was "
            "undone and the last good state is kept.",
            (long long)step_number, lr, g->what, before, now, TI_DIVERGENCE_FACTOR, g->token_norm);
        return false;
    }
    return true;
}

bool ti_part_undo_save(void *tp, sdt_error *error)
{
    return undo_copy(tp, UNDO_SAVE, error);
}
