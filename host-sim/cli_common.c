/* cli_common.c - parsing, errors and plugin opening shared by the subcommands. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli_common.h"
#include "exit_codes.h"
#include "train_session.h"

gboolean cli_parse(GOptionContext *ctx, const char *command, int *argc, char ***argv)
{
    GError *gerr = NULL;
    if (!g_option_context_parse(ctx, argc, argv, &gerr)) {
        fprintf(stderr, "sdt-host %s: %s\nTry 'sdt-host %s --help'.\n", command, gerr->message, command);
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
static int open_failed(cli_trainer *t, const char *sentence)
{
    int status = cli_error(sentence);
    host_plugin_close(&t->plugin);
    return status;
}

int cli_trainer_open(cli_trainer *t, const char *plugin_path)
{
    memset(t, 0, sizeof *t);
    char *error = NULL;
    if (host_plugin_open(&t->plugin, plugin_path, &error))
        t->factory = host_plugin_factory(&t->plugin, SDT_FACTORY_TEXTUAL_INVERSION, &error);
    if (!t->factory) {
        int status = open_failed(t, error);
        g_free(error);
        return status;
    }
    sdt_host_callbacks callbacks = train_session_callbacks();
    char sentence[1024] = "";
    if (t->factory->create(&callbacks, &t->trainer, sentence, sizeof sentence) != SDT_STATUS_OK)
        return open_failed(t, sentence);
    return 0;
}

void cli_trainer_close(cli_trainer *t)
{
    if (t->factory && t->trainer) t->factory->destroy(t->trainer);
    host_plugin_close(&t->plugin);
    memset(t, 0, sizeof *t);
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

char *cli_rename_fields(const char *sentence, const char *const (*renames)[2], size_t n_renames)
{
    GString *out = g_string_new(sentence);
    for (size_t i = 0; i < n_renames; i++) g_string_replace(out, renames[i][0], renames[i][1], 0);
    return g_string_free(out, FALSE);
}
