/* text_cache.h - the text encoders' outputs of every prompt a run can produce, encoded once.
 *
 * A run whose text side trains nothing (a hypernetwork without an embedding) and whose prompts
 * are all known before training (no tag shuffle, no tag drop-out: template lines x captions,
 * the empty prompt, the validation and preview prompts) needs the encoders only to turn those
 * prompts into the UNet's conditioning. kohya's --cache_text_encoder_outputs does the same.
 * Every prompt is cut into its 77-token chunks (train/prompt.h); each encoder reads every chunk
 * as its own sequence, so a chunk's context rows (and SDXL's pooled output, taken from a
 * prompt's first chunk) are a function of its 77 ids alone: the cache keys on the chunk.
 * A batch then looks up its rows chunk by chunk, whatever its prompts' chunk counts (a shorter
 * prompt's padding chunk is the empty prompt's chunk, which every cache holds).
 *
 * The values are encoded by the pass's own code (train/sd_cond.c with the encoders) in the
 * run's activation dtype, in groups of chunks, and kept in host memory; with the cache attached
 * to the runtime (sd_runtime.text_cache) sd_cond copies them instead of running the encoders,
 * whose weights then leave the device (sd_runtime_text_park). The fp32 fallback encodes them
 * again in f32 (sdt_text_cache_encode after sd_runtime_set_dtype). Encoding lives in
 * train/text_cache_encode.h: it runs sd_cond, which reads this store.
 */
#ifndef SDT_TRAIN_TEXT_CACHE_H
#define SDT_TRAIN_TEXT_CACHE_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "train/prompt.h"
#include "train/sd_runtime.h"
#include "train/work_arena.h"

/* Host memory the cache may take; a run whose chunks need more keeps its encoders. */
#define SDT_TEXT_CACHE_MAX_BYTES ((size_t)1 << 30)

typedef struct sdt_text_cache {
    int n, cap;    /* distinct chunks (after sdt_text_cache_seal), room in keys */
    int32_t *keys; /* [n, 77] CLIP-L ids (bigG's are made from them), memcmp order once sealed */
    bool sealed;
    int32_t end_id;       /* the tokenizer's end token (bigG pads after it: train/sd_cond.h) */
    sdt_dtype dtype;      /* of the values: the activation dtype they were encoded in */
    int clip_skip;        /* they were encoded with */
    int width;            /* context width (SDXL: 768 + 1280) */
    int pooled_width;     /* SDXL's pooled output, else 0 */
    size_t context_bytes; /* one chunk's context rows [77, width] in dtype */
    size_t pooled_bytes;  /* one chunk's pooled vector in dtype (0 unless SDXL) */
    uint8_t *context;     /* [n] x context_bytes, in key order */
    uint8_t *pooled;      /* [n] x pooled_bytes, or NULL */
} sdt_text_cache;

/* Adds every chunk of a prompt (as sdt_prompt_encode cuts it). false: out of host memory. */
bool sdt_text_cache_add_prompt(sdt_text_cache *c, sdt_tokenizer *tok, const sdt_slot_rules *rules, const char *prompt);
/* Sorts the keys and drops repeats; n is then the count of distinct chunks. */
void sdt_text_cache_seal(sdt_text_cache *c);
/* A chunk's context width (SDXL: 768 + 1280) and its pooled width (SDXL's, else 0) for this model. */
int sdt_text_cache_context_width(const sd_runtime *rt);
int sdt_text_cache_pooled_width(const sd_runtime *rt);
/* Host bytes the values of n chunks take for this model in dtype. */
size_t sdt_text_cache_bytes(const sd_runtime *rt, sdt_dtype dtype, int n);
/* The values of the chunk with these 77 ids (NULL when the cache does not hold it). */
const uint8_t *sdt_text_cache_context(const sdt_text_cache *c, const int32_t *ids);
const uint8_t *sdt_text_cache_pooled(const sdt_text_cache *c, const int32_t *ids);
void sdt_text_cache_free(sdt_text_cache *c);

#endif
