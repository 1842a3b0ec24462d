/* train_options.c - see train_options.h. */
#include "train/train_options.h"

#include <stdio.h>
#include <string.h>

#include "api/copy_out.h"

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
    o->preview_cfg_scale = 7.0;
    o->loss_scale_init = 65536.0;
    o->clip_value = "0.1";
    o->log_dir = log_dir;
    o->filename_word_regex = "";
    o->filename_join_string = " ";
    o->preview_negative_prompt = "";
    o->preview_sampler = "ddim";
}

bool sdt_train_options_read(sdt_train_options *own, const sdt_train_options *host, const char *log_dir,
                            const char *field, sdt_error *error)
{
    sdt_train_options_set_defaults(own, log_dir);
    if (!host || !sdt_struct_read_in(own, sizeof *own, host))
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "%s is NULL or its struct_size is not set; fill it with train_options_defaults() first.", field);
    if (own->reserved0 != 0 || own->reserved1[0] || own->reserved1[1] || own->reserved2 != 0)
        return sdt_fail(error, SDT_ERR_VALIDATION, "%s: the reserved fields must be 0; fill it with train_options_defaults() first.",
                        field);
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s->", field);
    return sdt_train_prediction_check(own->prediction_type, own->v_prediction, prefix, error);
}

_Static_assert((int)SD_PREDICTION_AUTO == SDT_PREDICTION_AUTO && (int)SD_PREDICTION_EPSILON == SDT_PREDICTION_EPSILON &&
                   (int)SD_PREDICTION_V == SDT_PREDICTION_V,
               "the models' prediction choice has the ABI's numbers");

bool sdt_train_prediction_check(uint32_t prediction_type, bool v_prediction, const char *prefix, sdt_error *error)
{
    if (prediction_type > SDT_PREDICTION_V)
        return sdt_fail(error, SDT_ERR_VALIDATION, "%sprediction_type is %u; it must be 0 (auto), 1 (epsilon) or 2 (v).", prefix,
                        (unsigned)prediction_type);
    if (v_prediction && prediction_type == SDT_PREDICTION_EPSILON)
        return sdt_fail(error, SDT_ERR_VALIDATION, "%sv_prediction (v) and %sprediction_type (epsilon) contradict; set only one "
                        "of them.", prefix, prefix);
    return true;
}

sd_prediction_choice sdt_train_prediction_choice(uint32_t prediction_type, bool v_prediction)
{
    return v_prediction ? SD_PREDICTION_V : (sd_prediction_choice)prediction_type;
}
