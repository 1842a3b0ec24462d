/* test_torch_file.c - the PyTorch file writer and restricted reader against each other: a tree of every
 * supported kind written and read back identical (zip layout checked: names, 64-byte alignment, CRCs), and
 * every refusal (foreign globals, truncation at every length, short storages, recursion bombs, cycles, huge
 * sizes, damaged bytes) giving a sentence that names the file. No torch needed (see test_torch_python.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io_test_util.h"
#include "pickle_read.h"
#include "pickle_write.h"
#include "sdt_test.h"
#include "torch_file.h"
#include "torch_save.h"
#include "torch_test_util.h"
#include "zip_read.h"
#include "zip_write.h"

static uint8_t *random_bytes(sdt_test_rng *rng, size_t n)
{
    uint8_t *p = g_malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)sdt_test_next(rng);
    return p;
}

/* A tree with every kind the writer supports; buffers kept in keep (freed by the caller). */
static sdt_pv *make_tree(sdt_pv_arena *a, sdt_test_rng *rng, GPtrArray *keep)
{
    sdt_pv *root = sdt_pv_new_dict(a, false);
    sdt_pv *sd = sdt_pv_new_dict(a, true);
    static const sdt_st_dtype dtypes[] = {SDT_ST_F32, SDT_ST_F16, SDT_ST_BF16, SDT_ST_F64, SDT_ST_I64,
                                          SDT_ST_I32, SDT_ST_I16, SDT_ST_I8,   SDT_ST_U8,  SDT_ST_BOOL};
    for (size_t i = 0; i < G_N_ELEMENTS(dtypes); i++) {
        int ndim = (int)(sdt_test_next(rng) % 5);
        int64_t shape[4], numel = 1;
        for (int d = 0; d < ndim; d++) numel *= (shape[d] = (int64_t)(sdt_test_next(rng) % 4));
        uint8_t *data = random_bytes(rng, (size_t)numel * sdt_st_dtype_size(dtypes[i]));
        if (dtypes[i] == SDT_ST_BOOL)
            for (int64_t k = 0; k < numel; k++) data[k] &= 1;
        g_ptr_array_add(keep, data);
        char key[64];
        snprintf(key, sizeof key, "model.layer%zu.%s", i, sdt_st_dtype_name(dtypes[i]));
        sdt_pv_dict_set(a, sd, key, sdt_pv_new_tensor(a, dtypes[i], ndim, shape, data));
    }
    float *pdata = (float *)random_bytes(rng, 6 * sizeof(float));
    g_ptr_array_add(keep, pdata);
    sdt_pv *param = sdt_pv_new_tensor(a, SDT_ST_F32, 2, (int64_t[]){2, 3}, pdata);
    param->u.t.parameter = param->u.t.requires_grad = true;
    sdt_pv_dict_set(a, sd, "param", param);
    sdt_pv_dict_set(a, root, "state_dict", sd);
    sdt_pv_dict_set(a, root, "none", sdt_pv_new(a, SDT_PV_NONE));
    sdt_pv_dict_set(a, root, "yes", sdt_pv_new_bool(a, true));
    sdt_pv_dict_set(a, root, "no", sdt_pv_new_bool(a, false));
    sdt_pv *ints = sdt_pv_new(a, SDT_PV_LIST);
    const int64_t values[] = {0,
                              1,
                              255,
                              256,
                              65535,
                              65536,
                              -1,
                              -128,
                              -129,
                              INT32_MAX,
                              INT32_MIN,
                              (int64_t)INT32_MAX + 1,
                              (int64_t)INT32_MIN - 1,
                              INT64_MAX,
                              INT64_MIN,
                              (int64_t)(sdt_test_next(rng) >> 1)};
    for (size_t i = 0; i < G_N_ELEMENTS(values); i++) sdt_pv_append(ints, sdt_pv_new_int(a, values[i]));
    sdt_pv_dict_set(a, root, "ints", ints);
    sdt_pv *floats = sdt_pv_new(a, SDT_PV_TUPLE);
    const double fv[] = {0.0, -0.0, 1.5, 1e-300, -3.25e200, sdt_test_uniform(rng)};
    for (size_t i = 0; i < G_N_ELEMENTS(fv); i++) sdt_pv_append(floats, sdt_pv_new_float(a, fv[i]));
    sdt_pv_dict_set(a, root, "floats", floats);
    for (int n = 0; n <= 4; n++) { /* tuples of 0..4 items use different opcodes */
        sdt_pv *t = sdt_pv_new(a, SDT_PV_TUPLE);
        for (int i = 0; i < n; i++) sdt_pv_append(t, sdt_pv_new_str(a, "é漢字"));
        char key[16];
        snprintf(key, sizeof key, "tuple%d", n);
        sdt_pv_dict_set(a, root, key, t);
    }
    sdt_pv *by_int = sdt_pv_new_dict(a, false); /* a hypernetwork's shape: int keys to pairs of state dicts */
    sdt_pv *pair = sdt_pv_new(a, SDT_PV_TUPLE);
    sdt_pv_append(pair, sdt_pv_new_dict(a, true));
    sdt_pv_append(pair, sd);
    sdt_pv_dict_add(by_int, sdt_pv_new_int(a, 768), pair);
    sdt_pv_dict_set(a, root, "by_int", by_int);
    sdt_pv_dict_set(a, root, "empty_list", sdt_pv_new(a, SDT_PV_LIST));
    sdt_pv_dict_set(a, root, "empty_str", sdt_pv_new_str(a, ""));
    return root;
}

