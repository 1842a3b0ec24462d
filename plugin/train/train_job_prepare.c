/* train_job_prepare.c - every check a training panel should make before any work, then
 * loading, for every method: template, the resume state's identity, backend, checkpoint,
 * tokenizer, the dataset's captions against the token window, the locks and the output folder,
 * then the expensive part: the dataset (with its latents), scaler and fallback, the memory the
 * passes need, the settings file. The method's prepare (ti/ti_job.c, hn/hn_job.c) adds its
 * parts between these phases. Each failure is one sentence naming the file or field and the
 * fix; interrupt() stops it between images. */
#include <dirent.h>
#include <libgen.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>

#include "host/host_log.h"
#include "c_numeric.h"
#include "atomic_file.h"
#include "testhooks/test_hooks.h"
#include "sd_text_rules.h"
#include "t5_prompt.h"
#include "train/tokenizer_open.h"
#include "train/sd_cond.h"
#include "train/flow_family_check.h"
#include "train/train_job.h"
#include "train/train_options.h"

static const char *file_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

void sdt_train_job_name_options(sdt_train_job *job, const char *prefix)
{
    job->options_field = prefix;
    job->val.field_prefix = prefix;
}

sdt_train_job *sdt_train_job_new(const sdt_train_options *c, const char *run_kind, const sdt_output_layout *layout,
                                 const sdt_host_callbacks *host, const sdt_run_control *control, sdt_error *error)
{
    sdt_train_job *job = calloc(1, sizeof(*job));
    if (!job) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory");
        return NULL;
    }
    job->host = host;
    job->control = control;
    job->run_kind = run_kind;
    job->outputs.layout = layout;
    if (!sdt_train_options_copy(&job->opt, c)) {
        free(job);
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory");
        return NULL;
    }
    c = &job->opt; /* read once: from here on the job's own copy, never the host's struct */
    /* who writes is known before the first lock */
    sdt_run_comm_init(&job->par, &job->opt);
    job->data.dir = c->dataset_dir;
    job->previews.prompt = c->preview_prompt;
    job->previews.negative = c->preview_negative_prompt;
    job->data.latent_sampling = c->latent_sampling;
    job->clip_skip = (int)c->clip_skip;
    job->previews.steps = c->preview_steps;
    job->data.width = c->width;
    job->data.height = c->height;
    job->previews.width = c->preview_width ? c->preview_width : c->width;
    job->previews.height = c->preview_height ? c->preview_height : c->height;
    job->previews.every = c->preview_every;
    job->outputs.write_csv_every = c->write_csv_every;
    job->previews.seed = c->preview_seed;
    job->previews.cfg = c->preview_cfg_scale;
    job->data.use_alpha = c->use_alpha_as_loss_weight;
    job->data.shuffle_tags = c->shuffle_tags;
    job->data.tag_dropout = c->tag_dropout;
    sdt_loss_options_from(&job->loss, c);
    job->lr_scheduler =
        (sdt_lr_scheduler_config){(sdt_lr_scheduler)c->lr_scheduler, c->warmup_steps, c->max_steps, c->lr_cycles};
    job->data.flip = c->flip;
    job->data.buckets = c->buckets;
    job->data.random_crop = c->random_crop;
    job->data.bucket_rules = sdt_train_options_bucket_rules(c);
    job->data.caption_dropout = c->caption_dropout;
    job->data.keep_tokens = c->keep_tokens;
    sdt_error ignored; /* sdt_train_options_check said why a sampler or seeds text is bad; here they are good */
    if (!sdt_sampler_parse(c->preview_sampler, "preview_sampler", &job->previews.sampler, &ignored))
        job->previews.sampler = SDT_SAMPLER_DDIM;
    if (!sdt_preview_seeds_parse(c->preview_seeds, "preview_seeds", &job->previews.seeds, &ignored))
        sdt_preview_seeds_parse(NULL, "preview_seeds", &job->previews.seeds, &ignored);
    job->previews.prompts_file = c->preview_prompts_file;
    job->previews.grid = job->previews.prompts_file || (c->preview_seeds && c->preview_seeds[0]);
    job->data.varsize = c->varsize;
    job->prediction = sdt_train_prediction_choice(c->prediction_type, c->v_prediction);
    job->precision = (sdt_precision)c->precision;
    job->data.caption_rules.word_regex = c->filename_word_regex;
    job->data.caption_rules.join_string = c->filename_join_string;
    job->rules.placeholder_id = -1; /* no embedding rows until a part puts them in */
    job->val.on = c->validation_dir || c->validation_split > 0;
    job->val.dir = c->validation_dir;
    job->val.split = c->validation_split;
    sdt_train_job_name_options(job, "config.train_options->");
    job->val.every = c->validate_every;
    job->val.patience = c->stop_after_no_improvement;
    job->ema.decay = c->ema_decay;
    job->ema.every = c->ema_every;
    job->ema.result = c->ema_result;
    job->ema.previews = c->ema_previews;
    job->outputs.write_metrics = c->write_metrics;
    job->outputs.csv_validation = job->val.on; /* the CSV's validation column */
    return job;
}

bool sdt_train_job_check_template(sdt_train_job *job, bool template_for_embedding, sdt_error *error)
{
    if (!job->opt.template_file)
        return sdt_fail(error, SDT_ERR_VALIDATION, "Prompt template file not selected: set the template file");
    if (!sdt_template_load(job->opt.template_file, &job->tmpl, error)) return false;
    if (template_for_embedding && !sdt_template_check_for_embedding(&job->tmpl, job->opt.template_file, error))
        return false;
    if (!sdt_run_previews_load(&job->previews, error)) return false;
    return sdt_caption_rules_check(&job->data.caption_rules, error);
}

/* The file a part writes: the one a symbolic link names (a save replaces a name by rename, which
 * would turn the link into a regular file and leave its target untrained), so the link is kept and
 * its target locked and written. A hard link cannot be kept that way: said in the log. */
static char *trained_file_path(const sdt_train_job *job, const char *what, const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0) return strdup(path);
    if (S_ISLNK(sb.st_mode)) {
        char *target = realpath(path, NULL);
        if (target) {
            sdt_host_log(job->host, SDT_LOG_INFO,
                         "%s is a symbolic link to %s: the trained %s is written there and the "
                         "link kept",
                         path, target, what);
            return target;
        }
    } else if (S_ISREG(sb.st_mode) && sb.st_nlink > 1) {
        sdt_host_log(job->host, SDT_LOG_WARNING,
                     "%s has %ju hard links: saving replaces this name with the trained %s, "
                     "and the other names keep the file as it is now (a symbolic link would follow it)",
                     path, (uintmax_t)sb.st_nlink, what);
    }
    return strdup(path);
}

sdt_train_part *sdt_train_job_add_part(sdt_train_job *job, const sdt_train_part_ops *ops, void *self, const char *what,
                                       const char *option, const char *state_prefix, const char *input_path,
                                       const char *output_path, sdt_error *error)
{
    if (job->n_parts >= SDT_JOB_MAX_PARTS) {
        sdt_fail(error, SDT_ERR_INTERNAL, "too many trained parts (a bug: please report)");
        return NULL;
    }
    sdt_train_part *p = &job->parts[job->n_parts++];
    p->ops = ops;
    p->self = self;
    p->what = what;
    p->option = option;
    p->state_prefix = state_prefix;
    p->group = -1;
    p->input_path = strdup(input_path);
    p->output_path = trained_file_path(job, what, output_path);
    bool average_beside = job->ema.decay > 0 && !job->ema.result && ops->save_as;
    if (p->output_path && average_beside) p->average_path = sdt_ema_path(p->output_path);
    if (!p->input_path || !p->output_path || (average_beside && !p->average_path)) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory");
        return NULL;
    }
    return p;
}

