/* train_job_step.c - one optimizer step of any method: the micro-batches (noise, timesteps,
 * prompts from the template and captions), their passes, and the step engine's policy
 * (train/step_engine.h); then metrics, the loss CSV and the timed state. Every random draw is a
 * pure function of (seed, step, sample), so a resumed run repeats exactly what an uninterrupted
 * one would have done. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/host_log.h"
#include "sd_text_rules.h"
#include "train/flow_prompts.h"
#include "train/rng.h"
#include "train/sd_cond.h"
#include "train/sample_augment.h"
#include "train/train_job.h"

/* Host buffers of one micro-batch. */
typedef struct batch_buffers {
    float *x0, *noise, *noisy, *target, *weight, *timesteps;
    int32_t *tokens;
    clip_override *overrides;
    sdt_prompt_encoded *prompts; /* one per sample, before sdt_prompt_batch lays them out */
    sdt_sdxl_sizes *sizes;       /* SDXL's size conditioning, one per sample */
    char **texts;                /* rectified flow: each sample's prompt, for sdt_flow_prompts */
    int32_t *t5_tokens;          /* rectified flow: [batch, t5_len] */
    t5_override *t5_overrides;
} batch_buffers;

static void buffers_free(batch_buffers *b)
{
    free(b->x0);
    free(b->noise);
    free(b->noisy);
    free(b->target);
    free(b->weight);
    free(b->timesteps);
    free(b->tokens);
    free(b->overrides);
    free(b->prompts);
    free(b->sizes);
    for (int i = 0; b->texts && b->texts[i]; i++) free(b->texts[i]);
    free(b->texts);
    free(b->t5_tokens);
    free(b->t5_overrides);
    memset(b, 0, sizeof(*b));
}

/* n: latent values of one sample; n_in: the UNet's input values of one sample (more for inpainting); t5_len: T5's
 * sequence of a rectified-flow family (0: none). */
static bool buffers_alloc(batch_buffers *b, int batch, int64_t n, int64_t n_in, int t5_len)
{
    memset(b, 0, sizeof(*b));
    size_t all = (size_t)(batch * n) * sizeof(float);
    b->x0 = malloc(all);
    b->noise = malloc(all);
    b->noisy = malloc((size_t)(batch * n_in) * sizeof(float));
    b->target = malloc(all);
    b->weight = malloc(all);
    b->timesteps = malloc((size_t)batch * sizeof(float));
    b->tokens = malloc((size_t)batch * SDT_PROMPT_MAX_CHUNKS * SDT_PROMPT_TOKENS * sizeof(int32_t));
    b->overrides = malloc((size_t)batch * SDT_PROMPT_MAX_CHUNKS * SDT_PROMPT_TOKENS * sizeof(clip_override));
    b->prompts = malloc((size_t)batch * sizeof(sdt_prompt_encoded));
    b->sizes = malloc((size_t)batch * sizeof(sdt_sdxl_sizes));
    bool t5_ok = true;
    if (t5_len > 0) {
        b->texts = calloc((size_t)batch + 1, sizeof(char *)); /* NULL-terminated */
        b->t5_tokens = malloc((size_t)batch * (size_t)t5_len * sizeof(int32_t));
        b->t5_overrides = malloc((size_t)batch * (size_t)t5_len * sizeof(t5_override));
        t5_ok = b->texts && b->t5_tokens && b->t5_overrides;
    }
    return b->x0 && b->noise && b->noisy && b->target && b->weight && b->timesteps && b->tokens && b->overrides &&
           b->prompts && b->sizes && t5_ok;
}

