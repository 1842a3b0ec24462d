/* cmd_train.c - `sdt-host train`: the Train tab, from options and/or a panel file, through the
 * trainer factory: the parts named (--embedding, --hypernetwork, or both together) in one config. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli_common.h"
#include "commands.h"
#include "data_dirs.h"
#include "dist_mode.h"
#include "exit_codes.h"
#include "launch.h"
#include "panel_options.h"
#include "train_session.h"

/* The sentence with the fields it names as options of method (train_session_explain_fn). */
static char *explain(const void *data, const char *sentence)
{
    return panel_explain(((const panel_config *)data)->method, sentence);
}

/* The run on one device, one rank of a job, or the GPUs in this process (dist_mode.h); the launcher
 * of one process per GPU starts this command again for each rank (command_line: this command's
 * arguments as given). fingerprint: the options every rank must share. */
static int train_where(panel_config *config, const cli_trainer *t, const char *const *command_line,
                       uint64_t fingerprint)
{
    char *error = NULL;
    char **env = g_get_environ();
    host_dist_plan plan;
    memset(&plan, 0, sizeof plan);
    dist_mode mode = DIST_ONE_DEVICE;
    gboolean usage = FALSE;
    const sdt_distributed_ext *ext = NULL;
    int status = -1;
    if (!dist_choose(&config->host, config->options.device, env, &plan, &mode, &error, &usage))
        status = usage ? cli_usage_error("train", error) : cli_error(error);
    else if (mode != DIST_ONE_DEVICE && !(ext = dist_extension(t->factory, &error)))
        status = cli_error(error);
    else if (mode == DIST_LAUNCHER)
        status = launch_ranks(command_line, plan.devices, plan.device_count);
    else if (mode == DIST_RANK && !dist_join_job(&plan, ext, fingerprint, &error))
        status = cli_error(error);
    else if (!dist_plan_apply(&plan, &config->options, &error))
        status = cli_error(error);
    if (status < 0) {
        panel_finish_config(config);
        train_target target = {
            .factory = t->factory, .trainer = t->trainer, .config = &config->trainer, .rank = plan.rank};
        status = train_session_run(&target, explain, config);
    }
    dist_plan_clear(&plan); /* after the run: options.devices points into it */
    g_strfreev(env);
    g_free(error);
    return status;
}

/* Required options, the template's path (looked up like a shipped name) and the run. */
static int train_with(panel_config *config, const cli_trainer *t, const char *const *command_line)
{
    char *error = NULL, *template_file = NULL;
    int status;
    const char **template_slot = panel_template_slot(config);
    const char *named = *template_slot;
    uint64_t fingerprint = panel_config_fingerprint(config); /* the template as named, not where it lies here */
    if (!panel_check_required(config, &error))
        status = cli_usage_error("train", error);
    else if (!(template_file = host_find_template(named && named[0] ? named : PANEL_DEFAULT_TEMPLATE, &error)))
        status = cli_error(error);
    else {
        *template_slot = template_file;
        status = train_where(config, t, command_line, fingerprint);
    }
    g_free(error);
    g_free(template_file);
    return status;
}

/* Opens the trainer, builds the config from the plugin's defaults, the panel file and the
 * command line, and trains. Returns an exit status. */
static int train_method(panel_values *values, panel_method method, const char *plugin, const char *const *command_line)
{
    cli_trainer t;
    int status = cli_trainer_open(&t, plugin);
    if (status != SDT_EXIT_OK) return status;
    panel_config *config = g_new0(panel_config, 1);
    panel_defaults defaults = panel_defaults_of(t.factory);
    char *error = NULL;
    gboolean usage = FALSE;
    if (!panel_build_config(values, method, &defaults, config, &error, &usage))
        status = usage ? cli_usage_error("train", error) : cli_error(error);
    else
        status = train_with(config, &t, command_line);
    g_free(error);
    g_free(config);
    cli_trainer_close(&t);
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
    const sdt_trainer_factory *factory = NULL;
    if (host_plugin_open(&plugin, path, &error)) factory = host_plugin_factory(&plugin, SDT_FACTORY_TRAINER, NULL);
    panel_defaults defaults = panel_defaults_of(factory);
    panel_show_defaults(values, factory ? &defaults : NULL);
    if (error) {
        char *summary =
            g_strdup_printf("%s\n(The defaults of the other options come from the plugin, which did not open: %s)",
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
    GOptionEntry entries[] = {CLI_PLUGIN_OPTION(plugin), {NULL, 0, 0, 0, NULL, NULL, NULL}};
    panel_values *values = panel_values_new();
    char **command_line = g_strdupv(argv); /* before parsing takes it apart: what each rank of --gpus runs */
    GOptionContext *ctx = g_option_context_new(
        "- train an embedding or a hypernetwork (Ctrl-C interrupts: the step finishes and is saved)");
    g_option_context_set_description(
        ctx,
        "--embedding FILE trains an embedding; --hypernetwork FILE trains a hypernetwork (its own options:\n"
        "--weight-decay, --strength); both together train them jointly (--embedding-learn-rate is then the\n"
        "embedding's rate). The defaults shown are the plugin's. Outputs go to --log-dir\n"
        "(textual_inversion, or hypernetworks with --hypernetwork)/<date>/<name>/.\n"
        "--template takes a path, or the bare name of a template shipped with sdt-host (looked up in\n"
        "<sdt-host's folder>/templates, then <sdt-host's folder>/../share/sdtrain/templates); the default is\n" PANEL_DEFAULT_TEMPLATE
        ". --resume FILE continues from the *.state.safetensors file a run writes into its\n"
        "log folder (with every copy and at the end); --resume DIR picks the newest state in a log folder\n"
        "that belongs to the file being trained. Use the same files, seed and options (max steps may grow).\n"
        "The trained result replaces the file given to --embedding or --hypernetwork (a PNG card:\n"
        "<stem>.safetensors). A --config panel file takes the same keys under [train].\n"
        "Several GPUs: --gpus 0,1,2,3 starts one process per GPU (the batch size is per GPU); --in-process keeps\n"
        "them in this process; under torchrun (WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) each\n"
        "process is one rank and rank 0 writes the files.\n");
    const GOptionEntry *panel_entries = panel_option_entries(values);
    if (cli_help_requested(argc, argv))
        show_plugin_defaults(values, ctx, argc, argv); /* before the entries are copied */
    g_option_context_add_main_entries(ctx, panel_entries, NULL);
    g_option_context_add_main_entries(ctx, entries, NULL);
    int status = SDT_EXIT_OK;
    char *error = NULL;
    if (!cli_parse(ctx, "train", &argc, &argv))
        status = SDT_EXIT_USAGE;
    else if (argc > 1)
        status = cli_usage_error("train", "unexpected argument; every input is an --option.");
    else if (!panel_load_file(values, &error))
        status = cli_error(error);
    else
        status = train_method(values, panel_method_chosen(values), plugin, (const char *const *)command_line);
    g_free(error);
    g_option_context_free(ctx);
    panel_values_free(values);
    g_strfreev(command_line);
    g_free(plugin);
    return status;
}
