/* ti_config.c - the deprecated textual-inversion config: defaults (the A1111 Train tab's), its one reader
 * and the plain checks (see ti_config.h). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "api/ti_config.h"
#include "host/copy_out.h"
#include "train/train_options.h"

void ti_config_set_defaults(sdt_ti_config *c)
{
    memset(c, 0, sizeof *c);
    c->struct_size = sizeof *c;
    sdt_train_options shared;
    ti_train_options_set_defaults(&shared);
#define TAKE(f) c->f = shared.f;
    SDT_TRAIN_OPTION_FIELDS(TAKE)
#undef TAKE
    c->learn_rate = "0.005";
    c->save_image_with_embedding = true;
}

void ti_train_options_set_defaults(sdt_train_options *o)
{
    sdt_train_options_set_defaults(o, "textual_inversion");
}

bool ti_config_read_options(const sdt_ti_config *own, sdt_train_options *o, sdt_error *error)
{
    if (!own->train_options) { /* 1.0/1.1: the inline copies; what only the options struct has keeps its default */
        ti_train_options_set_defaults(o);
#define GIVE(f) o->f = own->f;
        SDT_TRAIN_OPTION_FIELDS(GIVE)
#undef GIVE
        return true;
    }
    if (!sdt_train_options_read(o, own->train_options, "textual_inversion", "config.train_options", error))
        return false;
    /* options from before 1.4 have no save_state_every_seconds: the TI config's own counts then */
    if (own->train_options->struct_size < offsetof(sdt_train_options, save_state_every_seconds) + sizeof(int64_t))
        o->save_state_every_seconds = own->save_state_every_seconds;
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
    if (c->reserved0 != 0)
        return fail(error, "config.reserved0 must be 0; fill the config with config_defaults() first.");
    if (c->reserved1[0] || c->reserved1[1] || c->reserved1[2] || c->reserved2)
        return fail(error,
                    "config.reserved1 and config.reserved2 must be 0; fill the config with config_defaults() first.");
    return true;
}

/* The checks that need no file, in the order they always came: the embedding, the learning rate,
 * the shared values, the reserved words, the shared paths. */
static bool check(const sdt_ti_config *c, const sdt_train_request *rq, sdt_error *error)
{
    return sdt_embedding_settings_check(&rq->embedding, "config.", error) &&
           sdt_train_options_check(&rq->options, "config.", error) && check_own(c, error) &&
           sdt_train_options_check_required(&rq->options, "config.", error);
}

bool ti_config_read(const sdt_ti_config *host, sdt_train_request *rq, sdt_error *error)
{
    sdt_ti_config own;
    ti_config_set_defaults(&own);
    if (!host || !sdt_struct_read_in(&own, sizeof own, host))
        return sdt_fail(
            error, SDT_ERR_INVALID_ARGUMENT,
            "prepare(): config is NULL or config->struct_size is not set; fill it with config_defaults() first.");
    memset(rq, 0, sizeof *rq);
    if (!ti_config_read_options(&own, &rq->options, error)) return false;
    rq->options_prefix = "config.";
    rq->train_options_prefix = "config.train_options->";
    rq->has_embedding = true;
    rq->embedding = (sdt_embedding_settings){.path = own.embedding_path,
                                             .schedules = {own.learn_rate, "config.learn_rate", rq->options.clip_mode,
                                                           rq->options.clip_value, "config.clip_value"},
                                             .save_cards = own.save_image_with_embedding};
    return check(&own, rq, error);
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
        return spec_fail(
            error, "spec.vectors_per_token must be 1..75 (each vector takes one of the prompt's 75 token slots).");
    if (is_blank(s->model_path))
        return spec_fail(
            error,
            "No model selected: set spec.model_path to a Stable Diffusion checkpoint (its text encoder sets the embedding width).");
    if (is_blank(s->output_dir))
        return spec_fail(error, "spec.output_dir is empty: set it to the folder the embedding file goes to.");
    return true;
}
