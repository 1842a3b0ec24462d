/* test_safetensors.c - round trips of every dtype with metadata, every kind of
 * bad file giving a sentence that names the file and the key, and a mutation
 * loop over a valid file that must never crash or accept an inconsistent file. */
#include "safetensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io_test_util.h"
#include "sdt_test.h"

typedef struct held_tensor {
    char name[32];
    sdt_st_dtype dtype;
    int ndim;
    int64_t shape[SDT_ST_MAX_DIMS];
    size_t nbytes;
    uint8_t *data;
} held_tensor;

static void make_random_tensor(sdt_test_rng *rng, held_tensor *t, int index)
{
    t->dtype = (sdt_st_dtype)(index % SDT_ST_DTYPE_COUNT);
    snprintf(t->name, sizeof(t->name), "t%d.%s", index, sdt_st_dtype_name(t->dtype));
    t->ndim = (int)(sdt_test_next(rng) % 5); /* 0 = scalar */
    size_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        t->shape[d] = (int64_t)(sdt_test_next(rng) % 5); /* 0 makes an empty tensor */
        numel *= (size_t)t->shape[d];
    }
    t->nbytes = numel * sdt_st_dtype_size(t->dtype);
    t->data = malloc(t->nbytes ? t->nbytes : 1);
    for (size_t i = 0; i < t->nbytes; i++) t->data[i] = (uint8_t)sdt_test_next(rng);
}

static void test_round_trip(sdt_test_rng *rng, const char *dir)
{
    enum { N = 40 };
    held_tensor ts[N];
    sdt_st_write_item items[N];
    for (int i = 0; i < N; i++) {
        make_random_tensor(rng, &ts[i], i);
        items[i] = (sdt_st_write_item){ts[i].name, ts[i].dtype, ts[i].ndim, ts[i].shape, ts[i].data};
    }
    char meta_value[32];
    snprintf(meta_value, sizeof(meta_value), "%llu", (unsigned long long)sdt_test_next(rng));
    sdt_st_kv meta[] = {{"format", "pt"}, {"random", meta_value}, {"quote\"and\\slash", "é ü \n"}};
    char *path = g_build_filename(dir, "round.safetensors", NULL);
    sdt_error error = {0};
    CHECK(sdt_st_write(path, items, N, meta, 3, &error), "write failed: %s", error.message);

    /* Layout: header length padded to 8, data contiguous (no gaps), as the reference reader requires. */
    gchar *bytes = NULL;
    gsize size = 0;
    CHECK(g_file_get_contents(path, &bytes, &size, NULL), "cannot read back %s", path);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0 && size >= 8; i--) hlen = (hlen << 8) | (uint8_t)bytes[i];
    size_t total = 0;
    for (int i = 0; i < N; i++) total += ts[i].nbytes;
    CHECK((8 + hlen) % 8 == 0, "header length %llu leaves the data section unaligned", (unsigned long long)hlen);
    CHECK(size == 8 + hlen + total, "file is %zu bytes, expected %llu (gaps or missing data)", (size_t)size,
          (unsigned long long)(8 + hlen + total));
    g_free(bytes);

    sdt_safetensors *st = sdt_st_open(path, &error);
    CHECK(st != NULL, "open failed: %s", error.message);
    if (st) {
        CHECK(sdt_st_count(st) == N, "count %zu, expected %d", sdt_st_count(st), N);
        for (int i = 0; i < N; i++) {
            const sdt_st_entry *e = sdt_st_find(st, ts[i].name);
            CHECK(e != NULL, "tensor %s missing after the round trip", ts[i].name);
            if (!e) continue;
            CHECK(e->dtype == ts[i].dtype, "%s: dtype %s, expected %s", ts[i].name, sdt_st_dtype_name(e->dtype),
                  sdt_st_dtype_name(ts[i].dtype));
            CHECK(e->ndim == ts[i].ndim, "%s: ndim %d, expected %d", ts[i].name, e->ndim, ts[i].ndim);
            for (int d = 0; d < ts[i].ndim && d < e->ndim; d++)
                CHECK(e->shape[d] == ts[i].shape[d], "%s: shape[%d] differs", ts[i].name, d);
            CHECK(e->nbytes == ts[i].nbytes, "%s: %llu bytes, expected %zu", ts[i].name, (unsigned long long)e->nbytes,
                  ts[i].nbytes);
            CHECK(e->nbytes == 0 || memcmp(e->data, ts[i].data, ts[i].nbytes) == 0, "%s: data differs", ts[i].name);
            CHECK((uintptr_t)e->data % sdt_st_dtype_size(e->dtype) == 0, "%s: data not aligned to its element size",
                  ts[i].name);
            sdt_tensor view;
            sdt_dtype tdt;
            bool representable = sdt_st_dtype_to_tensor(e->dtype, &tdt);
            sdt_error verr = {0};
            bool got = sdt_st_entry_tensor(st, e, &view, &verr);
            CHECK(got == representable, "%s: tensor view %s", ts[i].name,
                  got ? "made for a dtype it cannot hold" : verr.message);
            if (got)
                CHECK(view.data == e->data && view.ndim == e->ndim && view.dtype == tdt, "%s: view wrong", ts[i].name);
            if (!got)
                CHECK(io_contains(verr.message, ts[i].name) && io_contains(verr.message, path),
                      "view error lacks file/key: %s", verr.message);
        }
        CHECK(sdt_st_metadata_count(st) == 3, "metadata count %zu", sdt_st_metadata_count(st));
        for (int i = 0; i < 3; i++) {
            const char *v = sdt_st_metadata_get(st, meta[i].key);
            CHECK(v && strcmp(v, meta[i].value) == 0, "metadata %s = %s, expected %s", meta[i].key, v ? v : "(null)",
                  meta[i].value);
        }
        CHECK(sdt_st_find(st, "absent") == NULL, "found a tensor that was never written");
        sdt_st_close(st);
    }
    /* Writing again replaces the file atomically and leaves no temp files. */
    CHECK(sdt_st_write(path, items, 1, NULL, 0, &error), "rewrite failed: %s", error.message);
    GDir *d = g_dir_open(dir, 0, NULL);
    int files = 0;
    while (d && g_dir_read_name(d)) files++;
    if (d) g_dir_close(d);
    CHECK(files == 1, "%d files in the folder after two saves (temp files left behind?)", files);
    /* Writer refuses duplicate names and the reserved name. */
    sdt_st_write_item dup[2] = {items[0], items[0]};
    CHECK(!sdt_st_write(path, dup, 2, NULL, 0, &error) && io_contains(error.message, items[0].name),
          "duplicate names accepted or error lacks the name: %s", error.message);
    sdt_st_kv twice[2] = {{"k", "1"}, {"k", "2"}};
    CHECK(!sdt_st_write(path, items, 1, twice, 2, &error) && io_contains(error.message, "'k'"),
          "duplicate metadata keys accepted: %s", error.message);
    for (int i = 0; i < N; i++) free(ts[i].data);
    g_free(path);
}