static bool all_finite(const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

/* Remembers a sample whose training input is not finite: the diagnosis names it as the cause. */
static void note_bad_input(sdt_train_job *job, const char *path)
{
    for (int i = 0; i < job->n_bad_input_files; i++)
        if (job->bad_input_files[i] == path) return;
    if (job->n_bad_input_files < SDT_JOB_MAX_BATCH_FILES) job->bad_input_files[job->n_bad_input_files++] = path;
}

/* The 1-based number of the step in progress, as metrics, the CSV and messages count. */
static int64_t step_number(const sdt_train_job *job)
{
    return job->step + 1;
}

/* The prompt of one sample: a template line, the caption's tags dropped/shuffled, placeholders
 * filled; or the empty prompt when caption drop-out picks the sample (true then). */
static bool sample_prompt(sdt_train_job *job, int item, uint64_t draw, sdt_prompt_encoded *enc, int b, char **text)
{
    bool dropped = sdt_augment_caption_dropped(job->opt.seed, draw, job->data.caption_dropout);
    sdt_data_rng rng = sdt_data_rng_seeded(sdt_rng_derive(job->opt.seed ^ 0x5445u, draw));
    sdt_prompt_rules pr = {job->data.shuffle_tags, job->data.tag_dropout, (int)job->data.keep_tokens};
    char *prompt =
        dropped ? strdup("") /* caption_dropout: the empty prompt, what CFG's unconditioned branch sees */
                : sdt_caption_prompt(&job->tmpl, job->data.ds.items[item].caption, job->prompt_name, &pr, &rng, NULL);
    sdt_prompt_encode(job->tok, &job->rules, prompt ? prompt : "", enc);
    if (b == 0 && prompt && !dropped) snprintf(job->last_prompt, sizeof job->last_prompt, "%s", prompt);
    if (text) /* rectified flow: sdt_flow_prompts reads the text (CLIP's and T5's ids) */
        *text = prompt ? prompt : strdup("");
    else
        free(prompt);
    return dropped;
}

/* Fills the inputs of micro-batch `micro` (a global counter) from the items idx[0..batch). */
static bool build_batch(sdt_train_job *job, uint64_t micro, const int *idx, batch_buffers *buf, sdt_pass_inputs *in,
                        sdt_error *error)
{
    const latent_entry *first = &job->data.lc.items[idx[0]];
    int64_t n = (int64_t)first->c * first->h * first->w, hw = (int64_t)first->h * first->w;
    memset(in, 0, sizeof(*in));
    int extra = inpaint_extra_channels(&job->rt);
    int64_t n_in = n + (int64_t)extra * hw; /* one sample of the UNet's input */
    in->shape = (sdt_pass_shape){.batch = job->data.batch,
                                 .c = first->c,
                                 .h = first->h,
                                 .w = first->w,
                                 .chunks = 1,
                                 .in_c = first->c + extra,
                                 .weighted = sdt_loss_options_weighted(&job->loss, job->data.use_alpha)};
    if (job->flow) in->shape.t5_len = job->t5_len;
    in->guidance = job->flow_guidance;
    if (job->flow && job->flow_objective.weighting != SDT_FLOW_WEIGHT_NONE) in->shape.weighted = true;
    if (!buffers_alloc(buf, job->data.batch, n, n_in, job->flow ? job->t5_len : 0)) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory building a batch");
        return false;
    }
    const float *cond = extra ? inpaint_cond_get(&job->inpaint, &job->rt, &job->wa, first->h, first->w, error) : NULL;
    if (extra && !cond) return false;
    bool v = job->rt.cfg.unet.v_prediction;
    for (int b = 0; b < job->data.batch; b++) {
        uint64_t draw = micro * (uint64_t)job->data.batch + (uint64_t)b;
        bool flipped = job->data.flip && sdt_augment_flip(job->opt.seed, draw);
        const latent_entry *e = latent_cache_entry(&job->data.lc, idx[b], flipped);
        if (latent_cache_numel(&job->data.lc, idx[b]) != n) {
            sdt_fail(error, SDT_ERR_VALIDATION,
                     "%s: its latent size differs from the rest of its batch (a data-order bug: please report)",
                     job->data.ds.items[idx[b]].path);
            return false;
        }
        float *x0 = buf->x0 + b * n, *noise = buf->noise + b * n;
        latent_cache_get(&job->data.lc, idx[b], draw, flipped, x0);
        if (!all_finite(x0, n) || (e->weight && !all_finite(e->weight, hw)))
            note_bad_input(job, job->data.ds.items[idx[b]].path);
        sdt_rng_normal_fill(job->opt.seed, SDT_RNG_NOISE, draw * (uint64_t)n, noise, n);
        if (job->flow) { /* rectified flow: x_t, the velocity target, the weighting at t (flow_step.h) */
            for (int ch = 0; ch < e->c; ch++)
                for (int64_t i = 0; i < hw; i++) buf->weight[b * n + ch * hw + i] = e->weight ? e->weight[i] : 1.0f;
            sdt_flow_objective_sample(&job->flow_objective, job->opt.seed, draw, e->h, e->w, x0, noise,
                                      buf->noisy + b * n_in, buf->target + b * n, buf->weight + b * n, n,
                                      &buf->timesteps[b]);
            job->step_prompts_dropped += sample_prompt(job, idx[b], draw, &buf->prompts[b], b, &buf->texts[b]);
            if (job->n_batch_files < SDT_JOB_MAX_BATCH_FILES)
                job->batch_files[job->n_batch_files++] = job->data.ds.items[idx[b]].path;
            continue;
        }
        sdt_loss_offset_noise(&job->loss, job->opt.seed, draw, noise, e->c, hw);
        int t = sdt_loss_timestep(&job->loss, job->opt.seed, draw);
        buf->timesteps[b] = (float)t;
        sdt_q_sample(&job->sched, t, x0, noise, buf->noisy + b * n_in, n);
        if (extra) memcpy(buf->noisy + b * n_in + n, cond, (size_t)(n_in - n) * sizeof(float));
        sdt_training_target(&job->sched, t, v, x0, noise, buf->target + b * n, n);
        /* the sample's min-SNR-gamma weight times its alpha weight: the mean over the batch of
         * weight * loss is kohya's per-sample mean times the SNR weight, then the batch mean */
        float snr_w = (float)sdt_min_snr_weight(sdt_noise_schedule_snr(&job->sched, t), job->loss.min_snr_gamma, v);
        for (int ch = 0; ch < e->c; ch++)
            for (int64_t i = 0; i < hw; i++)
                buf->weight[b * n + ch * hw + i] = (e->weight ? e->weight[i] : 1.0f) * snr_w;
        job->step_prompts_dropped += sample_prompt(job, idx[b], draw, &buf->prompts[b], b, NULL);
        buf->sizes[b] = sdt_train_job_sample_sizes(job, &job->data.ds.items[idx[b]], e, flipped);
        if (job->n_batch_files < SDT_JOB_MAX_BATCH_FILES)
            job->batch_files[job->n_batch_files++] = job->data.ds.items[idx[b]].path;
    }
    if (job->flow) { /* SD3.5, Flux: CLIP's one 77-token sequence per prompt and T5's own, each with the slots */
        sdt_flow_prompt_batch pb = {.tokens = buf->tokens,
                                    .overrides = buf->overrides,
                                    .t5_tokens = buf->t5_tokens,
                                    .t5_overrides = buf->t5_overrides};
        if (!sdt_flow_prompts(job->tok, &job->rules, job->t5_tok, &job->t5_rules, (const char *const *)buf->texts,
                              job->data.batch, job->t5_len, &pb, error))
            return false;
        in->shape.chunks = 1;
        in->n_overrides = pb.n_overrides;
        in->t5_tokens = buf->t5_tokens;
        in->t5_overrides = buf->t5_overrides;
        in->n_t5_overrides = pb.n_t5_overrides;
    } else
        in->shape.chunks = sdt_prompt_batch(job->tok, &job->rules, buf->prompts, job->data.batch, buf->tokens,
                                            buf->overrides, &in->n_overrides);
    in->tokens = buf->tokens;
    in->overrides = buf->overrides;
    in->noisy = buf->noisy;
    in->target = buf->target;
    in->weight = buf->weight;
    in->timesteps = buf->timesteps;
    in->end_id = sdt_tokenizer_eos(job->tok);
    in->sizes = sd_text_rules_of(&job->rt.cfg).sdxl ? buf->sizes : NULL;
    return true;
}

