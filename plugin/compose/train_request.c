/* train_request.c - the checks of a request's part settings that need no file (see train_request.h). */
#include "compose/train_request.h"

static bool blank(const char *s)
{
    return !s || !s[0];
}

#define FIELD_FAIL(...) sdt_fail(error, SDT_ERR_VALIDATION, __VA_ARGS__)

bool sdt_embedding_settings_check(const sdt_embedding_settings *s, const char *prefix, sdt_error *error)
{
    if (blank(s->path))
        return FIELD_FAIL("Embedding not selected: set %sembedding_path to the embedding file to train.", prefix);
    if (blank(s->schedules.learn_rate))
        return FIELD_FAIL("Learning rate is empty: set %slearn_rate, e.g. \"0.005\" or \"0.005:100, 1e-3:1000, 1e-5\".",
                          prefix);
    if (s->encoders & ~(uint32_t)(SDT_ENCODER_CLIP_L | SDT_ENCODER_CLIP_G | SDT_ENCODER_T5XXL))
        return FIELD_FAIL("%sencoders is 0x%x; it holds SDT_ENCODER_CLIP_L (1), SDT_ENCODER_CLIP_G (2) and "
                          "SDT_ENCODER_T5XXL (4) bits, 0 for every encoder of the family.",
                          prefix, (unsigned)s->encoders);
    static const char *const names[3] = {"learn_rate_clip_l", "learn_rate_clip_g", "learn_rate_t5xxl"};
    for (int i = 0; i < 3; i++)
        if (s->encoder_learn_rates[i] && !s->encoder_learn_rates[i][0])
            return FIELD_FAIL("%s%s is empty; set a schedule such as \"0.005\", or NULL for %slearn_rate's.", prefix,
                              names[i], prefix);
    return true;
}

bool sdt_hypernetwork_settings_check(const sdt_hypernetwork_settings *s, const char *prefix, sdt_error *error)
{
    if (blank(s->path))
        return FIELD_FAIL(
            "Hypernetwork not selected: set %shypernetwork_path to the .pt or .safetensors file to train.", prefix);
    if (blank(s->schedules.learn_rate))
        return FIELD_FAIL("Learning rate is empty: set %slearn_rate, e.g. \"0.00001\".", prefix);
    if (!(s->weight_decay >= 0 && s->weight_decay < 1))
        return FIELD_FAIL("%sweight_decay must be in [0, 1) (A1111's is 0.01).", prefix);
    if (!(s->strength > 0 && s->strength <= 10))
        return FIELD_FAIL("%sstrength must be in (0, 10] (1 trains at full strength).", prefix);
    if (!(s->preview_strength >= -10 && s->preview_strength <= 10))
        return FIELD_FAIL("%spreview_strength must be in [-10, 10] (0 = the training strength).", prefix);
    return true;
}
