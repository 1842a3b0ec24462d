/* ti_config.h - defaults and the checks of textual-inversion inputs that need no file access
 * or model: enum values, ranges and required fields. The trainer's prepare adds the rest
 * (dataset, templates, schedule grammar, token window, memory). Messages follow A1111's where
 * it has one, and always name the field and the fix. */
#ifndef SDT_PLUGIN_TI_CONFIG_H
#define SDT_PLUGIN_TI_CONFIG_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>

#include "sdtrain.h"

void ti_config_set_defaults(sdt_ti_config *c);   /* full sizeof; struct_size = sizeof */
bool ti_config_check(const sdt_ti_config *c, sdt_error *error);
/* The shared defaults as this method's (log_dir "textual_inversion"). */
void ti_train_options_set_defaults(sdt_train_options *o);
/* The config's inline copies of the shared options as the shared struct (the job and the
 * shared checks take that). */
void ti_config_shared_options(const sdt_ti_config *c, sdt_train_options *o);
/* When config.train_options is set (1.2), its fields replace the inline shared ones. */
bool ti_config_take_train_options(sdt_ti_config *c, sdt_error *error);

void ti_spec_set_defaults(sdt_embedding_spec *s);
bool ti_spec_check(const sdt_embedding_spec *s, sdt_error *error);

#endif
