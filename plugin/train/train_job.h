/* train_job.h - the shared training job: everything a run does that no method owns.
 *
 * Settings, backend and model, tokenizer and template, the dataset with its latents and data
 * order, the output folder and its locks, the batches (noise, timesteps, prompts), the pass
 * (train/sd_pass.h), the step (train/step_engine.h), metrics and the loss CSV, previews, the
 * sealed resume state and --resume. What is a method's own comes in as parts
 * (sdt_train_part): an embedding (ti/), a hypernetwork (hn/), or both in joint training. Each
 * part owns one parameter group of the step engine, its files and its saves; it may put rows
 * into the prompt (an embedding) or a hook on the UNet's K/V inputs (a hypernetwork).
 *
 * The job composes modules that own their fields and take explicit inputs (run_data,
 * run_outputs, run_previews, validation, ema, run_text_cache: docs/DESIGN.md draws them); its
 * own files are layered, each calling only those below it: train_job_prepare.c (the builder:
 * checks, loading, memory, settings) > train_job_step.c (batches, accumulation, metrics) >
 * train_job_save.c (snapshots, previews, the final save) > train_job_state.c (the resume state:
 * sealed, paired with each part's file) and train_job_validate.c (validation's pass) >
 * train_job.c (the small pieces all of them use). tests/source/check_train_cycles.py keeps it so. */
#ifndef SDT_TRAIN_TRAIN_JOB_H
#define SDT_TRAIN_TRAIN_JOB_H

#include "sdt_error.h"

#include <cjson/cJSON.h>
#include <time.h>

#include "host/backend_select.h"
#include "data/caption.h"
#include "data/data_order.h"
#include "data/dataset.h"
#include "data/metrics_log.h"
#include "data/outputs.h"
#include "data/preview_prompts.h"
#include "data/run_lock.h"
#include "data/template.h"
#include "train/inpaint_cond.h"
#include "train/flow_step.h"
#include "train/ema.h"
#include "train/latent_cache.h"
#include "train/loss_options.h"
#include "train/lr_scheduler.h"
#include "train/noise_schedule.h"
#include "train/options_copy.h"
#include "train/prompt.h"
#include "train/run_comm.h"
#include "train/run_control.h"
#include "train/run_data.h"
#include "train/run_loop.h"
#include "train/run_outputs.h"
#include "train/run_previews.h"
#include "train/sampler.h"
#include "train/sd_pass.h"
#include "train/sd_runtime.h"
#include "train/step_engine.h"
#include "train/run_t5_cache.h"
#include "train/run_text_cache.h"
#include "train/t5_cache.h"
#include "train/text_cache.h"
#include "train/validation.h"
#include "train/work_arena.h"
#include "tokenizer.h"
#include "sentencepiece.h"
#include "t5_prompt.h"

#define SDT_JOB_MAX_BATCH_FILES 64
#define SDT_JOB_MAX_PARTS 2

typedef struct sdt_train_job sdt_train_job;
typedef struct sdt_train_part sdt_train_part;