/* Anomaly mode found the first non-finite value: stop and say where, and what to do about it. */
static bool anomaly_stop(sdt_train_job *job, sdt_error *error)
{
    char where[SDT_ERROR_MESSAGE_MAX];
    snprintf(where, sizeof where, "%s", error->message);
    sdt_fail(error, SDT_ERR_NUMERICAL,
             "Step %lld: anomaly mode stopped training at the first non-finite value: %s. In %s this "
             "usually means the frozen weights or activations overflow the precision: train in fp32 or bf16, or check "
             "that layer's weights in the checkpoint; the last good state is kept.",
             (long long)step_number(job), where, sdt_precision_name(job->precision));
    return false;
}

/* Forward and backward of every micro-batch; *loss is their mean. */
static bool accumulate(void *user, float scale, double *loss, sdt_error *error)
{
    sdt_train_job *job = user;
    sdt_pass_options po = sdt_train_job_pass_options(job);
    sdt_pass_trainables tr = sdt_train_job_trainables(job);
    *loss = 0;
    job->n_batch_files = 0;
    job->n_bad_input_files = 0;
    job->step_prompts_dropped = 0;
    for (int micro = 0; micro < job->data.grad_accum; micro++) {
        const int *idx;
        int count;
        /* the global batch, of which this rank trains its slice; draws are keyed by the global
         * micro-batch and sample, so W ranks draw what one rank accumulating W x as many would */
        if (!sdt_data_order_shard(&job->data.order, sdt_data_order_next(&job->data.order, NULL, NULL),
                                  job->par.world_size, job->par.rank, &idx, &count, error))
            return false;
        uint64_t counter = sdt_run_comm_micro(&job->par, job->step, job->data.grad_accum, micro);
        for (int p = 0; p < job->n_parts; p++)
            if (job->parts[p].ops->begin_micro) job->parts[p].ops->begin_micro(&job->parts[p], job, counter);
        batch_buffers buf;
        sdt_pass_inputs in;
        double l = 0;
        bool ok = build_batch(job, counter, idx, &buf, &in, error) &&
                  sdt_train_job_ensure_arena(job, &in.shape, &po, error) &&
                  sdt_pass_run(&job->rt, &job->wa, &po, &in, &tr,
                               scale / (float)(job->data.grad_accum * job->par.world_size), true, &l, error);
        buffers_free(&buf);
        if (!ok && error->code == SDT_ERR_NUMERICAL && job->opt.anomaly_mode) return anomaly_stop(job, error);
        if (!ok) return false;
        if (job->engine.scaler) {
            double scaled;
            sdt_core_status cs = sdt_scaler_scale_loss(job->engine.scaler, l, job->data.batch, &scaled, error);
            if (cs != SDT_CORE_OK) return false;
        }
        for (int g = 0; g < job->engine.n_groups; g++) sdt_optimizer_note_backward(job->engine.groups[g].opt, scale);
        *loss += l / job->data.grad_accum;
    }
    /* every sample on the empty prompt: an embedding's gradient is exactly zero, and rightly so */
    job->engine.zero_gradient_expected = job->step_prompts_dropped == job->data.grad_accum * job->data.batch;
    return true;
}

