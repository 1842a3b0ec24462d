/* panel_options.h - the Train tab as command-line options and as a GKeyFile panel file.
 *
 * One table names every option once; it drives the GOptionEntry list, the [train] group of a
 * panel.ini, and the mapping onto sdt_ti_config. Precedence: the plugin's defaults, then the
 * panel file, then the command line. */
#ifndef SDT_HOST_PANEL_OPTIONS_H
#define SDT_HOST_PANEL_OPTIONS_H

#include <glib.h>

#include "sdtrain.h"

typedef struct panel_values panel_values;

panel_values *panel_values_new(void);
void panel_values_free(panel_values *v);

/* The option entries for `train` (--config and every Train-tab option); owned by v. */
const GOptionEntry *panel_option_entries(panel_values *v);

/* The --config path given on the command line, or NULL. */
const char *panel_config_path(const panel_values *v);

/* Builds the config: plugin defaults, then the panel file, then command-line values. Strings
 * in *config stay valid while v lives. FALSE with one sentence in *error; *usage_error tells
 * whether the command line was at fault (exit 2) rather than a file (exit 1). */
gboolean panel_build_config(panel_values *v, const sdt_ti_factory *factory, sdt_ti_config *config,
                            char **error, gboolean *usage_error);

/* FALSE with a usage sentence (g_free) naming the first required option that is missing. */
gboolean panel_check_required(const sdt_ti_config *config, char **error);

/* The plugin's sentence with each "config.<field>" it mentions named as the option that
 * sets it ("--embedding"), for people at a terminal (g_free). */
char *panel_explain(const char *sentence);

#endif
