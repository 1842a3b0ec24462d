/* tokenizer_open.c - where a training or create call finds CLIP's and T5's tokenizers (see tokenizer_open.h). */
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clip_tokenizer_builtin.h"
#include "train/tokenizer_open.h"

static bool is_dir(const char *p)
{
    struct stat st;
    return p && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A tokenizer whose ids reach past the text encoder's rows would index outside its embedding. */
static sdt_tokenizer *check_fits(sdt_tokenizer *t, const char *where, int model_vocab, sdt_error *error)
{
    if (!t || model_vocab <= 0 || sdt_tokenizer_vocab_size(t) <= model_vocab) return t;
    sdt_fail(error, SDT_ERR_VALIDATION,
             "%s: the tokenizer has %d entries but the model's text encoder has only %d token rows; "
             "set the tokenizer path to the tokenizer made for this model",
             where, (int)sdt_tokenizer_vocab_size(t), model_vocab);
    sdt_tokenizer_free(t);
    return NULL;
}

sdt_tokenizer *sdt_open_tokenizer(const char *given, const char *model_path, int model_vocab,
                                  const sdt_host_callbacks *host, sdt_error *error)
{
    if (given && *given) return check_fits(sdt_tokenizer_load_dir(given, error), given, model_vocab, error);
    if (is_dir(model_path))
        return check_fits(sdt_tokenizer_load_dir(model_path, error), model_path, model_vocab, error);
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", model_path);
    char *dir = dirname(buf);
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/tokenizer", dir);
    if (is_dir(probe)) return check_fits(sdt_tokenizer_load_dir(probe, error), probe, model_vocab, error);
    if (model_vocab != SDT_CLIP_BUILTIN_VOCAB) {
        sdt_fail(error, SDT_ERR_NOT_FOUND,
                 "%s: no tokenizer found (looked for %s/vocab.json), and the built-in CLIP tokenizer "
                 "(%d entries) does not fit this text encoder's %d token rows; set the tokenizer path to a folder with "
                 "this model's vocab.json and merges.txt",
                 model_path, probe, SDT_CLIP_BUILTIN_VOCAB, model_vocab);
        return NULL;
    }
    sdt_tokenizer *t = sdt_tokenizer_load_builtin_clip(error);
    if (t)
        sdt_host_log(host, SDT_LOG_INFO,
                     "%s: no tokenizer folder beside the model; using the CLIP tokenizer built "
                     "into the plugin (the one SD 1.x and 2.x use)",
                     model_path);
    return t;
}

/* Whether folder holds a T5 vocabulary where sdt_spm_load looks for one. */
static bool has_t5_vocab(const char *folder)
{
    static const char *const inside[] = {"spiece.model",
                                         "tokenizer.json",
                                         "tokenizer_3/spiece.model",
                                         "tokenizer_3/tokenizer.json",
                                         "tokenizer_2/spiece.model",
                                         "tokenizer_2/tokenizer.json"};
    char probe[4200];
    for (size_t i = 0; i < sizeof inside / sizeof inside[0]; i++) {
        snprintf(probe, sizeof probe, "%s/%s", folder, inside[i]);
        if (access(probe, F_OK) == 0) return true;
    }
    return false;
}

/* The folder a file is in (into buf). */
static const char *folder_of(const char *path, char *buf, size_t size)
{
    snprintf(buf, size, "%s", path);
    return dirname(buf);
}

sdt_spm *sdt_open_t5_tokenizer(const char *t5_path, const char *model_path, int t5_vocab,
                               const sdt_host_callbacks *host, sdt_error *error)
{
    /* create-embedding looks here too (plugin/ti/ti_create_tables.c); the model first */
    char folders[5][4200];
    const char *where[5];
    int n = 0;
    if (model_path && is_dir(model_path)) {
        snprintf(folders[n], sizeof folders[n], "%s", model_path);
        where[n] = folders[n], n++;
    } else if (model_path && *model_path) {
        char buf[4096];
        const char *dir = folder_of(model_path, buf, sizeof buf);
        snprintf(folders[n], sizeof folders[n], "%s/t5_tokenizer", dir), where[n] = folders[n], n++;
        snprintf(folders[n], sizeof folders[n], "%s", dir), where[n] = folders[n], n++;
    }
    if (t5_path && *t5_path) {
        char buf[4096];
        const char *dir = is_dir(t5_path) ? t5_path : folder_of(t5_path, buf, sizeof buf);
        if (!n || strcmp(where[n - 1], dir)) { /* the T5 file beside the model: one folder */
            snprintf(folders[n], sizeof folders[n], "%s", dir), where[n] = folders[n], n++;
        }
        snprintf(folders[n], sizeof folders[n], "%s/t5_tokenizer", dir), where[n] = folders[n], n++;
        if (n >= 2 && !strcmp(where[0], where[n - 1])) n--; /* the same t5_tokenizer/ as the model's */
    }
    for (int i = 0; i < n; i++) {
        if (!has_t5_vocab(where[i])) continue;
        sdt_spm *t = sdt_spm_load(where[i], error);
        if (!t) return NULL;
        if (t5_vocab > 0 && sdt_spm_size(t) > t5_vocab) {
            sdt_fail(error, SDT_ERR_VALIDATION,
                     "%s: T5's tokenizer there has %d pieces but the T5 encoder has only %d token rows; put the "
                     "tokenizer made for this T5 (google/t5-v1_1-xxl's spiece.model or tokenizer.json) there",
                     where[i], (int)sdt_spm_size(t), t5_vocab);
            sdt_spm_free(t);
            return NULL;
        }
        sdt_host_log(host, SDT_LOG_INFO, "T5's tokenizer: %s (%d pieces)", where[i], (int)sdt_spm_size(t));
        return t;
    }
    char looked[8400] = "";
    for (int i = 0; i < n; i++)
        snprintf(looked + strlen(looked), sizeof looked - strlen(looked), "%s%s",
                 i ? (i == n - 1 ? " and " : ", ") : "", where[i]);
    sdt_fail(error, SDT_ERR_NOT_FOUND,
             "no T5 tokenizer found (looked in %s for spiece.model or tokenizer.json, also under tokenizer_3/); "
             "sdtrain ships no T5 vocabulary: put T5's spiece.model or tokenizer.json (google/t5-v1_1-xxl's, or the "
             "model's tokenizer_3 folder) beside the T5 file or the model",
             n ? looked : "no folder: no model path was given");
    return NULL;
}
