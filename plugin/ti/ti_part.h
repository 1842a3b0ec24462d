/* ti_part.h - an embedding as a part of a training job (train/train_job.h): textual inversion
 * alone, or the embedding half of joint training with a hypernetwork.
 *
 * What is an embedding's own: its file (any format sdtrain reads; the result goes to the file
 * named, or to <stem>.safetensors beside a card or a PyTorch file), its name as an added token
 * whose occurrences in the prompt take the embedding's rows, its parameter group (AdamW without
 * weight decay, as A1111), the divergence guard (ti_part_guard.c), its copies and PNG cards.
 * A job adds it in three phases, as the information arrives. */
#ifndef SDT_TI_PART_H
#define SDT_TI_PART_H

#include "sdt_error.h"

#include "train/train_job.h"
#include "ti/embedding.h"

typedef struct ti_part {
    sdt_train_part *part;
    sdt_embedding emb;      /* host copy: name, metadata; vectors refreshed before each save */
    sdt_tensor param, grad; /* [n_vectors, width] f32 on the device */
    sdt_backend *be;
    bool save_cards;
    double token_norm;   /* mean row norm of the model's token embedding (the divergence guard) */
    double token_norm_g; /* SDXL: the same for bigG (the clip_g half of each row); 0 otherwise */
    float *undo;         /* param, AdamW m and v before the latest step: [3, n_vectors * width] */
    sdt_optimizer *opt;
} ti_part;

/* Phase 1, before the model: loads and checks the embedding file, chooses where the result goes,
 * takes its lock. state_prefix: "" for textual inversion alone, "embedding." in joint training. */
ti_part *ti_part_open(sdt_train_job *job, const char *embedding_path, const char *state_prefix, bool save_cards,
                      sdt_error *error);
/* Phase 2, after the model: the embedding fits the text encoder; its name becomes a token whose
 * occurrences take its rows (job->rules). */
bool ti_part_bind_model(ti_part *tp, sdt_train_job *job, sdt_error *error);
/* Whether the embedding's rows fit the model's text encoders (SDXL: clip_l and clip_g; SD3: a table per encoder,
 * encoder_dims, each its encoder's width); false + a sentence naming path and both shapes. Training and
 * generating check the same way. */
bool ti_embedding_check_model(const sdt_embedding *e, const sd_runtime *rt, const char *path, sdt_error *error);
/* Phase 3, after the data: the rows on the device, AdamW over them, the parameter group. */
bool ti_part_add_group(ti_part *tp, sdt_train_job *job, const sdt_schedule_texts *texts, sdt_error *error);

/* ti_part_guard.c: the divergence guard around each step (sdt_param_group's before/after). */
void ti_part_token_norms(const sdt_train_job *job, double *norm, double *norm_g);
bool ti_part_undo_save(void *tp, sdt_error *error);
bool ti_part_check_divergence(void *tp, int64_t step_number, double lr, sdt_error *error);
/* Copies the device rows into tp->emb.vectors. */
bool ti_part_download_vectors(ti_part *tp, sdt_error *error);

#endif