/* <file>.lock and, when inode, the file itself (a hard link to it is refused too). */
static bool lock_name(sdt_run_lock *lock, const char *file, bool inode, sdt_error *error)
{
    char lock_path[4200];
    snprintf(lock_path, sizeof lock_path, "%s.lock", file);
    return sdt_run_lock_take(lock, lock_path, file, error) && (!inode || sdt_run_lock_file(lock, file, error));
}

/* Every name the part writes: its file, the twin's name, the average's file (a run training that
 * file by its own name would otherwise have its result replaced by this run's average). */
static bool lock_part(sdt_train_part *p, sdt_error *error)
{
    return lock_name(&p->lock, p->output_path, true, error) &&
           (!p->also_locks || lock_name(&p->also_lock, p->also_locks, false, error)) &&
           (!p->average_path || lock_name(&p->average_lock, p->average_path, true, error));
}

static void unlock_part(sdt_train_part *p)
{
    sdt_run_lock_release(&p->lock);
    sdt_run_lock_release(&p->also_lock);
    sdt_run_lock_release(&p->average_lock);
}

/* Temp files that a killed save left beside the part's files (the result, the twin, the
 * average); the number removed. Only once the part's locks are this run's. */
static int remove_stale_beside_part(const sdt_train_part *p)
{
    return sdt_atomic_remove_stale(p->output_path) + (p->also_locks ? sdt_atomic_remove_stale(p->also_locks) : 0) +
           (p->average_path ? sdt_atomic_remove_stale(p->average_path) : 0);
}

bool sdt_train_job_lock_parts(sdt_train_job *job, sdt_error *error)
{
    if (!sdt_run_comm_writes(&job->par)) return true; /* rank 0 alone takes locks and writes */
    for (int i = 0; i < job->n_parts; i++)
        if (!lock_part(&job->parts[i], error)) return false;
    return true;
}

/* Temp files that a killed save left in the locked run folder and its sub-folders (the copies,
 * previews, cards, a joint run's embeddings/); the number removed. */
static int remove_stale_in_run_folder(const char *root)
{
    int stale = sdt_atomic_remove_stale_in(root);
    DIR *d = opendir(root);
    for (struct dirent *e; d && (e = readdir(d));) {
        char path[SDT_PATH_MAX + 256];
        struct stat sb;
        if (e->d_name[0] == '.' || snprintf(path, sizeof path, "%s/%s", root, e->d_name) >= (int)sizeof path) continue;
        if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) stale += sdt_atomic_remove_stale_in(path);
    }
    if (d) closedir(d);
    return stale;
}

static bool lock_run_folder(sdt_train_job *job, sdt_error *error)
{
    char lock_path[4200];
    snprintf(lock_path, sizeof lock_path, "%s/.sdtrain.lock", job->outputs.dirs.root);
    return sdt_run_lock_take(&job->outputs.log_lock, lock_path, job->outputs.dirs.root, error);
}

/* A run refused before it opened its outputs leaves what a killed run left: lock files no process
 * holds and temp files of an interrupted save, beside the parts' files and in the run folder it
 * would have used. Both are provably stale once the locks are ours, so they go (the lock files
 * with the release); what another run holds is left. (A run that opened its outputs swept then.) */
static void sweep_after_refusal(sdt_train_job *job)
{
    if (!sdt_run_comm_writes(&job->par)) return;
    if (job->outputs.log_lock.fd_plus_one) return;
    int stale = 0;
    for (int i = 0; i < job->n_parts; i++) {
        sdt_train_part *p = &job->parts[i];
        unlock_part(p); /* the run ends here: whichever of its locks it took, all are taken afresh */
        sdt_error busy;
        if (lock_part(p, &busy)) stale += remove_stale_beside_part(p); /* else another run's, or not writable */
        unlock_part(p);
    }
    sdt_error ignored;
    struct stat sb;
    if (job->opt.log_dir && job->name[0] &&
        sdt_outputs_paths(job->opt.log_dir, job->name, time(NULL), job->outputs.layout, &job->outputs.dirs, &ignored) &&
        stat(job->outputs.dirs.root, &sb) == 0 && S_ISDIR(sb.st_mode) && lock_run_folder(job, &ignored)) {
        stale += remove_stale_in_run_folder(job->outputs.dirs.root);
        sdt_run_lock_release(&job->outputs.log_lock);
    }
    if (stale)
        sdt_host_log(job->host, SDT_LOG_INFO,
                     "removed %d temp file(s) that an interrupted save of an earlier run left behind "
                     "(*.tmp-XXXXXX)",
                     stale);
}

/* The step the schedules are parsed from before a state is read. A file already at max steps gets
 * this far only to resume a state, which may hold nothing left to train (killed between its final
 * state and its files; the state's step then decides): its schedules are checked from the start. */
static int64_t schedule_check_step(const sdt_train_job *job)
{
    return job->step < job->opt.max_steps ? job->step : 0;
}

bool sdt_train_job_check_schedule(sdt_train_job *job, const sdt_schedule_texts *texts, sdt_error *error)
{
    int64_t from = schedule_check_step(job);
    sdt_lr_schedule s = {0};
    bool ok = sdt_lr_schedule_parse(texts->lr, texts->lr_field, from, job->opt.max_steps, &s, error);
    sdt_lr_schedule_free(&s);
    if (ok && texts->clip_mode != SDT_CLIP_DISABLED) {
        ok = sdt_lr_schedule_parse(texts->clip, texts->clip_field, from, job->opt.max_steps, &s, error);
        sdt_lr_schedule_free(&s);
    }
    return ok;
}

/* What SDXL changes in the settings, each said in the log; before the weights are placed, so an fp16
 * run's bf16 is the one copy made. */
static void sdxl_settings(sdt_train_job *job)
{
    if (job->clip_skip > 1)
        sdt_host_log(job->host, SDT_LOG_INFO,
                     "CLIP skip %d is not used on SDXL: both text encoders give their penultimate "
                     "layer, as SDXL was trained (A1111 does the same)",
                     job->clip_skip);
    if (job->precision != SDT_PRECISION_FP16) return;
    if (job->rt.cfg.vae.fp16_safe) {
        sdt_host_log(job->host, SDT_LOG_INFO,
                     "training in fp16 as asked: the VAE's config says force_upcast false (the "
                     "fp16-fix VAE, which stays within fp16's range)");
        return;
    }
    if (!job->pb.be->native_bf16 || sdt_test_hook_no_bf16()) {
        sdt_host_log(
            job->host, SDT_LOG_INFO,
            "SDXL's VAE overflows in fp16 (its activations exceed 65504) and this GPU has no "
            "bf16: the VAE encodes and decodes in fp32, the rest trains in fp16 (a VAE whose diffusers config says "
            "force_upcast false, such as the fp16-fix VAE, stays in fp16)");
        job->vae_fp32 = true;
        return;
    }
    sdt_host_log(job->host, SDT_LOG_INFO,
                 "training in bf16 instead of fp16: SDXL's VAE overflows in fp16 (its activations "
                 "exceed 65504), and this GPU computes bf16 natively, with fp32's range and no loss scaling needed");
    job->precision = SDT_PRECISION_BF16;
}

