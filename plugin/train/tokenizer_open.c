/* tokenizer_open.c - where a training or create call finds CLIP's tokenizer (see tokenizer_open.h). */
#include <libgen.h>
#include <stdio.h>
#include <sys/stat.h>

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
