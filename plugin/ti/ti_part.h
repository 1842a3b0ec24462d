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
#include "ti/embedding_model_check.h"

typedef struct ti_part ti_part;

/* One encoder's columns of a guarded group (an SD 1.x/2.x embedding has one: the whole row). */
typedef struct ti_guard_table {
    const char *what; /* "" or " (clip_l)" ... */
    int stride, from, width;
    double token_norm; /* mean row norm of the encoder's token embedding; 0: not guarded */
} ti_guard_table;

/* A parameter group of the embedding (ti_part_guard.c): the whole rows (SD 1.x/2.x/SDXL), or one trained table of
 * an SD3.5/Flux.1 embedding, with what the divergence guard needs. */
typedef struct ti_group {
    ti_part *tp;
    sdt_optimizer *opt;
    int engine_group;       /* its index in job->engine (and job->ema) */
    sdt_tensor param, grad; /* views into the part's buffers */
    size_t base;            /* where the group's values start in tp->emb.vectors */
    float *undo;            /* param, AdamW m and v before the latest step: [3, numel(param)] */
    int n_tables;
    ti_guard_table tables[2];
} ti_group;

struct ti_part {
    sdt_train_part *part;
    sdt_embedding emb;      /* host copy: name, metadata; vectors refreshed before each save */
    sdt_tensor param, grad; /* [n_vectors, width] f32 on the device (table-major for SD3.5/Flux.1) */
    sdt_backend *be;
    bool save_cards;
    uint32_t tables; /* SD3.5/Flux.1: the tables that train (SDT_ENCODER_* bits of the file's tables); 0 otherwise */
    int n_groups;
    ti_group groups[3];
};

/* What a part trains of an SD3.5/Flux.1 embedding (sdt_embedding_settings' encoders and encoder_learn_rates):
 * encoders 0 = every table of the family; a schedule NULL = the part's learn rate. */
typedef struct ti_table_settings {
    uint32_t encoders;
    const char *learn_rates[3], *learn_rate_fields[3]; /* clip_l, clip_g, t5xxl */
    const char *encoders_field;
} ti_table_settings;

/* Phase 1, before the model: loads and checks the embedding file, chooses where the result goes,
 * takes its lock. state_prefix: "" for textual inversion alone, "embedding." in joint training. */
ti_part *ti_part_open(sdt_train_job *job, const char *embedding_path, const char *state_prefix, bool save_cards,
                      sdt_error *error);
/* Phase 2, after the model: the embedding fits the text encoder; its name becomes a token whose
 * occurrences take its rows (job->rules). */
bool ti_part_bind_model(ti_part *tp, sdt_train_job *job, sdt_error *error);
/* Phase 3, after the data: the rows on the device, AdamW over them, the parameter groups: one for the rows of an
 * SD 1.x/2.x/SDXL embedding (tables ignored: its state keys emb_params, adamw_m, adamw_v), one per trained table of
 * an SD3.5/Flux.1 embedding (state keys <prefix><table>.emb_params, <prefix><table>.adamw_m ...), each with its
 * schedule; a table that does not train keeps its values and gets no gradient (the pass's tables mask). */
bool ti_part_add_group(ti_part *tp, sdt_train_job *job, const sdt_schedule_texts *texts,
                       const ti_table_settings *tables, sdt_error *error);

/* ti_part_guard.c: the divergence guard around each step (sdt_param_group's before/after; user: a ti_group). */
/* The mean row norm of the token embedding of encoder k (SDT_EMBEDDING_ENCODERS order: clip_l, clip_g, t5xxl;
 * for SD 1.x/2.x k 0 is the one CLIP and SDXL's 1 bigG); 0 when it cannot be read (no guard). */
double ti_part_token_norm(const sdt_train_job *job, int k);
bool ti_part_undo_save(void *group, sdt_error *error);
bool ti_part_check_divergence(void *group, int64_t step_number, double lr, sdt_error *error);
/* Copies the device rows into tp->emb.vectors. */
bool ti_part_download_vectors(ti_part *tp, sdt_error *error);

#endif
