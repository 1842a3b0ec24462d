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
#include "torch_save.h"

#define PYTHON "/usr/bin/python3"

/* Runs torch_files.py with mode and args (NULL-terminated); its stdout, status in *status. */
static char *run_python(const char *mode, char **args, int *status)
{
    char *script = g_build_filename(SDT_SOURCE_DIR, "tests", "models_io", "torch_files.py", NULL);
    GPtrArray *argv = g_ptr_array_new();
    g_ptr_array_add(argv, PYTHON);
    g_ptr_array_add(argv, script);
    g_ptr_array_add(argv, (char *)mode);
    for (char **a = args; *a; a++) g_ptr_array_add(argv, *a);
    g_ptr_array_add(argv, NULL);
    char *out = NULL, *errout = NULL;
    GError *e = NULL;
    *status = -1;
    if (!g_spawn_sync(NULL, (char **)argv->pdata, NULL, 0, NULL, NULL, &out, &errout, status, &e)) {
        fprintf(stderr, "cannot run %s: %s\n", PYTHON, e->message);
        g_error_free(e);
    } else if (*status != 0) {
        fprintf(stderr, "%s %s failed:\n%s\n", script, mode, errout);
    }
    g_ptr_array_free(argv, TRUE);
    g_free(errout);
    g_free(script);
    return out;
}

static bool torch_available(void)
{
    char *argv[] = {PYTHON, "-c", "import torch", NULL};
    int status = -1;
    return g_spawn_sync(NULL, argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, NULL,
                        NULL, &status, NULL) &&
           status == 0;
}

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
    char err[512] = "";
    sdt_torch_file *f = sdt_torch_open(path, err, sizeof err);
    CHECK(f, "%s: %s", path, err);
    if (!f) return NULL;
    cJSON *have = td_describe(sdt_torch_root(f));
    compare(path, want, have);
    cJSON_Delete(have);
    char *again = g_strconcat(path, ".sdt.pt", NULL);
    CHECK(sdt_torch_save(again, sdt_torch_root(f), NULL, err, sizeof err), "%s: save: %s", path, err);
    sdt_torch_close(f);
    return again;
}

int main(void)
{
    if (!torch_available()) {
        printf("test_torch_python: %s has no torch (apt-get install python3-torch); skipped\n", PYTHON);
        return SDT_TEST_SKIP;
    }
    char *dir = io_make_tmpdir();
    int status;
    char *make_args[] = {dir, NULL};
    g_free(run_python("make", make_args, &status));
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
        char *out = run_python("check", written, &status);
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
    for (int i = 0; i < N; i++) {
        cJSON_Delete(want[i]);
        g_free(written[i]);
    }
    io_rm_tree(dir);
    g_free(dir);
    return sdt_test_finish("test_torch_python");
}
