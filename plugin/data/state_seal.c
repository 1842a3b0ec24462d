/* state_seal.c - SHA-256 seals of training states (see state_seal.h). */
#include "data/state_seal.h"

#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct seal_tensor {
    const char *name;
    const char *dtype;
    int ndim;
    const int64_t *shape;
    const void *data;
    size_t nbytes;
} seal_tensor;

static int by_name(const void *a, const void *b)
{
    return strcmp(((const seal_tensor *)a)->name, ((const seal_tensor *)b)->name);
}

static int by_key(const void *a, const void *b)
{
    return strcmp(((const sdt_st_kv *)a)->key, ((const sdt_st_kv *)b)->key);
}

static void add_text(GChecksum *sum, const char *s)
{
    g_checksum_update(sum, (const guchar *)s, (gssize)strlen(s) + 1); /* with the NUL: "ab","c" != "a","bc" */
}

/* Sorts both arrays in place and digests them. */
static void seal(seal_tensor *t, size_t n, sdt_st_kv *kv, size_t n_kv, char hex[SDT_SHA256_HEX])
{
    qsort(t, n, sizeof *t, by_name);
    qsort(kv, n_kv, sizeof *kv, by_key);
    GChecksum *sum = g_checksum_new(G_CHECKSUM_SHA256);
    for (size_t i = 0; i < n; i++) {
        add_text(sum, t[i].name);
        add_text(sum, t[i].dtype);
        for (int d = 0; d < t[i].ndim; d++) {
            char dim[32];
            snprintf(dim, sizeof dim, "%lld,", (long long)t[i].shape[d]);
            add_text(sum, dim);
        }
        if (t[i].nbytes) g_checksum_update(sum, t[i].data, (gssize)t[i].nbytes);
    }
    for (size_t i = 0; i < n_kv; i++) {
        if (strcmp(kv[i].key, SDT_STATE_SEAL_KEY) == 0) continue;
        add_text(sum, kv[i].key);
        add_text(sum, kv[i].value);
    }
    snprintf(hex, SDT_SHA256_HEX, "%s", g_checksum_get_string(sum));
    g_checksum_free(sum);
}

void sdt_state_seal_compute(const sdt_st_write_item *items, size_t n, const sdt_st_kv *meta, size_t n_meta,
                            char hex[SDT_SHA256_HEX])
{
    seal_tensor *t = calloc(n ? n : 1, sizeof *t);
    sdt_st_kv *kv = calloc(n_meta ? n_meta : 1, sizeof *kv);
    if (!t || !kv) {
        hex[0] = '\0'; /* no seal: the reader refuses the file rather than trust it */
    } else {
        for (size_t i = 0; i < n; i++) {
            size_t bytes = sdt_st_dtype_size(items[i].dtype);
            for (int d = 0; d < items[i].ndim; d++) bytes *= (size_t)items[i].shape[d];
            t[i] = (seal_tensor){
                items[i].name, sdt_st_dtype_name(items[i].dtype), items[i].ndim, items[i].shape, items[i].data, bytes};
        }
        memcpy(kv, meta, n_meta * sizeof *kv);
        seal(t, n, kv, n_meta, hex);
    }
    free(t);
    free(kv);
}

bool sdt_state_seal_check(const sdt_safetensors *st, sdt_error *error)
{
    const char *stored = sdt_st_metadata_get(st, SDT_STATE_SEAL_KEY);
    if (!stored) {
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: the state has no checksum (%s), so damage could not be detected; "
                        "resume from a state this version of sdtrain wrote",
                        sdt_st_path(st), SDT_STATE_SEAL_KEY);
    }
    size_t n = sdt_st_count(st), n_kv = sdt_st_metadata_count(st);
    seal_tensor *t = calloc(n ? n : 1, sizeof *t);
    sdt_st_kv *kv = calloc(n_kv ? n_kv : 1, sizeof *kv);
    char hex[SDT_SHA256_HEX] = "";
    if (t && kv) {
        for (size_t i = 0; i < n; i++) {
            const sdt_st_entry *e = sdt_st_at(st, i);
            t[i] = (seal_tensor){e->name, sdt_st_dtype_name(e->dtype), e->ndim, e->shape, e->data, (size_t)e->nbytes};
        }
        for (size_t i = 0; i < n_kv; i++) {
            kv[i].key = sdt_st_metadata_key(st, i);
            kv[i].value = sdt_st_metadata_get(st, kv[i].key);
        }
        seal(t, n, kv, n_kv, hex);
    }
    free(t);
    free(kv);
    if (!hex[0]) {
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory while checking the state's checksum",
                        sdt_st_path(st));
    }
    if (strcmp(hex, stored) != 0) {
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: the state file is damaged (its checksum does not match its "
                        "contents); resume from an earlier state or a copy of this one, or train without --resume",
                        sdt_st_path(st));
    }
    return true;
}

void sdt_vectors_sha256(const float *v, size_t count, char hex[SDT_SHA256_HEX])
{
    GChecksum *sum = g_checksum_new(G_CHECKSUM_SHA256);
    if (count) g_checksum_update(sum, (const guchar *)v, (gssize)(count * sizeof(float)));
    snprintf(hex, SDT_SHA256_HEX, "%s", g_checksum_get_string(sum));
    g_checksum_free(sum);
}
