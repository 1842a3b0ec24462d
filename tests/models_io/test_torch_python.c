/* test_torch_python.c - the reader and writer against real torch (Debian's /usr/bin/python3 with
 * python3-torch; skipped without it). torch.save writes every kind of value in both layouts, plus embeddings
 * and a tiny checkpoint (tests/models_io/torch_files.py); the reader must see exactly what torch describes.
 * Then the project's writer saves those trees again and torch.load(weights_only=True) plus pickletools must
 * read back the same description. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "io_test_util.h"
#include "sdt_test.h"
#include "torch_describe.h"
#include "torch_file.h"
#include "torch_python.h"
#include "torch_save.h"
#include "weights.h"

static void compare(const char *label, cJSON *want, cJSON *have)
{
    bool same = want && have && cJSON_Compare(want, have, true);
    if (!same) {
        char *w = want ? cJSON_PrintUnformatted(want) : NULL, *h = have ? cJSON_PrintUnformatted(have) : NULL;
        fprintf(stderr, "%s\n want: %.2000s\n have: %.2000s\n", label, w ? w : "(none)", h ? h : "(none)");
        free(w);
        free(h);
    }
    CHECK(same, "%s: descriptions differ", label);
}

static cJSON *expected(const char *path)
{
    char *json_path = g_strconcat(path, ".json", NULL), *json = NULL;
    CHECK(g_file_get_contents(json_path, &json, NULL, NULL), "%s missing", json_path);
    cJSON *want = json ? cJSON_Parse(json) : NULL;
    g_free(json);
    g_free(json_path);
    return want;
}

/* Reads path with the project's reader, compares with torch's description, and saves it again as
 * <path>.sdt.pt with the project's writer (returned, for torch to check). */
static char *read_and_rewrite(const char *path, cJSON *want)
{
    sdt_error error = {0};
    sdt_torch_file *f = sdt_torch_open(path, &error);
    CHECK(f, "%s: %s", path, error.message);
    if (!f) return NULL;
    cJSON *have = td_describe(sdt_torch_root(f));
    compare(path, want, have);
    cJSON_Delete(have);
    char *again = g_strconcat(path, ".sdt.pt", NULL);
    CHECK(sdt_torch_save(again, sdt_torch_root(f), NULL, &error), "%s: save: %s", path, error.message);
    sdt_torch_close(f);
    return again;
}

/* torch's tiny.ckpt through the checkpoint loader: EMA copies left out, views (a transpose, an offset slice)
 * read as torch sees them. */
static void check_weights(const char *dir, cJSON *want)
{
    char *path = g_build_filename(dir, "tiny.ckpt", NULL);
    sdt_error error = {0};
    sdt_weights *w = sdt_weights_open(path, &error);
    CHECK(w, "tiny.ckpt as a checkpoint: %s", error.message);
    cJSON *sd = cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetObjectItem(want, "dict"), 0), 1);
    cJSON *pair;
    int compared = 0;
    cJSON_ArrayForEach(pair, cJSON_GetObjectItem(sd, "dict"))
    {
        const char *key = cJSON_GetArrayItem(pair, 0)->valuestring;
        const sdt_tensor *t = w ? sdt_weights_get(w, key) : NULL;
        if (g_str_has_prefix(key, "model_ema.")) {
            CHECK(!t, "%s: EMA copy kept", key);
            continue;
        }
        CHECK(t, "%s missing", key);
        if (!t) continue;
        cJSON *values = cJSON_GetObjectItem(cJSON_GetArrayItem(pair, 1), "values");
        float *f = g_new(float, (gsize)sdt_tensor_numel(t));
        sdt_load_f32(t->data, t->dtype, f, sdt_tensor_numel(t));
        CHECK(cJSON_GetArraySize(values) == sdt_tensor_numel(t), "%s: size", key);
        for (int i = 0; i < cJSON_GetArraySize(values) && i < sdt_tensor_numel(t); i++)
            CHECK(f[i] == (float)cJSON_GetArrayItem(values, i)->valuedouble, "%s[%d] differs", key, i);
        g_free(f);
        compared++;
    }
    CHECK(compared == 4 && w && sdt_weights_count(w) == 4, "tiny.ckpt: %d tensors compared", compared);
    sdt_weights_close(w);
    g_free(path);
}

int main(void)
{
    if (!tp_torch_available()) {
        printf("test_torch_python: %s has no torch (apt-get install python3-torch); skipped\n", TP_PYTHON);
        return SDT_TEST_SKIP;
    }
    char *dir = io_make_tmpdir();
    int status;
    char *make_args[] = {dir, NULL};
    g_free(tp_run(SDT_SOURCE_DIR, "make", make_args, &status));
    CHECK(status == 0, "torch_files.py make failed");
    enum { N = 6 };
    const char *files[N] = {"zip.ckpt", "legacy.pt", "tiny.ckpt", "a1111.pt", "a1111_old.pt", "learned_embeds.bin"};
    cJSON *want[N] = {0};
    char *written[N + 1] = {0};
    for (int i = 0; status == 0 && i < N; i++) {
        char *path = g_build_filename(dir, files[i], NULL);
        want[i] = expected(path);
        written[i] = read_and_rewrite(path, want[i]);
        g_free(path);
        if (!written[i]) status = 1;
    }
    if (status == 0) {
        char *out = tp_run(SDT_SOURCE_DIR, "check", written, &status);
        CHECK(status == 0, "torch.load(weights_only=True) or pickletools refused a file of the writer");
        char **lines = g_strsplit(out ? out : "", "\n", -1);
        for (int i = 0; status == 0 && i < N; i++) {
            cJSON *loaded = lines[i] ? cJSON_Parse(lines[i]) : NULL;
            char label[160];
            snprintf(label, sizeof label, "%s written by sdt_torch_save, loaded by torch", files[i]);
            compare(label, want[i], loaded);
            cJSON_Delete(loaded);
        }
        g_strfreev(lines);
        g_free(out);
    }
    if (status == 0) check_weights(dir, want[2]);
    for (int i = 0; i < N; i++) {
        cJSON_Delete(want[i]);
        g_free(written[i]);
    }
    io_rm_tree(dir);
    g_free(dir);
    return sdt_test_finish("test_torch_python");
}
