/* state_seal.h - what makes a training state file trustworthy: a SHA-256 over its tensors and
 * metadata, stored in the metadata (a flipped byte anywhere in them is found), and the content
 * hash of an embedding's vectors, which pairs a state with the embedding file it belongs to.
 *
 * The seal covers, tensors in name order: name, dtype, shape, bytes; then every metadata pair
 * in key order except the seal itself. Reader and writer compute it the same way.
 */
#ifndef SDT_STATE_SEAL_H
#define SDT_STATE_SEAL_H

#include <stdbool.h>
#include <stddef.h>

#include "safetensors.h"

#define SDT_STATE_SEAL_KEY "sdtrain_sha256"
#define SDT_SHA256_HEX 65 /* 64 hex digits and the NUL */

/* The seal of what is about to be written (hex receives 64 hex digits). */
void sdt_state_seal_compute(const sdt_st_write_item *items, size_t n, const sdt_st_kv *meta, size_t n_meta,
                            char hex[SDT_SHA256_HEX]);
/* false + a sentence (BAD_FORMAT) when the file has no seal or its contents do not match it. */
bool sdt_state_seal_check(const sdt_safetensors *st, sdt_error *error);
/* SHA-256 of count floats as stored in memory (little-endian on every platform we build for). */
void sdt_vectors_sha256(const float *v, size_t count, char hex[SDT_SHA256_HEX]);

#endif