/* Writes 8-byte length + header (+ pad) + data_len zero bytes; claimed_len overrides the length field when nonzero. */
static char *write_raw(const char *dir, const char *name, const char *header, size_t data_len, uint64_t claimed_len)
{
    char *path = g_build_filename(dir, name, NULL);
    size_t hlen = strlen(header);
    uint64_t field = claimed_len ? claimed_len : hlen;
    size_t size = 8 + hlen + data_len;
    uint8_t *buf = calloc(1, size);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(field >> (8 * i));
    memcpy(buf + 8, header, hlen);
    io_write_bytes(path, buf, size);
    free(buf);
    return path;
}

static void expect_error(const char *path, const char *key, const char *what)
{
    sdt_error error = {0};
    sdt_safetensors *st = sdt_st_open(path, &error);
    CHECK(st == NULL, "%s: a bad file was accepted", what);
    sdt_st_close(st);
    CHECK(io_contains(error.message, path), "%s: error does not name the file: %s", what, error.message);
    if (key) CHECK(io_contains(error.message, key), "%s: error does not name key '%s': %s", what, key, error.message);
    CHECK(strlen(error.message) > strlen(path) + 20, "%s: error says too little: %s", what, error.message);
    printf("  %-28s -> %s\n", what, error.message);
}

static void test_bad_files(const char *dir)
{
    struct {
        const char *what, *header, *key;
        size_t data_len;
        uint64_t claimed;
    } cases[] = {
        {"unknown dtype", "{\"w\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,2]}}", "w", 2, 0},
        {"e8m0 dtype", "{\"w8\":{\"dtype\":\"F8_E8M0\",\"shape\":[2],\"data_offsets\":[0,2]}}", "w8", 2, 0},
        {"shape/size mismatch", "{\"wm\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", "wm", 24, 0},
        {"overlap",
         "{\"a1\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
         "\"b2\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
         "b2", 24, 0},
        {"range beyond data", "{\"far\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[100,108]}}", "far", 8, 0},
        {"begin after end", "{\"rev\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[8,0]}}", "rev", 8, 0},
        {"negative dim", "{\"neg\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,0]}}", "neg", 0, 0},
        {"fractional offset", "{\"fr\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1.5]}}", "fr", 2, 0},
        {"huge shape",
         "{\"big\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,8]}}", "big", 8,
         0},
        {"missing dtype", "{\"nod\":{\"shape\":[1],\"data_offsets\":[0,1]}}", "nod", 1, 0},
        {"non-object tensor", "{\"arr\":[1,2]}", "arr", 0, 0},
        {"duplicate key",
         "{\"dd\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
         "\"dd\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
         "dd", 2, 0},
        {"metadata not string", "{\"__metadata__\":{\"epochs\":3}}", "epochs", 0, 0},
        {"metadata not object", "{\"__metadata__\":[1]}", "__metadata__", 0, 0},
        {"non-JSON header", "{this is not json}", NULL, 0, 0},
        {"header is an array", "[1,2,3]", NULL, 0, 0},
        {"trailing garbage", "{} x", NULL, 0, 0},
        {"claims more than the file", "{}", NULL, 0, 4096},
        {"huge header length", "{}", NULL, 0, UINT64_MAX},
        {"empty header", "", NULL, 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char name[32];
        snprintf(name, sizeof(name), "bad%zu.safetensors", i);
        char *path = write_raw(dir, name, cases[i].header, cases[i].data_len, cases[i].claimed);
        expect_error(path, cases[i].key, cases[i].what);
        g_free(path);
    }
    /* Too short for a length field, missing, a folder. */
    char *tiny = g_build_filename(dir, "tiny.safetensors", NULL);
    io_write_bytes(tiny, "abc", 3);
    expect_error(tiny, NULL, "3-byte file");
    g_free(tiny);
    char *missing = g_build_filename(dir, "missing.safetensors", NULL);
    expect_error(missing, NULL, "missing file");
    g_free(missing);
    expect_error(dir, NULL, "a folder");

    /* A valid file cut short at every interesting length: always a clean error. */
    int64_t shape[1] = {64};
    float data[64] = {0};
    sdt_st_write_item item = {"cut.me", SDT_ST_F32, 1, shape, data};
    char *good = g_build_filename(dir, "good.safetensors", NULL);
    sdt_error error = {0};
    CHECK(sdt_st_write(good, &item, 1, NULL, 0, &error), "write failed: %s", error.message);
    gchar *bytes;
    gsize size;
    g_file_get_contents(good, &bytes, &size, NULL);
    char *cut = g_build_filename(dir, "cut.safetensors", NULL);
    for (gsize len = 0; len < size; len += (len < 96 ? 1 : 37)) {
        io_write_bytes(cut, bytes, len);
        sdt_safetensors *st = sdt_st_open(cut, &error);
        CHECK(st == NULL, "a file truncated to %zu of %zu bytes was accepted", (size_t)len, (size_t)size);
        sdt_st_close(st);
        CHECK(io_contains(error.message, cut), "truncation error does not name the file: %s", error.message);
        if (len > 8 + 60 && len < size) /* header complete: the tensor's range is what is missing */
            CHECK(io_contains(error.message, "cut.me") || io_contains(error.message, "header claims"),
                  "truncation error names neither the key nor the header: %s", error.message);
    }
    g_free(bytes);
    g_free(cut);
    g_free(good);
}

/* Invariants an accepted file must satisfy, checked independently of the reader. */
static void check_accepted(const sdt_safetensors *st, const uint8_t *buf, size_t size)
{
    for (size_t i = 0; i < sdt_st_count(st); i++) {
        const sdt_st_entry *e = sdt_st_at(st, i);
        uint64_t numel = 1;
        for (int d = 0; d < e->ndim; d++) numel *= (uint64_t)e->shape[d];
        CHECK(numel * sdt_st_dtype_size(e->dtype) == e->nbytes, "accepted %s with inconsistent size", e->name);
        /* The range must lie in the file's data section (the reader may hand out an aligned
         * copy of that section, so the check is on offsets, not on pointers into buf). */
        uint64_t header_len = 0;
        for (int k = 7; k >= 0; k--) header_len = (header_len << 8) | buf[k];
        uint64_t data_size = size - 8 - header_len;
        CHECK(e->nbytes == 0 || (e->offset <= data_size && e->nbytes <= data_size - e->offset),
              "accepted %s pointing outside the file", e->name);
        for (size_t j = 0; j < i; j++) {
            const sdt_st_entry *f = sdt_st_at(st, j);
            bool disjoint = e->nbytes == 0 || f->nbytes == 0 || e->offset + e->nbytes <= f->offset ||
                            f->offset + f->nbytes <= e->offset;
            CHECK(disjoint, "accepted overlapping %s and %s", e->name, f->name);
        }
    }
}

static void test_mutations(sdt_test_rng *rng, const char *dir)
{
    int64_t s1[2] = {3, 5}, s2[1] = {7}, s3[0];
    float a[15] = {0};
    uint16_t b[7] = {0};
    int64_t c = 0;
    sdt_st_write_item items[] = {
        {"alpha", SDT_ST_F32, 2, s1, a}, {"beta", SDT_ST_BF16, 1, s2, b}, {"gamma", SDT_ST_I64, 0, s3, &c}};
    sdt_st_kv meta[] = {{"k", "v"}};
    char *path = g_build_filename(dir, "fuzzseed.safetensors", NULL);
    sdt_error error = {0};
    CHECK(sdt_st_write(path, items, 3, meta, 1, &error), "write failed: %s", error.message);
    gchar *orig;
    gsize size;
    g_file_get_contents(path, &orig, &size, NULL);
    uint8_t *buf = malloc(size + 64);
    int accepted = 0, rejected = 0;
    const char *tokens[] = {"{", "}", "[", "]",     ",",    ":",       "\"",
                            "-", "9", "0", "1e308", "null", "\\u0000", "__metadata__"};
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(buf, orig, size);
        size_t len = size;
        int edits = 1 + (int)(sdt_test_next(rng) % 4);
        for (int k = 0; k < edits; k++) {
            uint64_t r = sdt_test_next(rng);
            size_t at = (size_t)(r >> 8) % len;
            switch (r % 4) {
                case 0:
                    buf[at] = (uint8_t)(r >> 40);
                    break; /* random byte */
                case 1:
                    buf[at] ^= (uint8_t)(1u << ((r >> 40) % 8));
                    break; /* bit flip */
                case 2:
                    len = at + 1;
                    break; /* truncate */
                default: { /* JSON token splice */
                    const char *t = tokens[(r >> 40) % (sizeof(tokens) / sizeof(tokens[0]))];
                    size_t tl = strlen(t);
                    if (at + tl <= len) memcpy(buf + at, t, tl);
                }
            }
        }
        /* A private copy of exactly len bytes so reads past the end are caught by sanitizers. */
        uint8_t *img = malloc(len ? len : 1);
        memcpy(img, buf, len);
        sdt_safetensors *st = sdt_st_open_memory(img, len, "mutant", &error);
        if (st) {
            accepted++;
            check_accepted(st, img, len);
            sdt_st_close(st);
        } else {
            rejected++;
            CHECK(io_contains(error.message, "mutant"), "mutant error does not name the file: %s", error.message);
        }
        free(img);
    }
    printf("mutations: %d accepted (consistent), %d rejected with a sentence\n", accepted, rejected);
    CHECK(rejected > 0, "no mutation was rejected: the validator checks nothing");
    free(buf);
    g_free(orig);
    g_free(path);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("test_safetensors");
    char *dir = io_make_tmpdir();
    char *rt = g_build_filename(dir, "rt", NULL);
    g_mkdir(rt, 0700);
    test_round_trip(&rng, rt);
    test_bad_files(dir);
    test_mutations(&rng, dir);
    io_rm_tree(dir);
    g_free(rt);
    g_free(dir);
    return sdt_test_finish("test_safetensors");
}