/* "a.png, b.png" into out. */
static void join_names(const char *const *names, int n, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, "%s%s", i ? ", " : "", names[i]);
}

/* Why the loss was not finite: non-finite training inputs are certain evidence of the data;
 * without them the health history decides (diagnosis.h). */
static void explain_nonfinite(void *user, int64_t number, char *why, size_t size)
{
    sdt_train_job *job = user;
    if (job->n_bad_input_files > 0) {
        char names[2048];
        join_names(job->bad_input_files, job->n_bad_input_files, names, sizeof names);
        snprintf(why, size,
                 "The cause is the data, not the optimisation: the latents of %s are not finite (the image, or "
                 "the VAE's encoding of it, holds NaN or Inf values), so every step that uses it fails; remove or "
                 "replace that file.",
                 names);
        return;
    }
    sdt_diagnosis_classify(&job->engine.diagnosis, number, job->batch_files, job->n_batch_files, why, size);
}

static void skip_note(void *user, char *note, size_t size)
{
    sdt_train_job *job = user;
    note[0] = '\0';
    if (job->n_bad_input_files == 0) return;
    char names[2048];
    join_names(job->bad_input_files, job->n_bad_input_files, names, sizeof names);
    snprintf(note, size, " Non-finite latents came from: %s.", names);
}

static void engine_log(void *user, sdt_log_level level, const char *message)
{
    sdt_train_job *job = user;
    sdt_host_log(job->host, level, "%s", message);
}

static bool engine_use_fp32(void *user, sdt_error *error)
{
    return sdt_train_job_use_fp32(user, error);
}

