/* ti_job_prepare.c - every check a training panel should make before any work, then
 * loading: embedding and where the result goes, template, schedule, the resume state's
 * identity, backend, checkpoint, tokenizer, the dataset's captions against the token window,
 * the locks and the output folder, then the expensive part: the dataset (with its latents),
 * optimizer and scaler, the memory the passes need, the settings file. Each failure is one
 * sentence naming the file or field and the fix; interrupt() stops it between images. */
#include <cjson/cJSON.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/host_log.h"
#include "atomic_file.h"
#include "data/state_seal.h"
#include "safetensors.h"
#include "ti/ti_job.h"
#include "ti/ti_tokenizer_open.h"

static char *dup_or_null(const char *s) { return s && *s ? strdup(s) : NULL; }

sdt_dtype ti_precision_dtype(sdt_precision p)
{
    return p == SDT_PRECISION_FP16 ? SDT_F16 : p == SDT_PRECISION_BF16 ? SDT_BF16 : SDT_F32;
}

const char *ti_precision_name(sdt_precision p)
{
    return p == SDT_PRECISION_FP16 ? "fp16" : p == SDT_PRECISION_BF16 ? "bf16" : "fp32";
}

static const char *file_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static void copy_settings(ti_job *job, const sdt_ti_config *c)
{
    job->model_path = dup_or_null(c->model_path);
    job->embedding_path = dup_or_null(c->embedding_path);
    job->dataset_dir = dup_or_null(c->dataset_dir);
    job->template_path = dup_or_null(c->template_file);
    job->tokenizer_dir = dup_or_null(c->tokenizer_path);
    job->preview_prompt = dup_or_null(c->preview_prompt);
    job->preview_negative = strdup(c->preview_negative_prompt ? c->preview_negative_prompt : "");
    job->learn_rate_text = dup_or_null(c->learn_rate);
    job->clip_value_text = dup_or_null(c->clip_value);
    job->max_steps = c->max_steps;
    job->clip_mode = c->clip_mode;
    job->latent_sampling = c->latent_sampling;
    job->preview_steps = c->preview_steps;
    job->preview_width = c->preview_width ? c->preview_width : c->width;
    job->preview_height = c->preview_height ? c->preview_height : c->height;
    job->clip_skip = (int)c->clip_skip;
    job->save_every = c->save_every;
    job->preview_every = c->preview_every;
    job->write_csv_every = c->write_csv_every;
    job->state_every_s = c->save_state_every_seconds;
    job->preview_seed = c->preview_seed;
    job->preview_cfg = c->preview_cfg_scale;
    job->seed = c->seed;
    job->use_alpha = c->use_alpha_as_loss_weight;
    job->save_cards = c->save_image_with_embedding;
    job->shuffle_tags = c->shuffle_tags;
    job->tag_dropout = c->tag_dropout;
    job->anomaly = c->anomaly_mode;
    job->checkpointing = c->gradient_checkpointing;
    job->precision = (sdt_precision)c->precision;
}

/* The trained embedding goes to the file the user named; a card or another format we do not
 * write goes to <stem>.safetensors beside it, which must not be some other existing file. A
 * training state is not an embedding to train (its own file would be replaced). */
static bool choose_output(ti_job *job, sdt_embedding_format fmt, sdt_error *error)
{
    const char *path = job->embedding_path;
    if (fmt == SDT_EMBEDDING_FORMAT_SAFETENSORS) {
        sdt_safetensors *st = sdt_st_open(path, error);
        bool is_state = st && sdt_st_metadata_get(st, "sdtrain_state") != NULL;
        sdt_st_close(st);
        if (is_state)
            return sdt_fail(error, SDT_ERR_VALIDATION, "%s is a training state, not an embedding; pass the embedding with --embedding "
                 "(embedding_path) and this file with --resume (resume_state_path)", path);
        job->output_path = strdup(path);
    } else {
        const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
        int stem = (int)(dot && (!slash || dot > slash) ? dot - path : (int)strlen(path));
        char out[4096];
        if (snprintf(out, sizeof out, "%.*s.safetensors", stem, path) >= (int)sizeof out)
            return sdt_fail(error, SDT_ERR_VALIDATION, "%s: the path is too long; move the embedding to a shorter path", path);
        if (access(out, F_OK) == 0)
            return sdt_fail(error, SDT_ERR_ALREADY_EXISTS, "%s: the trained embedding would be saved as %s, which already exists and is "
                 "not the file you named; train %s itself, or move it away first", path, out, out);
        job->output_path = strdup(out);
    }
    if (!job->output_path) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory");
    return true;
}

