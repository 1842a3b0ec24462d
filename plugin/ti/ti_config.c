/* ti_config.c - textual-inversion config defaults (the A1111 Train tab's) and plain checks. */
#include <stdio.h>
#include <string.h>

#include "ti/ti_config.h"
#include "train/train_options.h"

/* The shared options into the config's inline copies of them. */
static void take_shared(sdt_ti_config *c, const sdt_train_options *o)
{
#define TAKE(f) c->f = o->f;
    SDT_TRAIN_OPTION_FIELDS(TAKE)
#undef TAKE
}

void ti_config_set_defaults(sdt_ti_config *c)
{
    memset(c, 0, sizeof *c);
    c->struct_size = sizeof *c;
    sdt_train_options shared;
    ti_train_options_set_defaults(&shared);
    take_shared(c, &shared);
    c->learn_rate = "0.005";
    c->save_image_with_embedding = true;
}

void ti_train_options_set_defaults(sdt_train_options *o)
{
    sdt_train_options_set_defaults(o, "textual_inversion");
}

bool ti_config_take_train_options(sdt_ti_config *c, sdt_error *error)
{
    if (!c->train_options) return true;
    sdt_train_options own;
    if (!sdt_train_options_read(&own, c->train_options, "textual_inversion", "config.train_options", error)) return false;
    take_shared(c, &own);
    return true;
}

/* A config field the job cannot run with. */
static bool fail(sdt_error *error, const char *sentence)
{
    return sdt_fail(error, SDT_ERR_VALIDATION, "%s", sentence);
}

/* A create_embedding() spec field: the call's argument is wrong. */
static bool spec_fail(sdt_error *error, const char *sentence)
{
    return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "%s", sentence);
}

static bool is_blank(const char *s)
{
    return !s || s[0] == '\0';
}

/* One table of the enum fields: value, count, sentence. */
static bool check_enums(const sdt_ti_config *c, sdt_error *error)
{
    if (c->clip_mode > SDT_CLIP_NORM)
        return fail(error, "config.clip_mode is not one of disabled, value or norm; pick one of those.");
    if (c->latent_sampling > SDT_LATENT_RANDOM)
        return fail(error, "config.latent_sampling is not one of once, deterministic or random; pick one of those.");
    if (c->precision > SDT_PRECISION_BF16)
        return fail(error, "config.precision is not one of fp32, fp16 or bf16; pick one of those.");
    if (c->device > SDT_DEVICE_CHOICE_CUDA)
        return fail(error, "config.device is not one of auto, cpu or cuda; pick one of those.");
    return sdt_train_prediction_check(c->prediction_type, c->v_prediction, "config.", error);
}

static bool check_counts(const sdt_ti_config *c, sdt_error *error)
{
    if (c->batch_size == 0) return fail(error, "Batch size must be positive (config.batch_size is 0); use 1 or more.");
    if (c->grad_accum_steps == 0)
        return fail(error, "Gradient accumulation step must be positive (config.grad_accum_steps is 0); use 1 or more.");
    if (c->max_steps <= 0) return fail(error, "Max steps must be positive (config.max_steps); use 1 or more.");
    if (c->save_every < 0) return fail(error, "Save a copy every N steps must be positive or 0 (config.save_every); 0 disables it.");
    if (c->preview_every < 0) return fail(error, "Save an image every N steps must be positive or 0 (config.preview_every); 0 disables it.");
    if (c->write_csv_every < 0) return fail(error, "config.write_csv_every must be positive or 0; 0 disables the loss CSV.");
    if (c->save_state_every_seconds < 0)
        return fail(error, "config.save_state_every_seconds must be positive or 0; 0 writes the state only with each copy and at the end.");
    if (c->clip_skip < 1 || c->clip_skip > 12) return fail(error, "config.clip_skip must be 1..12 (1 = the last CLIP layer).");
    if (c->max_consecutive_nonfinite == 0)
        return fail(error, "config.max_consecutive_nonfinite must be at least 1 (the default is 10).");
    if (c->reserved0 != 0) return fail(error, "config.reserved0 must be 0; fill the config with config_defaults() first.");
    if (c->reserved1[0] || c->reserved1[1] || c->reserved1[2] || c->reserved2)
        return fail(error, "config.reserved1 and config.reserved2 must be 0; fill the config with config_defaults() first.");
    return true;
}

