/* run_text_cache.h - whether a run keeps its text encoders, and the text cache (train/text_cache.h)
 * that replaces them when it need not: every prompt the run can produce is encoded at prepare and
 * the encoders' weights leave the device. The log says which path was taken and why, in one line.
 * Its inputs are explicit: the run's prompts (sdt_run_prompts), what would keep the encoders
 * (sdt_run_text_needs), the runtime and its work arena. */
#ifndef SDT_TRAIN_RUN_TEXT_CACHE_H
#define SDT_TRAIN_RUN_TEXT_CACHE_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>

#include "data/dataset.h"
#include "data/preview_prompts.h"
#include "data/template.h"
#include "host/host_log.h"
#include "train/prompt.h"
#include "train/run_control.h"
#include "train/sd_runtime.h"
#include "train/text_cache.h"
#include "train/work_arena.h"

/* Every prompt a run can produce: template lines x training captions, the empty prompt (caption
 * drop-out, and every shorter prompt's padding chunk in a batch), the validation prompts (the
 * first line), the preview prompt(s) and negative prompt. */
typedef struct sdt_run_prompts {
    sdt_tokenizer *tok;
    const sdt_slot_rules *rules;
    const char *prompt_name; /* what [name] becomes */
    const sdt_template *tmpl;
    const sdt_dataset *train;
    const sdt_dataset *validation; /* NULL: no validation */
    const char *preview_prompt;    /* NULL: a preview shows the last training prompt... */
    size_t last_prompt_size;       /* ...cut to this buffer's size */
    const char *preview_negative;  /* NULL: "" */
    const sdt_preview_prompts *preview_prompts;
} sdt_run_prompts;

/* Called with each prompt of the run in turn; false stops the listing (out of memory). */
typedef bool (*sdt_run_prompt_fn)(void *user, const char *prompt);
/* Every prompt a run can produce, as sdt_run_prompts lists them (repeats included), one call each; false when
 * a call returned false or a template line could not be filled. The text cache's list, and the T5 cache's
 * (train/run_t5_cache.h). */
bool sdt_run_prompts_each(const sdt_run_prompts *rp, sdt_run_prompt_fn each, void *user);

/* What keeps the encoders running every step. */
typedef struct sdt_run_text_needs {
    bool trains_text; /* an embedding's rows or placeholder go into the prompt */
    bool shuffle_tags;
    double tag_dropout;
} sdt_run_text_needs;

/* The encoders kept (one log line why), or every prompt encoded into tc in rt's dtype and the
 * encoders' weights parked (*encoded true: the work arena was used). */
bool sdt_run_text_cache(sdt_text_cache *tc, const sdt_run_prompts *prompts, const sdt_run_text_needs *needs,
                        sd_runtime *rt, work_arena *wa, int clip_skip, bool anomaly, const sdt_run_control *control,
                        const sdt_host_callbacks *host, bool *encoded, sdt_error *error);
/* After the switch to fp32: a cache in use is encoded again by the fresh f32 encoders (*encoded true). */
bool sdt_run_text_recache(sdt_text_cache *tc, sd_runtime *rt, work_arena *wa, int clip_skip, bool anomaly,
                          const sdt_host_callbacks *host, bool *encoded, sdt_error *error);

#endif
