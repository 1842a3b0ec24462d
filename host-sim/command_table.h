/* command_table.h - sdt-host's commands, named once: main dispatches through this table, and
 * the overview (--help) and every "unknown command" sentence list it whole. */
#ifndef SDT_HOST_COMMAND_TABLE_H
#define SDT_HOST_COMMAND_TABLE_H

#include <stddef.h>

typedef struct host_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary; /* one line of the overview */
} host_command;

extern const host_command host_commands[];
extern const size_t host_command_count;

/* The command called name, or NULL. */
const host_command *host_command_named(const char *name);

/* "'trian' (did you mean 'train'?); the commands are demo, create-embedding, ... and generate",
 * the suggestion only when word is near a command (g_free). */
char *host_commands_hint(const char *word);

#endif
