/* train_options.c - see train_options.h. */
#include "train/train_options.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "host/copy_out.h"
#include "train/options_copy.h"
#include "train/noise_schedule.h"
#include "data/buckets.h"
#include "data/preview_prompts.h"
#include "train/flow_match.h"
#include "train/sampler.h"

void sdt_train_options_set_defaults(sdt_train_options *o, const char *log_dir)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->batch_size = 1;
    o->grad_accum_steps = 1;
    o->clip_mode = SDT_CLIP_DISABLED;
    o->width = 512;
    o->height = 512;
    o->latent_sampling = SDT_LATENT_ONCE;
    o->precision = SDT_PRECISION_FP32;
    o->device = SDT_DEVICE_CHOICE_AUTO;
    o->clip_skip = 1;
    o->max_consecutive_nonfinite = 10;
    o->preview_steps = 20;
    o->max_steps = 100000;
    o->save_every = 500;
    o->preview_every = 500;
    o->write_csv_every = 500;
    o->preview_seed = -1;
    o->lr_backoff = 0.5;
    o->preview_cfg_scale = 0.0; /* the family's: 7, Flux.1 1 (sdt_train_job_load_model) */
    o->loss_scale_init = 65536.0;
    o->clip_value = "0.1";
    o->log_dir = log_dir;
    o->filename_word_regex = "";
    o->filename_join_string = " ";
    o->preview_negative_prompt = "";
    o->preview_sampler = "ddim";
    o->loss_type = SDT_LOSS_L2;
    o->lr_scheduler = SDT_LR_SCHEDULER_CONSTANT;
    o->lr_cycles = 1;
    o->timestep_max = SDT_DDPM_STEPS - 1;
    o->huber_delta = 1.0;
    o->ema_every = 1;
    o->bucket_min_side = SDT_BUCKET_DEFAULT_MIN_SIDE;
    o->bucket_max_side = SDT_BUCKET_DEFAULT_MAX_SIDE;
    o->bucket_step = SDT_BUCKET_DEFAULT_STEP;
    o->logit_std = 1.0;
    o->mode_scale = 1.29;
}

bool sdt_train_options_read(sdt_train_options *own, const sdt_train_options *host, const char *log_dir,
                            const char *field, sdt_error *error)
{
    sdt_train_options_set_defaults(own, log_dir);
    if (!host || !sdt_struct_read_in(own, sizeof *own, host))
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "%s is NULL or its struct_size is not set; fill it with train_options_defaults() first.",
                        field);
    bool reserved4_set = false;
    for (size_t i = 0; i < sizeof own->reserved4; i++) reserved4_set |= own->reserved4[i] != 0;
    for (size_t i = 0; i < sizeof own->reserved5; i++) reserved4_set |= own->reserved5[i] != 0;
    for (size_t i = 0; i < sizeof own->reserved6; i++) reserved4_set |= own->reserved6[i] != 0;
    reserved4_set |= own->reserved8 != 0;
    if (own->reserved0 != 0 || own->reserved1[0] || own->reserved1[1] || own->reserved2 != 0 || own->reserved_loss[0] ||
        own->reserved_loss[1] || own->reserved3[0] || own->reserved3[1] || own->reserved3[2] || reserved4_set ||
        own->reserved7 != 0)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%s: the reserved fields must be 0; fill it with train_options_defaults() first.", field);
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s->", field);
    return sdt_train_prediction_check(own->prediction_type, own->v_prediction, prefix, error);
}

/* A shared field the job cannot run with: the sentence names it after the caller's prefix. */
#define OPTION_FAIL(...) sdt_fail(error, SDT_ERR_VALIDATION, __VA_ARGS__)

static bool is_blank(const char *s)
{
    return !s || s[0] == '\0';
}