static char *read_file(const char *path, size_t *size)
{
    gchar *data = NULL;
    gsize n = 0;
    if (!g_file_get_contents(path, &data, &n, NULL)) return NULL;
    *size = n;
    return data;
}

static void test_round_trip(sdt_test_rng *rng, const char *dir)
{
    sdt_pv_arena *a = sdt_pv_arena_new();
    GPtrArray *keep = g_ptr_array_new_with_free_func(g_free);
    sdt_pv *root = make_tree(a, rng, keep);
    char *path = g_build_filename(dir, "tree.ckpt", NULL);
    sdt_error error = {0};
    CHECK(sdt_torch_save(path, root, NULL, &error), "save: %s", error.message);
    sdt_torch_file *f = sdt_torch_open(path, &error);
    CHECK(f, "open: %s", error.message);
    if (f) {
        char why[256] = "";
        CHECK(sdt_torch_layout_of(f) == SDT_TORCH_ZIP, "layout");
        CHECK(tt_equal(root, sdt_torch_root(f), why, sizeof why), "read back differs: %s", why);
        const sdt_pv *p = sdt_pv_dict_get(sdt_pv_dict_get(sdt_torch_root(f), "state_dict"), "param");
        CHECK(p && p->u.t.parameter && p->u.t.requires_grad, "Parameter flag lost");
        /* The int-keyed dict and the shared state dict (written twice: no memo) read back. */
        const sdt_pv *pair = sdt_pv_dict_get_int(sdt_pv_dict_get(sdt_torch_root(f), "by_int"), 768);
        CHECK(sdt_pv_len(pair) == 2 && sdt_pv_len(sdt_pv_item(pair, 1)) == 11, "int key lookup");
        sdt_tensor t;
        const sdt_pv *f32 = sdt_pv_dict_get(sdt_pv_dict_get(sdt_torch_root(f), "state_dict"), "model.layer0.F32");
        CHECK(sdt_torch_tensor(f, f32, "model.layer0.F32", &t, &error), "tensor view: %s", error.message);
        const sdt_pv *i64 = sdt_pv_dict_get(sdt_pv_dict_get(sdt_torch_root(f), "state_dict"), "model.layer4.I64");
        CHECK(!sdt_torch_tensor(f, i64, "model.layer4.I64", &t, &error) && io_contains(error.message, "I64") &&
                  io_contains(error.message, "model.layer4.I64"),
              "I64 as a model tensor: %s", error.message);
        sdt_torch_close(f);
    }
    /* Zip layout as torch writes it: archive/ names, data 64-byte aligned, CRCs right. */
    size_t size = 0;
    char *bytes = read_file(path, &size);
    sdt_zip *z = bytes ? sdt_zip_open_memory(bytes, size, path, &error) : NULL;
    CHECK(z, "zip index: %s", error.message);
    if (z) {
        CHECK(sdt_zip_find(z, "archive/data.pkl") && sdt_zip_find(z, "archive/version") &&
                  sdt_zip_find(z, "archive/byteorder") && sdt_zip_find(z, "archive/data/0") &&
                  sdt_zip_find(z, "archive/data/10") && !sdt_zip_find(z, "archive/data/11"),
              "record names (%zu entries)", sdt_zip_count(z));
        for (size_t i = 0; i < sdt_zip_count(z); i++) {
            const sdt_zip_entry *e = sdt_zip_at(z, i);
            const void *data;
            void *owned;
            CHECK(e->data_offset % 64 == 0, "%s data at %llu, not 64-aligned", e->name,
                  (unsigned long long)e->data_offset);
            CHECK(sdt_zip_read(z, e, &data, &owned, &error) && !owned, "%s: %s", e->name, error.message);
        }
        sdt_zip_close(z);
    }
    /* Every truncation is refused with a sentence, never a crash. */
    int refused = 0, total = 0;
    for (size_t cut = 0; bytes && cut < size; cut += 1 + cut / 16, total++) {
        sdt_error_clear(&error);
        sdt_torch_file *t = sdt_torch_open_memory(bytes, cut, "cut.ckpt", &error);
        if (!t && io_contains(error.message, "cut.ckpt")) refused++;
        sdt_torch_close(t);
    }
    CHECK(refused == total, "%d of %d truncations refused with a sentence", refused, total);
    /* One flipped byte anywhere: refused or read, never a crash (ASan/UBSan builds watch this). */
    for (int k = 0; bytes && k < 400; k++) {
        size_t at = (size_t)(sdt_test_next(rng) % size);
        char saved = bytes[at];
        bytes[at] ^= (char)(1 + sdt_test_next(rng) % 255);
        sdt_error_clear(&error);
        sdt_torch_file *t = sdt_torch_open_memory(bytes, size, "flip.ckpt", &error);
        CHECK(t || io_contains(error.message, "flip.ckpt"), "flip at %zu refused without a sentence: '%s'", at,
              error.message);
        sdt_torch_close(t);
        bytes[at] = saved;
    }
    g_free(bytes);
    g_free(path);
    g_ptr_array_free(keep, TRUE);
    sdt_pv_arena_free(a);
}