/* SD3.5's MMDiT and Flux's transformer overflow fp16 at full size (activations past 65504; kohya, OneTrainer and
 * diffusers train them in bf16): an fp16 run trains in bf16 where the backend has it, else keeps fp16 weights with
 * the transformer's activations in f32. Said in the log; before the weights are placed, as sdxl_settings. */
static void flow_precision(sdt_train_job *job)
{
    if (job->precision != SDT_PRECISION_FP16) return;
    const char *family = sd_family_title(job->rt.cfg.family);
    if (!job->pb.be->native_bf16 || sdt_test_hook_no_bf16()) {
        sdt_host_log(job->host, SDT_LOG_INFO,
                     "%s's transformer overflows in fp16 (its activations exceed 65504) and this GPU has no bf16: "
                     "the weights stay in fp16 and the transformer computes its activations in fp32 (more memory "
                     "and time than bf16 would take)",
                     family);
        job->transformer_f32 = true;
        return;
    }
    sdt_host_log(job->host, SDT_LOG_INFO,
                 "training in bf16 instead of fp16: %s's transformer overflows in fp16 (its activations exceed "
                 "65504; kohya, OneTrainer and diffusers train it in bf16), and this device computes bf16 "
                 "natively, with fp32's range and no loss scaling needed",
                 family);
    job->precision = SDT_PRECISION_BF16;
}

/* Whether a hypernetwork part trains in this job. */
static bool has_hypernetwork(const sdt_train_job *job)
{
    for (int p = 0; p < job->n_parts; p++)
        if (!strcmp(job->parts[p].what, "hypernetwork")) return true;
    return false;
}

/* SD3.5 and Flux.1 (rectified-flow transformers): the objective from the options over the family's defaults, T5's
 * sequence (SD3.5's and Flux schnell's pipelines 256, Flux dev's 512) and tokenizer (the embedding's name is added to
 * it by ti_part_bind_model), Flux dev's guidance (FluxPipeline's 3.5 by default); guidance on a model without a
 * guidance embedder (schnell, SD3.5) is refused by name. */
static bool flow_setup(sdt_train_job *job, sdt_error *error)
{
    job->flow = true;
    const sd_config *c = &job->rt.cfg;
    bool flux = sd_config_is_flux(c), dev = flux && c->flux.guidance;
    if (job->opt.guidance != 0.0 && !dev)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%sguidance is %g, but %s (%s) has no guidance embedder (%s): leave %sguidance at 0",
                        job->options_field, job->opt.guidance, job->opt.model_path, sd_family_title(c->family),
                        flux ? "Flux.1 schnell is not guidance-distilled; only dev takes a guidance value"
                             : "SD3.5 takes classifier-free guidance at sampling, not as a model input",
                        job->options_field);
    job->flow_guidance = dev ? (job->opt.guidance != 0.0 ? (float)job->opt.guidance : 3.5f) : 0.0f;
    if (!sdt_flow_objective_from_options(&job->opt, flux, job->options_field, &job->flow_objective, error))
        return false;
    job->t5_len = job->opt.t5_max_length ? (int)job->opt.t5_max_length : dev ? 512 : 256;
    job->t5_tok =
        sdt_open_t5_tokenizer(job->opt.t5xxl_path, job->opt.model_path, job->rt.cfg.t5.vocab, job->host, error);
    job->t5_rules = (sdt_t5_slot_rules){.placeholder_id = -1, .n_vectors = 0, .slot_token = 0};
    return job->t5_tok != NULL;
}

/* Backend, checkpoint and tokenizer. */
bool sdt_train_job_load_model(sdt_train_job *job, uint32_t device, uint32_t cpu_threads, sdt_error *error)
{
    sdt_host_log(job->host, SDT_LOG_INFO, "loading the model %s", job->opt.model_path ? job->opt.model_path : "");
    int ordinal = job->opt.devices ? job->opt.devices[0] : 0; /* an in-process rank's own (run_comm.h) */
    if (!plugin_backend_open(&job->pb, device, ordinal, (int)cpu_threads, job->host, error) ||
        !sdt_run_comm_open(&job->par, &job->opt, &job->pb, job->options_field, error))
        return false;
    /* set by every job, as a backend could serve another; the CPU backend always is deterministic */
    job->pb.be->deterministic = job->opt.deterministic || job->pb.be->device == SDT_DEVICE_CPU;
    /* the steady-state UNet backward as a CUDA graph (train/step_capture.h); a backend without capture ignores it */
    job->wa.capture.enabled = job->opt.cuda_graph == SDT_CUDA_GRAPH_ON; /* AUTO: uncaptured until measured */
    if (job->precision == SDT_PRECISION_BF16 && (!job->pb.be->native_bf16 || sdt_test_hook_no_bf16())) {
        sdt_host_log(job->host, SDT_LOG_WARNING,
                     "this GPU has no bf16 arithmetic (compute capability below 8.0); "
                     "training in fp16 with loss scaling instead");
        job->precision = SDT_PRECISION_FP16;
    }
    if (!job->opt.model_path)
        return sdt_fail(error, SDT_ERR_VALIDATION, "no model selected: set the model path to an SD checkpoint");
    gint64 start = g_get_monotonic_time();
    const char *const part_paths[SD_PART_COUNT] = {NULL, job->opt.clip_l_path, job->opt.clip_g_path,
                                                   job->opt.t5xxl_path, job->opt.vae_path};
    if (!sd_runtime_read_parts(&job->rt, job->opt.model_path, part_paths, job->pb.be, true, error)) return false;
    bool transformer = sd_config_is_transformer(&job->rt.cfg);
    if (!sdt_flow_family_check(&job->opt, transformer, has_hypernetwork(job), job->opt.model_path,
                               sd_family_title(job->rt.cfg.family), job->options_field, error))
        return false;
    if (transformer && !flow_setup(job, error)) return false;
    /* 0 = the family's guidance: FluxPipeline (dev's guidance is distilled into the model) samples without a negative
     * pass, the other families with A1111's 7 */
    if (job->previews.cfg == 0.0) job->previews.cfg = sd_config_is_flux(&job->rt.cfg) ? 1.0 : 7.0;
    sd_text_rules text = sd_text_rules_of(&job->rt.cfg);
    if (text.sdxl) sdxl_settings(job);
    if (job->flow) flow_precision(job);
    job->clip_skip = sd_text_clip_skip(&text, job->clip_skip);
    if (!sd_runtime_place(&job->rt, sdt_precision_dtype(job->precision), job->prediction, error) ||
        (job->vae_fp32 && !sd_runtime_set_vae_dtype(&job->rt, SDT_F32, error)))
        return false;
    if (job->transformer_f32) job->rt.transformer_act_dtype = SDT_F32;
    char prediction[512];
    if (job->flow)
        sdt_flow_objective_describe(&job->flow_objective, prediction, sizeof prediction);
    else
        sd_runtime_prediction_sentence(&job->rt, prediction, sizeof prediction);
    sdt_host_log(job->host, SDT_LOG_INFO, "%s: %s", job->opt.model_path, prediction);
    if (!job->flow && /* the flow families' options were checked by sdt_flow_family_check */
        !sdt_loss_options_check_model(&job->loss, job->rt.cfg.unet.v_prediction, job->opt.model_path, prediction,
                                      job->options_field, error))
        return false;
    char hash[11], buf[4096];
    sdt_error no_hash; /* a model without a hash trains the same; only the metadata lacks it */
    double hash_s;
    if (sd_runtime_short_hash(&job->rt, hash, &hash_s, &no_hash))
        snprintf(job->checkpoint_hash, sizeof job->checkpoint_hash, "%s", hash);
    gint64 end = g_get_monotonic_time();
    const char *attention_backward =
        job->pb.be->device == SDT_DEVICE_CPU ? ""
        : job->pb.be->deterministic
            ? "; attention backward: deterministic kernels (every step bitwise reproducible)"
            : "; attention backward: cuDNN's fused kernels where they apply (faster, not bitwise "
              "reproducible; the deterministic option makes it so)";
    sdt_c_snprintf(buf, sizeof buf,
                   "loaded the model in %.1f s: opened %.1f s, checked for NaN/Inf %.1f s, placed on the %s "
                   "as %s %.1f s; hashed alongside %.1f s%s",
                   (double)(end - start) / 1e6, job->rt.open_s, job->rt.check_s,
                   job->pb.be->device == SDT_DEVICE_CPU ? "CPU" : "GPU", sdt_dtype_name(job->rt.dtype), job->rt.place_s,
                   hash_s, attention_backward);
    sdt_host_log(job->host, SDT_LOG_INFO, "%s", buf);
    snprintf(buf, sizeof buf, "%s", job->opt.model_path);
    snprintf(job->checkpoint_name, sizeof job->checkpoint_name, "%s", basename(buf));
    job->tok =
        sdt_open_tokenizer(job->opt.tokenizer_path, job->opt.model_path, job->rt.cfg.clip.vocab, job->host, error);
    if (!job->tok) return false;
    /* bigG's own padding is made from these tokens (train/sd_cond.h) */
    job->rules.pad_id = sd_text_pad_id(&text, sdt_tokenizer_eos(job->tok));
    return true;
}