/* Embedding file, template, caption rules and schedules: the checks that need no model. */
static bool check_inputs(ti_job *job, const sdt_ti_config *c, sdt_error *error)
{
    sdt_embedding_format fmt;
    if (!sdt_embedding_load(job->embedding_path, &job->emb, &fmt, error)) return false;
    if (job->emb.load_note) sdt_host_log(job->host, SDT_LOG_WARNING, "%s", job->emb.load_note);
    if (!sdt_embedding_name_check(job->emb.name, error)) return false;
    if (!choose_output(job, fmt, error)) return false;
    if (fmt == SDT_EMBEDDING_FORMAT_A1111_PT || fmt == SDT_EMBEDDING_FORMAT_TORCH_CONCEPT)
        sdt_host_log(job->host, SDT_LOG_INFO, "%s is a PyTorch file: the trained embedding is written as %s "
                     "(safetensors, which A1111, Forge, ComfyUI and diffusers load) beside it; the .pt/.bin itself "
                     "is not changed", job->embedding_path, job->output_path);
    char folder[4096];
    snprintf(folder, sizeof folder, "%s", job->output_path);
    if (access(dirname(folder), W_OK) != 0) /* the trained embedding is saved there: find out now, not after training */
        return sdt_fail(error, SDT_ERR_IO, "%s: the embedding's folder is not writable, so the trained embedding could not be saved "
             "there; make the folder writable or copy the embedding into a writable folder", job->output_path);
    if (!sdt_embedding_is_finite(&job->emb))
        return sdt_fail(error, SDT_ERR_VALIDATION, "%s: the embedding holds NaN or infinite values; train from an earlier copy or "
             "create it again", job->embedding_path);
    if (job->emb.clip_l_dim)
        return sdt_fail(error, SDT_ERR_UNSUPPORTED, "%s: SDXL embeddings (clip_l + clip_g) cannot be trained yet; use an SD 1.x or "
             "2.x embedding", job->embedding_path);
    if (!job->template_path) return sdt_fail(error, SDT_ERR_VALIDATION, "Prompt template file not selected: set the template file");
    if (!sdt_template_load(job->template_path, &job->tmpl, error)) return false;
    if (!sdt_template_check_for_embedding(&job->tmpl, job->template_path, error)) return false;
    job->caption_rules.word_regex = c->filename_word_regex;
    job->caption_rules.join_string = c->filename_join_string;
    if (!sdt_caption_rules_check(&job->caption_rules, error)) return false;
    job->initial_step = job->step = job->emb.step;
    job->start_file_step = job->emb.step;
    sdt_vectors_sha256(job->emb.vectors, (size_t)job->emb.n_vectors * (size_t)job->emb.dim, job->start_file_sha256);
    if (c->max_steps <= job->emb.step)
        return sdt_fail(error, SDT_ERR_VALIDATION, "%s: the embedding has already been trained for %lld steps, which reaches max steps "
             "(%lld); raise max steps to train further", job->embedding_path, (long long)job->emb.step,
             (long long)c->max_steps);
    return ti_job_parse_schedules(job, error);
}

bool ti_job_parse_schedules(ti_job *job, sdt_error *error)
{
    sdt_lr_schedule_free(&job->lr);
    sdt_lr_schedule_free(&job->clip_value);
    if (!sdt_lr_schedule_parse(job->learn_rate_text, job->step, job->max_steps, &job->lr, error)) return false;
    if (job->clip_mode != SDT_CLIP_DISABLED &&
        !sdt_lr_schedule_parse(job->clip_value_text, job->step, job->max_steps, &job->clip_value, error))
        return false;
    job->end_step = sdt_lr_end_step(&job->lr);
    return true;
}