/* A zip holding pkl as archive/data.pkl and the given storages (data/0..), written by the project's writer
 * (with zip64 records for every entry when zip64 is set). */
static char *write_archive_as(const char *dir, const char *name, const void *pkl, size_t pkl_len, const void *storage,
                              size_t storage_len, bool zip64)
{
    char *path = g_build_filename(dir, name, NULL);
    FILE *fp = fopen(path, "wb");
    sdt_zip_writer *z = sdt_zip_writer_new(fp, path);
    if (zip64) sdt_zip_writer_set_zip64_threshold(z, 0);
    sdt_error error = {0};
    bool ok = sdt_zip_writer_add(z, "archive/data.pkl", pkl, pkl_len, &error);
    if (storage) ok = ok && sdt_zip_writer_add(z, "archive/data/0", storage, storage_len, &error);
    ok = ok && sdt_zip_writer_finish(z, &error);
    if (!ok) sdt_zip_writer_free(z);
    fclose(fp);
    return path;
}

static char *write_archive(const char *dir, const char *name, const void *pkl, size_t pkl_len, const void *storage,
                           size_t storage_len)
{
    return write_archive_as(dir, name, pkl, pkl_len, storage, storage_len, false);
}

/* zip64 everywhere (local and central extra fields, the zip64 end records), as torch writes past 4 GiB:
 * read back by the project's reader and, where a python3 is installed, by Python's zipfile. */
static void test_zip64(const char *dir)
{
    sdt_pv_arena *a = sdt_pv_arena_new();
    float data[6] = {1, 2, 3, 4, 5, 6};
    sdt_pv *t = sdt_pv_new_tensor(a, SDT_ST_F32, 2, (int64_t[]){2, 3}, data);
    GByteArray *pkl = g_byte_array_new();
    GPtrArray *storages = g_ptr_array_new();
    sdt_error error = {0};
    CHECK(sdt_pickle_write(t, pkl, storages, "zip64", &error), "write: %s", error.message);
    char *path = write_archive_as(dir, "zip64.pt", pkl->data, pkl->len, data, sizeof data, true);
    sdt_torch_file *f = sdt_torch_open(path, &error);
    CHECK(f, "zip64 archive: %s", error.message);
    sdt_tensor out;
    CHECK(f && sdt_torch_tensor(f, sdt_torch_root(f), "t", &out, &error) && memcmp(out.data, data, sizeof data) == 0,
          "zip64 tensor: %s", error.message);
    sdt_torch_close(f);
    char *argv[] = {"/usr/bin/python3", "-c",
                    "import sys, zipfile\n"
                    "z = zipfile.ZipFile(sys.argv[1])\n"
                    "assert z.testzip() is None\n"
                    "print(len(z.read('archive/data/0')))",
                    path, NULL};
    char *out_text = NULL;
    int status = -1;
    if (g_file_test(argv[0], G_FILE_TEST_IS_EXECUTABLE) &&
        g_spawn_sync(NULL, argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out_text, NULL, &status, NULL))
        CHECK(status == 0 && out_text && atoi(out_text) == (int)sizeof data,
              "Python's zipfile rejects the zip64 archive");
    else
        printf("  no /usr/bin/python3: the zip64 archive is not cross-checked with Python's zipfile\n");
    g_free(out_text);
    g_free(path);
    g_byte_array_free(pkl, TRUE);
    g_ptr_array_free(storages, TRUE);
    sdt_pv_arena_free(a);
}