/* Progress of a long phase of preparation, logged every few seconds, and the interrupt button:
 * false once interrupt() was called (err then says nothing was trained or saved). */
typedef struct prep_phase {
    sdt_train_job *job;
    const char *what;
    struct timespec last;
} prep_phase;

#define PREP_PROGRESS_EVERY_S 3

static bool phase_keep_going(void *user, int done, int total)
{
    prep_phase *p = user;
    if (p->job->control && sdt_run_control_interrupt_requested(p->job->control)) return false;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - p->last.tv_sec >= PREP_PROGRESS_EVERY_S && done < total) {
        sdt_host_log(p->job->host, SDT_LOG_INFO, "%s: %d of %d", p->what, done, total);
        p->last = now;
    }
    return true;
}

static prep_phase phase_begin(sdt_train_job *job, const char *what)
{
    prep_phase p = {job, what, {0, 0}};
    clock_gettime(CLOCK_MONOTONIC, &p.last);
    return p;
}

static bool interrupted(sdt_error *error)
{
    return sdt_fail(error, SDT_ERR_INTERRUPTED,
                    "preparation was interrupted; nothing was trained and no file was written for this run");
}

/* false (SDT_ERR_INTERRUPTED) once interrupt() was called during preparation. */
static bool still_wanted(const sdt_train_job *job, sdt_error *error)
{
    return !(job->control && sdt_run_control_interrupt_requested(job->control)) || interrupted(error);
}

static sdt_dataset_options dataset_options(sdt_train_job *job)
{
    sdt_dataset_options o = {0};
    o.folder = job->data.dir;
    sdt_train_job_image_options(job, &o);
    o.keep_going = phase_keep_going;
    return o;
}

/* The dataset's files, captions and sizes from their headers (nothing decoded): enough for
 * every check before the expensive work. The listing goes into job->data.ds until load_dataset. */
static bool list_dataset(sdt_train_job *job, sdt_error *error)
{
    if (!job->data.dir)
        return sdt_fail(error, SDT_ERR_VALIDATION, "Dataset directory is empty: set the dataset folder");
    int f = sd_runtime_image_divisor(&job->rt);
    if (job->data.width % (uint32_t)f || job->data.height % (uint32_t)f)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "width %u x height %u: this model needs sides that are multiples of %d; round them to "
                        "a multiple of %d",
                        job->data.width, job->data.height, f, f);
    if (!sdt_run_data_make_buckets(&job->data, f, vae_factor(&job->rt.cfg.vae), job->opt.model_path, job->options_field,
                                   error))
        return false;
    prep_phase phase = phase_begin(job, "listing the dataset");
    sdt_dataset_options o = dataset_options(job);
    o.probe_only = true;
    o.user = &phase;
    if (!sdt_dataset_load(&o, &job->data.ds, error)) {
        still_wanted(job, error); /* an interrupt says so instead of the loader's "interrupted" */
        return false;
    }
    for (int i = 0; i < job->data.ds.n_items; i++) {
        const sdt_dataset_item *it = &job->data.ds.items[i];
        if (job->data.varsize && (it->width % f || it->height % f))
            return sdt_fail(error, SDT_ERR_VALIDATION,
                            "%s: %dx%d is not a multiple of %d on both sides; resize it or turn off "
                            "\"do not resize\"",
                            it->path, it->width, it->height, f);
    }
    return true;
}

/* Images and their latents; pixels are dropped as soon as an image is encoded (kept only when
 * mixed precision gave non-finite latents that fp32 may fix). */
static bool load_dataset(sdt_train_job *job, sdt_error *error)
{
    sdt_dataset_free(&job->data.ds); /* the listing: decoded now */
    prep_phase phase = phase_begin(job, "decoding the dataset's images");
    sdt_dataset_options o = dataset_options(job);
    o.user = &phase;
    sdt_host_log(job->host, SDT_LOG_INFO, "reading the dataset %s", job->data.dir);
    if (!sdt_dataset_load(&o, &job->data.ds, error)) {
        still_wanted(job, error); /* an interrupt says so instead of the loader's "interrupted" */
        return false;
    }
    for (int i = 0; i < job->data.ds.n_warnings; i++)
        sdt_host_log(job->host, SDT_LOG_WARNING, "%s", job->data.ds.warnings[i]);
    if (!latent_cache_init(&job->data.lc, job->data.ds.n_items, (latent_method)job->data.latent_sampling,
                           job->rt.cfg.vae.scaling, job->opt.seed) ||
        (job->data.flip && !latent_cache_enable_flip(&job->data.lc)))
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory for the latent cache");
    latent_cache_set_shift(&job->data.lc, job->rt.cfg.vae.shift);
    const char *nan_pixel = sdt_test_hook_nan_pixel();
    int f = sd_runtime_image_divisor(&job->rt);
    phase = phase_begin(job, "encoding the dataset with the VAE");
    for (int i = 0; i < job->data.ds.n_items; i++) {
        if (!phase_keep_going(&phase, i, job->data.ds.n_items)) return interrupted(error);
        sdt_dataset_item *it = &job->data.ds.items[i];
        if (it->width % f || it->height % f)
            return sdt_fail(error, SDT_ERR_VALIDATION,
                            "%s: %dx%d is not a multiple of %d on both sides; resize it or turn off "
                            "\"do not resize\"",
                            it->path, it->width, it->height, f);
        if (nan_pixel && *nan_pixel && strcmp(file_name(it->path), nan_pixel) == 0) {
            it->pixels[0] = NAN; /* fault injection (tests only): what a broken decoder would hand over */
            sdt_host_log(job->host, SDT_LOG_WARNING, "%s: fault injection: one pixel set to NaN", it->path);
        }
        if (!sdt_train_job_encode_item(job, i, error)) return false;
        if (latent_cache_is_finite(&job->data.lc, i)) {
            sdt_dataset_drop_pixels(&job->data.ds, i);
        } else if (job->precision == SDT_PRECISION_FP32) {
            sdt_host_log(job->host, SDT_LOG_WARNING,
                         "%s: the VAE encodes this image to NaN/Inf latents; every step that "
                         "uses it will be skipped (remove or replace the file)",
                         it->path);
            sdt_dataset_drop_pixels(&job->data.ds, i);
        } else { /* the pixels stay: the fp32 fallback encodes them again */
            sdt_host_log(job->host, SDT_LOG_WARNING,
                         "%s: in %s the VAE encodes this image to NaN/Inf latents; the steps "
                         "that use it will be skipped until the fp32 fallback encodes it again",
                         it->path, sdt_precision_name(job->precision));
        }
    }
    sdt_host_log(job->host, SDT_LOG_INFO, "encoded %d training images with the VAE", job->data.ds.n_items);
    return true;
}