/* Backend, checkpoint and tokenizer; the embedding must fit the text encoder. */
static bool load_model(ti_job *job, const sdt_ti_config *c, sdt_error *error)
{
    if (!plugin_backend_open(&job->pb, c->device, (int)c->cpu_threads, job->host, error)) return false;
    if (job->precision == SDT_PRECISION_BF16 && !job->pb.be->native_bf16) {
        sdt_host_log(job->host, SDT_LOG_WARNING, "this GPU has no bf16 arithmetic (compute capability below 8.0); "
                     "training in fp16 with loss scaling instead");
        job->precision = SDT_PRECISION_FP16;
    }
    if (!job->model_path) return sdt_fail(error, SDT_ERR_VALIDATION, "no model selected: set the model path to an SD checkpoint");
    if (!sd_runtime_open(&job->rt, job->model_path, job->pb.be, ti_precision_dtype(job->precision), c->v_prediction, error))
        return false;
    if (job->rt.cfg.family == SD_FAMILY_SD2) job->clip_skip = 0; /* A1111 ignores CLIP skip on SD 2.x */
    sdt_host_log(job->host, SDT_LOG_INFO, "%s: the model predicts %s (%s)", job->model_path,
                 job->rt.cfg.unet.v_prediction ? "v" : "the noise (epsilon)",
                 c->v_prediction ? "v-prediction was asked for"
                 : job->rt.cfg.prediction_from_config ? "its scheduler/scheduler_config.json says so"
                                                      : "the default; set v-prediction for SD 2.x 768-v models");
    int width = job->rt.cfg.clip.width;
    if (job->emb.dim != width)
        return sdt_fail(error, SDT_ERR_VALIDATION, "%s: the embedding has %d values per vector but the model's text encoder is %d wide "
             "(%s); it was made for another model family, create a new one for this model", job->embedding_path,
             job->emb.dim, width, sd_family_name(job->rt.cfg.family));
    char hash[11];
    sdt_error no_hash; /* a model without a hash trains the same; only the metadata lacks it */
    if (sdt_weights_short_hash(job->rt.file, hash, &no_hash)) snprintf(job->checkpoint_hash, sizeof job->checkpoint_hash, "%s", hash);
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", job->model_path);
    snprintf(job->checkpoint_name, sizeof job->checkpoint_name, "%s", basename(buf));
    job->tok = ti_open_tokenizer(job->tokenizer_dir, job->model_path, job->rt.cfg.clip.vocab, job->host, error);
    if (!job->tok) return false;
    int32_t id;
    if (!sdt_tokenizer_add_token(job->tok, job->emb.name, -1, &id, error)) return false;
    job->rules.placeholder_id = id;
    job->rules.n_vectors = job->emb.n_vectors;
    job->rules.slot_token = 0;
    job->rules.pad_id = job->rt.cfg.family == SD_FAMILY_SD2 ? 0 : sdt_tokenizer_eos(job->tok);
    return true;
}

/* One image through the VAE into the latent cache, in the runtime's current precision;
 * a failure keeps the encoder's status, its sentence naming the image. */
static bool encode_item(ti_job *job, int i, sdt_error *error)
{
    sdt_dataset_item *it = &job->ds.items[i];
    if (!latent_cache_encode(&job->lc, i, &job->rt, &job->wa, it->pixels, it->width, it->height, it->loss_weight,
                             it->width / 8, it->height / 8, error))
        return sdt_error_wrap(error, "%s: encoding the image failed", it->path);
    return true;
}

bool ti_job_reencode_nonfinite(ti_job *job, sdt_error *error)
{
    for (int i = 0; i < job->ds.n_items; i++) {
        sdt_dataset_item *it = &job->ds.items[i];
        if (!it->pixels) continue;
        if (!encode_item(job, i, error)) return false;
        bool finite = latent_cache_is_finite(&job->lc, i);
        sdt_host_log(job->host, finite ? SDT_LOG_INFO : SDT_LOG_WARNING, finite ? "%s: encoded again in %s: its latents "
                     "are finite now" : "%s: even in %s the VAE encodes this image to NaN/Inf latents; every step that "
                     "uses it will be skipped (remove or replace the file)", it->path, ti_precision_name(job->precision));
        sdt_dataset_drop_pixels(&job->ds, i);
    }
    job->have_measured = false; /* the encoder used the work arena */
    return true;
}

/* Progress of a long phase of preparation, logged every few seconds, and the interrupt button:
 * false once interrupt() was called (err then says nothing was trained or saved). */
