/* ti_job_step.c - one optimizer step of textual inversion: gradient accumulation over
 * micro-batches, the loss scaler (fp16), clipping of the unscaled gradients, AdamW, and
 * the NaN/Inf policy (skip, the one-shot switch to fp32 with a learning-rate backoff,
 * stop with a diagnosis). Every random draw is a pure function of (seed, step, sample),
 * so a resumed run repeats exactly what an uninterrupted one would have done. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/host_log.h"
#include "train/rng.h"
#include "ti/ti_job.h"

/* Host buffers of one micro-batch. */
typedef struct batch_buffers {
    float *x0, *noise, *noisy, *target, *weight, *timesteps;
    int32_t *tokens;
    clip_override *overrides;
    ti_encoded *prompts; /* one per sample, before ti_prompt_batch lays them out */
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
    memset(b, 0, sizeof(*b));
}

/* n: latent values of one sample; n_in: the UNet's input values of one sample (more for inpainting). */
static bool buffers_alloc(batch_buffers *b, int batch, int64_t n, int64_t n_in)
{
    memset(b, 0, sizeof(*b));
    size_t all = (size_t)(batch * n) * sizeof(float);
    b->x0 = malloc(all);
    b->noise = malloc(all);
    b->noisy = malloc((size_t)(batch * n_in) * sizeof(float));
    b->target = malloc(all);
    b->weight = malloc(all);
    b->timesteps = malloc((size_t)batch * sizeof(float));
    b->tokens = malloc((size_t)batch * TI_MAX_CHUNKS * TI_TOKENS * sizeof(int32_t));
    b->overrides = malloc((size_t)batch * TI_MAX_CHUNKS * TI_TOKENS * sizeof(clip_override));
    b->prompts = malloc((size_t)batch * sizeof(ti_encoded));
    return b->x0 && b->noise && b->noisy && b->target && b->weight && b->timesteps && b->tokens && b->overrides &&
           b->prompts;
}

static bool all_finite(const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

/* Remembers a sample whose training input is not finite: the diagnosis names it as the cause. */
static void note_bad_input(ti_job *job, const char *path)
{
    for (int i = 0; i < job->n_bad_input_files; i++)
        if (job->bad_input_files[i] == path) return;
    if (job->n_bad_input_files < TI_MAX_BATCH_FILES) job->bad_input_files[job->n_bad_input_files++] = path;
}

/* The 1-based number of the step in progress, as metrics, the CSV and messages count. */
static int64_t step_number(const ti_job *job) { return job->step + 1; }

/* The prompt of one sample: a template line, the caption's tags dropped/shuffled, placeholders filled. */
static void sample_prompt(ti_job *job, int item, uint64_t draw, ti_encoded *enc, int b)
{
    sdt_data_rng rng = sdt_data_rng_seeded(sdt_rng_derive(job->seed ^ 0x5445u, draw));
    sdt_prompt_rules pr = {job->shuffle_tags, job->tag_dropout};
    char *prompt = sdt_caption_prompt(&job->tmpl, job->ds.items[item].caption, job->emb.name, &pr, &rng, NULL);
    ti_prompt_encode(job->tok, &job->rules, prompt ? prompt : "", enc);
    if (b == 0 && prompt) snprintf(job->last_prompt, sizeof job->last_prompt, "%s", prompt);
    free(prompt);
}

/* Fills the inputs of micro-batch `micro` (a global counter) from the items idx[0..batch). */
static bool build_batch(ti_job *job, uint64_t micro, const int *idx, batch_buffers *buf, ti_pass_inputs *in, sdt_error *error)
{
    const latent_entry *first = &job->lc.items[idx[0]];
    int64_t n = (int64_t)first->c * first->h * first->w, hw = (int64_t)first->h * first->w;
    memset(in, 0, sizeof(*in));
    int extra = inpaint_extra_channels(&job->rt);
    int64_t n_in = n + (int64_t)extra * hw; /* one sample of the UNet's input */
    in->shape = (ti_pass_shape){.batch = job->batch, .c = first->c, .h = first->h, .w = first->w, .chunks = 1,
                                .in_c = first->c + extra, .weighted = job->use_alpha};
    if (!buffers_alloc(buf, job->batch, n, n_in)) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory building a batch");
        return false;
    }
    const float *cond = extra ? inpaint_cond_get(&job->inpaint, &job->rt, &job->wa, first->h, first->w, error)
                              : NULL;
    if (extra && !cond) return false;
    bool v = job->rt.cfg.unet.v_prediction;
    for (int b = 0; b < job->batch; b++) {
        const latent_entry *e = &job->lc.items[idx[b]];
        if (latent_cache_numel(&job->lc, idx[b]) != n) {
            sdt_fail(error, SDT_ERR_VALIDATION, "%s: its latent size differs from the rest of its batch (a data-order bug: please report)",
                     job->ds.items[idx[b]].path);
            return false;
        }
        uint64_t draw = micro * (uint64_t)job->batch + (uint64_t)b;
        float *x0 = buf->x0 + b * n, *noise = buf->noise + b * n;
        latent_cache_get(&job->lc, idx[b], draw, x0);
        if (!all_finite(x0, n) || (e->weight && !all_finite(e->weight, hw))) note_bad_input(job, job->ds.items[idx[b]].path);
        sdt_rng_normal_fill(job->seed, SDT_RNG_NOISE, draw * (uint64_t)n, noise, n);
        int t = (int)sdt_rng_below(job->seed, SDT_RNG_TIMESTEP, draw, SDT_DDPM_STEPS);
        buf->timesteps[b] = (float)t;
        sdt_q_sample(&job->sched, t, x0, noise, buf->noisy + b * n_in, n);
        if (extra) memcpy(buf->noisy + b * n_in + n, cond, (size_t)(n_in - n) * sizeof(float));
        sdt_training_target(&job->sched, t, v, x0, noise, buf->target + b * n, n);
        for (int ch = 0; ch < e->c; ch++)
            for (int64_t i = 0; i < hw; i++) buf->weight[b * n + ch * hw + i] = e->weight ? e->weight[i] : 1.0f;
        sample_prompt(job, idx[b], draw, &buf->prompts[b], b);
        if (job->n_batch_files < TI_MAX_BATCH_FILES) job->batch_files[job->n_batch_files++] = job->ds.items[idx[b]].path;
    }
    in->shape.chunks = ti_prompt_batch(job->tok, &job->rules, buf->prompts, job->batch, buf->tokens, buf->overrides,
                                       &in->n_overrides);
    in->tokens = buf->tokens;
    in->overrides = buf->overrides;
    in->noisy = buf->noisy;
    in->target = buf->target;
    in->weight = buf->weight;
    in->timesteps = buf->timesteps;
    return true;
}

