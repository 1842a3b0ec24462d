/* run_t5_cache.h - whether an SD3.5 (or Flux.1) run keeps T5, and the T5 cache (train/t5_cache.h) that replaces
 * it when it need not: T5's output for every prompt the run can produce (the text cache's list,
 * sdt_run_prompts_each) is computed at prepare and T5's weights leave the backend. The text cache's rules
 * decide: tag shuffle and tag drop-out make new captions every step and keep T5, as does the embedding's
 * t5xxl table training or a cache over SDT_T5_CACHE_MAX_BYTES; the log says which path was taken and why in
 * one `T5: ...` line. */
#ifndef SDT_TRAIN_RUN_T5_CACHE_H
#define SDT_TRAIN_RUN_T5_CACHE_H

#include "sdt_error.h"

#include <stdbool.h>

#include "host/host_log.h"
#include "sentencepiece.h"
#include "t5_prompt.h"
#include "train/run_control.h"
#include "train/run_text_cache.h"
#include "train/sd_runtime.h"
#include "train/t5_cache.h"
#include "train/work_arena.h"

/* T5's side of the run. */
typedef struct sdt_run_t5 {
    const sdt_spm *spm;             /* T5's tokenizer, the placeholder added */
    const sdt_t5_slot_rules *rules; /* the placeholder's slots in T5's sequence */
    int len;                        /* T5's sequence, t5_len */
    const sdt_tensor *rows;         /* the embedding's t5xxl table [n, d_model] on the backend (NULL: none) */
    bool trains;                    /* the t5xxl table trains: T5 runs every step */
} sdt_run_t5;

/* T5 kept (one log line why), or every prompt's T5 output computed into tc in rt's dtype, rt->t5_cache set
 * and T5's weights parked (*encoded true: the work arena was used). */
bool sdt_run_t5_cache(sdt_t5_cache *tc, const sdt_run_prompts *prompts, const sdt_run_text_needs *needs,
                      const sdt_run_t5 *t5, sd_runtime *rt, work_arena *wa, const sdt_run_control *control,
                      const sdt_host_callbacks *host, bool *encoded, sdt_error *error);
/* After the switch to fp32 (sd_runtime_set_dtype brought T5 back in f32): a cache in use is computed again and
 * T5 parked again (*encoded true). */
bool sdt_run_t5_recache(sdt_t5_cache *tc, const sdt_run_t5 *t5, sd_runtime *rt, work_arena *wa,
                        const sdt_host_callbacks *host, bool *encoded, sdt_error *error);

#endif