static bool check_size(uint32_t v, const char *field, sdt_error *error)
{
    if (v >= 64 && v <= 2048 && v % 8 == 0) return true;
    char sentence[256];
    snprintf(sentence, sizeof sentence, "config.%s is %u; it must be a multiple of 8 from 64 to 2048 (the default is 512).",
             field, (unsigned)v);
    return fail(error, sentence);
}

static bool check_numbers(const sdt_ti_config *c, sdt_error *error)
{
    if (!c->varsize && (!check_size(c->width, "width", error) || !check_size(c->height, "height", error)))
        return false;
    if (!(c->tag_dropout >= 0.0 && c->tag_dropout <= 1.0))
        return fail(error, "config.tag_dropout must be between 0 and 1 (the chance to drop each tag).");
    if (!(c->lr_backoff > 0.0 && c->lr_backoff <= 1.0))
        return fail(error, "config.lr_backoff must be in (0, 1] (the default 0.5 halves the learning rate when the fp32 fallback fires).");
    if (!(c->preview_cfg_scale >= 0.0 && c->preview_cfg_scale <= 100.0))
        return fail(error, "config.preview_cfg_scale must be between 0 and 100 (the default is 7).");
    if (!(c->loss_scale_init > 0.0 && c->loss_scale_init < 3.4e38))
        return fail(error, "config.loss_scale_init must be a positive finite number (the default is 65536).");
    if (c->preview_every > 0 && c->preview_steps == 0)
        return fail(error, "config.preview_steps must be at least 1 when previews are on (the default is 20).");
    return true;
}

static bool check_required_strings(const sdt_ti_config *c, sdt_error *error)
{
    if (is_blank(c->embedding_path)) return fail(error, "Embedding not selected: set config.embedding_path to the embedding file to train.");
    if (is_blank(c->model_path)) return fail(error, "No model selected: set config.model_path to a Stable Diffusion checkpoint file or diffusers folder.");
    if (is_blank(c->learn_rate)) return fail(error, "Learning rate is empty: set config.learn_rate, e.g. \"0.005\" or \"0.005:100, 1e-3:1000, 1e-5\".");
    if (c->clip_mode != SDT_CLIP_DISABLED && is_blank(c->clip_value))
        return fail(error, "Gradient clipping is on but config.clip_value is empty; set it, e.g. \"0.1\".");
    if (is_blank(c->dataset_dir)) return fail(error, "Dataset directory is empty: set config.dataset_dir to a folder of training images.");
    if (is_blank(c->template_file)) return fail(error, "Prompt template file not selected: set config.template_file, e.g. a file with the line \"a photo of [name]\".");
    if ((c->save_every > 0 || c->preview_every > 0 || c->write_csv_every > 0) && is_blank(c->log_dir))
        return fail(error, "Log directory is empty: set config.log_dir, or set save_every, preview_every and write_csv_every to 0.");
    if (c->preview_every > 0 && !is_blank(c->preview_sampler) && strcmp(c->preview_sampler, "ddim") != 0)
        return fail(error, "config.preview_sampler must be \"ddim\" (the one preview sampler this plugin has).");
    return true;
}

bool ti_config_check(const sdt_ti_config *c, sdt_error *error)
{
    return check_enums(c, error) && check_counts(c, error) && check_numbers(c, error) &&
           check_required_strings(c, error);
}

void ti_spec_set_defaults(sdt_embedding_spec *s)
{
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
    s->vectors_per_token = 1;
    s->init_text = "*";
}

bool ti_spec_check(const sdt_embedding_spec *s, sdt_error *error)
{
    if (is_blank(s->name)) return spec_fail(error, "The embedding name is empty: set spec.name, e.g. \"my-style\".");
    if (s->vectors_per_token < 1 || s->vectors_per_token > 75)
        return spec_fail(error, "spec.vectors_per_token must be 1..75 (each vector takes one of the prompt's 75 token slots).");
    if (is_blank(s->model_path)) return spec_fail(error, "No model selected: set spec.model_path to a Stable Diffusion checkpoint (its text encoder sets the embedding width).");
    if (is_blank(s->output_dir)) return spec_fail(error, "spec.output_dir is empty: set it to the folder the embedding file goes to.");
    return true;
}