static void expect_refusal(const char *dir, const char *name, const void *pkl, size_t len, const void *storage,
                           size_t storage_len, const char *needle)
{
    char *path = write_archive(dir, name, pkl, len, storage, storage_len);
    sdt_error error = {0};
    sdt_torch_file *f = sdt_torch_open(path, &error);
    CHECK(!f && error.code == SDT_ERR_BAD_FORMAT, "%s: accepted, or refused as %s", name,
          sdt_error_code_name(error.code));
    CHECK(io_contains(error.message, path) && io_contains(error.message, needle),
          "%s: sentence '%s' lacks '%s' or the path", name, error.message, needle);
    printf("  %s -> %s\n", name, error.message);
    sdt_torch_close(f);
    g_free(path);
}

#define PKL(s) (const uint8_t *)(s), sizeof(s) - 1

static void test_refusals(const char *dir)
{
    /* A foreign global, in both spellings (GLOBAL and STACK_GLOBAL). */
    expect_refusal(dir, "os_system.pt",
                   PKL("\x80\x02"
                       "cos\nsystem\n"
                       "X\x02\x00\x00\x00ls\x85R."),
                   NULL, 0, "'os.system'");
    expect_refusal(dir, "stack_global.pt",
                   PKL("\x80\x04\x8c\x08"
                       "builtins"
                       "\x8c\x04"
                       "eval\x93"
                       "X\x01\x00\x00\x00"
                       "1\x85R."),
                   NULL, 0, "'builtins.eval'");
    expect_refusal(dir, "torch_load.pt",
                   PKL("\x80\x02"
                       "ctorch\nload\n."),
                   NULL, 0, "'torch.load'");
    /* Direct object creation opcodes. */
    expect_refusal(dir, "inst.pt", PKL("(ios\nsystem\n."), NULL, 0, "creates Python objects");
    /* A storage shorter than its tensor: the pickle says 6 floats, the record holds 5. */
    const char tensor_pkl[] = "\x80\x02"
                              "ctorch._utils\n_rebuild_tensor_v2\n"
                              "((X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x00"
                              "0X\x03\x00\x00\x00"
                              "cpuK\x06tQK\x00K\x02K\x03\x86K\x03K\x01\x86\x89}tR.";
    float six[6] = {1, 2, 3, 4, 5, 6};
    expect_refusal(dir, "short_storage.pt", PKL(tensor_pkl), six, 5 * sizeof(float),
                   "holds 20 bytes but its tensors need 24");
    /* A tensor reaching past its declared storage (shape 2x4 over 6 elements). */
    const char over_pkl[] = "\x80\x02"
                            "ctorch._utils\n_rebuild_tensor_v2\n"
                            "((X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x00"
                            "0X\x03\x00\x00\x00"
                            "cpuK\x06tQK\x00K\x02K\x04\x86K\x04K\x01\x86\x89}tR.";
    expect_refusal(dir, "tensor_past_storage.pt", PKL(over_pkl), six, sizeof six, "which holds only 6");
    /* Huge sizes: a 2^40-element shape, a string claiming 2^62 bytes, an int of 2^31 bytes. */
    const char huge_shape[] = "\x80\x02"
                              "ctorch._utils\n_rebuild_tensor_v2\n"
                              "((X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x00"
                              "0X\x03\x00\x00\x00"
                              "cpuK\x06tQK\x00\x8a\x06\x00\x00\x00\x00\x00\x01\x85K\x01\x85\x89}tR.";
    expect_refusal(dir, "huge_shape.pt", PKL(huge_shape), six, sizeof six, "which holds only 6");
    expect_refusal(dir, "huge_string.pt",
                   PKL("\x80\x04\x8d\x00\x00\x00\x00\x00\x00\x00\x40"
                       "abc."),
                   NULL, 0, "runs past the end");
    expect_refusal(dir, "huge_int.pt",
                   PKL("\x80\x02\x8b\x00\x00\x00\x80"
                       "abc."),
                   NULL, 0, "needs");
    expect_refusal(dir, "wide_int.pt", PKL("\x80\x02\x8a\x09\x01\x02\x03\x04\x05\x06\x07\x08\x09."), NULL, 0,
                   "wider than 64 bits");
    /* Recursion bombs: nesting past the depth limit, marks past theirs, a list containing itself. */
    GString *deep = g_string_new("\x80\x02");
    for (int i = 0; i < 200; i++) g_string_append(deep, "]");
    for (int i = 0; i < 199; i++) g_string_append(deep, "a");
    g_string_append(deep, ".");
    expect_refusal(dir, "deep.pt", deep->str, deep->len, NULL, 0, "nests deeper than 64");
    g_string_truncate(deep, 2);
    for (int i = 0; i < 5000; i++) g_string_append(deep, "(");
    expect_refusal(dir, "marks.pt", deep->str, deep->len, NULL, 0, "more than 1024 marks");
    g_string_free(deep, TRUE);
    GString *key = g_string_new("\x80\x02}K\x01");
    for (int i = 0; i < 100; i++) g_string_append(key, "\x85"); /* a tuple key nested 100 deep */
    g_string_append_len(key, "K\x00s.", 4);
    expect_refusal(dir, "deep_key.pt", key->str, key->len, NULL, 0, "cannot hash");
    g_string_free(key, TRUE);
    GString *many = g_string_new("\x80\x02");
    for (size_t i = 0; i <= SDT_PICKLE_MAX_VALUES; i++) g_string_append_c(many, 'N');
    g_string_append(many, ".");
    expect_refusal(dir, "many_values.pt", many->str, many->len, NULL, 0, "more than 4194304 values");
    g_string_free(many, TRUE);
    expect_refusal(dir, "cycle.pt",
                   PKL("\x80\x02]q\x00h\x00"
                       "a."),
                   NULL, 0, "contains itself");
    /* Memo abuse: reading an entry never stored. */
    expect_refusal(dir, "memo.pt", PKL("\x80\x02h\x05."), NULL, 0, "never stored");
    /* Malformed endings. */
    expect_refusal(dir, "no_stop.pt", PKL("\x80\x02}"), NULL, 0, "without its STOP");
    expect_refusal(dir, "two_results.pt", PKL("\x80\x02}}."), NULL, 0, "instead of one result");
    expect_refusal(dir, "bad_persid.pt", PKL("\x80\x02X\x01\x00\x00\x00xQ."), NULL, 0, "persistent id");
    expect_refusal(dir, "bad_opcode.pt", PKL("\x80\x02\xff."), NULL, 0, "opcode 0xff");
    /* A zip that is no torch file. */
    char *path = g_build_filename(dir, "plain.zip", NULL);
    FILE *fp = fopen(path, "wb");
    sdt_zip_writer *z = sdt_zip_writer_new(fp, path);
    sdt_error error = {0};
    CHECK(sdt_zip_writer_add(z, "readme.txt", "hi", 2, &error) && sdt_zip_writer_finish(z, &error), "plain zip: %s",
          error.message);
    fclose(fp);
    sdt_torch_file *f = sdt_torch_open(path, &error);
    CHECK(!f && io_contains(error.message, "data.pkl"), "plain zip: '%s'", error.message);
    sdt_torch_close(f);
    g_free(path);
}