typedef struct prep_phase {
    ti_job *job;
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

static prep_phase phase_begin(ti_job *job, const char *what)
{
    prep_phase p = {job, what, {0, 0}};
    clock_gettime(CLOCK_MONOTONIC, &p.last);
    return p;
}

static bool interrupted(sdt_error *error)
{
    return sdt_fail(error, SDT_ERR_INTERRUPTED, "preparation was interrupted; nothing was trained and no file was written for this run");
}

/* false (SDT_ERR_INTERRUPTED) once interrupt() was called during preparation. */
static bool still_wanted(const ti_job *job, sdt_error *error)
{
    return !(job->control && sdt_run_control_interrupt_requested(job->control)) || interrupted(error);
}

static sdt_dataset_options dataset_options(ti_job *job, const sdt_ti_config *c)
{
    sdt_dataset_options o = {0};
    o.folder = job->dataset_dir;
    o.width = (int)c->width;
    o.height = (int)c->height;
    o.do_not_resize = c->varsize;
    o.alpha_as_loss_weight = c->use_alpha_as_loss_weight;
    o.caption = job->caption_rules;
    o.keep_going = phase_keep_going;
    return o;
}

/* The dataset's files, captions and sizes from their headers (nothing decoded): enough for
 * every check before the expensive work. The listing goes into job->ds until load_dataset. */
static bool list_dataset(ti_job *job, const sdt_ti_config *c, sdt_error *error)
{
    if (!job->dataset_dir) return sdt_fail(error, SDT_ERR_VALIDATION, "Dataset directory is empty: set the dataset folder");
    int f = vae_factor(&job->rt.cfg.vae) << (job->rt.cfg.unet.num_levels - 1);
    if (c->width % (uint32_t)f || c->height % (uint32_t)f)
        return sdt_fail(error, SDT_ERR_VALIDATION, "width %u x height %u: this model needs sides that are multiples of %d; round them to "
             "a multiple of %d", c->width, c->height, f, f);
    prep_phase phase = phase_begin(job, "listing the dataset");
    sdt_dataset_options o = dataset_options(job, c);
    o.probe_only = true;
    o.user = &phase;
    if (!sdt_dataset_load(&o, &job->ds, error)) {
        still_wanted(job, error); /* an interrupt says so instead of the loader's "interrupted" */
        return false;
    }
    for (int i = 0; i < job->ds.n_items; i++) {
        const sdt_dataset_item *it = &job->ds.items[i];
        if (c->varsize && (it->width % f || it->height % f))
            return sdt_fail(error, SDT_ERR_VALIDATION, "%s: %dx%d is not a multiple of %d on both sides; resize it or turn off "
                 "\"do not resize\"", it->path, it->width, it->height, f);
    }
    return true;
}

/* Images and their latents; pixels are dropped as soon as an image is encoded (kept only when
 * mixed precision gave non-finite latents that fp32 may fix). */
static bool load_dataset(ti_job *job, const sdt_ti_config *c, sdt_error *error)
{
    sdt_dataset_free(&job->ds); /* the listing: decoded now */
    prep_phase phase = phase_begin(job, "decoding the dataset's images");
    sdt_dataset_options o = dataset_options(job, c);
    o.user = &phase;
    sdt_host_log(job->host, SDT_LOG_INFO, "reading the dataset %s", job->dataset_dir);
    if (!sdt_dataset_load(&o, &job->ds, error)) {
        still_wanted(job, error); /* an interrupt says so instead of the loader's "interrupted" */
        return false;
    }
    for (int i = 0; i < job->ds.n_warnings; i++) sdt_host_log(job->host, SDT_LOG_WARNING, "%s", job->ds.warnings[i]);
    if (!latent_cache_init(&job->lc, job->ds.n_items, (latent_method)job->latent_sampling, job->rt.cfg.vae.scaling,
                           job->seed))
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory for the latent cache");
    const char *nan_pixel = sdt_test_hook_nan_pixel();
    int f = vae_factor(&job->rt.cfg.vae) << (job->rt.cfg.unet.num_levels - 1);
    phase = phase_begin(job, "encoding the dataset with the VAE");
    for (int i = 0; i < job->ds.n_items; i++) {
        if (!phase_keep_going(&phase, i, job->ds.n_items)) return interrupted(error);
        sdt_dataset_item *it = &job->ds.items[i];
        if (it->width % f || it->height % f)
            return sdt_fail(error, SDT_ERR_VALIDATION, "%s: %dx%d is not a multiple of %d on both sides; resize it or turn off "
                 "\"do not resize\"", it->path, it->width, it->height, f);
        if (nan_pixel && *nan_pixel && strcmp(file_name(it->path), nan_pixel) == 0) {
            it->pixels[0] = NAN; /* fault injection (tests only): what a broken decoder would hand over */
            sdt_host_log(job->host, SDT_LOG_WARNING, "%s: fault injection: one pixel set to NaN", it->path);
        }
        if (!encode_item(job, i, error)) return false;
        if (latent_cache_is_finite(&job->lc, i)) {
            sdt_dataset_drop_pixels(&job->ds, i);
        } else if (job->precision == SDT_PRECISION_FP32) {
            sdt_host_log(job->host, SDT_LOG_WARNING, "%s: the VAE encodes this image to NaN/Inf latents; every step that "
                         "uses it will be skipped (remove or replace the file)", it->path);
            sdt_dataset_drop_pixels(&job->ds, i);
        } else { /* the pixels stay: the fp32 fallback encodes them again */
            sdt_host_log(job->host, SDT_LOG_WARNING, "%s: in %s the VAE encodes this image to NaN/Inf latents; the steps "
                         "that use it will be skipped until the fp32 fallback encodes it again", it->path,
                         ti_precision_name(job->precision));
        }
    }
    sdt_host_log(job->host, SDT_LOG_INFO, "encoded %d training images with the VAE", job->ds.n_items);
    return true;
}

/* No prompt may lose the embedding: each template line with each caption (all tags, the
 * longest it can be) must place every slot in one of its 75-token chunks (ti_prompt.h). */
static bool check_prompts(ti_job *job, sdt_error *error)
{
    job->max_prompt_chunks = 1;
    int longest = 0;
    for (int i = 0; i < job->ds.n_items; i++) {
        for (int l = 0; l < job->tmpl.n_lines; l++) {
            if (!strstr(job->tmpl.lines[l], "[name]")) continue; /* no slot to lose: nothing to encode */
            char *prompt = sdt_template_fill(job->tmpl.lines[l], job->emb.name, job->ds.items[i].caption);
            ti_encoded e;
            ti_prompt_encode(job->tok, &job->rules, prompt, &e);
            free(prompt);
            if (e.n_cut_slots > 0 && job->emb.n_vectors > TI_CHUNK_BODY)
                return sdt_fail(error, SDT_ERR_NO_GRADIENT, "%s: the embedding '%s' has %d vectors, more than one %d-token chunk of the "
                     "prompt holds, so its vectors would be split across chunks; create an embedding with at most %d "
                     "vectors", job->embedding_path, job->emb.name, job->emb.n_vectors, TI_CHUNK_BODY, TI_CHUNK_BODY);
            if (e.n_cut_slots > 0)
                return sdt_fail(error, SDT_ERR_NO_GRADIENT, "%s: with template line %d of %s, the prompt is %d tokens long, past the %d "
                     "tokens (%d chunks of %d) sdtrain encodes, which pushes the embedding '%s' out (%d tokens cut), so it "
                     "would get no gradient; shorten the caption or put [name] before [filewords]", job->ds.items[i].path,
                     l + 1, job->template_path, e.n_prompt_tokens, TI_MAX_CHUNKS * TI_CHUNK_BODY, TI_MAX_CHUNKS,
                     TI_CHUNK_BODY, job->emb.name, e.n_cut_tokens);
            if (e.n_chunks > job->max_prompt_chunks) job->max_prompt_chunks = e.n_chunks;
            if (e.n_prompt_tokens > longest) longest = e.n_prompt_tokens;
        }
    }
    if (job->max_prompt_chunks > 1)
        sdt_host_log(job->host, SDT_LOG_INFO, "the longest prompt is %d tokens: prompts are encoded in up to %d chunks of "
                     "%d tokens, as A1111 does, so the UNet sees all of every caption", longest, job->max_prompt_chunks,
                     TI_CHUNK_BODY);
    return true;
}

/* The data order (which may lower the batch size), gradient accumulation capped at what the
 * dataset holds, and the steps of one epoch. */
static bool plan_batches(ti_job *job, const sdt_ti_config *c, sdt_error *error)
{
    if (!sdt_data_order_init(&job->order, &job->ds, (int)c->batch_size, job->seed, error)) return false;
    job->batch = job->order.batch_size;
    int max_ga = job->ds.n_items / job->batch;
    job->grad_accum = (int)c->grad_accum_steps < max_ga ? (int)c->grad_accum_steps : max_ga;
    if (job->grad_accum < 1) job->grad_accum = 1;
    job->steps_per_epoch = job->ds.n_items / job->batch / job->grad_accum;
    if (job->steps_per_epoch < 1) job->steps_per_epoch = 1;
    return true;
}

/* The embedding on the device, AdamW over it, the loss scaler for fp16, the fallback. */
static bool setup_optimizer(ti_job *job, const sdt_ti_config *c, sdt_error *error)
{
    sdt_backend *be = job->pb.be;
    int64_t shape[2] = {job->emb.n_vectors, job->emb.dim};
    job->param = sdt_tensor_make(NULL, SDT_F32, be->device, 2, shape);
    job->grad = sdt_tensor_make(NULL, SDT_F32, be->device, 2, shape);
    size_t bytes = sdt_tensor_nbytes(&job->param);
    job->param.data = be->alloc(be, bytes);
    job->grad.data = be->alloc(be, bytes);
    if (!job->param.data || !job->grad.data || be->upload(be, job->param.data, job->emb.vectors, bytes) ||
        be->zero(be, &job->grad))
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "cannot place the embedding on the %s backend: %s", be->name, be->error);
    sdt_adamw_hparams hp = sdt_adamw_hparams_textual_inversion((float)sdt_lr_at(&job->lr, job->step));
    job->opt = sdt_optimizer_create(be, job->emb.name, &hp, error);
    if (!job->opt) return false;
    sdt_core_status cs = sdt_optimizer_add_param(job->opt, "emb_params", &job->param, &job->grad, true, error);
    if (cs == SDT_CORE_OK) cs = sdt_optimizer_prepare(job->opt, error);
    if (cs != SDT_CORE_OK) return false;
    if (job->precision == SDT_PRECISION_FP16) {
        sdt_scaler_config sc = sdt_scaler_config_default();
        sc.enabled = true;
        sc.init_scale = (float)c->loss_scale_init;
        sc.min_scale = 1.0f; /* below 1, fp16 cannot hold these gradients: the fallback takes over */
        job->scaler = sdt_scaler_create(be, &sc, NULL, NULL, error);
        if (!job->scaler) return false;
        cs = sdt_scaler_attach(job->scaler, job->opt, error);
        if (cs == SDT_CORE_OK) cs = sdt_scaler_prepare(job->scaler, error);
        if (cs != SDT_CORE_OK) return false;
    }
    sdt_fallback_config fc = sdt_fallback_config_default(job->precision != SDT_PRECISION_FP32);
    fc.lr_backoff = c->lr_backoff;
    fc.max_consecutive = (int)c->max_consecutive_nonfinite;
    if (sdt_fallback_init(&job->fallback, &fc, error) != SDT_CORE_OK) return false;
    sdt_diagnosis_init(&job->diagnosis);
    sdt_noise_schedule_init_sd(&job->sched);
    job->token_norm = ti_job_token_norm(job);
    job->undo = malloc(3 * bytes);
    if (!job->undo) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory for the embedding's undo copy");
    return true;
}