static bool check_enums(const sdt_train_options *o, const char *p, sdt_error *error)
{
    if (o->clip_mode > SDT_CLIP_NORM)
        return OPTION_FAIL("%sclip_mode is not one of disabled, value or norm; pick one of those.", p);
    if (o->latent_sampling > SDT_LATENT_RANDOM)
        return OPTION_FAIL("%slatent_sampling is not one of once, deterministic or random; pick one of those.", p);
    if (o->precision > SDT_PRECISION_BF16)
        return OPTION_FAIL("%sprecision is not one of fp32, fp16 or bf16; pick one of those.", p);
    if (o->device > SDT_DEVICE_CHOICE_CUDA)
        return OPTION_FAIL("%sdevice is not one of auto, cpu or cuda; pick one of those.", p);
    if (o->cuda_graph > SDT_CUDA_GRAPH_OFF)
        return OPTION_FAIL("%scuda_graph is %u; it must be 0 (auto), 1 (on) or 2 (off).", p, (unsigned)o->cuda_graph);
    return sdt_train_prediction_check(o->prediction_type, o->v_prediction, p, error);
}

static bool check_counts(const sdt_train_options *o, const char *p, sdt_error *error)
{
    if (o->batch_size == 0) return OPTION_FAIL("Batch size must be positive (%sbatch_size is 0); use 1 or more.", p);
    if (o->grad_accum_steps == 0)
        return OPTION_FAIL("Gradient accumulation step must be positive (%sgrad_accum_steps is 0); use 1 or more.", p);
    if (o->max_steps <= 0) return OPTION_FAIL("Max steps must be positive (%smax_steps); use 1 or more.", p);
    if (o->save_every < 0)
        return OPTION_FAIL("Save a copy every N steps must be positive or 0 (%ssave_every); 0 disables it.", p);
    if (o->preview_every < 0)
        return OPTION_FAIL("Save an image every N steps must be positive or 0 (%spreview_every); 0 disables it.", p);
    if (o->write_csv_every < 0)
        return OPTION_FAIL("%swrite_csv_every must be positive or 0; 0 disables the loss CSV.", p);
    if (o->save_state_every_seconds < 0)
        return OPTION_FAIL(
            "%ssave_state_every_seconds must be positive or 0; 0 writes the state only with each copy and at the "
            "end.",
            p);
    if (o->clip_skip < 1 || o->clip_skip > 12)
        return OPTION_FAIL("%sclip_skip must be 1..12 (1 = the last CLIP layer).", p);
    if (o->max_consecutive_nonfinite == 0)
        return OPTION_FAIL("%smax_consecutive_nonfinite must be at least 1 (the default is 10).", p);
    if (o->preview_every > 0 && (o->preview_steps == 0 || o->preview_steps > 1000))
        return OPTION_FAIL("%spreview_steps must be 1..1000 when previews are on (the default is 20).", p);
    return true;
}

/* A training size, or a preview size where 0 means the training one. */
static bool check_size(uint32_t v, bool zero_ok, const char *p, const char *field, sdt_error *error)
{
    if ((v >= 64 && v <= 2048 && v % 8 == 0) || (zero_ok && v == 0)) return true;
    return OPTION_FAIL("%s%s is %u; it must be a multiple of 8 from 64 to 2048%s.", p, field, (unsigned)v,
                       zero_ok ? " (0 = the training size)" : " (the default is 512)");
}

static bool check_numbers(const sdt_train_options *o, const char *p, sdt_error *error)
{
    if (!o->varsize &&
        (!check_size(o->width, false, p, "width", error) || !check_size(o->height, false, p, "height", error)))
        return false;
    if (!check_size(o->preview_width, true, p, "preview_width", error) ||
        !check_size(o->preview_height, true, p, "preview_height", error))
        return false;
    if (!(o->tag_dropout >= 0.0 && o->tag_dropout <= 1.0))
        return OPTION_FAIL("%stag_dropout must be between 0 and 1 (the chance to drop each tag).", p);
    if (!(o->lr_backoff > 0.0 && o->lr_backoff <= 1.0))
        return OPTION_FAIL(
            "%slr_backoff must be in (0, 1] (the default 0.5 halves the learning rate when the fp32 fallback fires).",
            p);
    if (!(o->preview_cfg_scale >= 0.0 && o->preview_cfg_scale <= 100.0))
        return OPTION_FAIL("%spreview_cfg_scale must be between 0 and 100 (0 = the family's default: 7, Flux.1 1).", p);
    if (!(o->loss_scale_init > 0.0 && o->loss_scale_init < 3.4e38))
        return OPTION_FAIL("%sloss_scale_init must be a positive finite number (the default is 65536).", p);
    return true;
}