/* The legacy (pre-1.6) layout, built by hand as torch.save(..., _use_new_zipfile_serialization=False) writes it. */
static void test_legacy(void)
{
    GByteArray *b = g_byte_array_new();
    const char head[] = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19\x2e" /* magic */
                        "\x80\x02M\xe9\x03."                                           /* 1001 */
                        "\x80\x02}X\x0d\x00\x00\x00little_endian\x88s."                /* sys_info */
                        "\x80\x02}X\x01\x00\x00\x00wctorch._utils\n_rebuild_tensor_v2\n"
                        "((X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x02\x00\x00\x00"
                        "42X\x03\x00\x00\x00"
                        "cpuK\x03NtQK\x01K\x02\x85K\x01\x85\x89}tRs." /* {'w': storage[1:3]} */
                        "\x80\x02]X\x02\x00\x00\x00"
                        "42a."; /* keys */
    g_byte_array_append(b, (const guint8 *)head, sizeof head - 1);
    const uint64_t numel = 3;
    const float vals[3] = {7, 8, 9};
    g_byte_array_append(b, (const guint8 *)&numel, 8);
    g_byte_array_append(b, (const guint8 *)vals, sizeof vals);
    sdt_error error = {0};
    sdt_torch_file *f = sdt_torch_open_memory(b->data, b->len, "legacy.pt", &error);
    CHECK(f, "legacy: %s", error.message);
    if (f) {
        CHECK(sdt_torch_layout_of(f) == SDT_TORCH_LEGACY, "legacy layout");
        sdt_tensor t;
        const sdt_pv *w = sdt_pv_dict_get(sdt_torch_root(f), "w");
        CHECK(sdt_torch_tensor(f, w, "w", &t, &error) && t.ndim == 1 && t.shape[0] == 2 &&
                  ((const float *)t.data)[0] == 8 && ((const float *)t.data)[1] == 9,
              "legacy tensor: %s", error.message);
        sdt_torch_close(f);
    }
    for (guint cut = 0; cut < b->len; cut++) {
        sdt_error_clear(&error);
        sdt_torch_file *t = sdt_torch_open_memory(b->data, cut, "legacy-cut.pt", &error);
        CHECK(!t && io_contains(error.message, "legacy-cut.pt"), "legacy cut at %u: '%s'", cut, error.message);
        sdt_torch_close(t);
    }
    g_byte_array_free(b, TRUE);
}

