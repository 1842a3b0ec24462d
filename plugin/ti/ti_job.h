/* ti_job.h - the textual-inversion training job behind ti_trainer.h, shared by the files
 * that implement it: ti_job_prepare.c (validation and loading), ti_job_step.c (one
 * optimizer step), ti_job_guard.c (the divergence guard), ti_job_save.c (every embedding
 * file the run writes), ti_job_state.c (the resume state: sealed, paired with its embedding). */
#ifndef SDT_PLUGIN_TI_JOB_H
#define SDT_PLUGIN_TI_JOB_H

#include "sdt_error.h"

#include "api/backend_select.h"
#include "data/caption.h"
#include "data/data_order.h"
#include "data/dataset.h"
#include "train/diagnosis.h"
#include "ti/embedding.h"
#include "ti/embedding_file.h"
#include "train/fallback.h"
#include "train/inpaint_cond.h"
#include "train/latent_cache.h"
#include "data/lr_schedule.h"
#include "train/noise_schedule.h"
#include "train/optimizer.h"
#include "ti/outputs.h"
#include "train/run_control.h"
#include "data/run_lock.h"
#include "train/scaler.h"
#include "train/sd_runtime.h"
#include "data/template.h"
#include "testhooks/test_hooks.h"
#include "ti/ti_pass.h"
#include "ti/ti_prompt.h"
#include "ti/ti_trainer.h"
#include "tokenizer.h"
#include "train/work_arena.h"

#define TI_MAX_BATCH_FILES 64


struct ti_job {
    /* what the panel asked for (strings owned here) */
    char *model_path, *embedding_path, *dataset_dir, *template_path, *tokenizer_dir;
    char *preview_prompt, *preview_negative;
    char *learn_rate_text, *clip_value_text; /* the schedules as given: a resume re-parses them at its step */
    int64_t max_steps;
    uint32_t clip_mode, latent_sampling, preview_steps, preview_width, preview_height;
    int clip_skip;
    int64_t save_every, preview_every, write_csv_every;
    int64_t state_every_s;     /* the state after a step once this many seconds passed since the last (0: off) */
    double last_state_at;      /* monotonic seconds of the last state written (or of prepare) */
    int64_t preview_seed;
    double preview_cfg;
    uint64_t seed;
    bool use_alpha, save_cards, shuffle_tags, anomaly, checkpointing;
    double tag_dropout;
    const sdt_host_callbacks *host;

    /* compute */
    plugin_backend pb;
    sd_runtime rt;
    sdt_precision precision;   /* in use now (fp32 after the fallback) */
    work_arena wa;             /* training passes and previews */
    ti_pass_shape measured;    /* the batch shape the arena was last sized for */
    int max_prompt_chunks;     /* 77-token chunks of the longest prompt (pre-flight) */
    inpaint_cond inpaint;      /* an inpainting UNet's extra input channels (train/inpaint_cond.h) */
    bool have_measured;
    size_t memory_estimate_bytes; /* prepare's estimate, for the run's peak-memory line */
    sdt_noise_schedule sched;

    /* text */
    sdt_tokenizer *tok;
    ti_prompt_rules rules;
    sdt_template tmpl;
    sdt_caption_rules caption_rules;

    /* data */
    sdt_dataset ds;
    latent_cache lc;
    sdt_data_order order;
    int batch, grad_accum;
    int64_t steps_per_epoch;

    /* what trains */
    sdt_embedding emb;         /* host copy: name, metadata; vectors refreshed before each save */
    sdt_tensor param, grad;    /* [n_vectors, width] f32 on the device */
    sdt_optimizer *opt;
    sdt_scaler *scaler;        /* fp16 only; NULL otherwise and after the fallback */
    sdt_fallback fallback;
    sdt_diagnosis diagnosis;
    sdt_lr_schedule lr;
    sdt_lr_schedule clip_value;

    /* the divergence guard (ti_job_guard.c) */
    double token_norm;         /* mean row norm of the model's token embedding: what a prompt vector looks like */
    float *undo;               /* param, AdamW m and v before the latest step: [3, n_vectors * width] */

    /* progress */
    int64_t step, initial_step, end_step;
    int64_t skipped;
    char last_prompt[1024];
    const char *batch_files[TI_MAX_BATCH_FILES];
    int n_batch_files;
    const char *bad_input_files[TI_MAX_BATCH_FILES]; /* samples of this step whose latents are not finite */
    int n_bad_input_files;

    /* outputs */
    char *output_path;         /* the trained embedding: the file named, or <stem>.safetensors beside a card */
    char start_file_sha256[65]; /* content hash of the embedding's vectors when the run began (ti_job_state.c) */
    int64_t start_file_step;
    char *resume_path;         /* the state --resume resolved to (a file, or the newest that pairs in a folder) */
    sdt_run_lock output_lock, log_lock;
    time_t started_at;         /* names the log folder (its date) and the settings file */
    const sdt_run_control *control; /* prepare() stops when an interrupt is requested */
    sdt_output_dirs out;
    char checkpoint_hash[16];
    char checkpoint_name[256];
};

/* How every training pass of this job runs. */
static inline ti_pass_options ti_job_pass_options(const ti_job *job)
{
    return (ti_pass_options){job->clip_skip, job->checkpointing, job->anomaly};
}

/* ti_job_prepare.c: the LR and clip schedules parsed at job->step (after a resume too). */
bool ti_job_parse_schedules(ti_job *job, sdt_error *error);
/* After the switch to fp32: images whose latents were not finite are encoded again. */
bool ti_job_reencode_nonfinite(ti_job *job, sdt_error *error);
/* ti_job_guard.c: the divergence guard. token_norm at prepare; undo_save before each step;
 * check_divergence after it (undoes the step and returns SDT_STATUS_NUMERICAL with the sentence). */
double ti_job_token_norm(const ti_job *job);
bool ti_job_undo_save(ti_job *job, sdt_error *error);
bool ti_job_check_divergence(ti_job *job, int64_t step_number, double lr, sdt_error *error);
/* ti_job_step.c */
bool ti_job_step(void *job, sdt_metrics *metrics, uint32_t *images, sdt_error *error);
bool ti_job_done(const void *job);
/* Monotonic seconds (step timing, the state's time interval). */
double ti_job_clock(void);
/* Frozen weights upcast to f32 and no loss scaling from now on (the fallback's switch). */
bool ti_job_use_fp32(ti_job *job, sdt_error *error);
/* ti_job_state.c: the resume state (sealed, paired with its embedding; see there). */
void ti_job_state_path(const ti_job *job, char *out, size_t size);
bool ti_job_write_run_state(ti_job *job, sdt_error *error);
/* --resume: a state file or a folder; checks all that needs no device and sets job->resume_path. */
bool ti_job_resolve_resume(ti_job *job, const char *given, sdt_error *error);
/* ti_job_save.c */
bool ti_job_save_snapshot(void *job, int64_t step, sdt_error *error);
bool ti_job_save_preview(void *job, int64_t step, sdt_error *error);
bool ti_job_save_final(void *job, sdt_save_reason reason, sdt_error *error);
/* Copies the device embedding's vectors into job->emb.vectors. */
bool ti_job_download_vectors(ti_job *job, sdt_error *error);
/* The same, and job->emb's step, checkpoint and fallback note brought up to date: ready to save. */
bool ti_job_sync_embedding(ti_job *job, sdt_error *error);
/* The precision's storage dtype. */
sdt_dtype ti_precision_dtype(sdt_precision p);
const char *ti_precision_name(sdt_precision p);

#endif