/* Every write_csv_every-th step's row now; another step's is kept for the run's end.
 * images_per_s is this step's own throughput (the host's metrics carry a smoothed one). */
static void write_csv_row(sdt_train_job *job, const sdt_metrics *m, double images_per_s)
{
    sdt_loss_row row = {m->step,          m->epoch,     m->epoch_step, m->loss,
                        m->learn_rate,    m->grad_norm, m->loss_scale, sdt_precision_name(job->precision),
                        m->skipped_steps, images_per_s, job->val.on,   job->val.last_loss};
    sdt_run_outputs_csv_row(&job->outputs, &row, job->host);
}

/* The state on a time interval (save_state_every_seconds), besides the one written with every
 * copy: a failure for IO (the disk) stops the run after this step (run_loop.h); any other is a
 * warning, and training goes on. */
static void save_state_if_due(sdt_train_job *job)
{
    if (job->opt.save_state_every_seconds <= 0 ||
        sdt_run_clock() - job->last_state_at < (double)job->opt.save_state_every_seconds)
        return;
    sdt_error why;
    sdt_error_clear(&why);
    if (sdt_train_job_write_run_state(job, &why)) return;
    if (!sdt_run_outputs_note_failure(&job->outputs, &why))
        sdt_host_log(job->host, SDT_LOG_WARNING,
                     "Saving the training state at step %lld failed: %s Training continues.", (long long)job->step,
                     why.message);
}

static bool job_write_failed(void *vjob, sdt_error *error)
{
    sdt_train_job *job = vjob;
    return sdt_run_outputs_take_failure(&job->outputs, job->step, error);
}

/* This step's line of metrics.jsonl (write_metrics): a failure for IO stops the run as the CSV's does. */
static void write_metrics_line(sdt_train_job *job, const sdt_metrics *m, double images_per_s)
{
    if (!job->outputs.write_metrics) return;
    sdt_metrics_record r = {.step = m->step,
                            .epoch = m->epoch,
                            .loss = m->loss,
                            .validation_loss = job->val.last_loss,
                            .learn_rate = m->learn_rate,
                            .grad_norm = m->grad_norm,
                            .loss_scale = m->loss_scale,
                            .images_per_s = images_per_s,
                            .skipped = job->engine.skipped > job->skipped_before,
                            .skipped_total = job->engine.skipped,
                            .precision = sdt_precision_name(job->precision)};
    r.n_groups = job->engine.n_groups < SDT_METRICS_MAX_GROUPS ? job->engine.n_groups : SDT_METRICS_MAX_GROUPS;
    for (int g = 0; g < r.n_groups; g++) {
        r.group_names[g] = job->engine.groups[g].name;
        r.group_rates[g] = sdt_lr_at(&job->engine.groups[g].lr, job->step - 1); /* the step just taken */
    }
    sdt_run_outputs_metrics_line(&job->outputs, &r, job->host);
}

/* Data parallelism: an interrupt asked of any rank is summed before each step, so every rank stops
 * (and rank 0 saves) after the same one. */
static bool job_agree_stop(void *vjob, bool *stop, sdt_error *error)
{
    sdt_train_job *job = vjob;
    if (sdt_run_comm_any(&job->par, stop, error)) return true;
    sdt_run_comm_abort(&job->par, error->message);
    return false;
}

/* Once a run: the first captured step, and the first region that could not be captured (train/step_capture.h). */
static void log_capture(sdt_train_job *job, int64_t captures_before, int64_t spoiled_before)
{
    const sdt_step_capture *sc = &job->wa.capture;
    if (captures_before == 0 && sc->captures > 0)
        sdt_host_log(job->host, SDT_LOG_INFO,
                     "CUDA graph: step %lld captured the UNet backward; steps with the same shapes and options "
                     "replay it (the run option cuda_graph, sdt-host --cuda-graph on|off)",
                     (long long)job->step);
    if (spoiled_before == 0 && sc->spoiled > 0)
        sdt_host_log(job->host, SDT_LOG_INFO,
                     "CUDA graph: step %lld's UNet backward could not be captured (%s); such steps run uncaptured",
                     (long long)job->step, sc->spoiled_why);
    if (job->step == job->end_step && (sc->captures > 0 || sc->spoiled > 0))
        sdt_host_log(job->host, SDT_LOG_INFO,
                     "CUDA graph: %lld captures, %lld replays, %lld passes that could not be captured in %lld steps",
                     (long long)sc->captures, (long long)sc->replays, (long long)sc->spoiled, (long long)job->step);
}

