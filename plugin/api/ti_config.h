/* ti_config.h - the deprecated textual-inversion factory's structs (sdt_ti_config, 1.0;
 * sdt_embedding_spec): their defaults, and the one reader of sdt_ti_config into a training request
 * (compose/train_request.h) with the checks that need no file. Sentences name the fields as
 * config.<field>, as they always have. */
#ifndef SDT_API_TI_CONFIG_H
#define SDT_API_TI_CONFIG_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>

#include "compose/train_request.h"
#include "sdtrain.h"

void ti_config_set_defaults(sdt_ti_config *c); /* full sizeof; struct_size = sizeof */
/* The shared defaults as this method's (log_dir "textual_inversion"). */
void ti_train_options_set_defaults(sdt_train_options *o);
/* The shared options of a config read in at full size (own): those of config.train_options when it
 * is set (1.2; a struct from before 1.4 leaves save_state_every_seconds to the config's own), else
 * the config's inline copies over the defaults. false + a sentence for a bad options struct. */
bool ti_config_read_options(const sdt_ti_config *own, sdt_train_options *o, sdt_error *error);
/* The one reader: the host's config (any struct_size) into rq, with every check that needs no file
 * (an INVALID_ARGUMENT error for a NULL config or an unset struct_size, else VALIDATION). */
bool ti_config_read(const sdt_ti_config *host, sdt_train_request *rq, sdt_error *error);

void ti_spec_set_defaults(sdt_embedding_spec *s);
bool ti_spec_check(const sdt_embedding_spec *s, sdt_error *error);

#endif
