/* cli_common.h - what every subcommand shares: parsing with a usage error (exit 2), opening
 * the plugin and a trainer with a one-sentence error (exit 1). */
#ifndef SDT_HOST_CLI_COMMON_H
#define SDT_HOST_CLI_COMMON_H

#include <glib.h>

#include "plugin_loader.h"
#include "sdtrain.h"

/* The --plugin option, to append to each subcommand's entries. */
#define CLI_PLUGIN_OPTION(var)                                                                                         \
    {                                                                                                                  \
        "plugin", 0, 0, G_OPTION_ARG_FILENAME, &(var),                                                                 \
            "Path of libsdtrain.so (default: $SDTRAIN_PLUGIN, then next to sdt-host)", "PATH"                          \
    }

/* Whether argv asks for --help (-h, --help-all) before a "--": what a command may prepare for it. */
gboolean cli_help_requested(int argc, char **argv);
/* The --plugin PATH (or --plugin=PATH) in argv, before parsing; NULL when none. */
const char *cli_plugin_argument(int argc, char **argv);

/* Parses argv; on a bad command line prints the reason, a "did you mean --option?" for an unknown
 * option near a known one, and a hint, and returns FALSE. */
gboolean cli_parse(GOptionContext *ctx, const char *command, int *argc, char ***argv);

/* text with control characters and bytes that are not UTF-8 written as \xNN: what a file's
 * contents quoted in a sentence may hold must not reach the terminal raw. g_free the result. */
char *cli_printable(const char *text);
/* Prints "sdt-host: <sentence>" (made printable) on stderr and returns exit status 1 (or 2 for usage). */
int cli_error(const char *sentence);
int cli_usage_error(const char *command, const char *sentence);
/* The same with the sentence built from a printf format. */
int cli_errorf(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
int cli_usage_errorf(const char *command, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

/* An open plugin, its trainer factory ("sdtrain.trainer/1": every method, as parts of one
 * config) and, once cli_trainer_open made it, one trainer with sdt-host's callbacks. */
typedef struct cli_trainer {
    host_plugin plugin;
    const sdt_trainer_factory *factory;
    sdt_trainer *trainer;
} cli_trainer;

/* Opens the plugin and its trainer factory only (no trainer: what the applier needs); 0, or an
 * exit status after printing the sentence. */
int cli_factory_open(cli_trainer *t, const char *plugin_path);
/* The factory and one trainer; 0, or an exit status after printing the sentence. */
int cli_trainer_open(cli_trainer *t, const char *plugin_path);
void cli_trainer_close(cli_trainer *t);

/* The factory's extension table with this id (SDT_EXT_...), or NULL after printing a sentence
 * naming it; *status gets the exit status then. */
const void *cli_trainer_extension(const cli_trainer *t, const char *extension_id, int *status);

/* cli_trainer_open, then the extension extension_id into *extension; 0, or an exit status after
 * the sentence (nothing left open). */
int cli_trainer_open_extension(cli_trainer *t, const char *plugin_path, const char *extension_id,
                               const void **extension);

/* The trainer's last error as a malloc'd string (g_free). */
char *cli_trainer_error(const cli_trainer *t);

/* Maps a failed status to an exit status after printing the trainer's sentence. */
int cli_trainer_fail(const cli_trainer *t);

/* What every create-* command shares. cli_parse_create parses argv, refuses a positional
 * argument and requires --name (*name: the variable its entry fills); cli_make_output_folder creates the folder
 * with its parents; each returns 0, or an exit status after the sentence. cli_created prints
 * "Created: PATH" when failure is NULL, else the plugin's sentence failure (g_free'd here) with
 * its fields renamed as cli_rename_fields does; it returns the exit status. */
int cli_parse_create(GOptionContext *ctx, const char *command, int *argc, char ***argv, char *const *name);
int cli_make_output_folder(const char *dir);
int cli_created(const char *path, char *failure, const char *const (*renames)[2], size_t n_renames);

/* A plugin sentence with each API field it names ("spec.model_path") replaced by the option
 * that sets it ("--model"): renames[i][0] -> renames[i][1]. A new string (g_free). */
char *cli_rename_fields(const char *sentence, const char *const (*renames)[2], size_t n_renames);
/* cli_error of the renamed sentence; g_frees sentence. Returns the exit status. */
int cli_error_renamed(char *sentence, const char *const (*renames)[2], size_t n_renames);

#endif
