/* serve_option_groups.c - see serve_option_groups.h. */
#include <string.h>

#include "serve_option_groups.h"

static const struct {
    const char *group;
    const char *const names[16];
} groups[] = {
    {"What to train", {"embedding", "hypernetwork", "model", "dataset", "template", "log-dir"}},
    {"Learning rate and batch",
     {"learn-rate", "embedding-learn-rate", "weight-decay", "strength", "batch-size", "grad-accum", "clip-mode",
      "clip-value", "embedding-clip-mode", "embedding-clip-value", "lr-scheduler", "lr-cycles", "warmup-steps"}},
    {"Images and captions",
     {"width", "height", "do-not-resize", "latent-sampling", "alpha-loss-weight", "shuffle-tags", "tag-dropout",
      "keep-tokens", "caption-dropout", "flip", "buckets", "filename-word-regex", "filename-join"}},
    {"Steps and saving",
     {"max-steps", "save-every", "preview-every", "save-state-every", "csv-every", "metrics", "no-embedding-cards",
      "resume"}},
    {"Validation and average",
     {"validation-dir", "validation-split", "validate-every", "stop-after-no-improvement", "ema", "ema-every",
      "ema-result", "ema-previews"}},
    {"SD3.5 and Flux.1", {"clip-l", "clip-g", "t5xxl", "vae", "encoders"}},
    {"Previews",
     {"preview-prompt", "preview-negative-prompt", "preview-steps", "preview-cfg", "preview-sampler", "preview-seed",
      "preview-width", "preview-height", "preview-hypernetworks", "preview-strength"}},
};

/* The path options picked from their folder's list, as A1111's Train tab picks them, with the
 * label of the empty choice ("": no label of the layout's own). */
static const struct {
    const char *name;
    const char *empty;
} picked[] = {
    {"embedding", "(none)"},
    {"hypernetwork", ""},
    {"model", ""},
    {"template", ""},
};

const char *serve_option_picked(const char *name)
{
    for (size_t i = 0; i < sizeof picked / sizeof picked[0]; i++)
        if (strcmp(picked[i].name, name) == 0) return picked[i].empty;
    return NULL;
}

const char *serve_option_group(const char *name)
{
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
        for (size_t i = 0; i < 16 && groups[g].names[i]; i++)
            if (strcmp(groups[g].names[i], name) == 0) return groups[g].group;
    return "Advanced";
}

const char *serve_option_group_member(size_t i)
{
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
        for (size_t k = 0; k < 16 && groups[g].names[k]; k++)
            if (i-- == 0) return groups[g].names[k];
    return i < sizeof picked / sizeof picked[0] ? picked[i].name : NULL;
}