/* The loss, noise and LR-scheduler options (1.5). */
static bool check_loss_options(const sdt_train_options *o, const char *p, sdt_error *error)
{
    if (o->loss_type > SDT_LOSS_HUBER)
        return OPTION_FAIL("%sloss_type is %u; it must be 0 (l2), 1 (l1) or 2 (huber).", p, (unsigned)o->loss_type);
    if (!((float)o->huber_delta > 0.0f && isfinite((float)o->huber_delta))) /* the loss computes in float */
        return OPTION_FAIL(
            "%shuber_delta must be a positive finite number (where the Huber loss turns from quadratic to linear; "
            "the default is 1).",
            p);
    if (o->huber_delta < SDT_LOSS_SCALE_OPTION_MIN)
        return OPTION_FAIL(
            "%shuber_delta is %g, below %g: the Huber gradient is at most delta, so every gradient would vanish in "
            "float arithmetic before it reaches the trained values; use %g to 1e6 (the default is 1), or "
            "loss_type l1 for the shape a tiny delta gives.",
            p, o->huber_delta, SDT_LOSS_SCALE_OPTION_MIN, SDT_LOSS_SCALE_OPTION_MIN);
    if (!(o->min_snr_gamma >= 0.0 && isfinite(o->min_snr_gamma)))
        return OPTION_FAIL("%smin_snr_gamma must be 0 (off) or a positive finite number (5 is the paper's choice).", p);
    if (o->min_snr_gamma > 0.0 && o->min_snr_gamma < SDT_LOSS_SCALE_OPTION_MIN)
        return OPTION_FAIL(
            "%smin_snr_gamma is %g, below %g: each sample's weight min(SNR, gamma)/SNR is at most gamma/SNR, so "
            "every gradient would vanish in float arithmetic before it reaches the trained values; use 0 (off) "
            "or %g and above (5 is the paper's choice).",
            p, o->min_snr_gamma, SDT_LOSS_SCALE_OPTION_MIN, SDT_LOSS_SCALE_OPTION_MIN);
    if (!(o->noise_offset >= 0.0 && o->noise_offset <= 1.0))
        return OPTION_FAIL("%snoise_offset must be between 0 (off) and 1 (0.05 to 0.1 is usual).", p);
    if (o->noise_offset_random_strength && o->noise_offset == 0.0)
        return OPTION_FAIL(
            "%snoise_offset_random_strength draws each sample's strength from [0, noise_offset], but noise_offset "
            "is 0; set noise_offset too, e.g. 0.1.",
            p);
    if (o->timestep_max > SDT_DDPM_STEPS - 1)
        return OPTION_FAIL("%stimestep_max is %u; training timesteps are 0..%d, so use at most %d.", p,
                           (unsigned)o->timestep_max, SDT_DDPM_STEPS - 1, SDT_DDPM_STEPS - 1);
    if (o->timestep_min > o->timestep_max)
        return OPTION_FAIL(
            "%stimestep_min (%u) is above %stimestep_max (%u); the range is inclusive, so set min <= max.", p,
            (unsigned)o->timestep_min, p, (unsigned)o->timestep_max);
    if (o->lr_scheduler > SDT_LR_SCHEDULER_COSINE_WITH_RESTARTS)
        return OPTION_FAIL(
            "%slr_scheduler is %u; it must be 0 (constant), 1 (linear), 2 (cosine) or 3 (cosine_with_restarts).", p,
            (unsigned)o->lr_scheduler);
    if (o->lr_cycles < 1)
        return OPTION_FAIL("%slr_cycles must be at least 1 (the cosine cycles of cosine_with_restarts).", p);
    if (o->warmup_steps < 0) return OPTION_FAIL("%swarmup_steps must be positive or 0 (0: no warmup).", p);
    return true;
}

