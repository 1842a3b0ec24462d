/* text_cache_encode.h - filling a text cache (train/text_cache.h) with the encoders' outputs.
 *
 * Apart from the store because it runs the pass's conditioning (train/sd_cond.h), which itself
 * reads the store: the store sits below sd_cond, the encoding above it. */
#ifndef SDT_TRAIN_TEXT_CACHE_ENCODE_H
#define SDT_TRAIN_TEXT_CACHE_ENCODE_H

#include "sdt_error.h"

#include <stdbool.h>

#include "train/sd_runtime.h"
#include "train/text_cache.h"
#include "train/work_arena.h"

/* Called between groups of chunks with the chunks encoded so far: false stops the encoding (an
 * interrupt during prepare); it may log progress. */
typedef bool (*sdt_text_cache_progress)(void *user, int done, int total);
/* Encodes every sealed key with the runtime's encoders in rt->dtype (rt->text_cache must be NULL
 * meanwhile: this runs the encoders), the work arena sized for a group of chunks and left
 * reserved. Values already there (the fp32 fallback's second encode) are replaced. progress may be
 * NULL; when it returns false, encoding stops with SDT_ERR_INTERRUPTED. */
bool sdt_text_cache_encode(sdt_text_cache *c, sd_runtime *rt, work_arena *wa, int clip_skip, bool anomaly_check,
                           sdt_text_cache_progress progress, void *user, sdt_error *error);
#endif
