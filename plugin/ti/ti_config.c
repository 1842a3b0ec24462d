/* ti_config.c - textual-inversion config defaults (the A1111 Train tab's) and plain checks. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ti/ti_config.h"
#include "train/train_options.h"

/* The shared options into the config's inline copies of them. */
static void take_shared(sdt_ti_config *c, const sdt_train_options *o)
{
#define TAKE(f) c->f = o->f;
    SDT_TRAIN_OPTION_FIELDS(TAKE)
#undef TAKE
}

void ti_config_shared_options(const sdt_ti_config *c, sdt_train_options *o)
{
    ti_train_options_set_defaults(o);
    /* the fields only the options struct has (1.5 on: loss, noise, LR scheduler, previews, data,
     * validation, the average, metrics) come from it; a bad struct was refused by
     * ti_config_take_train_options already, so the defaults stay then */
    sdt_error ignored;
    if (c->train_options && !sdt_train_options_read(o, c->train_options, "textual_inversion", "config.train_options", &ignored))
        ti_train_options_set_defaults(o);
#define GIVE(f) o->f = c->f;
    SDT_TRAIN_OPTION_FIELDS(GIVE)
#undef GIVE
    /* 1.5's options live only in train_options (the config has no inline copies of them) */
    sdt_train_options host;
    sdt_error unread; /* ti_config_take_train_options reported a bad struct already */
    if (c->train_options && sdt_train_options_read(&host, c->train_options, "textual_inversion", "config.train_options", &unread)) {
#define TAKE_1_5(f) o->f = host.f;
        SDT_TRAIN_OPTION_FIELDS_1_5(TAKE_1_5)
#undef TAKE_1_5
    }
}

void ti_config_set_defaults(sdt_ti_config *c)
{
    memset(c, 0, sizeof *c);
    c->struct_size = sizeof *c;
    sdt_train_options shared;
    ti_train_options_set_defaults(&shared);
    take_shared(c, &shared);
    c->learn_rate = "0.005";
    c->save_image_with_embedding = true;
}

void ti_train_options_set_defaults(sdt_train_options *o)
{
    sdt_train_options_set_defaults(o, "textual_inversion");
}

bool ti_config_take_train_options(sdt_ti_config *c, sdt_error *error)
{
    if (!c->train_options) return true;
    sdt_train_options own;
    if (!sdt_train_options_read(&own, c->train_options, "textual_inversion", "config.train_options", error)) return false;
    int64_t own_state_every = c->save_state_every_seconds;
    take_shared(c, &own);
    /* options from before 1.4 have no save_state_every_seconds: the TI config's own counts then */
    if (c->train_options->struct_size < offsetof(sdt_train_options, save_state_every_seconds) + sizeof(int64_t))
        c->save_state_every_seconds = own_state_every;
    return true;
}

/* A config field the job cannot run with. */
static bool fail(sdt_error *error, const char *sentence)
{
    return sdt_fail(error, SDT_ERR_VALIDATION, "%s", sentence);
}

/* A create_embedding() spec field: the call's argument is wrong. */
static bool spec_fail(sdt_error *error, const char *sentence)
{
    return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "%s", sentence);
}

static bool is_blank(const char *s)
{
    return !s || s[0] == '\0';
}

/* The TI-only fields and the reserved words of the 1.0 layout; the shared ones are train/'s. */
static bool check_own(const sdt_ti_config *c, sdt_error *error)
{
    if (c->reserved0 != 0) return fail(error, "config.reserved0 must be 0; fill the config with config_defaults() first.");
    if (c->reserved1[0] || c->reserved1[1] || c->reserved1[2] || c->reserved2)
        return fail(error, "config.reserved1 and config.reserved2 must be 0; fill the config with config_defaults() first.");
    return true;
}

bool ti_config_check(const sdt_ti_config *c, sdt_error *error)
{
    if (is_blank(c->embedding_path)) return fail(error, "Embedding not selected: set config.embedding_path to the embedding file to train.");
    if (is_blank(c->learn_rate)) return fail(error, "Learning rate is empty: set config.learn_rate, e.g. \"0.005\" or \"0.005:100, 1e-3:1000, 1e-5\".");
    sdt_train_options shared;
    ti_config_shared_options(c, &shared);
    return sdt_train_options_check(&shared, "config.", error) && check_own(c, error) &&
           sdt_train_options_check_required(&shared, "config.", error);
}

void ti_spec_set_defaults(sdt_embedding_spec *s)
{
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
    s->vectors_per_token = 1;
    s->init_text = "*";
}

bool ti_spec_check(const sdt_embedding_spec *s, sdt_error *error)
{
    if (is_blank(s->name)) return spec_fail(error, "The embedding name is empty: set spec.name, e.g. \"my-style\".");
    if (s->vectors_per_token < 1 || s->vectors_per_token > 75)
        return spec_fail(error, "spec.vectors_per_token must be 1..75 (each vector takes one of the prompt's 75 token slots).");
    if (is_blank(s->model_path)) return spec_fail(error, "No model selected: set spec.model_path to a Stable Diffusion checkpoint (its text encoder sets the embedding width).");
    if (is_blank(s->output_dir)) return spec_fail(error, "spec.output_dir is empty: set it to the folder the embedding file goes to.");
    return true;
}