bool sdt_train_options_check_required(const sdt_train_options *o, const char *p, sdt_error *error)
{
    if (is_blank(o->model_path))
        return OPTION_FAIL(
            "No model selected: set %smodel_path to a Stable Diffusion checkpoint file or diffusers folder.", p);
    if (o->clip_mode != SDT_CLIP_DISABLED && is_blank(o->clip_value))
        return OPTION_FAIL("Gradient clipping is on but %sclip_value is empty; set it, e.g. \"0.1\".", p);
    if (is_blank(o->dataset_dir))
        return OPTION_FAIL("Dataset directory is empty: set %sdataset_dir to a folder of training images.", p);
    if (is_blank(o->template_file))
        return OPTION_FAIL(
            "Prompt template file not selected: set %stemplate_file, e.g. a file with the line \"a photo of [name]\".",
            p);
    if ((o->save_every > 0 || o->preview_every > 0 || o->write_csv_every > 0) && is_blank(o->log_dir))
        return OPTION_FAIL(
            "Log directory is empty: set %slog_dir, or set save_every, preview_every and write_csv_every to 0.", p);
    return true;
}

/* Validation (1.5): one source of held-out images, measured on a cadence; early stop needs it. */
static bool check_validation(const sdt_train_options *o, const char *p, sdt_error *error)
{
    bool dir = !is_blank(o->validation_dir), split = o->validation_split != 0.0;
    if (split && !(o->validation_split > 0.0 && o->validation_split < 1.0))
        return OPTION_FAIL(
            "%svalidation_split is %g; it must be between 0 and 1 (exclusive), the fraction of the dataset held "
            "out, e.g. 0.1; 0 turns it off.",
            p, o->validation_split);
    if (dir && split)
        return OPTION_FAIL(
            "%svalidation_dir and %svalidation_split are both set; choose one source of validation images.", p, p);
    if (o->validate_every < 0) return OPTION_FAIL("%svalidate_every must be positive or 0.", p);
    if ((dir || split) && o->validate_every == 0)
        return OPTION_FAIL(
            "%s%s is set but %svalidate_every is 0; set how often to measure the validation loss, e.g. 100.", p,
            dir ? "validation_dir" : "validation_split", p);
    if (!(dir || split) && o->validate_every > 0)
        return OPTION_FAIL("%svalidate_every is %lld but there are no validation images; set %svalidation_dir or "
                           "%svalidation_split, or set validate_every to 0.",
                           p, (long long)o->validate_every, p, p);
    if (o->stop_after_no_improvement > 0 && !(dir || split))
        return OPTION_FAIL(
            "%sstop_after_no_improvement needs a validation loss; set %svalidation_dir or %svalidation_split "
            "with %svalidate_every.",
            p, p, p, p);
    return true;
}

/* Aspect-ratio buckets (1.5): kohya's rules, the area 0 meaning width x height. */
static bool check_buckets(const sdt_train_options *o, const char *p, sdt_error *error)
{
    if (!o->buckets) {
        if (o->random_crop)
            return OPTION_FAIL("%srandom_crop places the crop of a bucket; turn on %sbuckets too.", p, p);
        return true;
    }
    if (o->varsize)
        return OPTION_FAIL(
            "%sbuckets and %svarsize are both set; choose one: buckets resize and crop each image to its "
            "bucket, while %svarsize keeps every image's own size.",
            p, p, p);
    sdt_bucket_rules r = sdt_train_options_bucket_rules(o);
    return sdt_bucket_rules_check(&r, p, error);
}