/* Sizes the training pass on a measuring arena and reserves it: the memory check. */
static bool plan_memory(ti_job *job, sdt_prepare_info *info, sdt_error *error)
{
    const latent_entry *e = &job->lc.items[0];
    ti_pass_shape shape = {.batch = job->batch, .c = e->c, .h = e->h, .w = e->w, .chunks = job->max_prompt_chunks,
                           .in_c = e->c + inpaint_extra_channels(&job->rt), .weighted = job->use_alpha};
    ti_pass_options po = ti_job_pass_options(job);
    size_t bytes = 0;
    if (!ti_pass_measure(&job->rt, &po, &shape, &job->param, &job->grad, &bytes, error)) return false;
    size_t weights = 0;
    for (size_t i = 0; i < sdt_weights_count(job->rt.dev); i++)
        weights += sdt_tensor_nbytes(sdt_weights_get(job->rt.dev, sdt_weights_key(job->rt.dev, i)));
    info->memory_estimate_bytes = bytes + (job->pb.be->device == SDT_DEVICE_CPU ? 0 : weights);
    job->memory_estimate_bytes = info->memory_estimate_bytes;
    unsigned long long cap_mib = sdt_test_hook_memory_limit_mib();
    if (cap_mib > 0 && (unsigned long long)((bytes + weights) >> 20) > cap_mib)
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "training needs about %zu MiB (%zu MiB of activations at batch size %d and %dx%d "
             "latents, %zu MiB of model weights) but %s limits it to %llu MiB; lower the batch size or the resolution, "
             "enable gradient checkpointing, or raise the limit", (bytes + weights) >> 20, bytes >> 20, job->batch, e->w,
             e->h, weights >> 20, SDT_TEST_HOOK_MEMORY_LIMIT_NAME, cap_mib);
    sdt_error why;
    job->measured = shape;
    job->have_measured = true;
    if (!work_arena_reserve(&job->wa, job->pb.be, bytes, &why))
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "training needs %zu MiB for activations at batch size %d and %dx%d latents, and the "
             "%s backend cannot provide it (%s); lower the batch size or the resolution, or enable gradient checkpointing",
             bytes >> 20, job->batch, e->w, e->h, job->pb.be->name, why.message);
    return true;
}