/* Sizes the arena for a batch shape it has not seen (varying image sizes, or after the fp32 switch). */
static bool ensure_arena(ti_job *job, const ti_pass_shape *shape, const ti_pass_options *po, sdt_error *error)
{
    if (job->have_measured && memcmp(shape, &job->measured, sizeof(*shape)) == 0) return true;
    size_t bytes;
    if (!ti_pass_measure(&job->rt, po, shape, &job->param, &job->grad, &bytes, error) ||
        !work_arena_reserve(&job->wa, job->pb.be, bytes, error))
        return false;
    job->measured = *shape;
    job->have_measured = true;
    return true;
}

/* Anomaly mode found the first non-finite value: stop and say where, and what to do about it. */
static bool anomaly_stop(ti_job *job, sdt_error *error)
{
    char where[SDT_ERROR_MESSAGE_MAX];
    snprintf(where, sizeof where, "%s", error->message);
    sdt_fail(error, SDT_ERR_NUMERICAL, "Step %lld: anomaly mode stopped training at the first non-finite value: %s. In %s this "
             "usually means the frozen weights or activations overflow the precision: train in fp32 or bf16, or check "
             "that layer's weights in the checkpoint; the last good state is kept.", (long long)step_number(job), where,
             ti_precision_name(job->precision));
    return false;
}

/* Forward and backward of every micro-batch; *loss is their mean. */
static bool accumulate(ti_job *job, float scale, double *loss, sdt_error *error)
{
    ti_pass_options po = ti_job_pass_options(job);
    *loss = 0;
    job->n_batch_files = 0;
    job->n_bad_input_files = 0;
    for (int micro = 0; micro < job->grad_accum; micro++) {
        const int *idx = sdt_data_order_next(&job->order, NULL, NULL);
        batch_buffers buf;
        ti_pass_inputs in;
        double l = 0;
        bool ok = build_batch(job, (uint64_t)job->step * (uint64_t)job->grad_accum + (uint64_t)micro, idx, &buf, &in, error) &&
                  ensure_arena(job, &in.shape, &po, error) &&
                  ti_pass_run(&job->rt, &job->wa, &po, &in, &job->param, &job->grad, scale / (float)job->grad_accum, true,
                              &l, error);
        buffers_free(&buf);
        if (!ok && error->code == SDT_ERR_NUMERICAL && job->anomaly) return anomaly_stop(job, error);
        if (!ok) return false;
        if (job->scaler) {
            double scaled;
            sdt_core_status cs = sdt_scaler_scale_loss(job->scaler, l, job->batch, &scaled, error);
            if (cs != SDT_CORE_OK) return false;
        }
        sdt_optimizer_note_backward(job->opt, scale);
        *loss += l / job->grad_accum;
    }
    return true;
}

