/* ti_part_guard.c - the divergence guard: after every optimizer step the embedding's longest
 * vector is compared with the model's typical token vector. An embedding far outside that scale
 * means the optimisation blew up (a learning rate far too high does it in one step, and in fp32
 * nothing turns NaN: the loss just stalls); the step is undone, vectors and AdamW moments, so
 * the saved state is the last good one, and the run stops with a sentence saying what to change. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_text_rules.h"
#include "transformer_keys.h"
#include "ti/ti_part.h"

/* The mean L2 norm of (up to 4096 evenly spaced) rows of a [rows, width] token embedding: the scale a healthy
 * embedding vector stays near. */
static double mean_row_norm(const sdt_tensor *tok_emb)
{
    if (!tok_emb || !tok_emb->data || tok_emb->ndim != 2) return 0;
    int64_t rows = tok_emb->shape[0], width = tok_emb->shape[1];
    int64_t stride = rows > 4096 ? rows / 4096 : 1;
    float *row = malloc((size_t)width * sizeof(float));
    double sum = 0;
    int64_t counted = 0;
    for (int64_t r = 0; row && r < rows; r += stride, counted++) {
        sdt_load_f32((const uint8_t *)tok_emb->data + (size_t)(r * width) * sdt_dtype_size(tok_emb->dtype),
                     tok_emb->dtype, row, width);
        sum += sdt_embedding_vector_norm(row, width);
    }
    free(row);
    return counted ? sum / (double)counted : 0;
}

/* The file that holds SD3's part (a part file given, or the checkpoint). */
static const sdt_weights *part_source(const sdt_train_job *job, int part)
{
    return job->rt.part_file[part] ? job->rt.part_file[part] : job->rt.file;
}

static double clip_token_norm(const sdt_weights *w, const clip_config *cfg)
{
    clip_text_model m;
    sdt_error ignored; /* no norm means no divergence guard, never a failed run */
    if (!clip_text_load(&m, cfg, w, &ignored)) return 0;
    return mean_row_norm(&m.tok_emb);
}

double ti_part_token_norm(const sdt_train_job *job, int k)
{
    const sd_config *c = &job->rt.cfg;
    if (sd_config_is_transformer(c)) {
        if (k == 0) return clip_token_norm(part_source(job, SD_PART_CLIP_L), &c->clip);
        if (k == 1) return clip_token_norm(part_source(job, SD_PART_CLIP_G), &c->clip2);
        const sdt_weights *w = part_source(job, SD_PART_T5XXL);
        const sdt_tensor *t = sdt_weights_get(w, SDT_TK_T5XXL_PREFIX "shared.weight");
        return mean_row_norm(t ? t : sdt_weights_get(w, SDT_TK_T5XXL_PREFIX "encoder.embed_tokens.weight"));
    }
    if (k == 0) return clip_token_norm(job->rt.file, &c->clip);
    return k == 1 && sd_text_rules_of(c).sdxl ? clip_token_norm(job->rt.file, &c->clip2) : 0;
}

/* A vector this many times longer than the model's typical token vector is no longer a prompt
 * word: past the first LayerNorm only its direction counts and its gradient shrinks as 1/norm,
 * so training has stalled. Healthy runs stay within a few times; the factor leaves a wide margin. */
#define TI_DIVERGENCE_FACTOR 1000.0

typedef enum undo_op { UNDO_SAVE, UNDO_RESTORE } undo_op;

/* Copies the group's values and AdamW moments to or from its undo buffer. */
static bool undo_copy(ti_group *grp, undo_op op, sdt_error *error)
{
    sdt_tensor *param, *grad, *m, *v;
    const char *name;
    if (!sdt_optimizer_param_views(grp->opt, 0, &name, &param, &grad, &m, &v)) {
        sdt_fail(error, SDT_ERR_INTERNAL, "the optimizer has no parameter (a bug: please report)");
        return false;
    }
    sdt_backend *be = grp->tp->be;
    size_t bytes = sdt_tensor_nbytes(param), n = bytes / sizeof(float);
    sdt_tensor *parts[3] = {param, m, v};
    for (int i = 0; i < 3; i++) {
        int rc = op == UNDO_SAVE ? be->download(be, grp->undo + (size_t)i * n, parts[i]->data, bytes)
                                 : be->upload(be, parts[i]->data, grp->undo + (size_t)i * n, bytes);
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

/* After a step: an embedding that left the scale of prompt vectors means the optimisation
 * diverged. The step is undone (so the saved state is the last good one) and the run stops. */
bool ti_part_check_divergence(void *user, int64_t step_number, double lr, sdt_error *error)
{
    ti_group *grp = user;
    ti_part *tp = grp->tp;
    bool guarded = false;
    for (int t = 0; t < grp->n_tables; t++) guarded |= grp->tables[t].token_norm > 0;
    if (!guarded) return true;
    if (!ti_part_download_vectors(tp, error)) return false;
    const float *now_values = tp->emb.vectors + grp->base;
    for (int t = 0; t < grp->n_tables; t++) {
        const ti_guard_table *g = &grp->tables[t];
        if (!(g->token_norm > 0)) continue;
        double now = largest_row_norm(now_values, tp->emb.n_vectors, g->stride, g->from, g->width);
        double limit = TI_DIVERGENCE_FACTOR * g->token_norm;
        if (now <= limit) continue;
        double before = largest_row_norm(grp->undo, tp->emb.n_vectors, g->stride, g->from, g->width);
        if (!undo_copy(grp, UNDO_RESTORE, error)) return false;
        sdt_optimizer_set_step_count(grp->opt, sdt_optimizer_step_count(grp->opt) - 1);
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

bool ti_part_undo_save(void *group, sdt_error *error)
{
    return undo_copy(group, UNDO_SAVE, error);
}
