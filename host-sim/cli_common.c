/* cli_common.c - parsing, errors and plugin opening shared by the subcommands. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli_common.h"
#include "exit_codes.h"
#include "suggest.h"
#include "train_session.h"

/* The long options ctx knows, read from its own help (every line that lists an option starts
 * with "  --name" or "  -x, --name"), so the list is the one the parser uses. */
static GPtrArray *known_options(GOptionContext *ctx)
{
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    char *help = g_option_context_get_help(ctx, FALSE, NULL);
    char **lines = g_strsplit(help, "\n", -1);
    for (char **line = lines; *line; line++) {
        const char *p = *line + strspn(*line, " ");
        if (p[0] == '-' && p[1] != '-' && p[1] && p[2] == ',') p += 3 + strspn(p + 3, " ");
        if (strncmp(p, "--", 2) != 0) continue;
        p += 2;
        size_t n = strcspn(p, "= \t");
        if (n) g_ptr_array_add(names, g_strndup(p, n));
    }
    g_strfreev(lines);
    g_free(help);
    return names;
}

/* " (did you mean --learn-rate?)" for the first --option in argv that ctx does not know and
 * that is near one it does; "" when none is (g_free). */
static char *option_suggestion(GOptionContext *ctx, int argc, char **argv)
{
    GPtrArray *names = known_options(ctx);
    char *suggestion = NULL;
    for (int i = 1; i < argc && !suggestion && strcmp(argv[i], "--") != 0; i++) {
        if (strncmp(argv[i], "--", 2) != 0) continue;
        char *name = g_strndup(argv[i] + 2, strcspn(argv[i] + 2, "="));
        gboolean known = FALSE;
        for (guint k = 0; k < names->len && !known; k++) known = strcmp(name, names->pdata[k]) == 0;
        const char *nearest = known ? NULL : suggest_nearest(name, (const char *const *)names->pdata, names->len);
        if (!known) suggestion = nearest ? g_strdup_printf(" (did you mean --%s?)", nearest) : g_strdup("");
        g_free(name);
    }
    g_ptr_array_unref(names);
    return suggestion ? suggestion : g_strdup("");
}

gboolean cli_help_requested(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "-?") == 0 ||
            strncmp(argv[i], "--help-", 7) == 0)
            return TRUE;
    return FALSE;
}

const char *cli_plugin_argument(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "--plugin") == 0 && i + 1 < argc)
            path = argv[++i];
        else if (strncmp(argv[i], "--plugin=", 9) == 0)
            path = argv[i] + 9;
    }
    return path;
}

gboolean cli_parse(GOptionContext *ctx, const char *command, int *argc, char ***argv)
{
    GError *gerr = NULL;
    if (!g_option_context_parse(ctx, argc, argv, &gerr)) {
        char *suggestion = g_error_matches(gerr, G_OPTION_ERROR, G_OPTION_ERROR_UNKNOWN_OPTION)
                               ? option_suggestion(ctx, *argc, *argv)
                               : g_strdup("");
        fprintf(stderr, "sdt-host %s: %s%s\nTry 'sdt-host %s --help'.\n", command, gerr->message, suggestion, command);
        g_free(suggestion);
        g_clear_error(&gerr);
        return FALSE;
    }
    return TRUE;
}

char *cli_printable(const char *text)
{
    GString *out = g_string_new(NULL);
    const char *p = text, *end = text + strlen(text);
    while (p < end) {
        gunichar c = g_utf8_get_char_validated(p, end - p);
        if (c == (gunichar)-1 || c == (gunichar)-2) { /* not UTF-8: show the byte, never send it */
            g_string_append_printf(out, "\\x%02X", (unsigned char)*p);
            p++;
            continue;
        }
        if (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0)) /* control characters move the cursor, ring, recolour */
            g_string_append_printf(out, "\\x%02X", (unsigned)c);
        else
            g_string_append_len(out, p, g_utf8_next_char(p) - p);
        p = g_utf8_next_char(p);
    }
    return g_string_free(out, FALSE);
}

int cli_error(const char *sentence)
{
    char *shown = cli_printable(sentence);
    fprintf(stderr, "sdt-host: %s\n", shown);
    g_free(shown);
    return SDT_EXIT_ERROR;
}

int cli_usage_error(const char *command, const char *sentence)
{
    char *shown = cli_printable(sentence);
    fprintf(stderr, "sdt-host %s: %s\nTry 'sdt-host %s --help'.\n", command, shown, command);
    g_free(shown);
    return SDT_EXIT_USAGE;
}

