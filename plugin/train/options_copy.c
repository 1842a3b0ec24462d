/* options_copy.c - see options_copy.h. */
#include "train/options_copy.h"

#include <stdlib.h>
#include <string.h>

/* The paths and prompts where "" means "not given". */
/* One X-macro list, laid out by hand (clang-format would staircase it). */
// clang-format off
#define SDT_TRAIN_OPTION_EMPTY_IS_NULL(X)                                                                            \
    X(model_path) X(dataset_dir) X(template_file) X(tokenizer_path) X(preview_prompt) X(preview_prompts_file)        \
    X(validation_dir)
// clang-format on

static bool own_string(const char **field)
{
    if (!*field) return true;
    char *copy = strdup(*field);
    *field = copy;
    return copy != NULL;
}

static void drop_empty(const char **field)
{
    if (*field && !**field) {
        free((char *)*field);
        *field = NULL;
    }
}

bool sdt_train_options_copy(sdt_train_options *own, const sdt_train_options *o)
{
    *own = *o;
    bool ok = true;
#define OWN(f) ok &= own_string(&own->f);
    SDT_TRAIN_OPTION_STRINGS(OWN)
#undef OWN
    if (!own->preview_negative_prompt) ok &= (own->preview_negative_prompt = strdup("")) != NULL;
    if (!ok) {
        sdt_train_options_release(own);
        return false;
    }
#define DROP(f) drop_empty(&own->f);
    SDT_TRAIN_OPTION_EMPTY_IS_NULL(DROP)
#undef DROP
    return true;
}

void sdt_train_options_release(sdt_train_options *own)
{
#define FREE(f) free((char *)own->f), own->f = NULL;
    SDT_TRAIN_OPTION_STRINGS(FREE)
#undef FREE
}