static bool job_step(void *vjob, sdt_metrics *m, uint32_t *images, sdt_error *error)
{
    sdt_train_job *job = vjob;
    double started = sdt_run_clock();
    job->skipped_before = job->engine.skipped;
    int64_t captures_before = job->wa.capture.captures, spoiled_before = job->wa.capture.spoiled;
    job->engine.hooks = (sdt_step_hooks){job, accumulate, engine_use_fp32, explain_nonfinite, skip_note, engine_log};
    sdt_step_result r;
    /* accumulate takes this step's batches from the data order; a step that fails gives them back,
     * so the state saved after the failure resumes to the bytes of an uninterrupted run */
    int64_t data_epoch;
    int data_position;
    sdt_data_order_get_position(&job->data.order, &data_epoch, &data_position);
    if (!sdt_step_engine_step(&job->engine, job->step, &r, error)) {
        sdt_error why; /* only out of memory, rebuilding the epoch the failed step left */
        if (!sdt_data_order_set_position(&job->data.order, data_epoch, data_position, &why))
            sdt_host_log(job->host, SDT_LOG_WARNING,
                         "Step %lld failed and its batches could not be given back (%s): a state saved now resumes "
                         "one step's batches further on.",
                         (long long)step_number(job), why.message);
        sdt_run_comm_abort(&job->par, error->message); /* the other ranks stop at their next sum */
        return false;
    }
    job->step++;
    log_capture(job, captures_before, spoiled_before);
    m->step = job->step;
    m->max_steps = job->end_step;
    m->epoch = (job->step - 1) / job->data.steps_per_epoch;
    m->epoch_step = (job->step - 1) % job->data.steps_per_epoch;
    m->skipped_steps = job->engine.skipped;
    m->loss = r.loss;
    m->grad_norm = r.grad_norm;
    m->learn_rate = r.learn_rate;
    m->loss_scale = job->engine.scaler ? sdt_scaler_get_scale(job->engine.scaler) : 1.0;
    m->precision = job->precision;
    m->fallback_fired = job->engine.fallback.fired;
    *images = (uint32_t)(job->data.batch * job->data.grad_accum * job->par.world_size); /* the job's */
    double seconds = sdt_run_clock() - started; /* the step's own time: validation below is not training */
    /* The average and the validation after the update; neither draws from the training's RNG. */
    if (!sdt_ema_update(&job->ema, &job->engine, job->pb.be, job->step, error) ||
        !sdt_train_job_validate_if_due(job, error)) {
        sdt_run_comm_abort(&job->par, error->message);
        return false;
    }
    if (!sdt_run_comm_writes(&job->par)) return true; /* rank 0 writes the CSV, metrics and state */
    write_csv_row(job, m, seconds > 0 ? (double)*images / seconds : NAN);
    write_metrics_line(job, m, seconds > 0 ? (double)*images / seconds : NAN);
    save_state_if_due(job);
    return true;
}

static bool job_done(const void *vjob)
{
    const sdt_train_job *job = vjob;
    return job->step >= job->end_step || sdt_step_engine_finished(&job->engine, job->step) || job->val.stop;
}

static const sdt_job_ops train_job_ops = {job_step,
                                          job_done,
                                          sdt_train_job_save_snapshot,
                                          sdt_train_job_save_preview,
                                          sdt_train_job_save_final,
                                          job_write_failed,
                                          sdt_train_job_saved_note,
                                          job_agree_stop};

const sdt_job_ops *sdt_train_job_ops(void)
{
    return &train_job_ops;
}

sdt_run_params sdt_train_job_run_params(const sdt_train_job *job)
{
    sdt_run_params p = {.save_every = job->opt.save_every,
                        .preview_every = job->previews.every,
                        .backend = job->pb.be,
                        .memory_estimate_bytes = job->memory_estimate_bytes,
                        .memory_note = job->memory_note[0] ? job->memory_note : NULL};
    return p;
}
