/* options_copy.h - the shared training options (sdt_train_options) as a value a job keeps: read
 * once at sdt_train_job_new, every string duplicated and owned by the copy, so nothing the host
 * frees or changes later reaches the run, and nothing is written back into the host's struct.
 * The copy is normalised: an empty path or preview prompt is "not given" (NULL) and the negative
 * prompt is never NULL, so every reader tests one form. */
#ifndef SDT_TRAIN_OPTIONS_COPY_H
#define SDT_TRAIN_OPTIONS_COPY_H

#include <stdbool.h>

#include "sdtrain.h"

/* Every string field of sdt_train_options, X(field). */
/* One X-macro list, laid out by hand (clang-format would staircase it). */
// clang-format off
#define SDT_TRAIN_OPTION_STRINGS(X)                                                                                  \
    X(model_path) X(clip_value) X(dataset_dir) X(log_dir) X(template_file) X(filename_word_regex)                   \
    X(filename_join_string) X(preview_prompt) X(preview_negative_prompt) X(preview_sampler) X(resume_state_path)      \
    X(tokenizer_path) X(preview_prompts_file) X(preview_seeds) X(validation_dir) X(clip_l_path) X(clip_g_path)      \
    X(t5xxl_path) X(vae_path) X(timestep_sampling) X(flow_weighting)
// clang-format on

/* The most CUDA ordinals sdt_train_options.devices may list (1.8). */
#define SDT_TRAIN_MAX_DEVICES 64

/* *own = *o with its strings (and its device list) duplicated and normalised; false when out of host memory (*own then
 * holds nothing to release). */
bool sdt_train_options_copy(sdt_train_options *own, const sdt_train_options *o);
/* Frees the strings of a copy. */
void sdt_train_options_release(sdt_train_options *own);

#endif
