/* main.c - sdt-host: the host simulator and command-line trainer.
 *
 *   sdt-host [demo] [--out DIR] [--max-steps N] [--seed S]
 *   sdt-host create-embedding --name N [--init-text T] [--vectors K] [--model PATH] [--out DIR] [--overwrite]
 *   sdt-host create-hypernetwork --name N [--sizes L] [--layer-structure L] [--activation A] [--init I]
 *            [--layer-norm] [--dropout [--dropout-structure L]] [--activate-output] [--out DIR] [--overwrite]
 *   sdt-host train [--config panel.ini] --embedding FILE | --hypernetwork FILE [--embedding FILE]
 *            --dataset DIR --model PATH [Train-tab options...]
 *   sdt-host inspect FILE [--json]
 *   sdt-host generate --model PATH --prompt T [--negative T] [--hypernetwork FILE[:S]]... [--embedding FILE] [--steps N]
 *            [--cfg X] [--seed S] [--width W] [--height H] --out IMAGE.png [--overwrite]
 *   --plugin PATH and --help on every command. Exit: 0 ok, 1 error, 2 usage, 130 interrupted.
 *
 * It depends only on abi/sdtrain.h: everything goes through the plugin's entry symbol. */
#include <glib.h>
#include <locale.h>
#include <stdio.h>
#include <string.h>

#include "cli_common.h"
#include "command_table.h"
#include "exit_codes.h"

static void print_overview(void)
{
    printf("Usage: sdt-host [COMMAND] [OPTIONS]\n\n"
           "Trains Stable Diffusion textual-inversion embeddings and hypernetworks through libsdtrain.so.\n\n"
           "Commands:\n");
    for (size_t c = 0; c < host_command_count; c++)
        printf("  %-20s %s\n", host_commands[c].name, host_commands[c].summary);
    printf("\n'sdt-host COMMAND --help' lists a command's options with their defaults. Every command takes\n"
           "--plugin PATH and --help. Exit status: 0 success, 1 error, 2 usage, 130 interrupted (Ctrl-C\n"
           "finishes the step and saves).\n");
}

/* The subcommand is the first argument, or the first after a leading --plugin PATH (which
 * is handed to it). Only those places count, so an option's value that happens to be a
 * command's name (`--out demo`) stays a value. No name there: the demo. A word there that names
 * no command is a mistyped one (NULL, *index at it). */
static const host_command *find_command(int argc, char **argv, int *index)
{
    int i = 1;
    while (i < argc && (strcmp(argv[i], "--plugin") == 0 || strncmp(argv[i], "--plugin=", 9) == 0))
        i += strcmp(argv[i], "--plugin") == 0 ? 2 : 1;
    *index = i < argc ? i : 0;
    if (i >= argc || argv[i][0] == '-') {
        *index = 0;
        return host_command_named("demo");
    }
    return host_command_named(argv[i]);
}

int main(int argc, char **argv)
{
    setlocale(LC_ALL, "");
    /* This host's choice for its own process, before the plugin (and OpenBLAS with it) loads:
     * BLAS on one thread, so the plugin splits products over its OpenMP threads instead of
     * stacking two thread pools. An OPENBLAS_NUM_THREADS the user set wins. */
    g_setenv("OPENBLAS_NUM_THREADS", "1", FALSE);
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        print_overview();
        return SDT_EXIT_OK;
    }
    int index = 0;
    const host_command *cmd = find_command(argc, argv, &index);
    if (!cmd) {
        char *hint = host_commands_hint(argv[index]);
        fprintf(stderr, "sdt-host: unknown command %s.\nTry 'sdt-host --help'.\n", hint);
        g_free(hint);
        return SDT_EXIT_USAGE;
    }
    /* Rebuild argv as "<command> <every other argument>" for GOptionContext. */
    char **args = g_new0(char *, (gsize)argc + 1);
    int n = 0;
    args[n++] = (char *)cmd->name;
    for (int i = 1; i < argc; i++)
        if (i != index) args[n++] = argv[i];
    int status = cmd->run(n, args);
    g_free(args);
    return status;
}
