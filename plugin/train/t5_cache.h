/* t5_cache.h - T5's output for every prompt a run can produce, computed once (issue 30).
 *
 * SD3.5's (and Flux.1's) T5-XXL is the largest part of the text side (9 GiB of weights in bf16) and the
 * most expensive encoder to run. When the embedding's t5xxl table does not train, T5's output for a prompt
 * is a function of the prompt alone: its T5 ids (t5_prompt.h) with the placeholder's slots taking the frozen
 * t5xxl rows. A run whose prompts are all known before training (as the text cache decides it,
 * train/text_cache.h: no tag shuffle, no tag drop-out) then computes T5's last hidden state once per
 * distinct prompt, keeps it in host memory, and T5's weights leave the backend (sd_runtime_part_park).
 * sd_cond gives the cached rows to sd3_text as t5_context's `hidden` instead of running T5, so CLIP and the
 * trained tables are untouched.
 *
 * A prompt is keyed on its t5_len ids with each slot position holding -(row + 1) instead of the slot's id
 * (ids are never negative), so two prompts share an entry exactly when T5 reads the same embeddings. T5
 * runs every prompt as its own sequence without a mask and the CPU's linears are one GEMM per sequence
 * (kernels/cpu/linear.c), so an entry computed in a group of prompts equals T5 run live in any batch,
 * byte for byte. The values are in the activation dtype they were computed in; the fp32 fallback
 * computes them again (sdt_t5_cache_encode after sd_runtime_set_dtype).
 *
 * Host memory rather than the device: 256 x 4096 values a prompt (2 MiB in bf16) times a dataset's
 * captions times the template's lines is easily gigabytes, which the transformer's training wants on the
 * GPU; a batch's rows go up with the batch (a few MiB a step, nothing beside the transformer's pass).
 */
#ifndef SDT_TRAIN_T5_CACHE_H
#define SDT_TRAIN_T5_CACHE_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sentencepiece.h"
#include "t5_encoder.h"
#include "t5_prompt.h"
#include "train/sd_runtime.h"
#include "train/work_arena.h"

/* Host memory the T5 cache may take; a run whose prompts need more keeps T5. Larger than the CLIP text
 * cache's 1 GiB: each entry replaces far more computation, and the weights it frees are 9 GiB. */
#define SDT_T5_CACHE_MAX_BYTES ((size_t)4 << 30)

typedef struct sdt_t5_cache {
    int n, cap;    /* distinct prompts (after sdt_t5_cache_seal), room in keys */
    int len;       /* T5's sequence, t5_len */
    int32_t *keys; /* [n, len]: ids, a slot's position as -(row + 1); memcmp order once sealed */
    bool sealed;
    sdt_dtype dtype;     /* of the values: the activation dtype they were computed in */
    int width;           /* T5's d_model */
    size_t value_bytes;  /* one prompt's output [len, width] in dtype */
    uint8_t *values;     /* [n] x value_bytes, in key order */
    size_t parked_bytes; /* T5's weights let go of once the cache replaced it (the memory lines say so) */
} sdt_t5_cache;

/* Starts an empty cache for sequences of len. */
void sdt_t5_cache_init(sdt_t5_cache *c, int len);
/* Adds the prompt as T5 reads it (sdt_t5_prompt_encode with the placeholder's slots). false: out of host
 * memory or a sentence from the tokenizer. */
bool sdt_t5_cache_add_prompt(sdt_t5_cache *c, const sdt_spm *spm, const sdt_t5_slot_rules *rules, const char *prompt,
                             sdt_error *error);
/* Sorts the keys and drops repeats; n is then the count of distinct prompts. false: out of host memory. */
bool sdt_t5_cache_seal(sdt_t5_cache *c);
/* Host bytes the values of n prompts take: n x len x width in dtype. */
size_t sdt_t5_cache_bytes(int len, int width, sdt_dtype dtype, int n);
/* Computes every sealed key's output with rt's T5 in rt->dtype (T5 must be on the backend); t5_rows are the
 * embedding's frozen t5xxl rows [R, d_model] on the backend (NULL: no slots). The work arena is sized for a
 * group of prompts and left reserved. Values already there (the fp32 fallback's second pass) are replaced. */
bool sdt_t5_cache_encode(sdt_t5_cache *c, sd_runtime *rt, work_arena *wa, const sdt_tensor *t5_rows, sdt_error *error);
/* Fills hidden [batch, len, width] (on the backend, in the cache's dtype) with the outputs of the batch's
 * prompts: tokens host [batch, len] and their slots, as sd_cond receives them. A prompt the cache does not
 * hold is an internal error (every prompt of the run was added). */
bool sdt_t5_cache_fill(const sdt_t5_cache *c, sdt_backend *be, const int32_t *tokens, const t5_override *overrides,
                       int n_overrides, int batch, sdt_tensor *hidden, sdt_error *error);
void sdt_t5_cache_free(sdt_t5_cache *c);

#endif