bool ti_job_use_fp32(ti_job *job, sdt_error *error)
{
    if (!sd_runtime_set_dtype(&job->rt, SDT_F32, error)) return false;
    if (job->scaler) sdt_scaler_destroy(job->scaler);
    job->scaler = NULL;
    job->precision = SDT_PRECISION_FP32;
    job->have_measured = false;
    inpaint_cond_free(&job->inpaint); /* encoded again in fp32 when next needed */
    return ti_job_reencode_nonfinite(job, error);
}

/* The one-shot fallback: fp32 compute, and the lr backed off from the next step on. */
static bool switch_to_fp32(ti_job *job, sdt_error *error)
{
    if (!ti_job_use_fp32(job, error)) return false;
    double factor = job->fallback.cfg.lr_backoff;
    if (!sdt_lr_apply_multiplier(&job->lr, job->step + 1, factor, error)) return false;
    return true;
}

/* Clipping of the unscaled gradients, as the Train tab's "Gradient Clipping" asks. */
static bool clip_gradients(ti_job *job, sdt_error *error)
{
    if (job->clip_mode == SDT_CLIP_DISABLED) return true;
    double limit = sdt_lr_at(&job->clip_value, job->step);
    if (limit < 0) return true;
    double total;
    sdt_core_status cs = job->clip_mode == SDT_CLIP_NORM
                             ? sdt_optimizer_clip_grad_norm(job->opt, limit, false, &total, error)
                             : sdt_optimizer_clip_grad_value(job->opt, (float)limit, error);
    return cs == SDT_CORE_OK;
}

/* "a.png, b.png" into out. */
static void join_names(const char *const *names, int n, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < n && used < size; i++) used += (size_t)snprintf(out + used, size - used, "%s%s", i ? ", " : "", names[i]);
}

/* Why the loss was not finite: non-finite training inputs are certain evidence of the data;
 * without them the health history decides (diagnosis.h). */
static void explain_nonfinite(ti_job *job, char *why, size_t size)
{
    if (job->n_bad_input_files > 0) {
        char names[2048];
        join_names(job->bad_input_files, job->n_bad_input_files, names, sizeof names);
        snprintf(why, size, "The cause is the data, not the optimisation: the latents of %s are not finite (the image, or "
                 "the VAE's encoding of it, holds NaN or Inf values), so every step that uses it fails; remove or "
                 "replace that file.", names);
        return;
    }
    sdt_diagnosis_classify(&job->diagnosis, step_number(job), job->batch_files, job->n_batch_files, why, size);
}

static bool stop_with_diagnosis(ti_job *job, sdt_fallback_action action, sdt_error *error)
{
    char what[512], why[2560];
    sdt_fallback_describe(&job->fallback, action, step_number(job), what, sizeof what);
    explain_nonfinite(job, why, sizeof why);
    sdt_fail(error, SDT_ERR_NUMERICAL, "%s %s", what, why);
    return false;
}

/* A skipped step is never silent: the host hears what happened, and about bad inputs at once. */
static void log_skip(ti_job *job, sdt_fallback_action action)
{
    char what[512], names[2048];
    sdt_fallback_describe(&job->fallback, action, step_number(job), what, sizeof what);
    if (job->n_bad_input_files == 0) {
        sdt_host_log(job->host, SDT_LOG_WARNING, "%s", what);
        return;
    }
    join_names(job->bad_input_files, job->n_bad_input_files, names, sizeof names);
    sdt_host_log(job->host, SDT_LOG_WARNING, "%s Non-finite latents came from: %s.", what, names);
}

/* Applies the fallback's decision; *stepped says whether the optimizer moved. */
static bool apply_action(ti_job *job, sdt_fallback_action action, bool *stepped, sdt_error *error)
{
    *stepped = false;
    sdt_core_status cs = SDT_CORE_OK;
    if (action == SDT_FALLBACK_CONTINUE) {
        if (!clip_gradients(job, error)) return false;
        if (!ti_job_undo_save(job, error)) return false;
        if (job->scaler) {
            cs = sdt_scaler_step(job->scaler, job->opt, stepped, error);
        } else {
            cs = sdt_optimizer_require_gradients(job->opt, error);
            if (cs == SDT_CORE_OK) cs = sdt_optimizer_step(job->opt, error);
            *stepped = cs == SDT_CORE_OK;
        }
        if (cs != SDT_CORE_OK) return false;
    }
    if (!*stepped) sdt_optimizer_note_skipped_step(job->opt);
    else if (!ti_job_check_divergence(job, step_number(job), sdt_lr_at(&job->lr, job->step), error))
        return false;
    if (job->scaler) {
        sdt_scaler_update_info info;
        cs = sdt_scaler_update(job->scaler, &info, error);
        if (cs != SDT_CORE_OK) return false;
        if (info.at_min_scale && action == SDT_FALLBACK_CONTINUE) action = sdt_fallback_on_scale_collapse(&job->fallback, step_number(job));
    }
    if (action == SDT_FALLBACK_SWITCH_TO_FP32) {
        log_skip(job, action);
        return switch_to_fp32(job, error);
    }
    if (action == SDT_FALLBACK_SKIP) log_skip(job, action);
    if (action == SDT_FALLBACK_STOP) return stop_with_diagnosis(job, action, error);
    return true;
}

