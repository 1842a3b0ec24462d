/* command_table.c - see command_table.h. */
#include <glib.h>
#include <string.h>

#include "cli_common.h"
#include "command_table.h"
#include "commands.h"
#include "suggest.h"

const host_command host_commands[] = {
    {"demo", cmd_demo, "train the demo embedding (the default)"},
    {"create-embedding", cmd_create_embedding, "create an embedding file"},
    {"create-hypernetwork", cmd_create_hypernetwork, "create a hypernetwork file (A1111 .pt)"},
    {"train", cmd_train, "train an embedding, a hypernetwork, or both (options or --config panel.ini)"},
    {"inspect", cmd_inspect,
     "show what a FILE holds: an embedding, a hypernetwork, a model (with the hypernetwork\n"
     "                       sizes it takes), any file a run wrote (--json)"},
    {"generate", cmd_generate, "txt2img through the plugin, with hypernetworks at chosen strengths"},
    {"convert", cmd_convert, "write an SD3.5/Flux.1 embedding as the files Forge loads (--for forge)"},
#ifdef SDT_HOST_SERVE
    {"serve", cmd_serve, "the training panel in a browser: create, train, watch, interrupt, resume (127.0.0.1)"},
#endif
};

const size_t host_command_count = sizeof host_commands / sizeof host_commands[0];

const host_command *host_command_named(const char *name)
{
    for (size_t c = 0; c < host_command_count; c++)
        if (strcmp(name, host_commands[c].name) == 0) return &host_commands[c];
    return NULL;
}

char *host_commands_hint(const char *word)
{
    const char *names[sizeof host_commands / sizeof host_commands[0]];
    for (size_t c = 0; c < host_command_count; c++) names[c] = host_commands[c].name;
    const char *nearest = word ? suggest_nearest(word, names, host_command_count) : NULL;
    GString *hint = g_string_new(NULL);
    char *shown = cli_printable(word ? word : "");
    g_string_append_printf(hint, "'%s'", shown);
    g_free(shown);
    if (nearest) g_string_append_printf(hint, " (did you mean '%s'?)", nearest);
    g_string_append(hint, "; the commands are ");
    for (size_t c = 0; c < host_command_count; c++)
        g_string_append_printf(hint, "%s%s", c == 0 ? "" : c + 1 == host_command_count ? " and " : ", ", names[c]);
    return g_string_free(hint, FALSE);
}