/* The output embedding's lock, taken right after the cheap checks, so a second run on the same
 * file is refused at once. */
static bool lock_output(ti_job *job, sdt_error *error)
{
    char lock_path[4200];
    snprintf(lock_path, sizeof lock_path, "%s.lock", job->output_path);
    return sdt_run_lock_take(&job->output_lock, lock_path, job->output_path, error);
}

/* The log folder and its lock, before the expensive work. Temp files that a killed save left in
 * the locked places go. */
static bool open_outputs(ti_job *job, const sdt_ti_config *c, sdt_error *error)
{
    char lock_path[4200];
    job->started_at = time(NULL);
    if (!sdt_outputs_prepare(c->log_dir, job->emb.name, job->started_at, &job->out, error)) return false;
    snprintf(lock_path, sizeof lock_path, "%s/.sdtrain.lock", job->out.root);
    if (!sdt_run_lock_take(&job->log_lock, lock_path, job->out.root, error)) return false;
    int stale = sdt_atomic_remove_stale(job->output_path);
    const char *folders[] = {job->out.root, job->out.embeddings, job->out.images, job->out.image_embeddings};
    for (size_t i = 0; i < sizeof folders / sizeof folders[0]; i++) stale += sdt_atomic_remove_stale_in(folders[i]);
    if (stale)
        sdt_host_log(job->host, SDT_LOG_INFO, "removed %d temp file(s) that an interrupted save of an earlier run left "
                     "behind (*.tmp-XXXXXX)", stale);
    return true;
}

