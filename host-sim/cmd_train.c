/* cmd_train.c - `sdt-host train`: the Train tab, from options and/or a panel file. */
#include <stdio.h>

#include "cli_common.h"
#include "commands.h"
#include "exit_codes.h"
#include "panel_options.h"
#include "train_session.h"

int cmd_train(int argc, char **argv)
{
    char *plugin = NULL;
    GOptionEntry entries[] = { CLI_PLUGIN_OPTION(plugin), { NULL, 0, 0, 0, NULL, NULL, NULL } };
    panel_values *values = panel_values_new();
    GOptionContext *ctx = g_option_context_new("- train an embedding (Ctrl-C interrupts: the step finishes and is saved)");
    g_option_context_add_main_entries(ctx, panel_option_entries(values), NULL);
    g_option_context_add_main_entries(ctx, entries, NULL);
    int status = SDT_EXIT_OK;
    if (!cli_parse(ctx, "train", &argc, &argv)) status = SDT_EXIT_USAGE;
    else if (argc > 1) status = cli_usage_error("train", "unexpected argument; every input is an --option.");
    cli_trainer t;
    if (status == SDT_EXIT_OK && (status = cli_trainer_open(&t, plugin)) == SDT_EXIT_OK) {
        sdt_ti_config config;
        char *error = NULL;
        gboolean usage = FALSE;
        if (!panel_build_config(values, t.factory, &config, &error, &usage))
            status = usage ? cli_usage_error("train", error) : cli_error(error);
        else
            status = train_session_run(t.factory, t.trainer, &config);
        g_free(error);
        cli_trainer_close(&t);
    }
    g_option_context_free(ctx);
    panel_values_free(values);
    g_free(plugin);
    return status;
}
