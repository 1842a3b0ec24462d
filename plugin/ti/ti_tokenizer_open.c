/* ti_tokenizer_open.c - where a training or create call finds CLIP's tokenizer (see ti_tokenizer_open.h). */
#include <libgen.h>
#include <stdio.h>
#include <sys/stat.h>

#include "ti/ti_tokenizer_open.h"

static bool is_dir(const char *p)
{
    struct stat st;
    return p && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

sdt_tokenizer *ti_open_tokenizer(const char *given, const char *model_path, sdt_error *error)
{
    if (given && *given) return sdt_tokenizer_load_dir(given, error);
    char buf[4096];
    if (is_dir(model_path)) return sdt_tokenizer_load_dir(model_path, error);
    snprintf(buf, sizeof buf, "%s", model_path);
    char *dir = dirname(buf);
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/tokenizer", dir);
    if (is_dir(probe)) return sdt_tokenizer_load_dir(probe, error);
    sdt_fail(error, SDT_ERR_NOT_FOUND, "%s: no tokenizer found (looked for %s/vocab.json); set the tokenizer path to a folder "
             "with CLIP's vocab.json and merges.txt", model_path, probe);
    return NULL;
}
