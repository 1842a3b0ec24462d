/* train_job.c - the job's own small pieces every other file of the job uses: precision names, the
 * clock, the pass's options and trainables, SDXL's size conditioning, the image options, the arena,
 * the parts' sync and the fallback note. Nothing here calls up into the job's phases (prepare,
 * state, save, step): they sit above this file (docs/DESIGN.md, "the job as modules"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_numeric.h"
#include "host/host_log.h"
#include "train/sd_cond.h"
#include "train/train_job.h"

sdt_dtype sdt_precision_dtype(sdt_precision p)
{
    return p == SDT_PRECISION_FP16 ? SDT_F16 : p == SDT_PRECISION_BF16 ? SDT_BF16 : SDT_F32;
}

const char *sdt_precision_name(sdt_precision p)
{
    return p == SDT_PRECISION_FP16 ? "fp16" : p == SDT_PRECISION_BF16 ? "bf16" : "fp32";
}

void sdt_train_job_image_options(const sdt_train_job *job, sdt_dataset_options *o)
{
    sdt_run_data_image_options(&job->data, job->opt.seed, o);
}

sdt_sdxl_sizes sdt_train_job_sample_sizes(const sdt_train_job *job, const sdt_dataset_item *it, const latent_entry *e,
                                          bool flipped)
{
    int f = vae_factor(&job->rt.cfg.vae);
    /* without buckets the whole image, resized to the training size (crop 0, as kohya and diffusers pass);
     * with them the crop's corner in the resized image, its left seen from the right when mirrored */
    int crop_left = flipped ? it->resized_width - it->width - it->crop_left : it->crop_left;
    sdt_sdxl_sizes s = {it->source_height, it->source_width, it->crop_top,
                        crop_left,         (double)e->h * f, (double)e->w * f};
    return s;
}

sdt_pass_trainables sdt_train_job_trainables(const sdt_train_job *job)
{
    sdt_pass_trainables tr = {.rows = job->rows, .drows = job->drows, .hook = job->hook, .tables = job->tables};
    return tr;
}

sdt_run_t5 sdt_train_job_t5(sdt_train_job *job)
{
    job->t5_rows = sdt_cond_t5_table(&job->rt, job->rows);
    sdt_run_t5 t5 = {.spm = job->t5_tok,
                     .rules = &job->t5_rules,
                     .len = job->t5_len,
                     .rows = job->t5_rows.data ? &job->t5_rows : NULL,
                     .trains = job->rows && (job->tables == 0 || (job->tables & SDT_ENCODER_T5XXL))};
    return t5;
}

sdt_pass_options sdt_train_job_pass_options(const sdt_train_job *job)
{
    return (sdt_pass_options){job->clip_skip, job->opt.gradient_checkpointing, job->opt.anomaly_mode, job->loss.type,
                              job->loss.huber_delta};
}

/* Sizes the arena for a batch shape it has not seen (varying image sizes, or after the fp32 switch). */
bool sdt_train_job_ensure_arena(sdt_train_job *job, const sdt_pass_shape *shape, const sdt_pass_options *po,
                                sdt_error *error)
{
    if (job->have_measured && sdt_pass_shape_equal(shape, &job->measured)) return true;
    size_t bytes;
    sdt_pass_trainables tr = sdt_train_job_trainables(job);
    if (!sdt_pass_measure(&job->rt, po, shape, &tr, &bytes, error) ||
        !work_arena_reserve(&job->wa, job->pb.be, bytes, error))
        return false;
    job->measured = *shape;
    job->have_measured = true;
    return true;
}

bool sdt_train_job_sync_parts(sdt_train_job *job, sdt_error *error)
{
    for (int p = 0; p < job->n_parts; p++)
        if (!job->parts[p].ops->sync(&job->parts[p], job, error)) return false;
    return true;
}

void sdt_train_job_fallback_note(const sdt_train_job *job, char *note, size_t size)
{
    const sdt_fallback *fb = &job->engine.fallback;
    note[0] = '\0';
    if (fb->fired) /* a file says how it was trained: fp32 from that step, at the backed-off rate */
        sdt_c_snprintf(note, size, "fp32 from step %lld (%s), learning rate x%g", (long long)fb->fired_at_step,
                       fb->fired_by == SDT_FALLBACK_TRIGGER_SCALE_COLLAPSE ? "loss scale collapsed" : "non-finite loss",
                       fb->cfg.lr_backoff);
}

/* One image through the VAE into the latent cache, in the runtime's current precision;
 * a failure keeps the encoder's status, its sentence naming the image. */
bool sdt_train_job_encode_item(sdt_train_job *job, int i, sdt_error *error)
{
    sdt_dataset_item *it = &job->data.ds.items[i];
    if (!latent_cache_encode(&job->data.lc, i, &job->rt, &job->wa, it->pixels, it->width, it->height, it->loss_weight,
                             it->width / 8, it->height / 8, error))
        return sdt_error_wrap(error, "%s: encoding the image failed", it->path);
    return true;
}

bool sdt_train_job_reencode_nonfinite(sdt_train_job *job, sdt_error *error)
{
    for (int i = 0; i < job->data.ds.n_items; i++) {
        sdt_dataset_item *it = &job->data.ds.items[i];
        if (!it->pixels) continue;
        if (!sdt_train_job_encode_item(job, i, error)) return false;
        bool finite = latent_cache_is_finite(&job->data.lc, i);
        sdt_host_log(job->host, finite ? SDT_LOG_INFO : SDT_LOG_WARNING,
                     finite ? "%s: encoded again in %s: its latents "
                              "are finite now"
                            : "%s: even in %s the VAE encodes this image to NaN/Inf latents; every step that "
                              "uses it will be skipped (remove or replace the file)",
                     it->path, sdt_precision_name(job->precision));
        sdt_dataset_drop_pixels(&job->data.ds, i);
    }
    job->have_measured = false; /* the encoder used the work arena */
    return true;
}

bool sdt_train_job_use_fp32(sdt_train_job *job, sdt_error *error)
{
    if (!sd_runtime_set_dtype(&job->rt, SDT_F32, error)) return false;
    sdt_step_engine_drop_scaler(&job->engine);
    job->precision = SDT_PRECISION_FP32;
    job->have_measured = false;
    inpaint_cond_free(&job->inpaint); /* encoded again in fp32 when next needed */
    bool encoded = false;
    if (!sdt_run_text_recache(&job->text_cache, &job->rt, &job->wa, job->clip_skip, job->opt.anomaly_mode, job->host,
                              &encoded, error))
        return false;
    if (encoded) job->have_measured = false;
    sdt_run_t5 t5 = sdt_train_job_t5(job);
    if (!sdt_run_t5_recache(&job->t5_cache, &t5, &job->rt, &job->wa, job->host, &encoded, error)) return false;
    if (encoded) job->have_measured = false;
    return sdt_train_job_reencode_nonfinite(job, error);
}
