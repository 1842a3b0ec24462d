/* panel_options.h - the Train tab as command-line options and as a GKeyFile panel file.
 *
 * One table names every option once; it drives the GOptionEntry list, the [train] group of a
 * panel.ini, the web panel's form (sdt-host serve), and the mapping onto the trainer factory's
 * structs: the options every method shares go to sdt_train_options, a part's own to
 * sdt_embedding_part or sdt_hypernetwork_part. A run trains the parts whose file is named: an
 * embedding, a hypernetwork, or both (joint training). Precedence: the plugin's defaults, then
 * sdt-host's own (metrics.jsonl and loss.png on: --no-metrics), then the panel file, then the
 * command line. */
#ifndef SDT_HOST_PANEL_OPTIONS_H
#define SDT_HOST_PANEL_OPTIONS_H

#include <glib.h>

#include "sdtrain.h"

typedef struct panel_values panel_values;

/* What a run trains: a hypernetwork (with --embedding too, jointly with an embedding) when
 * --hypernetwork (or hypernetwork= in the file) is given, else an embedding. The method decides
 * what an option means (--learn-rate is the hypernetwork's in a hypernetwork run). */
typedef enum panel_method { PANEL_EMBEDDING, PANEL_HYPERNETWORK } panel_method;

/* The options that are sdt-host's own, not the plugin's: how a run spreads over GPUs (issue 33;
 * host-sim/dist/). Left out of the job's fingerprint, as each rank may differ in them. */
typedef struct panel_host_options {
    const char *gpus;       /* --gpus "0,1,2,3": one rank per GPU; NULL/"": one device */
    bool in_process;        /* --in-process: those ranks as the plugin's threads in this process */
    uint32_t comm_timeout;  /* --comm-timeout SECONDS, 0 = the plugin's default (600) */
    bool cuda_device_given; /* --device cuda:N */
    int32_t cuda_device;    /* that N: this rank's GPU instead of LOCAL_RANK */
} panel_host_options;

/* What prepare() receives: the shared options and each part's settings, filled in place;
 * trainer points at them once panel_finish_config ran (so a panel_config is never copied). */
typedef struct panel_config {
    panel_method method;
    panel_host_options host;
    sdt_train_options options;
    sdt_embedding_part embedding;       /* sent when its embedding_path is set */
    sdt_hypernetwork_part hypernetwork; /* sent when its hypernetwork_path is set */
    sdt_trainer_config trainer;         /* panel_finish_config */
} panel_config;

/* The plugin's defaults: the trainer factory's train_options_defaults and each part's. */
typedef struct panel_defaults {
    sdt_status (*train_options)(sdt_train_options *options);
    sdt_status (*embedding_part)(sdt_embedding_part *part);
    sdt_status (*hypernetwork_part)(sdt_hypernetwork_part *part);
} panel_defaults;

/* The plugin's defaults from its trainer factory (NULL: none). sdt-host train and sdt-host serve
 * both take them from here. */
panel_defaults panel_defaults_of(const sdt_trainer_factory *factory);

panel_values *panel_values_new(void);
void panel_values_free(panel_values *v);

/* The Train tab's default prompt template, as in A1111 (one form serves both methods). */
#define PANEL_DEFAULT_TEMPLATE "style_filewords.txt"

/* Puts each option's default into its --help line (call after panel_option_entries, before its
 * entries are added to a GOptionContext, which copies them): the values the plugin's trainer
 * factory fills for each method (defaults NULL when the plugin did not open), so the help shows
 * what a run would use. */
void panel_show_defaults(panel_values *v, const panel_defaults *defaults);

/* The option entries for `train` (--config and every Train-tab option); owned by v. */
const GOptionEntry *panel_option_entries(panel_values *v);

/* Reads the --config file, when one was given, after the command line is parsed (needed before
 * panel_method_chosen). FALSE with one sentence in *error (g_free) naming the file. */
gboolean panel_load_file(panel_values *v, char **error);

/* Reads a panel file's text (what a browser panel posts); origin names it in sentences. Replaces
 * any file loaded before. FALSE with one sentence in *error (g_free). */
gboolean panel_load_data(panel_values *v, const char *origin, const char *data, size_t n, char **error);

/* The method the command line and the loaded panel file ask for. */
panel_method panel_method_chosen(const panel_values *v);

/* Builds the config for method: the plugin's defaults, then the panel file, then command-line
 * values. Strings in *config stay valid while v lives. FALSE with one sentence in *error;
 * *usage_error tells whether the command line was at fault (exit 2) rather than a file (exit 1).
 * An option of the other method (--weight-decay without --hypernetwork, ...) is refused. */
gboolean panel_build_config(panel_values *v, panel_method method, const panel_defaults *defaults, panel_config *config,
                            char **error, gboolean *usage_error);

/* The prompt-template field (options.template_file). */
const char **panel_template_slot(panel_config *config);

/* Just before the run: points config->trainer at the options and the parts whose file is named. */
void panel_finish_config(panel_config *config);

/* FALSE with a usage sentence (g_free) naming the first required option that is missing. */
gboolean panel_check_required(const panel_config *config, char **error);

/* The plugin's sentence with each field it names ("options->clip_value", "embedding->learn_rate")
 * named as the option that sets it in a run of method ("--clip-value"), for people at a terminal
 * or a panel (g_free). */
char *panel_explain(panel_method method, const char *sentence);

/* A hash of every option a run sends the plugin (not sdt-host's own: --gpus, --device's GPU, ...), so
 * the ranks of a data-parallel job can check they run the same job. Call before the template's
 * name is resolved to a path (machines may keep sdt-host in different folders). */
uint64_t panel_config_fingerprint(const panel_config *config);

/* The table, for a host that draws its own form (sdt-host serve): option i of panel_option_count(). */
typedef struct panel_option_info {
    const char *name; /* the key in [train], the option without its -- */
    const char *kind; /* "text", "whole", "number", "flag" or "choice" */
    const char *arg;  /* placeholder, NULL for a flag */
    const char *help;
    const char *const *choices; /* "choice": NULL-terminated names; a "text" of a comma list of names: those */
    gboolean embedding;         /* an embedding run takes it */
    gboolean hypernetwork;      /* a hypernetwork run takes it */
    const char *folder;         /* a file or folder path: the kind of folder a panel keeps it in ("models",
                                  * "datasets", "embeddings", "hypernetworks", "logs", "templates"); NULL for
                                  * other options. sdt-host serve confines every such key by it. */
    gboolean folder_list;       /* the value is a list of such paths, "FILE[:S]; FILE[:S]" */
} panel_option_info;

size_t panel_option_count(void);
void panel_option_describe(size_t i, panel_option_info *info);

/* Each option's default for method as a panel file's value ("" where there is none; a flag:
 * "true"/"false" for the key's own sense); panel_option_count() strings (g_strfreev). */
char **panel_default_values(const panel_defaults *defaults, panel_method method);

#endif
