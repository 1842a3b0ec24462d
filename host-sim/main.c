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

#include "commands.h"
#include "exit_codes.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
} command;

static const command commands[] = {
    { "demo", cmd_demo },
    { "create-embedding", cmd_create_embedding },
    { "create-hypernetwork", cmd_create_hypernetwork },
    { "train", cmd_train },
    { "inspect", cmd_inspect },
    { "generate", cmd_generate },
};

static void print_overview(void)
{
    printf("Usage: sdt-host [COMMAND] [OPTIONS]\n\n"
           "Trains Stable Diffusion textual-inversion embeddings and hypernetworks through libsdtrain.so.\n\n"
           "Commands:\n"
           "  demo               train the demo embedding (the default)\n"
           "  create-embedding   create an embedding file\n"
           "  create-hypernetwork create a hypernetwork file (A1111 .pt)\n"
           "  train              train an embedding, a hypernetwork, or both (options or --config panel.ini)\n"
           "  inspect FILE       show what an embedding, a hypernetwork, a model checkpoint or any\n"
           "                     file a run wrote holds (--json)\n"
           "  generate           txt2img through the plugin, with hypernetworks at chosen strengths\n\n"
           "Every command takes --plugin PATH and --help. Exit status: 0 success, 1 error,\n"
           "2 usage, 130 interrupted (Ctrl-C finishes the step and saves).\n");
}

/* The subcommand is the first argument, or the first after a leading --plugin PATH (which
 * is handed to it). Only those places count, so an option's value that happens to be a
 * command's name (`--out demo`) stays a value. No name there: the demo. */
static const command *find_command(int argc, char **argv, int *index)
{
    int i = 1;
    while (i < argc && (strcmp(argv[i], "--plugin") == 0 || strncmp(argv[i], "--plugin=", 9) == 0))
        i += strcmp(argv[i], "--plugin") == 0 ? 2 : 1;
    for (size_t c = 0; i < argc && c < sizeof commands / sizeof commands[0]; c++)
        if (strcmp(argv[i], commands[c].name) == 0) {
            *index = i;
            return &commands[c];
        }
    *index = 0;
    return &commands[0];
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
    const command *cmd = find_command(argc, argv, &index);
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