static bool write_settings(ti_job *job, const sdt_ti_config *c, sdt_error *error)
{
    time_t now = job->started_at;
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "embedding_name", job->emb.name);
    cJSON_AddStringToObject(s, "model_name", job->checkpoint_name);
    cJSON_AddStringToObject(s, "model_hash", job->checkpoint_hash);
    cJSON_AddStringToObject(s, "data_root", job->dataset_dir);
    cJSON_AddStringToObject(s, "template_file", job->template_path);
    cJSON_AddStringToObject(s, "learn_rate", c->learn_rate);
    cJSON_AddNumberToObject(s, "batch_size", job->batch);
    cJSON_AddNumberToObject(s, "gradient_step", job->grad_accum);
    cJSON_AddNumberToObject(s, "training_width", c->width);
    cJSON_AddNumberToObject(s, "training_height", c->height);
    cJSON_AddNumberToObject(s, "steps", (double)c->max_steps);
    cJSON_AddNumberToObject(s, "initial_step", (double)job->initial_step);
    cJSON_AddNumberToObject(s, "num_of_dataset_images", job->ds.n_items);
    cJSON_AddNumberToObject(s, "num_vectors_per_token", job->emb.n_vectors);
    cJSON_AddStringToObject(s, "precision", ti_precision_name(job->precision));
    cJSON_AddStringToObject(s, "device", job->pb.be->name);
    cJSON_AddNumberToObject(s, "seed", (double)job->seed);
    const char *lsm[] = {"once", "deterministic", "random"};
    cJSON_AddStringToObject(s, "latent_sampling_method", lsm[job->latent_sampling % 3]);
    char path[4096];
    bool ok = sdt_settings_save(job->out.root, s, now, path, sizeof path, error);
    cJSON_Delete(s);
    if (!ok) return false;
    sdt_host_file_saved(job->host, SDT_FILE_SETTINGS, path, job->step);
    return true;
}

