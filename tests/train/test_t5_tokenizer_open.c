/* test_t5_tokenizer_open.c - where a run finds T5's tokenizer (train/tokenizer_open.h, sdt_open_t5_tokenizer), on a
 * hand-built unigram vocabulary (no real T5 vocabulary is shipped or downloaded):
 *  - nothing anywhere: NOT_FOUND naming every folder looked in and the files to put there;
 *  - tokenizer.json beside the T5 file (t5xxl_path) is found; so is one beside a single-file model;
 *  - a diffusers folder's tokenizer_3/ comes first;
 *  - a tokenizer with more pieces than T5's token rows is refused naming the folder and both counts;
 *  - a damaged tokenizer.json is its own sentence (not "none found"). */
#include <glib.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>

#include "sdt_test.h"
#include "t5_test_vocab.h"
#include "train/tokenizer_open.h"

static const char *const JSON = SDT_TEST_T5_TOKENIZER_JSON;

static char *in(const char *dir, const char *name)
{
    return g_strdup_printf("%s/%s", dir, name);
}

static void put(const char *path, const char *text)
{
    CHECK(g_file_set_contents(path, text, -1, NULL), "write %s", path);
}

int main(void)
{
    char *root = g_dir_make_tmp("sdt-t5tok-XXXXXX", NULL);
    CHECK(root != NULL, "temp folder");
    if (!root) return sdt_test_finish("test_t5_tokenizer_open");
    char *models = in(root, "models"), *t5dir = in(root, "t5"), *folder = in(root, "sd35-diffusers");
    char *tok3 = in(folder, "tokenizer_3");
    g_mkdir(models, 0777), g_mkdir(t5dir, 0777), g_mkdir(folder, 0777), g_mkdir(tok3, 0777);
    char *model = in(models, "sd3.5_medium.safetensors"), *t5 = in(t5dir, "t5xxl_fp16.safetensors");
    sdt_error err = {0};

    sdt_spm *t = sdt_open_t5_tokenizer(t5, model, 32128, NULL, &err);
    CHECK(!t && err.code == SDT_ERR_NOT_FOUND && strstr(err.message, t5dir) && strstr(err.message, models) &&
              strstr(err.message, "spiece.model") && strstr(err.message, "tokenizer.json"),
          "none anywhere: \"%s\"", err.message);

    char *beside_t5 = in(t5dir, "tokenizer.json");
    put(beside_t5, JSON);
    t = sdt_open_t5_tokenizer(t5, model, 32128, NULL, &err);
    CHECK(t && sdt_spm_size(t) == 10, "beside the T5 file: %s", t ? "" : err.message);
    sdt_spm_free(t);
    t = sdt_open_t5_tokenizer(t5, model, 5, NULL, &err);
    CHECK(!t && err.code == SDT_ERR_VALIDATION && strstr(err.message, t5dir) && strstr(err.message, "10 pieces") &&
              strstr(err.message, "only 5 token rows"),
          "more pieces than T5's rows: \"%s\"", err.message);

    char *beside_model = in(models, "tokenizer.json");
    put(beside_model, "{\"model\": ");
    t = sdt_open_t5_tokenizer(NULL, model, 32128, NULL, &err);
    CHECK(!t && strstr(err.message, "tokenizer.json") && !strstr(err.message, "no T5 tokenizer found"),
          "a damaged tokenizer.json beside the model: \"%s\"", err.message);
    put(beside_model, JSON);
    t = sdt_open_t5_tokenizer(NULL, model, 32128, NULL, &err);
    CHECK(t != NULL, "beside a single-file model: %s", t ? "" : err.message);
    sdt_spm_free(t);

    /* the diffusers folder's tokenizer_3 first: a T5 folder with a damaged file is not reached */
    put(beside_t5, "not json");
    char *json3 = in(tok3, "tokenizer.json");
    put(json3, JSON);
    t = sdt_open_t5_tokenizer(t5, folder, 32128, NULL, &err);
    CHECK(t && sdt_spm_size(t) == 10, "a diffusers folder's tokenizer_3: %s", t ? "" : err.message);
    sdt_spm_free(t);

    char *rm = g_strdup_printf("rm -rf '%s'", root);
    CHECK(system(rm) == 0, "remove %s", root);
    g_free(rm);
    g_free(json3), g_free(beside_model), g_free(beside_t5), g_free(model), g_free(t5);
    g_free(tok3), g_free(folder), g_free(t5dir), g_free(models), g_free(root);
    return sdt_test_finish("test_t5_tokenizer_open");
}
