/* cmd_train.c - `sdt-host train`: the Train tab, from options and/or a panel file. With
 * --hypernetwork it trains a hypernetwork (and, with --embedding too, both together) through the
 * hypernetwork factory; otherwise an embedding through the textual-inversion factory. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli_common.h"
#include "commands.h"
#include "data_dirs.h"
#include "exit_codes.h"
#include "panel_options.h"
#include "train_session.h"

/* Required options, the template's path (looked up like a shipped name) and the run. */
static int train_with(panel_config *config, const train_target *target)
{
    char *error = NULL, *template_file = NULL;
    int status;
    const char **template_slot = panel_template_slot(config);
    const char *named = *template_slot;
    if (!panel_check_required(config, &error))
        status = cli_usage_error("train", error);
    else if (!(template_file = host_find_template(named && named[0] ? named : PANEL_DEFAULT_TEMPLATE, &error)))
        status = cli_error(error);
    else {
        *template_slot = template_file;
        panel_finish_config(config);
        status = train_session_run(target, panel_explain);
    }
    g_free(error);
    g_free(template_file);
    return status;
}

/* Opens the method's factory, builds the config from the plugin's defaults, the panel file and
 * the command line, and trains. Returns an exit status. */
static int train_method(panel_values *values, panel_method method, const char *plugin)
{
    cli_trainer ti;
    cli_hn_trainer hn;
    panel_config config;
    panel_defaults defaults;
    train_target target;
    memset(&target, 0, sizeof target);
    int status;
    if (method == PANEL_HYPERNETWORK) {
        if ((status = cli_hn_trainer_open(&hn, plugin)) != SDT_EXIT_OK) return status;
        defaults = panel_defaults_of_hypernetwork(hn.factory);
        target.hn = hn.factory, target.hn_trainer = hn.trainer, target.hn_config = &config.hn;
    } else {
        if ((status = cli_trainer_open(&ti, plugin)) != SDT_EXIT_OK) return status;
        defaults = panel_defaults_of_embedding(ti.factory);
        target.ti = ti.factory, target.ti_trainer = ti.trainer, target.ti_config = &config.ti;
    }
    char *error = NULL;
    gboolean usage = FALSE;
    if (!panel_build_config(values, method, &defaults, &config, &error, &usage))
        status = usage ? cli_usage_error("train", error) : cli_error(error);
    else
        status = train_with(&config, &target);
    g_free(error);
    if (method == PANEL_HYPERNETWORK) cli_hn_trainer_close(&hn);
    else cli_trainer_close(&ti);
    return status;
}

/* For --help: every option's default as this plugin fills it. Without the plugin the help still
 * prints, saying where the defaults would come from. */
static void show_plugin_defaults(panel_values *values, GOptionContext *ctx, int argc, char **argv)
{
    host_plugin plugin;
    memset(&plugin, 0, sizeof plugin);
    char *error = NULL;
    const char *path = cli_plugin_argument(argc, argv);
    const sdt_ti_factory *ti = NULL;
    const sdt_hn_factory *hn = NULL;
    if (host_plugin_open(&plugin, path, &error)) {
        ti = host_plugin_factory(&plugin, SDT_FACTORY_TEXTUAL_INVERSION, NULL);
        hn = host_plugin_factory(&plugin, SDT_FACTORY_HYPERNETWORK, NULL);
    }
    panel_defaults embedding = panel_defaults_of_embedding(ti), hypernetwork = panel_defaults_of_hypernetwork(hn);
    panel_show_defaults(values, ti ? &embedding : NULL, hn ? &hypernetwork : NULL);
    if (error) {
        char *summary = g_strdup_printf("%s\n(The defaults of the other options come from the plugin, which did not open: %s)",
                                        g_option_context_get_summary(ctx) ? g_option_context_get_summary(ctx) : "", error);
        g_option_context_set_summary(ctx, summary);
        g_free(summary);
    }
    g_free(error);
    host_plugin_close(&plugin);
}

int cmd_train(int argc, char **argv)
{
    char *plugin = NULL;
    GOptionEntry entries[] = { CLI_PLUGIN_OPTION(plugin), { NULL, 0, 0, 0, NULL, NULL, NULL } };
    panel_values *values = panel_values_new();
    GOptionContext *ctx = g_option_context_new("- train an embedding or a hypernetwork (Ctrl-C interrupts: the step finishes and is saved)");
    g_option_context_set_description(ctx,
        "--embedding FILE trains an embedding; --hypernetwork FILE trains a hypernetwork (its own options:\n"
        "--weight-decay, --strength); both together train them jointly (--embedding-learn-rate is then the\n"
        "embedding's rate). The defaults shown are the plugin's. Outputs go to --log-dir\n"
        "(textual_inversion, or hypernetworks with --hypernetwork)/<date>/<name>/.\n"
        "--template takes a path, or the bare name of a template shipped with sdt-host (looked up in\n"
        "<sdt-host's folder>/templates, then <sdt-host's folder>/../share/sdtrain/templates); the default is\n"
        PANEL_DEFAULT_TEMPLATE ". --resume FILE continues from the *.state.safetensors file a run writes into its\n"
        "log folder (with every copy and at the end); --resume DIR picks the newest state in a log folder\n"
        "that belongs to the file being trained. Use the same files, seed and options (max steps may grow).\n"
        "The trained result replaces the file given to --embedding or --hypernetwork (a PNG card:\n"
        "<stem>.safetensors). A --config panel file takes the same keys under [train].\n");
    const GOptionEntry *panel_entries = panel_option_entries(values);
    if (cli_help_requested(argc, argv)) show_plugin_defaults(values, ctx, argc, argv); /* before the entries are copied */
    g_option_context_add_main_entries(ctx, panel_entries, NULL);
    g_option_context_add_main_entries(ctx, entries, NULL);
    int status = SDT_EXIT_OK;
    char *error = NULL;
    if (!cli_parse(ctx, "train", &argc, &argv)) status = SDT_EXIT_USAGE;
    else if (argc > 1) status = cli_usage_error("train", "unexpected argument; every input is an --option.");
    else if (!panel_load_file(values, &error)) status = cli_error(error);
    else status = train_method(values, panel_method_chosen(values), plugin);
    g_free(error);
    g_option_context_free(ctx);
    panel_values_free(values);
    g_free(plugin);
    return status;
}