typedef struct sdt_train_part_ops {
    /* Brings the part's host copy (weights, step, checkpoint, training note) up to date. */
    bool (*sync)(sdt_train_part *p, sdt_train_job *job, sdt_error *error);
    /* The copy every save_every steps (into job->outputs.dirs.copies). */
    bool (*save_snapshot)(sdt_train_part *p, sdt_train_job *job, int64_t step, sdt_error *error);
    /* The trained file (p->output_path, and any twin). */
    bool (*save_final)(sdt_train_part *p, sdt_train_job *job, sdt_error *error);
    /* Optional: after a preview image was written (the embedding's PNG card); rgb NULL at the end.
     * A card that cannot be written (a full disk) fails the save it belongs to. */
    bool (*after_preview)(sdt_train_part *p, sdt_train_job *job, int64_t step, const uint8_t *rgb, int w, int h,
                          sdt_error *error);
    /* Optional: before each micro-batch's pass (a hypernetwork's dropout key) and around previews. */
    void (*begin_micro)(sdt_train_part *p, sdt_train_job *job, uint64_t counter);
    void (*begin_preview)(sdt_train_part *p, sdt_train_job *job);
    void (*end_preview)(sdt_train_part *p, sdt_train_job *job);
    /* Optional: before a validation pass (a hypernetwork's eval mode at its training strength; the
     * next begin_micro returns to training). */
    void (*begin_validation)(sdt_train_part *p, sdt_train_job *job);
    /* Optional: writes the part's values as they are on the device now to path, in the part's own
     * format (the average beside the result: train_job_save.c); file_kind as the ABI's. */
    bool (*save_as)(sdt_train_part *p, sdt_train_job *job, const char *path, sdt_error *error);
    /* The part's keys in the settings file. */
    void (*settings)(sdt_train_part *p, sdt_train_job *job, cJSON *s);
    /* The content hash of all its values on the device, for a part whose values span several groups or hold some
     * no group trains (SD3.5/Flux.1 tables); NULL: its one group's values. */
    bool (*values_sha256)(sdt_train_part *p, char hex[65], sdt_error *error);
    /* The same for the values the result file holds with ema_result (each group's average over the rest); NULL: its
     * one group's average. */
    bool (*average_sha256)(sdt_train_part *p, sdt_train_job *job, char hex[65], sdt_error *error);
    void (*destroy)(sdt_train_part *p);
} sdt_train_part_ops;

struct sdt_train_part {
    const sdt_train_part_ops *ops;
    void *self;               /* the method's own data */
    const char *what;         /* "embedding", "hypernetwork": sentences, state keys */
    const char *option;       /* how the user names the file: "--embedding (embedding_path)" */
    const char *state_prefix; /* prefix of its tensors in the state ("" for a lone embedding) */
    int group;                /* its parameter group in job->engine */
    char *input_path;         /* the file given */
    char *output_path;        /* the trained file */
    const char *also_writes;  /* another file the part writes beside it (a hypernetwork's twin), or NULL;
                                  * the method's (set before load_data, whose sweep of temp files covers it) */
    char start_sha256[65];    /* content hash of its values when the run began */
    int64_t start_step;       /* the step its file held then */
    char *also_locks;         /* another name the part's file goes by (a hypernetwork's twin name, whether
                                  * it exists or not), locked with it so two runs never write the pair; or NULL */
    char *average_path;       /* <stem>-ema<ext> when the run writes the average beside the result (ema_decay
                                  * without ema_result), locked under its own name too; or NULL */
    sdt_run_lock lock, also_lock, average_lock;
};

struct sdt_train_job {
    /* what the panel asked for: the shared options, read once at sdt_train_job_new (strings owned
     * here, normalised: train/options_copy.h); the modules below take their settings from it */
    sdt_train_options opt;
    int clip_skip;                        /* the options' clip_skip as the model's text rules take it (load_model) */
    sd_prediction_choice prediction;      /* the user's: auto, epsilon or v (sd_runtime_open decides auto) */
    sdt_loss_options loss;                /* the loss and noise options (1.5); their defaults are A1111's */
    sdt_lr_scheduler_config lr_scheduler; /* the LR scheduler (1.5), given to the step engine */
    const sdt_host_callbacks *host;
    const char *options_field;      /* how sentences name an option only sdt_train_options has ("options->") */
    const sdt_run_control *control; /* prepare() stops when an interrupt is requested */
    const char *run_kind;           /* "embedding", "hypernetwork": the settings file and log lines */

    /* the modules (each owns its fields; none knows the job) */
    sdt_run_data data; /* the dataset, its latents, order, buckets and augmentation (train/run_data.h) */
    sdt_run_outputs
        outputs; /* folders, the run folder's lock, the loss CSV, metrics.jsonl, loss.png (train/run_outputs.h) */
    sdt_run_previews previews; /* what previews show, how and how often (train/run_previews.h) */
    sdt_validation val;        /* the validation images and what they measured (train/validation.h) */
    sdt_ema ema;               /* the average of the trained values (train/ema.h): ema.decay 0: off */
    sdt_text_cache text_cache; /* every prompt encoded once when the encoders can go (train/run_text_cache.h;
                                * rt.text_cache points here) */
    sdt_t5_cache t5_cache;     /* SD3.5: T5's output for every prompt when the t5xxl table does not train
                                * (train/run_t5_cache.h; rt.t5_cache points here) */

