/* train_options.h - the training options every method shares (sdt_train_options, ABI 1.2):
 * their defaults, reading a host's copy under the struct_size rules, and the one list of the
 * shared fields, so a method whose config also carries them inline (sdt_ti_config, 1.0) copies
 * them without a second list. */
#ifndef SDT_TRAIN_TRAIN_OPTIONS_H
#define SDT_TRAIN_TRAIN_OPTIONS_H

#include <stdbool.h>

#include "data/buckets.h"
#include "sd_model.h"
#include "sdt_error.h"
#include "sdtrain.h"

/* Every field sdt_train_options has, X(field): a method whose config carries them inline copies
 * them with `#define TAKE(f) cfg->f = opts->f;` and SDT_TRAIN_OPTION_FIELDS(TAKE). */
/* One X-macro list, laid out by hand (clang-format would staircase it). */
// clang-format off
#define SDT_TRAIN_OPTION_FIELDS(X)                                                                                   \
    X(batch_size) X(grad_accum_steps) X(clip_mode) X(width) X(height) X(latent_sampling) X(precision) X(device)      \
    X(clip_skip) X(max_consecutive_nonfinite) X(preview_steps) X(preview_width) X(preview_height) X(cpu_threads)     \
    X(max_steps) X(save_every) X(preview_every) X(write_csv_every) X(seed) X(preview_seed) X(tag_dropout)            \
    X(lr_backoff) X(preview_cfg_scale) X(loss_scale_init) X(model_path) X(clip_value) X(dataset_dir) X(log_dir)      \
    X(template_file) X(filename_word_regex) X(filename_join_string) X(preview_prompt) X(preview_negative_prompt)     \
    X(preview_sampler) X(resume_state_path) X(tokenizer_path) X(varsize) X(shuffle_tags)                             \
    X(use_alpha_as_loss_weight) X(anomaly_mode) X(v_prediction) X(gradient_checkpointing) X(prediction_type)         \
    X(save_state_every_seconds)
// clang-format on

/* The fields appended in 1.5, which only sdt_train_options has: a method whose config carries the
 * older ones inline takes these from its train_options pointer. */
/* One X-macro list, laid out by hand (clang-format would staircase it). */
// clang-format off
#define SDT_TRAIN_OPTION_FIELDS_1_5(X)                                                                               \
    X(preview_prompts_file) X(preview_seeds) X(caption_dropout) X(keep_tokens) X(flip) X(bucket_max_area)            \
    X(bucket_min_side) X(bucket_max_side) X(bucket_step) X(buckets) X(random_crop)
// clang-format on

/* prediction_type (1.3) and v_prediction (1.1) as one choice: v_prediction true means V (a
 * 1.1/1.2 host's only way to say it), else prediction_type. check: prediction_type is one of
 * the enum's values and not EPSILON beside v_prediction true; a VALIDATION error names the
 * fields after `prefix` ("config.", "config.train_options->") otherwise. */
bool sdt_train_prediction_check(uint32_t prediction_type, bool v_prediction, const char *prefix, sdt_error *error);
sd_prediction_choice sdt_train_prediction_choice(uint32_t prediction_type, bool v_prediction);

/* The bucket rules of the options (1.5): bucket_max_area 0 is width x height. */
sdt_bucket_rules sdt_train_options_bucket_rules(const sdt_train_options *o);

/* The A1111 Train tab's defaults; log_dir is the method's ("textual_inversion", "hypernetworks"). */
void sdt_train_options_set_defaults(sdt_train_options *o, const char *log_dir);

/* The smallest huber_delta and (non-zero) min_snr_gamma. Both only scale gradients (a tiny delta
 * makes Huber delta x L1; a tiny gamma weighs every sample gamma/SNR), and AdamW undoes a scale,
 * but the scaled per-pixel gradient, value x loss scale / pixels, must stay above fp16's smallest
 * step (6e-8) in the 16-bit backward: at 1e-4 it does for any latent and batch up to ~10^8 pixels,
 * while 5e-324 or 1e-45 make every gradient exactly 0 even in fp32. */
#define SDT_LOSS_SCALE_OPTION_MIN 1e-4

/* The checks of the shared values that need no file (enums, counts, ranges, sizes, the preview
 * sampler), one home for every method: false + a VALIDATION sentence naming the field after
 * `prefix` ("config.", "config.train_options->") and the fix. Reserved fields are the reader's
 * (their place differs per struct). */
bool sdt_train_options_check(const sdt_train_options *o, const char *prefix, sdt_error *error);
/* The shared paths a run needs (model, dataset, template, a log folder when something is
 * logged, a clip value when clipping): a method checks them after its own file, so the sentence
 * a user meets first is about the file they chose to train. */
bool sdt_train_options_check_required(const sdt_train_options *o, const char *prefix, sdt_error *error);

/* A host's options (any struct_size from 1.2 on) over the defaults into *own. false + an
 * INVALID_ARGUMENT error naming `field` (the config member that points at them) when host is
 * NULL or its struct_size is unset, or a VALIDATION error when a reserved field is not 0 or the
 * prediction type is bad (sdt_train_prediction_check). */
bool sdt_train_options_read(sdt_train_options *own, const sdt_train_options *host, const char *log_dir,
                            const char *field, sdt_error *error);

#endif