/* SD3.5's and Flux's T5 reads one sequence of t5_len tokens (t5_prompt.h): an occurrence of the placeholder past it
 * is cut whole, and its t5xxl rows would get no gradient (with every prompt so, the run ends on "every gradient is
 * exactly zero"), so the template line, the caption and t5_max_length are named here instead. */
static bool check_t5_prompt(const sdt_train_job *job, const char *prompt, int line, const char *image, int32_t *ids,
                            int *slots, sdt_error *error)
{
    sdt_t5_prompt_report rep;
    if (!sdt_t5_prompt_encode(job->t5_tok, &job->t5_rules, prompt, job->t5_len, ids, slots, slots + job->t5_len, &rep,
                              error))
        return false;
    if (rep.n_cut_slots == 0) return true;
    return sdt_fail(error, SDT_ERR_NO_GRADIENT,
                    "%s: with template line %d of %s, T5's prompt is %d tokens long, past T5's sequence of %d tokens "
                    "(%st5_max_length %d), which cuts the embedding '%s' out of it (%d tokens cut), so its t5xxl rows "
                    "would get no gradient; set a longer %st5_max_length (0 = the model's: 512 for Flux dev, 256 "
                    "otherwise) or use a shorter template, or put [name] before [filewords]",
                    image, line, job->opt.template_file, rep.n_prompt_tokens, job->t5_len, job->options_field,
                    job->t5_len, job->prompt_name, rep.n_cut_tokens, job->options_field);
}

/* No prompt may lose an embedding: each template line with each caption (all tags, the
 * longest it can be) must place every slot in one of its 75-token chunks (train/prompt.h), and in T5's sequence. */