sdt_bucket_rules sdt_train_options_bucket_rules(const sdt_train_options *o)
{
    return (sdt_bucket_rules){o->bucket_max_area ? o->bucket_max_area : (int64_t)o->width * o->height,
                              (int)o->bucket_min_side, (int)o->bucket_max_side, (int)o->bucket_step};
}

/* The average of the trained values (1.5). */
static bool check_ema(const sdt_train_options *o, const char *p, sdt_error *error)
{
    bool on = o->ema_decay != 0.0;
    if (on && !(o->ema_decay > 0.0 && o->ema_decay < 1.0))
        return OPTION_FAIL(
            "%sema_decay is %g; it must be between 0 and 1 (exclusive), e.g. 0.999; 0 turns the average off.", p,
            o->ema_decay);
    if (o->ema_every == 0) return OPTION_FAIL("%sema_every must be at least 1 (the default, every step).", p);
    if (!on && (o->ema_result || o->ema_previews))
        return OPTION_FAIL("%s%s needs the average: set %sema_decay, e.g. 0.999.", p,
                           o->ema_result ? "ema_result" : "ema_previews", p);
    return true;
}

/* Data parallelism (1.8, docs/abi.md 3.16): the ranks this trainer runs must lie inside the job. */
static bool check_parallel(const sdt_train_options *o, const char *p, sdt_error *error)
{
    int64_t world = o->world_size > 1 ? o->world_size : 1;
    int64_t local = o->devices ? o->device_count : 1;
    if (o->world_size < 0)
        return OPTION_FAIL("%sworld_size is %d; it counts the job's ranks (0 or 1: one device).", p,
                           (int)o->world_size);
    if (o->comm_timeout_seconds < 0)
        return OPTION_FAIL("%scomm_timeout_seconds is %d; use 0 (600 seconds) or more.", p,
                           (int)o->comm_timeout_seconds);
    if (o->devices && o->device_count <= 0)
        return OPTION_FAIL("%sdevices is set but %sdevice_count is %d; give the number of CUDA ordinals in the list.",
                           p, p, (int)o->device_count);
    if (o->devices && o->device_count > SDT_TRAIN_MAX_DEVICES)
        return OPTION_FAIL("%sdevice_count is %d; one trainer drives at most %d devices.", p, (int)o->device_count,
                           SDT_TRAIN_MAX_DEVICES);
    if (!o->devices && o->device_count != 0)
        return OPTION_FAIL("%sdevice_count is %d but %sdevices is NULL; set both or neither.", p, (int)o->device_count,
                           p);
    for (int64_t i = 0; o->devices && i < o->device_count; i++) {
        if (o->devices[i] < 0)
            return OPTION_FAIL("%sdevices[%d] is %d; a CUDA ordinal is 0 or more.", p, (int)i, (int)o->devices[i]);
        for (int64_t j = 0; j < i; j++)
            if (o->devices[j] == o->devices[i])
                return OPTION_FAIL("%sdevices[%d] and %sdevices[%d] both name CUDA device %d; list each GPU once (one "
                                   "rank per device).",
                                   p, (int)j, p, (int)i, (int)o->devices[i]);
    }
    if (o->devices && o->world_size == 0) world = local;
    if (o->rank < 0 || o->rank + local > world)
        return OPTION_FAIL("%srank %d with %lld device(s) does not fit in %sworld_size %lld; ranks run from 0 to "
                           "world_size - 1.",
                           p, (int)o->rank, (long long)local, p, (long long)world);
    return true;
}

