/* options_copy.c - see options_copy.h. */
#include "train/options_copy.h"

#include <stdlib.h>
#include <string.h>

/* The paths and prompts where "" means "not given". */
/* One X-macro list, laid out by hand (clang-format would staircase it). */
// clang-format off
#define SDT_TRAIN_OPTION_EMPTY_IS_NULL(X)                                                                            \
    X(model_path) X(dataset_dir) X(template_file) X(tokenizer_path) X(preview_prompt) X(preview_prompts_file)        \
    X(validation_dir) X(clip_l_path) X(clip_g_path) X(t5xxl_path) X(vae_path) X(timestep_sampling) X(flow_weighting)
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
    /* The device list (1.8) is the host's memory too; a count the checks will refuse copies nothing
     * but keeps the list non-NULL, so the refusal names the count. */
    own->devices = NULL;
    if (o->devices) {
        static const int32_t none[1] = {0};
        size_t n = o->device_count > 0 && o->device_count <= SDT_TRAIN_MAX_DEVICES ? (size_t)o->device_count : 0;
        int32_t *list = n ? malloc(n * sizeof *list) : NULL;
        if (list) memcpy(list, o->devices, n * sizeof *list);
        if (n && !list)
            ok = false; /* own->devices stays NULL: release frees nothing */
        else
            own->devices = list ? list : none;
    }
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
    if (own->devices && own->device_count > 0 && own->device_count <= SDT_TRAIN_MAX_DEVICES)
        free((int32_t *)own->devices);
    own->devices = NULL;
}