bool ti_job_prepare(const sdt_ti_config *config, const sdt_host_callbacks *host, const sdt_run_control *control,
                    ti_job **out, sdt_prepare_info *info, sdt_error *error)
{
    *out = NULL;
    ti_job *job = calloc(1, sizeof(*job));
    if (!job) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory");
    job->host = host;
    job->control = control;
    copy_settings(job, config);
    /* The cheap checks first, identity included, then the expensive work (the README's promise). */
    bool resume = config->resume_state_path && *config->resume_state_path;
    bool ok = check_inputs(job, config, error) && lock_output(job, error) &&
              (!resume || ti_job_resolve_resume(job, config->resume_state_path, error));
    if (ok) {
        sdt_host_log(host, SDT_LOG_INFO, "loading the model %s", job->model_path ? job->model_path : "");
        ok = load_model(job, config, error) &&
             (!resume || ti_job_resolve_resume(job, job->resume_path, error)) && /* the model too */
             list_dataset(job, config, error) && check_prompts(job, error) && open_outputs(job, config, error) &&
             load_dataset(job, config, error) && plan_batches(job, config, error) &&
             setup_optimizer(job, config, error) && plan_memory(job, info, error) &&
             still_wanted(job, error) &&
             write_settings(job, config, error) && (!resume || ti_job_load_state(job, job->resume_path, error));
    }
    if (!ok) {
        ti_job_destroy(job);
        return false;
    }
    job->last_state_at = ti_job_clock(); /* the state's time interval counts from here */
    info->precision = job->precision;
    info->device = job->pb.be->device == SDT_DEVICE_CUDA ? SDT_DEVICE_CHOICE_CUDA : SDT_DEVICE_CHOICE_CPU;
    info->vectors = (uint32_t)job->emb.n_vectors;
    info->embedding_dim = (uint32_t)job->emb.dim;
    info->batch_size = (uint32_t)job->batch;
    info->grad_accum_steps = (uint32_t)job->grad_accum;
    info->dataset_images = job->ds.n_items;
    info->steps_per_epoch = job->steps_per_epoch;
    info->start_step = job->step;
    info->max_steps = job->end_step;
    *out = job;
    return true;
}

void ti_job_destroy(ti_job *job)
{
    if (!job) return;
    sdt_run_lock_release(&job->log_lock);
    sdt_run_lock_release(&job->output_lock);
    free(job->output_path);
    free(job->resume_path);
    if (job->scaler) sdt_scaler_destroy(job->scaler);
    if (job->opt) sdt_optimizer_destroy(job->opt);
    if (job->pb.be) {
        if (job->param.data) job->pb.be->free(job->pb.be, job->param.data);
        if (job->grad.data) job->pb.be->free(job->pb.be, job->grad.data);
    }
    work_arena_release(&job->wa);
    sd_runtime_close(&job->rt);
    plugin_backend_close(&job->pb);
    sdt_tokenizer_free(job->tok);
    sdt_template_free(&job->tmpl);
    sdt_dataset_free(&job->ds);
    latent_cache_free(&job->lc);
    inpaint_cond_free(&job->inpaint);
    sdt_data_order_free(&job->order);
    sdt_lr_schedule_free(&job->lr);
    sdt_lr_schedule_free(&job->clip_value);
    sdt_embedding_free(&job->emb);
    free(job->model_path);
    free(job->embedding_path);
    free(job->dataset_dir);
    free(job->template_path);
    free(job->tokenizer_dir);
    free(job->preview_prompt);
    free(job->preview_negative);
    free(job->undo);
    free(job->learn_rate_text);
    free(job->clip_value_text);
    free(job);
}