/* Strided views are copied row-major; expanded ones (stride 0) refused. */
static void test_strided(void)
{
    sdt_pv_arena *a = sdt_pv_arena_new();
    float data[6] = {0, 1, 2, 3, 4, 5};
    sdt_pv *t = sdt_pv_new_tensor(a, SDT_ST_F32, 2, (int64_t[]){2, 3}, data);
    t->u.t.shape[0] = 3; /* the transpose: [3, 2] with strides [1, 3] */
    t->u.t.shape[1] = 2;
    t->u.t.stride[0] = 1;
    t->u.t.stride[1] = 3;
    GByteArray *pkl = g_byte_array_new();
    GPtrArray *storages = g_ptr_array_new();
    sdt_error error = {0};
    CHECK(sdt_pickle_write(t, pkl, storages, "strided", &error), "write: %s", error.message);
    char *dir = io_make_tmpdir();
    char *path = write_archive(dir, "strided.pt", pkl->data, pkl->len, data, sizeof data);
    sdt_torch_file *f = sdt_torch_open(path, &error);
    CHECK(f, "strided open: %s", error.message);
    sdt_tensor out;
    if (f && sdt_torch_tensor(f, sdt_torch_root(f), "t", &out, &error)) {
        const float want[6] = {0, 3, 1, 4, 2, 5};
        CHECK(memcmp(out.data, want, sizeof want) == 0, "transpose copied wrong");
    } else {
        CHECK(false, "strided tensor: %s", error.message);
    }
    sdt_torch_close(f);
    g_free(path);
    /* Stride 0 over a 6-element storage, viewing 100 x 100 elements. */
    t->u.t.shape[0] = t->u.t.shape[1] = 100;
    t->u.t.stride[0] = t->u.t.stride[1] = 0;
    g_byte_array_set_size(pkl, 0);
    g_ptr_array_set_size(storages, 0);
    CHECK(sdt_pickle_write(t, pkl, storages, "expanded", &error), "write: %s", error.message);
    path = write_archive(dir, "expanded.pt", pkl->data, pkl->len, data, sizeof data);
    f = sdt_torch_open(path, &error);
    CHECK(f && !sdt_torch_tensor(f, sdt_torch_root(f), "t", &out, &error) && io_contains(error.message, "expanded"),
          "expanded view: '%s'", error.message);
    sdt_torch_close(f);
    g_free(path);
    io_rm_tree(dir);
    g_free(dir);
    g_byte_array_free(pkl, TRUE);
    g_ptr_array_free(storages, TRUE);
    sdt_pv_arena_free(a);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("test_torch_file");
    char *dir = io_make_tmpdir();
    test_round_trip(&rng, dir);
    test_refusals(dir);
    test_legacy();
    test_zip64(dir);
    test_strided();
    io_rm_tree(dir);
    g_free(dir);
    return sdt_test_finish("test_torch_file");
}