    /* compute */
    plugin_backend pb;
    sdt_run_comm par; /* this run's rank of a data-parallel job (train/run_comm.h); one rank: world_size 1 */
    sd_runtime rt;
    sdt_precision precision; /* in use now (fp32 after the fallback) */
    bool vae_fp32;           /* SDXL's VAE in fp32 beside fp16 weights (an fp16 run on a GPU without bf16) */
    bool transformer_f32;    /* SD3.5/Flux: the transformer's activations in f32 beside fp16 weights (the same) */
    work_arena wa;           /* training passes and previews */
    sdt_pass_shape measured; /* the batch shape the arena was last sized for */
    int max_prompt_chunks;   /* 77-token chunks of the longest prompt (pre-flight) */
    inpaint_cond inpaint;    /* an inpainting UNet's extra input channels (train/inpaint_cond.h) */
    bool have_measured;
    size_t memory_estimate_bytes; /* prepare's estimate, for the run's peak-memory line */
    char memory_note[256];        /* what the peak-memory line adds (T5's output cached instead of its weights) */
    sdt_noise_schedule sched;     /* SD's; rescaled to zero terminal SNR when asked */
    size_t extra_bytes;           /* device memory the parts add to the plan (hook workspace, values) */

    /* text */
    sdt_tokenizer *tok;
    sdt_slot_rules rules;         /* placeholder_id -1 when no rows go into the prompt */
    const char *placeholder_file; /* the file of the part whose rows the placeholder takes (sentences) */
    char name[256];               /* the run's name: folders, the state, copies */
    char prompt_name[256];        /* what [name] in the template becomes (the embedding's name when one trains) */
    sdt_template tmpl;
    /* SD3.5, Flux.1 (rectified flow, train/flow_step.h): T5's tokenizer with the placeholder in it, T5's sequence, the
     * objective; flow false for the UNet families */
    bool flow;
    sdt_spm *t5_tok;
    sdt_t5_slot_rules t5_rules;
    int t5_len;
    sdt_flow_objective flow_objective;
    float flow_guidance; /* Flux.1 dev: the distilled guidance the transformer embeds (options' guidance or 3.5) */

    /* what the pass trains */
    const sdt_tensor
        *rows;          /* an embedding's rows spliced into the prompt (NULL: none); SDXL: clip_l | clip_g per row */
    sdt_tensor *drows;  /* their gradient; NULL: the text encoder runs without backward */
    uint32_t tables;    /* SD3.5/Flux.1: the tables of the table-major rows that train (SDT_ENCODER_* bits) */
    sdt_tensor t5_rows; /* SD3.5: the view of rows' t5xxl table (sdt_train_job_t5) */
    const sdt_unet_kv_hook *hook; /* a hypernetwork on the UNet's K/V inputs (NULL: none) */

    /* the method's parts and the numerics */
    sdt_train_part parts[SDT_JOB_MAX_PARTS];
    int n_parts;
    sdt_step_engine engine;

    /* progress */
    int64_t step, initial_step, end_step;
    char last_prompt[1024];
    const char *batch_files[SDT_JOB_MAX_BATCH_FILES];
    int n_batch_files;
    const char *bad_input_files[SDT_JOB_MAX_BATCH_FILES]; /* samples of this step whose latents are not finite */
    int n_bad_input_files;
    int step_prompts_dropped; /* samples of the step in progress that caption drop-out emptied */
    int64_t skipped_before;   /* engine.skipped before this step: metrics' "skipped" */
    double last_state_at;     /* monotonic seconds of the last state written (or of prepare) */

    /* the resume state and the files */
    char *resume_path; /* the state --resume resolved to (a file, or the newest that pairs in a folder) */
    char checkpoint_hash[16];
    char checkpoint_name[256];
    char saved_note[SDT_ERROR_MESSAGE_MAX / 2 + 32]; /* what the last final save wrote (run_loop.h's saved_note) */
};

