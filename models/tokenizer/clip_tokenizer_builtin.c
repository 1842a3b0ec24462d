/* clip_tokenizer_builtin.c - inflates the embedded CLIP tokenizer (see clip_tokenizer_builtin.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "clip_tokenizer_builtin.h"

/* From clip_tokenizer_blob.S. */
extern const unsigned char sdt_clip_vocab_gz[], sdt_clip_vocab_gz_end[];
extern const unsigned char sdt_clip_merges_gz[], sdt_clip_merges_gz_end[];
extern const char sdt_clip_license[];

/* gzip's trailer ends with the uncompressed size mod 2^32; the files are far below 4 GiB. */
static char *inflate_blob(const unsigned char *begin, const unsigned char *end, size_t *out_len)
{
    /* Lengths through addresses: begin and end are two symbols of the .S file, and indexing
     * backwards from end reads (to the compiler) before an object of unknown size. */
    size_t in_len = (size_t)((uintptr_t)end - (uintptr_t)begin);
    if (in_len < 18) return NULL;
    const unsigned char *t = begin + in_len - 4;
    size_t n = (size_t)t[0] | (size_t)t[1] << 8 | (size_t)t[2] << 16 | (size_t)t[3] << 24;
    char *out = malloc(n + 1);
    if (!out) return NULL;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
        free(out);
        return NULL;
    }
    z.next_in = (unsigned char *)begin;
    z.avail_in = (uInt)in_len;
    z.next_out = (unsigned char *)out;
    z.avail_out = (uInt)n;
    int rc = inflate(&z, Z_FINISH);
    size_t got = z.total_out;
    inflateEnd(&z);
    if (rc != Z_STREAM_END || got != n) {
        free(out);
        return NULL;
    }
    out[n] = '\0';
    *out_len = n;
    return out;
}

sdt_tokenizer *sdt_tokenizer_load_builtin_clip(sdt_error *error)
{
    size_t vlen = 0, mlen = 0;
    char *vocab = inflate_blob(sdt_clip_vocab_gz, sdt_clip_vocab_gz_end, &vlen);
    char *merges = vocab ? inflate_blob(sdt_clip_merges_gz, sdt_clip_merges_gz_end, &mlen) : NULL;
    sdt_tokenizer *t = NULL;
    if (!vocab || !merges)
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY,
                 "the built-in CLIP tokenizer could not be unpacked (out of memory); free "
                 "memory or set the tokenizer path to a folder with CLIP's vocab.json and merges.txt");
    else
        t = sdt_tokenizer_load_memory(vocab, vlen, merges, mlen, "built-in CLIP vocab.json", "built-in CLIP merges.txt",
                                      error);
    free(vocab);
    free(merges);
    return t;
}

const char *sdt_clip_tokenizer_license(void)
{
    return sdt_clip_license;
}