/* The rectified-flow block (1.9): values in range here; whether the model is a flow family is prepare's. */
static bool check_flow(const sdt_train_options *o, const char *p, sdt_error *error)
{
    char field[160];
    sdt_flow_density density = SDT_FLOW_DENSITY_LOGIT_NORMAL;
    sdt_flow_weighting weighting = SDT_FLOW_WEIGHT_NONE;
    snprintf(field, sizeof field, "%stimestep_sampling", p);
    if (!sdt_flow_density_parse(o->timestep_sampling, field, &density, error)) return false;
    snprintf(field, sizeof field, "%sflow_weighting", p);
    if (!sdt_flow_weighting_parse(o->flow_weighting, field, &weighting, error)) return false;
    if (!isfinite(o->logit_mean) || !(o->logit_std > 0.0 && isfinite(o->logit_std)))
        return OPTION_FAIL("%slogit_mean must be finite and %slogit_std above 0 (defaults 0 and 1).", p, p);
    if (!(o->mode_scale >= -1.0 && o->mode_scale <= 1.75))
        return OPTION_FAIL("%smode_scale is %g; between -1 and 1.75 the mode density stays a density (default 1.29).",
                           p, o->mode_scale);
    if (!(o->flow_shift >= 0.0 && o->flow_shift <= 100.0))
        return OPTION_FAIL("%sflow_shift is %g; 0 takes the family's shift, else a shift in (0, 100].", p,
                           o->flow_shift);
    if (!(o->guidance >= 0.0 && o->guidance <= 100.0))
        return OPTION_FAIL("%sguidance is %g; 0 takes Flux.1 dev's 3.5, else a value in (0, 100].", p, o->guidance);
    if (o->t5_max_length > 512)
        return OPTION_FAIL("%st5_max_length is %u; T5 reads at most 512 tokens (0 = the family's length).", p,
                           (unsigned)o->t5_max_length);
    return true;
}

bool sdt_train_options_check(const sdt_train_options *o, const char *p, sdt_error *error)
{
    if (!check_enums(o, p, error) || !check_counts(o, p, error) || !check_numbers(o, p, error) ||
        !check_loss_options(o, p, error) || !check_validation(o, p, error) || !check_ema(o, p, error) ||
        !check_buckets(o, p, error) || !check_parallel(o, p, error) || !check_flow(o, p, error))
        return false;
    char field[160];
    sdt_preview_seeds seeds;
    sdt_sampler_kind sampler;
    snprintf(field, sizeof field, "%spreview_sampler", p);
    if (o->preview_every > 0 && !sdt_sampler_parse(o->preview_sampler, field, &sampler, error)) return false;
    snprintf(field, sizeof field, "%spreview_seeds", p);
    if (o->preview_every > 0 && !sdt_preview_seeds_parse(o->preview_seeds, field, &seeds, error)) return false;
    if (!(o->caption_dropout >= 0.0 && o->caption_dropout <= 1.0))
        return OPTION_FAIL(
            "%scaption_dropout must be between 0 and 1 (the chance that a sample trains on the empty prompt).", p);
    if (o->keep_tokens > 1000)
        return OPTION_FAIL("%skeep_tokens is %u; it counts the caption's first tags kept in place (0..1000, 0 = none).",
                           p, (unsigned)o->keep_tokens);
    return true;
}

_Static_assert((int)SD_PREDICTION_AUTO == SDT_PREDICTION_AUTO && (int)SD_PREDICTION_EPSILON == SDT_PREDICTION_EPSILON &&
                   (int)SD_PREDICTION_V == SDT_PREDICTION_V,
               "the models' prediction choice has the ABI's numbers");

bool sdt_train_prediction_check(uint32_t prediction_type, bool v_prediction, const char *prefix, sdt_error *error)
{
    if (prediction_type > SDT_PREDICTION_V)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%sprediction_type is %u; it must be 0 (auto), 1 (epsilon) or 2 (v).", prefix,
                        (unsigned)prediction_type);
    if (v_prediction && prediction_type == SDT_PREDICTION_EPSILON)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%sv_prediction (v) and %sprediction_type (epsilon) contradict; set only one "
                        "of them.",
                        prefix, prefix);
    return true;
}

sd_prediction_choice sdt_train_prediction_choice(uint32_t prediction_type, bool v_prediction)
{
    return v_prediction ? SD_PREDICTION_V : (sd_prediction_choice)prediction_type;
}