/* ---- building a job (the method's prepare calls these in order) ---- */

/* The shared options into a new job, read once (job->opt: train/options_copy.h); run_kind
 * "embedding"/"hypernetwork". Nothing later reads the host's struct or writes into it: the o that
 * load_data and finish take is the same options, kept in their signatures for the methods. */
sdt_train_job *sdt_train_job_new(const sdt_train_options *o, const char *run_kind, const sdt_output_layout *layout,
                                 const sdt_host_callbacks *host, const sdt_run_control *control, sdt_error *error);
/* How the job's sentences name an option only sdt_train_options has, as the host's struct does:
 * "options->" (the trainer factory), "config.train_options->" (the default: the method factories). A
 * string literal. */
void sdt_train_job_name_options(sdt_train_job *job, const char *prefix);
/* Template and caption rules and the preview prompts file (the checks that need no model);
 * template_for_embedding: every line must hold [name] (an embedding gets no gradient from a line
 * without it). */
bool sdt_train_job_check_template(sdt_train_job *job, bool template_for_embedding, sdt_error *error);
/* A part (the job owns self from here on, and frees it with ops->destroy). */
sdt_train_part *sdt_train_job_add_part(sdt_train_job *job, const sdt_train_part_ops *ops, void *self, const char *what,
                                       const char *option, const char *state_prefix, const char *input_path,
                                       const char *output_path, sdt_error *error);
/* Every part's output lock (<output>.lock, <also_locks>.lock, <average_path>.lock and the files'
 * inodes, so a hard link is covered), right after the cheap checks, so a second run on any file
 * this run will write is refused at once. */
bool sdt_train_job_lock_parts(sdt_train_job *job, sdt_error *error);
/* The learning-rate and clip schedule strings parse (checked before the model; the groups parse
 * them again at their step). */
/* The options of a training pass: CLIP skip, checkpointing, anomaly mode, the loss type. */
sdt_pass_options sdt_train_job_pass_options(const sdt_train_job *job);
bool sdt_train_job_check_schedule(sdt_train_job *job, const sdt_schedule_texts *texts, sdt_error *error);
/* --resume given: resolved and checked as far as possible without a model (call again after load_model). */
bool sdt_train_job_resolve_resume(sdt_train_job *job, const char *given, sdt_error *error);
/* The hashes the resolved --resume state records for part p: of the values it was saved with and of
 * the file its run started from ("" each when there is no such state or record). */
void sdt_train_job_resume_hashes(const sdt_train_job *job, const sdt_train_part *p, char saved[65], char started[65]);
/* Backend, checkpoint (precision, prediction type, hash) and tokenizer. */
bool sdt_train_job_load_model(sdt_train_job *job, uint32_t device, uint32_t cpu_threads, sdt_error *error);
/* Listing the dataset, the prompts against the token window, the output folder and its lock,
 * the images and their latents, the batches. */
bool sdt_train_job_load_data(sdt_train_job *job, const sdt_train_options *o, sdt_error *error);
/* A part's parameter group (after the part's parameters are on the backend); the part's start
 * hash is taken from the optimizer's values. */
bool sdt_train_job_add_group(sdt_train_job *job, sdt_train_part *p, const sdt_param_group *g, sdt_error *error);
/* Schedules, scaler, fallback, the memory plan, the settings file, and a resume state: the job
 * is ready to run. info filled (the method adds its own fields). */
bool sdt_train_job_finish(sdt_train_job *job, const sdt_train_options *o, sdt_prepare_info *info, sdt_error *error);
void sdt_train_job_destroy(sdt_train_job *job);

/* Validation (train_job_validate.c over train/validation.h): the images (a folder, or held out of
 * the dataset before the batches are planned), measuring every validate_every steps, the best
 * step's copy. */