static bool check_prompts(sdt_train_job *job, sdt_error *error)
{
    job->max_prompt_chunks = 1;
    int longest = 0;
    const char *emb_path = job->placeholder_file ? job->placeholder_file : "";
    /* T5's sequence matters to the t5xxl table only when it trains (job->tables 0: every table) */
    bool t5 = job->flow && job->t5_tok && job->t5_rules.placeholder_id >= 0 &&
              (job->tables == 0 || (job->tables & SDT_ENCODER_T5XXL));
    int32_t *t5_ids = t5 ? malloc((size_t)job->t5_len * sizeof *t5_ids) : NULL;
    int *t5_slots = t5 ? malloc((size_t)job->t5_len * 2 * sizeof *t5_slots) : NULL;
    if (t5 && (!t5_ids || !t5_slots)) {
        free(t5_ids);
        free(t5_slots);
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    bool ok = true;
    for (int i = 0; ok && i < job->data.ds.n_items; i++) {
        for (int l = 0; ok && l < job->tmpl.n_lines; l++) {
            if (!strstr(job->tmpl.lines[l], "[name]") && job->rules.placeholder_id >= 0) continue; /* no slot to lose */
            char *prompt = sdt_template_fill(job->tmpl.lines[l], job->prompt_name, job->data.ds.items[i].caption);
            if (t5) ok = check_t5_prompt(job, prompt, l + 1, job->data.ds.items[i].path, t5_ids, t5_slots, error);
            sdt_prompt_encoded e;
            sdt_prompt_encode(job->tok, &job->rules, prompt, &e);
            free(prompt);
            if (!ok) break;
            if (e.n_cut_slots > 0 && job->rules.n_vectors > SDT_PROMPT_CHUNK_BODY)
                ok = sdt_fail(
                    error, SDT_ERR_NO_GRADIENT,
                    "%s: the embedding '%s' has %d vectors, more than one %d-token chunk of the "
                    "prompt holds, so its vectors would be split across chunks; create an embedding with at most %d "
                    "vectors",
                    emb_path, job->prompt_name, job->rules.n_vectors, SDT_PROMPT_CHUNK_BODY, SDT_PROMPT_CHUNK_BODY);
            else if (e.n_cut_slots > 0)
                ok = sdt_fail(
                    error, SDT_ERR_NO_GRADIENT,
                    "%s: with template line %d of %s, the prompt is %d tokens long, past the %d "
                    "tokens (%d chunks of %d) sdtrain encodes, which pushes the embedding '%s' out (%d tokens cut), so it "
                    "would get no gradient; shorten the caption or put [name] before [filewords]",
                    job->data.ds.items[i].path, l + 1, job->opt.template_file, e.n_prompt_tokens,
                    SDT_PROMPT_MAX_CHUNKS * SDT_PROMPT_CHUNK_BODY, SDT_PROMPT_MAX_CHUNKS, SDT_PROMPT_CHUNK_BODY,
                    job->prompt_name, e.n_cut_tokens);
            if (e.n_chunks > job->max_prompt_chunks) job->max_prompt_chunks = e.n_chunks;
            if (e.n_prompt_tokens > longest) longest = e.n_prompt_tokens;
        }
    }
    free(t5_ids);
    free(t5_slots);
    if (!ok) return false;
    if (job->max_prompt_chunks > 1)
        sdt_host_log(job->host, SDT_LOG_INFO,
                     "the longest prompt is %d tokens: prompts are encoded in up to %d chunks of "
                     "%d tokens, as A1111 does, so the UNet sees all of every caption",
                     longest, job->max_prompt_chunks, SDT_PROMPT_CHUNK_BODY);
    return true;
}

/* The log folder and its lock, before the expensive work. Temp files that a killed save left in
 * the locked places (beside each part's files, in the run folder) go. */
static bool open_outputs(sdt_train_job *job, sdt_error *error)
{
    job->outputs.started_at = time(NULL);
    if (!sdt_run_comm_writes(&job->par)) return true; /* no folder, no lock: rank 0 writes */
    if (!sdt_outputs_prepare(job->opt.log_dir, job->name, job->outputs.started_at, job->outputs.layout,
                             &job->outputs.dirs, error) ||
        !lock_run_folder(job, error))
        return false;
    int stale = 0;
    for (int p = 0; p < job->n_parts; p++) {
        stale += remove_stale_beside_part(&job->parts[p]);
        if (job->parts[p].also_writes &&
            (!job->parts[p].also_locks || strcmp(job->parts[p].also_writes, job->parts[p].also_locks)))
            stale += sdt_atomic_remove_stale(job->parts[p].also_writes);
    }
    stale += remove_stale_in_run_folder(job->outputs.dirs.root);
    if (stale)
        sdt_host_log(job->host, SDT_LOG_INFO,
                     "removed %d temp file(s) that an interrupted save of an earlier run left "
                     "behind (*.tmp-XXXXXX)",
                     stale);
    return true;
}

/* The data order of the GLOBAL batch (every rank's batch together: the order one rank with that
 * batch walks); data.batch is then this rank's share of it (data/data_order.h's shard). */
static bool plan_batches(sdt_train_job *job, sdt_error *error)
{
    int world = job->par.world_size;
    if (!sdt_run_data_plan_batches(&job->data, job->opt.batch_size * (uint32_t)world, job->opt.grad_accum_steps,
                                   job->opt.seed, job->host, error))
        return false;
    const int *first = NULL, *shard;
    int count;
    if (job->data.order.batch_size % world != 0) /* the shard's sentence, with the numbers */
        return sdt_data_order_shard(&job->data.order, first, world, job->par.rank, &shard, &count, error);
    job->data.batch = job->data.order.batch_size / world;
    return true;
}

bool sdt_train_job_load_data(sdt_train_job *job, const sdt_train_options *o, sdt_error *error)
{
    (void)o; /* the options were read once, at sdt_train_job_new (job->opt) */
    /* the validation images before the batches: a split takes its images out of the dataset */
    return list_dataset(job, error) && check_prompts(job, error) && open_outputs(job, error) &&
           load_dataset(job, error) && sdt_train_job_load_validation(job, error) && plan_batches(job, error);
}

bool sdt_train_job_add_group(sdt_train_job *job, sdt_train_part *p, const sdt_param_group *g, sdt_error *error)
{
    if (!sdt_step_engine_add_group(&job->engine, g, error)) return false;
    p->group = job->engine.n_groups - 1;
    return true;
}

/* Sizes the training pass on a measuring arena and reserves it: the memory check, at the largest
 * latent of the dataset (its largest bucket, or image with varsize). */
static bool plan_memory(sdt_train_job *job, sdt_prepare_info *info, sdt_error *error)
{
    const latent_entry *e = &job->data.lc.items[0];
    for (int i = 1; i < job->data.lc.n; i++)
        if ((int64_t)job->data.lc.items[i].h * job->data.lc.items[i].w > (int64_t)e->h * e->w)
            e = &job->data.lc.items[i];
    sdt_pass_shape shape = {.batch = job->data.batch,
                            .c = e->c,
                            .h = e->h,
                            .w = e->w,
                            .chunks = job->max_prompt_chunks,
                            .in_c = e->c + inpaint_extra_channels(&job->rt),
                            .weighted = sdt_loss_options_weighted(&job->loss, job->data.use_alpha) ||
                                        (job->flow && job->flow_objective.weighting != SDT_FLOW_WEIGHT_NONE),
                            .t5_len = job->flow ? job->t5_len : 0};
    sdt_pass_options po = sdt_train_job_pass_options(job);
    sdt_pass_trainables tr = sdt_train_job_trainables(job);
    size_t bytes = 0;
    if (!sdt_pass_measure(&job->rt, &po, &shape, &tr, &bytes, error)) return false;
    /* The images are encoded: the VAE's arena and scratch (sized for its full-resolution convolutions) are
     * not the training pass's, which is reserved below and grows its own scratch. */
    work_arena_release(&job->wa);
    if (job->pb.be->release_scratch) job->pb.be->release_scratch(job->pb.be);
    size_t parked = sd_runtime_vae_park(&job->rt);
    if (parked)
        sdt_host_log(job->host, SDT_LOG_INFO,
                     "the VAE's weights (%zu MiB) leave the GPU while training: the images are encoded, "
                     "and a preview brings them back",
                     parked >> 20);
    size_t weights = 0;
    for (int p = -1; p < SD_PART_COUNT; p++) { /* the checkpoint's copy, then the parts given as files of their own */
        const sdt_weights *w = p < 0 ? job->rt.dev : job->rt.part_dev[p];
        for (size_t i = 0; w && i < sdt_weights_count(w); i++) {
            const sdt_tensor *t = sdt_weights_get(w, sdt_weights_key(w, i));
            if (t->data) weights += sdt_tensor_nbytes(t); /* a parked VAE (or cached T5) is not on the device */
        }
    }
    job->memory_note[0] = '\0';
    if (job->rt.t5_cache) /* the activations hold a batch's cached T5 rows; the weights no longer hold T5 */
        sdt_c_snprintf(
            job->memory_note, sizeof job->memory_note,
            "T5's output for the run's %d prompts is cached in host memory (%.1f MiB) in place of T5's "
            "weights (%.1f MiB) on the device.",
            job->t5_cache.n,
            (double)sdt_t5_cache_bytes(job->t5_cache.len, job->t5_cache.width, job->t5_cache.dtype, job->t5_cache.n) /
                1048576.0,
            (double)job->t5_cache.parked_bytes / 1048576.0);
    size_t extra =
        job->extra_bytes; /* the parts' own device memory (a hypernetwork's values, grads, moments, workspace) */
    info->memory_estimate_bytes = bytes + extra + (job->pb.be->device == SDT_DEVICE_CPU ? 0 : weights);
    job->memory_estimate_bytes = info->memory_estimate_bytes;
    if (job->pb.be->device != SDT_DEVICE_CPU)
        sdt_host_log(
            job->host, SDT_LOG_INFO,
            "GPU memory this run needs: about %zu MiB (%zu MiB of model weights, %zu MiB of "
            "activations at batch size %d and %dx%d latents, %zu MiB for the trained parts), plus the CUDA context%s%s",
            info->memory_estimate_bytes >> 20, weights >> 20, bytes >> 20, job->data.batch, e->w, e->h, extra >> 20,
            job->memory_note[0] ? "; " : "", job->memory_note);
    unsigned long long cap_mib = sdt_test_hook_memory_limit_mib();
    char extra_text[96] = "";
    if (extra)
        snprintf(extra_text, sizeof extra_text, ", %zu MiB for the trained modules and their workspace", extra >> 20);
    if (cap_mib > 0 && (unsigned long long)((bytes + weights + extra) >> 20) > cap_mib)
        return sdt_fail(
            error, SDT_ERR_OUT_OF_MEMORY,
            "training needs about %zu MiB (%zu MiB of activations at batch size %d and %dx%d "
            "latents, %zu MiB of model weights%s) but %s limits it to %llu MiB; lower the batch size or the resolution, "
            "enable gradient checkpointing, or raise the limit",
            (bytes + weights + extra) >> 20, bytes >> 20, job->data.batch, e->w, e->h, weights >> 20, extra_text,
            SDT_TEST_HOOK_MEMORY_LIMIT_NAME, cap_mib);
    sdt_error why;
    job->measured = shape;
    job->have_measured = true;
    if (!work_arena_reserve(&job->wa, job->pb.be, bytes, &why))
        return sdt_fail(
            error, SDT_ERR_OUT_OF_MEMORY,
            "training needs %zu MiB for activations at batch size %d and %dx%d latents, and the "
            "%s backend cannot provide it (%s); lower the batch size or the resolution, or enable gradient checkpointing",
            bytes >> 20, job->data.batch, e->w, e->h, job->pb.be->name, why.message);
    return true;
}

/* The loss, noise and scheduler options (1.5) that differ from their defaults, so a run with
 * A1111's settings writes A1111's file. */
static void add_loss_settings(const sdt_train_job *job, cJSON *s)
{
    const sdt_loss_options *l = &job->loss;
    if (l->type != SDT_LOSS_L2) cJSON_AddStringToObject(s, "loss_type", sdt_loss_type_name(l->type));
    if (l->type == SDT_LOSS_HUBER) cJSON_AddNumberToObject(s, "huber_delta", l->huber_delta);
    if (l->min_snr_gamma > 0) cJSON_AddNumberToObject(s, "min_snr_gamma", l->min_snr_gamma);
    if (l->noise_offset > 0) {
        cJSON_AddNumberToObject(s, "noise_offset", l->noise_offset);
        cJSON_AddBoolToObject(s, "noise_offset_random_strength", l->noise_offset_random);
    }
    if (l->timestep_min != 0 || l->timestep_max != SDT_DDPM_STEPS - 1) {
        cJSON_AddNumberToObject(s, "timestep_min", l->timestep_min);
        cJSON_AddNumberToObject(s, "timestep_max", l->timestep_max);
    }
    if (l->zero_terminal_snr) cJSON_AddBoolToObject(s, "zero_terminal_snr", true);
    const sdt_lr_scheduler_config *sc = &job->lr_scheduler;
    if (sc->kind != SDT_LR_SCHEDULER_CONSTANT || sc->warmup_steps > 0) {
        cJSON_AddStringToObject(s, "lr_scheduler", sdt_lr_scheduler_name(sc->kind));
        cJSON_AddNumberToObject(s, "warmup_steps", (double)sc->warmup_steps);
        if (sc->kind == SDT_LR_SCHEDULER_COSINE_WITH_RESTARTS) cJSON_AddNumberToObject(s, "lr_cycles", sc->cycles);
    }
}

static bool write_settings(sdt_train_job *job, const sdt_train_options *c, const char *learn_rate, sdt_error *error)
{
    time_t now = job->outputs.started_at;
    cJSON *s = cJSON_CreateObject();
    for (int p = 0; p < job->n_parts; p++)
        if (job->parts[p].ops->settings) job->parts[p].ops->settings(&job->parts[p], job, s);
    cJSON_AddStringToObject(s, "model_name", job->checkpoint_name);
    cJSON_AddStringToObject(s, "model_hash", job->checkpoint_hash);
    cJSON_AddStringToObject(s, "data_root", job->data.dir);
    cJSON_AddStringToObject(s, "template_file", job->opt.template_file);
    cJSON_AddStringToObject(s, "learn_rate", learn_rate);
    cJSON_AddNumberToObject(s, "batch_size", job->data.batch);
    cJSON_AddNumberToObject(s, "gradient_step", job->data.grad_accum);
    /* data parallelism: batch_size is per rank, the global batch world_size times it */
    if (job->par.world_size > 1) cJSON_AddNumberToObject(s, "world_size", job->par.world_size);
    cJSON_AddNumberToObject(s, "training_width", c->width);
    cJSON_AddNumberToObject(s, "training_height", c->height);
    cJSON_AddNumberToObject(s, "steps", (double)c->max_steps);
    cJSON_AddNumberToObject(s, "initial_step", (double)job->initial_step);
    cJSON_AddNumberToObject(s, "num_of_dataset_images", job->data.ds.n_items);
    cJSON_AddStringToObject(s, "precision", sdt_precision_name(job->precision));
    cJSON_AddStringToObject(s, "device", job->pb.be->name);
    cJSON_AddNumberToObject(s, "seed", (double)job->opt.seed);
    if (job->val.on) { /* 1.5's keys only when used: a run without them writes the settings it always did */
        if (job->val.dir)
            cJSON_AddStringToObject(s, "validation_dir", job->val.dir);
        else
            cJSON_AddNumberToObject(s, "validation_split", job->val.split);
        cJSON_AddNumberToObject(s, "validate_every", (double)job->val.every);
        cJSON_AddNumberToObject(s, "stop_after_no_improvement", job->val.patience);
        cJSON_AddNumberToObject(s, "num_of_validation_images", job->val.ds.n_items);
    }
    if (job->ema.decay > 0) {
        cJSON_AddNumberToObject(s, "ema_decay", job->ema.decay);
        cJSON_AddNumberToObject(s, "ema_every", (double)job->ema.every);
        cJSON_AddBoolToObject(s, "ema_result", job->ema.result);
        cJSON_AddBoolToObject(s, "ema_previews", job->ema.previews);
    }
    const char *lsm[] = {"once", "deterministic", "random"};
    cJSON_AddStringToObject(s, "latent_sampling_method", lsm[job->data.latent_sampling % 3]);
    const char *clip[] = {"disabled", "value", "norm"};
    cJSON_AddStringToObject(s, "clip_grad_mode", clip[c->clip_mode % 3]);
    cJSON_AddStringToObject(s, "clip_grad_value", c->clip_value ? c->clip_value : "");
    add_loss_settings(job, s);
    /* 1.5's data options, named only when on (A1111's settings file has no such keys) */
    if (job->opt.deterministic) cJSON_AddBoolToObject(s, "deterministic", true); /* 1.6, named only when on */
    if (job->opt.cuda_graph != SDT_CUDA_GRAPH_AUTO)                              /* 1.11, named only when set */
        cJSON_AddStringToObject(s, "cuda_graph", job->opt.cuda_graph == SDT_CUDA_GRAPH_ON ? "on" : "off");
    if (job->data.flip) cJSON_AddBoolToObject(s, "flip", true);
    if (job->data.caption_dropout > 0) cJSON_AddNumberToObject(s, "caption_dropout", job->data.caption_dropout);
    if (job->data.keep_tokens > 0) cJSON_AddNumberToObject(s, "keep_tokens", job->data.keep_tokens);
    if (job->data.buckets) {
        cJSON_AddBoolToObject(s, "buckets", true);
        cJSON_AddNumberToObject(s, "bucket_max_area", (double)job->data.bucket_rules.max_area);
        cJSON_AddNumberToObject(s, "bucket_min_side", job->data.bucket_rules.min_side);
        cJSON_AddNumberToObject(s, "bucket_max_side", job->data.bucket_rules.max_side);
        cJSON_AddNumberToObject(s, "bucket_step", job->data.bucket_rules.step);
        cJSON_AddBoolToObject(s, "random_crop", job->data.random_crop);
    }
    char path[4096];
    bool ok = sdt_settings_save(job->outputs.dirs.root, s, now, path, sizeof path, error);
    cJSON_Delete(s);
    if (!ok) return false;
    sdt_host_file_saved(job->host, SDT_FILE_SETTINGS, path, job->step);
    return true;
}

/* Every prompt the run will encode (train/run_text_cache.h), for the text cache and the T5 cache alike. */
static sdt_run_prompts run_prompts_of(sdt_train_job *job)
{
    return (sdt_run_prompts){job->tok,
                             &job->rules,
                             job->prompt_name,
                             &job->tmpl,
                             &job->data.ds,
                             job->val.on ? &job->val.ds : NULL,
                             job->previews.prompt,
                             sizeof job->last_prompt,
                             job->previews.negative,
                             &job->previews.prompts};
}

/* What makes a run's prompts change from step to step or carry trained rows (both caches' fall-backs). */
static sdt_run_text_needs run_text_needs_of(const sdt_train_job *job)
{
    return (sdt_run_text_needs){job->rows || job->rules.placeholder_id >= 0, job->data.shuffle_tags,
                                job->data.tag_dropout};
}

/* The text encoders kept, or every prompt of the run encoded once and the encoders' weights let go
 * of (train/run_text_cache.h): after the data and the parts, before the memory plan. */
static bool cache_text(sdt_train_job *job, sdt_error *error)
{
    sdt_run_prompts prompts = run_prompts_of(job);
    sdt_run_text_needs needs = run_text_needs_of(job);
    bool encoded = false;
    bool ok = sdt_run_text_cache(&job->text_cache, &prompts, &needs, &job->rt, &job->wa, job->clip_skip,
                                 job->opt.anomaly_mode, job->control, job->host, &encoded, error);
    if (encoded) job->have_measured = false; /* the encoders used the work arena */
    return ok;
}

/* SD3.5 and Flux.1: T5 kept, or its output for every prompt of the run computed once and its weights let go of
 * (train/run_t5_cache.h), when the embedding's t5xxl table does not train. */
static bool cache_t5(sdt_train_job *job, sdt_error *error)
{
    if (!job->flow || !job->t5_tok || job->rt.cfg.t5.d_model <= 0 || !sdt_cond_reads_t5_cache(&job->rt)) return true;
    sdt_run_prompts prompts = run_prompts_of(job);
    sdt_run_text_needs needs = run_text_needs_of(job);
    sdt_run_t5 t5 = sdt_train_job_t5(job);
    bool encoded = false;
    bool ok = sdt_run_t5_cache(&job->t5_cache, &prompts, &needs, &t5, &job->rt, &job->wa, job->control, job->host,
                               &encoded, error);
    if (encoded) job->have_measured = false; /* T5 used the work arena */
    return ok;
}

bool sdt_train_job_finish(sdt_train_job *job, const sdt_train_options *o, sdt_prepare_info *info, sdt_error *error)
{
    (void)o; /* the options were read once, at sdt_train_job_new (job->opt) */
    bool resume = job->resume_path != NULL;
    sdt_step_engine *e = &job->engine;
    e->hooks.user = job;
    e->comm = job->par.comm; /* NULL with one rank */
    if (!sdt_step_engine_parse_schedules(e, schedule_check_step(job), job->opt.max_steps, &job->end_step, error))
        return false;
    bool mixed = job->precision != SDT_PRECISION_FP32;
    if (!sdt_step_engine_setup(e, job->pb.be, job->precision == SDT_PRECISION_FP16, mixed, job->opt.loss_scale_init,
                               job->opt.lr_backoff, (int)job->opt.max_consecutive_nonfinite, error))
        return false;
    e->lr_scheduler = job->lr_scheduler;
    sdt_noise_schedule_init_sd(&job->sched);
    if (job->loss.zero_terminal_snr) sdt_noise_schedule_rescale_zero_terminal_snr(&job->sched);
    if (!cache_text(job, error) || !cache_t5(job, error)) {
        still_wanted(job, error); /* an interrupt says so instead of the encoder's "interrupted" */
        return false;
    }
    if (!still_wanted(job, error) || !plan_memory(job, info, error) || !still_wanted(job, error) ||
        (sdt_run_comm_writes(&job->par) && !write_settings(job, &job->opt, e->groups[0].lr_text, error)) ||
        !sdt_ema_start(&job->ema, &job->engine, job->pb.be, error) ||
        (resume && !sdt_train_job_load_state(job, job->resume_path, error)))
        return false;
    /* metrics.jsonl continues from this run's step: lines a resumed run will write again go */
    int dropped = 0;
    if (job->outputs.write_metrics && sdt_run_comm_writes(&job->par) &&
        !sdt_metrics_log_open(&job->outputs.metrics, job->outputs.dirs.root, job->step, &dropped, error))
        return false;
    if (dropped)
        sdt_host_log(job->host, SDT_LOG_INFO,
                     "%s/" SDT_METRICS_LOG_NAME ": %d line(s) past step %lld were dropped (written after the "
                     "state this run continues from, or by an earlier run), so no step is there twice",
                     job->outputs.dirs.root, dropped, (long long)job->step);
    job->last_state_at = sdt_run_clock(); /* the state's time interval counts from here */
    if (!sdt_run_comm_ready(&job->par, error)) return false;
    info->precision = job->precision;
    info->device = job->pb.be->device == SDT_DEVICE_CUDA ? SDT_DEVICE_CHOICE_CUDA : SDT_DEVICE_CHOICE_CPU;
    info->batch_size = (uint32_t)job->data.batch;
    info->grad_accum_steps = (uint32_t)job->data.grad_accum;
    info->dataset_images = job->data.ds.n_items;
    info->steps_per_epoch = job->data.steps_per_epoch;
    info->start_step = job->step;
    info->max_steps = job->end_step;
    return true;
}

void sdt_train_job_destroy(sdt_train_job *job)
{
    if (!job) return;
    sweep_after_refusal(job);
    sdt_run_lock_release(&job->outputs.log_lock);
    sdt_step_engine_free(&job->engine);
    for (int p = 0; p < job->n_parts; p++) {
        sdt_train_part *part = &job->parts[p];
        unlock_part(part);
        if (part->ops->destroy) part->ops->destroy(part);
        free(part->input_path);
        free(part->output_path);
        free(part->also_locks);
        free(part->average_path);
    }
    free(job->resume_path);
    sdt_validation_free(&job->val);
    sdt_ema_free(&job->ema);
    sdt_metrics_log_free(&job->outputs.metrics);
    work_arena_release(&job->wa);
    sd_runtime_close(&job->rt);
    sdt_run_comm_close(&job->par); /* before the backend whose stream NCCL's collectives use */
    plugin_backend_close(&job->pb);
    sdt_tokenizer_free(job->tok);
    if (job->t5_tok) sdt_spm_free(job->t5_tok);
    sdt_template_free(&job->tmpl);
    sdt_text_cache_free(&job->text_cache);
    sdt_t5_cache_free(&job->t5_cache);
    sdt_run_data_free(&job->data);
    inpaint_cond_free(&job->inpaint);
    sdt_train_options_release(&job->opt);
    sdt_run_previews_free(&job->previews);
    free(job);
}

void sdt_train_job_free(void *job)
{
    sdt_train_job_destroy(job);
}
sdt_run_params sdt_train_job_params(const void *job)
{
    return sdt_train_job_run_params(job);
}
bool sdt_train_job_save_state_at(void *job, const char *path, sdt_error *error)
{
    return sdt_train_job_save_state(job, path, error);
}
bool sdt_train_job_load_state_at(void *job, const char *path, sdt_error *error)
{
    return sdt_train_job_load_state(job, path, error);
}
