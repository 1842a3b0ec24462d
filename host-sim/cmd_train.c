/* cmd_train.c - `sdt-host train`: the Train tab, from options and/or a panel file. */
#include <stdio.h>

#include "cli_common.h"
#include "commands.h"
#include "data_dirs.h"
#include "exit_codes.h"
#include "panel_options.h"
#include "train_session.h"

/* The Train tab's default prompt template, as in A1111. */
#define DEFAULT_TEMPLATE "style_filewords.txt"

int cmd_train(int argc, char **argv)
{
    char *plugin = NULL;
    GOptionEntry entries[] = { CLI_PLUGIN_OPTION(plugin), { NULL, 0, 0, 0, NULL, NULL, NULL } };
    panel_values *values = panel_values_new();
    GOptionContext *ctx = g_option_context_new("- train an embedding (Ctrl-C interrupts: the step finishes and is saved)");
    g_option_context_set_description(ctx,
        "--template takes a path, or the bare name of a template shipped with sdt-host (looked up in\n"
        "<sdt-host's folder>/templates, then <sdt-host's folder>/../share/sdtrain/templates); the default is\n"
        DEFAULT_TEMPLATE ". --resume FILE continues from the *.state.safetensors file a run writes into its\n"
        "log folder (with every copy and at the end); --resume DIR picks the newest state in a log folder\n"
        "that belongs to the embedding. Use the same embedding, seed and options (max steps may grow).\n"
        "The trained embedding replaces the file given to --embedding (a PNG card: <stem>.safetensors).\n");
    g_option_context_add_main_entries(ctx, panel_option_entries(values), NULL);
    g_option_context_add_main_entries(ctx, entries, NULL);
    int status = SDT_EXIT_OK;
    if (!cli_parse(ctx, "train", &argc, &argv)) status = SDT_EXIT_USAGE;
    else if (argc > 1) status = cli_usage_error("train", "unexpected argument; every input is an --option.");
    cli_trainer t;
    if (status == SDT_EXIT_OK && (status = cli_trainer_open(&t, plugin)) == SDT_EXIT_OK) {
        sdt_ti_config config;
        char *error = NULL, *template_file = NULL;
        gboolean usage = FALSE;
        if (!panel_build_config(values, t.factory, &config, &error, &usage))
            status = usage ? cli_usage_error("train", error) : cli_error(error);
        else if (!panel_check_required(&config, &error))
            status = cli_usage_error("train", error);
        else if (!(template_file = host_find_template(config.template_file && config.template_file[0]
                                                          ? config.template_file : DEFAULT_TEMPLATE, &error)))
            status = cli_error(error);
        else {
            config.template_file = template_file;
            status = train_session_run(t.factory, t.trainer, &config, panel_explain);
        }
        g_free(error);
        g_free(template_file);
        cli_trainer_close(&t);
    }
    g_option_context_free(ctx);
    panel_values_free(values);
    g_free(plugin);
    return status;
}