int cli_errorf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *sentence = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    int status = cli_error(sentence);
    g_free(sentence);
    return status;
}

int cli_usage_errorf(const char *command, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *sentence = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    int status = cli_usage_error(command, sentence);
    g_free(sentence);
    return status;
}

/* Prints why the plugin or trainer did not open and closes what did. */
static int open_failed(host_plugin *plugin, const char *sentence)
{
    int status = cli_error(sentence);
    host_plugin_close(plugin);
    return status;
}

int cli_factory_open(cli_trainer *t, const char *plugin_path)
{
    memset(t, 0, sizeof *t);
    char *error = NULL;
    if (host_plugin_open(&t->plugin, plugin_path, &error))
        t->factory = host_plugin_factory(&t->plugin, SDT_FACTORY_TRAINER, &error);
    if (t->factory) return SDT_EXIT_OK;
    int status = open_failed(&t->plugin, error);
    g_free(error);
    return status;
}

int cli_trainer_open(cli_trainer *t, const char *plugin_path)
{
    int status = cli_factory_open(t, plugin_path);
    if (status != SDT_EXIT_OK) return status;
    sdt_host_callbacks callbacks = train_session_callbacks();
    char sentence[1024] = "";
    if (t->factory->create(&callbacks, &t->trainer, sentence, sizeof sentence) != SDT_STATUS_OK) {
        t->factory = NULL;
        return open_failed(&t->plugin, sentence);
    }
    return SDT_EXIT_OK;
}

void cli_trainer_close(cli_trainer *t)
{
    if (t->factory && t->trainer) t->factory->destroy(t->trainer);
    host_plugin_close(&t->plugin);
    memset(t, 0, sizeof *t);
}

const void *cli_trainer_extension(const cli_trainer *t, const char *extension_id, int *status)
{
    const void *extension = t->factory->get_extension(extension_id);
    if (!extension)
        *status = cli_errorf("The plugin %s (version %s) does not provide '%s'; use a newer plugin.", t->plugin.path,
                             t->plugin.entry->plugin_version, extension_id);
    return extension;
}

int cli_trainer_open_extension(cli_trainer *t, const char *plugin_path, const char *extension_id,
                               const void **extension)
{
    int status = cli_trainer_open(t, plugin_path);
    if (status != SDT_EXIT_OK) return status;
    if (!(*extension = cli_trainer_extension(t, extension_id, &status))) cli_trainer_close(t);
    return status;
}

char *cli_trainer_error(const cli_trainer *t)
{
    uint32_t needed = 0;
    t->factory->get_last_error(t->trainer, NULL, 0, &needed);
    char *sentence = g_malloc0(needed ? needed : 1);
    t->factory->get_last_error(t->trainer, sentence, needed ? needed : 1, NULL);
    return sentence;
}

int cli_trainer_fail(const cli_trainer *t)
{
    char *sentence = cli_trainer_error(t);
    int status = cli_error(sentence[0] ? sentence : "the plugin reported a failure without a message.");
    g_free(sentence);
    return status;
}

int cli_parse_create(GOptionContext *ctx, const char *command, int *argc, char ***argv, char *const *name)
{
    if (!cli_parse(ctx, command, argc, argv)) return SDT_EXIT_USAGE;
    if (*argc > 1) return cli_usage_error(command, "unexpected argument; every input is an --option.");
    if (!*name) return cli_usage_error(command, "--name is required.");
    return SDT_EXIT_OK;
}

int cli_make_output_folder(const char *dir)
{
    if (g_mkdir_with_parents(dir, 0777) == 0) return SDT_EXIT_OK;
    return cli_errorf("Could not create the output folder %s; check its parent exists and is writable.", dir);
}

int cli_created(const char *path, char *failure, const char *const (*renames)[2], size_t n_renames)
{
    if (failure) return cli_error_renamed(failure, renames, n_renames);
    printf("Created: %s\n", path);
    return SDT_EXIT_OK;
}

/* The sentence (g_free'd here) with the API fields it names replaced by options, printed. */
int cli_error_renamed(char *sentence, const char *const (*renames)[2], size_t n_renames)
{
    char *explained = cli_rename_fields(sentence, renames, n_renames);
    int status = cli_error(explained);
    g_free(sentence);
    g_free(explained);
    return status;
}

char *cli_rename_fields(const char *sentence, const char *const (*renames)[2], size_t n_renames)
{
    GString *out = g_string_new(sentence);
    for (size_t i = 0; i < n_renames; i++) g_string_replace(out, renames[i][0], renames[i][1], 0);
    return g_string_free(out, FALSE);
}