bool sdt_train_job_load_validation(sdt_train_job *job, sdt_error *error);
bool sdt_train_job_validate_if_due(sdt_train_job *job, sdt_error *error);
/* The mean loss over every validation image and fixed timestep, at fixed noise; no state changes. */
bool sdt_train_job_validation_loss(sdt_train_job *job, double *loss, sdt_error *error);
/* The arena sized for a pass of this shape (train_job_step.c). */
bool sdt_train_job_ensure_arena(sdt_train_job *job, const sdt_pass_shape *shape, const sdt_pass_options *po,
                                sdt_error *error);

/* ---- what the run loop drives ---- */
const sdt_job_ops *sdt_train_job_ops(void);
bool sdt_train_job_save_snapshot(void *job, int64_t step, sdt_error *error);
bool sdt_train_job_save_preview(void *job, int64_t step, sdt_error *error);
bool sdt_train_job_save_final(void *job, sdt_save_reason reason, sdt_error *error);
/* What the pass trains: the embedding's rows (both encoders' on SDXL) and the hypernetwork's hook. */
sdt_pass_trainables sdt_train_job_trainables(const sdt_train_job *job);
/* SD3.5: T5's side of the run for the T5 cache (train/run_t5_cache.h): its tokenizer and slots, the t5xxl table's
 * view (kept in job->t5_rows), and whether the table trains. */
sdt_run_t5 sdt_train_job_t5(sdt_train_job *job);
/* SDXL's size conditioning of one dataset image with its cached latent: (original h, w, crop top,
 * left, target h, w), the crop's left mirrored when the sample is flipped, as kohya does. */
sdt_sdxl_sizes sdt_train_job_sample_sizes(const sdt_train_job *job, const sdt_dataset_item *it, const latent_entry *e,
                                          bool flipped);
/* How the training and validation images are sized: the training size, varsize or buckets. */
void sdt_train_job_image_options(const sdt_train_job *job, sdt_dataset_options *o);
const char *sdt_train_job_saved_note(const void *job);
sdt_run_params sdt_train_job_run_params(const sdt_train_job *job);
bool sdt_train_job_save_state(sdt_train_job *job, const char *path, sdt_error *error);
bool sdt_train_job_load_state(sdt_train_job *job, const char *path, sdt_error *error);
/* The job's members of a method table (api/trainer_handle.h's sdt_train_method), for a method
 * whose prepare makes a sdt_train_job. */
void sdt_train_job_free(void *job);
sdt_run_params sdt_train_job_params(const void *job);
bool sdt_train_job_save_state_at(void *job, const char *path, sdt_error *error);
bool sdt_train_job_load_state_at(void *job, const char *path, sdt_error *error);
#define SDT_TRAIN_JOB_METHOD(prepare)                                                                                  \
    {                                                                                                                  \
        prepare, sdt_train_job_free, sdt_train_job_ops, sdt_train_job_params, sdt_train_job_save_state_at,             \
            sdt_train_job_load_state_at                                                                                \
    }

/* ---- for the parts and the job's own files ---- */
/* One dataset image through the VAE into the latent cache, in the runtime's current precision;
 * a failure keeps the encoder's status, its sentence naming the image. */
bool sdt_train_job_encode_item(sdt_train_job *job, int i, sdt_error *error);
/* Frozen weights upcast to f32, no loss scaling, non-finite latents encoded again. */
bool sdt_train_job_use_fp32(sdt_train_job *job, sdt_error *error);
/* After the switch to fp32: images whose latents were not finite are encoded again. */
bool sdt_train_job_reencode_nonfinite(sdt_train_job *job, sdt_error *error);
/* The state file's path and writing it (every part synced first). */
void sdt_train_job_state_path(const sdt_train_job *job, char *out, size_t size);
bool sdt_train_job_write_run_state(sdt_train_job *job, sdt_error *error);
bool sdt_train_job_sync_parts(sdt_train_job *job, sdt_error *error);
/* "fp32 from step N (...), learning rate xF" when the fallback fired, else "". */
void sdt_train_job_fallback_note(const sdt_train_job *job, char *note, size_t size);
sdt_dtype sdt_precision_dtype(sdt_precision p);
const char *sdt_precision_name(sdt_precision p);

#endif
