/* train_request.h - what one prepare() trains, read once at the ABI edge: the shared options by
 * value and each part's own settings, every field name a sentence may need already chosen.
 *
 * Exactly one reader fills it per ABI struct (api/: the trainer factory's sdt_trainer_config, the
 * deprecated adapters' sdt_ti_config and sdt_hn_config), with the names that struct's users know
 * ("embedding->learn_rate", "config.learn_rate"); nothing after the reader looks at an ABI config
 * struct again. Strings are borrowed from the host for the prepare() call (the job copies what it
 * keeps); field names are string literals (the step engine keeps them for later sentences). */
#ifndef SDT_COMPOSE_TRAIN_REQUEST_H
#define SDT_COMPOSE_TRAIN_REQUEST_H

#include <stdbool.h>
#include <stdint.h>

#include "sdt_error.h"
#include "sdtrain.h"

struct sdt_rank_group; /* train/rank_group.h */

/* A part's learning-rate and clip schedules with the fields they came from; the clip is resolved
 * (the part's own, or the options'). */
typedef struct sdt_part_schedules {
    const char *learn_rate, *learn_rate_field;
    uint32_t clip_mode; /* sdt_clip_mode */
    const char *clip_value, *clip_value_field;
} sdt_part_schedules;

typedef struct sdt_embedding_settings {
    const char *path;
    sdt_part_schedules schedules;
    bool save_cards; /* A1111 PNG cards */
    /* SD3.5/Flux.1 (1.9): the tables that train (SDT_ENCODER_* bits, 0 = all of the family) and each one's
     * schedule (NULL: schedules.learn_rate), indexed clip_l, clip_g, t5xxl */
    uint32_t encoders;
    const char *encoder_learn_rates[3];
} sdt_embedding_settings;

typedef struct sdt_hypernetwork_settings {
    const char *path;
    sdt_part_schedules schedules;
    double weight_decay;
    double strength;
    const char *preview_hypernetworks;       /* NULL or "": none */
    const char *preview_hypernetworks_field; /* its name in sentences */
    double preview_strength;                 /* 0: strength */
} sdt_hypernetwork_settings;

typedef struct sdt_train_request {
    sdt_train_options options;        /* complete: defaults under what the host gave, log_dir resolved */
    const char *options_prefix;       /* how sentences name an option: "options->", "config.", ... */
    const char *train_options_prefix; /* how they name one only sdt_train_options has (1.5 on): "options->",
                                       * "config.train_options->" */
    bool has_embedding, has_hypernetwork;
    sdt_embedding_settings embedding;
    sdt_hypernetwork_settings hypernetwork;
    /* One rank of a trainer that lists several devices (train/rank_group.h): set by the trainer handle
     * on each rank's copy of the request, whose options then list that rank's device alone; NULL from
     * the readers. */
    struct sdt_rank_group *rank_group;
    int rank_index;
} sdt_train_request;

/* The checks of a part's settings that need no file (the file chosen, the learning rate, the
 * hypernetwork's ranges), one home for every reader: false + a VALIDATION sentence naming the field
 * after prefix ("config.", "embedding->", "hypernetwork->") and the fix. */
bool sdt_embedding_settings_check(const sdt_embedding_settings *s, const char *prefix, sdt_error *error);
bool sdt_hypernetwork_settings_check(const sdt_hypernetwork_settings *s, const char *prefix, sdt_error *error);

#endif