double ti_job_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* images_per_s is this step's own throughput (the host's metrics carry a smoothed one). */
static void write_csv_row(ti_job *job, const sdt_metrics *m, double images_per_s)
{
    if (job->write_csv_every <= 0 || job->step % job->write_csv_every != 0) return;
    sdt_loss_row row = {m->step, m->epoch, m->epoch_step, m->loss, m->learn_rate, m->grad_norm, m->loss_scale,
                        ti_precision_name(job->precision), m->skipped_steps, images_per_s};
    sdt_error why;
    if (!sdt_loss_csv_append(job->out.loss_csv, &row, &why))
        sdt_host_log(job->host, SDT_LOG_WARNING, "the loss CSV was not updated: %s", why.message);
}

/* The state on a time interval (config.save_state_every_seconds), besides the one written with
 * every copy: a failure is a warning, and training goes on. */
static void save_state_if_due(ti_job *job)
{
    if (job->state_every_s <= 0 || ti_job_clock() - job->last_state_at < (double)job->state_every_s) return;
    sdt_error why;
    sdt_error_clear(&why);
    if (!ti_job_sync_embedding(job, &why) || !ti_job_write_run_state(job, &why))
        sdt_host_log(job->host, SDT_LOG_WARNING, "Saving the training state at step %lld failed: %s Training continues.",
                     (long long)job->step, why.message);
}

bool ti_job_step(void *vjob, sdt_metrics *m, uint32_t *images, sdt_error *error)
{
    ti_job *job = vjob;
    double started = ti_job_clock();
    double lr = sdt_lr_at(&job->lr, job->step);
    sdt_optimizer_set_lr(job->opt, (float)lr);
    sdt_core_status cs = sdt_optimizer_zero_grad(job->opt, error);
    if (cs != SDT_CORE_OK) return false;
    float scale = job->scaler ? sdt_scaler_get_scale(job->scaler) : 1.0f;
    double loss = 0, grad_norm = NAN;
    if (!accumulate(job, scale, &loss, error)) return false;
    if (job->scaler && (cs = sdt_scaler_unscale(job->scaler, job->opt, error)) != SDT_CORE_OK)
        return false;
    if ((cs = sdt_optimizer_grad_norm(job->opt, &grad_norm, error)) != SDT_CORE_OK) return false;
    /* With a scaler, overflowing gradients are its business (skip, back off); a non-finite loss is the fallback's. */
    bool nonfinite = !isfinite(loss) || (!job->scaler && !isfinite(grad_norm));
    sdt_fallback_action action = sdt_fallback_on_loss(&job->fallback, step_number(job), nonfinite ? NAN : loss);
    bool stepped;
    if (!apply_action(job, action, &stepped, error)) return false;
    if (!stepped) job->skipped++;
    if (!nonfinite) {
        sdt_health_sample hs = {step_number(job), loss, grad_norm, lr, scale, 0};
        sdt_diagnosis_record(&job->diagnosis, &hs);
    }
    job->step++;
    m->step = job->step;
    m->max_steps = job->end_step;
    m->epoch = (job->step - 1) / job->steps_per_epoch;
    m->epoch_step = (job->step - 1) % job->steps_per_epoch;
    m->skipped_steps = job->skipped;
    m->loss = nonfinite ? NAN : loss;
    m->grad_norm = grad_norm;
    m->learn_rate = lr;
    m->loss_scale = job->scaler ? sdt_scaler_get_scale(job->scaler) : 1.0;
    m->precision = job->precision;
    m->fallback_fired = job->fallback.fired;
    *images = (uint32_t)(job->batch * job->grad_accum);
    double seconds = ti_job_clock() - started;
    write_csv_row(job, m, seconds > 0 ? (double)*images / seconds : NAN);
    save_state_if_due(job);
    return true;
}

bool ti_job_done(const void *vjob)
{
    const ti_job *job = vjob;
    return job->step >= job->end_step || sdt_lr_finished(&job->lr, job->step);
}
