/* cmd_create_hypernetwork.c - `sdt-host create-hypernetwork`: A1111's Create hypernetwork tab. */
#include <stdio.h>

#include "cli_common.h"
#include "commands.h"
#include "exit_codes.h"

/* The plugin's sentences name sdt_hypernetwork_spec fields or the Create tab's; a terminal
 * user sets options. */
static const char *const spec_options[][2] = {
    {"spec.name", "--name"},
    {"spec.output_dir", "--out"},
    {"turn on overwrite", "pass --overwrite"},
};

int cmd_create_hypernetwork(int argc, char **argv)
{
    char *name = NULL, *sizes = NULL, *layer_structure = NULL, *activation = NULL, *init = NULL;
    char *dropout_structure = NULL, *out = NULL, *plugin = NULL;
    gboolean layer_norm = FALSE, dropout = FALSE, activate_output = FALSE, overwrite = FALSE;
    GOptionEntry entries[] = {
        {"name", 0, 0, G_OPTION_ARG_STRING, &name,
         "Name (letters, digits, '.', '_', '-', ' '; required); the file is DIR/NAME.pt", "NAME"},
        {"sizes", 0, 0, G_OPTION_ARG_STRING, &sizes,
         "Modules: K/V widths (default \"768,320,640,1280\"; or a family: sd1, sd2, sdxl = 2048,640,1280; `sdt-host inspect MODEL` lists a model's)",
         "LIST"},
        {"layer-structure", 0, 0, G_OPTION_ARG_STRING, &layer_structure,
         "Width multipliers, first and last 1 (default \"1,2,1\")", "LIST"},
        {"activation", 0, 0, G_OPTION_ARG_STRING, &activation,
         "Activation function, A1111's lower-case name (default linear)", "NAME"},
        {"init", 0, 0, G_OPTION_ARG_STRING, &init,
         "Weight initialization: Normal (default), XavierUniform, XavierNormal, KaimingUniform, KaimingNormal", "NAME"},
        {"layer-norm", 0, 0, G_OPTION_ARG_NONE, &layer_norm, "Add layer normalization (default off)", NULL},
        {"dropout", 0, 0, G_OPTION_ARG_NONE, &dropout, "Use dropout (default off)", NULL},
        {"dropout-structure", 0, 0, G_OPTION_ARG_STRING, &dropout_structure,
         "Dropout per layer-structure entry, first 0 (with --dropout; default all 0)", "LIST"},
        {"activate-output", 0, 0, G_OPTION_ARG_NONE, &activate_output,
         "Apply the activation after the last layer too (default off)", NULL},
        {"out", 0, 0, G_OPTION_ARG_FILENAME, &out, "Output folder (default: hypernetworks; created if missing)", "DIR"},
        {"overwrite", 0, 0, G_OPTION_ARG_NONE, &overwrite, "Overwrite an existing hypernetwork file (default off)",
         NULL},
        CLI_PLUGIN_OPTION(plugin),
        {NULL, 0, 0, 0, NULL, NULL, NULL}};
    GOptionContext *ctx = g_option_context_new("- create a hypernetwork file (A1111 .pt)");
    g_option_context_add_main_entries(ctx, entries, NULL);
    int status = cli_parse_create(ctx, "create-hypernetwork", &argc, &argv, &name);
    if (status == SDT_EXIT_OK && dropout_structure && !dropout)
        status = cli_usage_error("create-hypernetwork",
                                 "--dropout-structure needs --dropout (A1111 ignores the structure without it).");
    const char *out_dir = out ? out : "hypernetworks";
    if (status == SDT_EXIT_OK) status = cli_make_output_folder(out_dir);
    cli_trainer t;
    const void *extension = NULL;
    if (status == SDT_EXIT_OK &&
        (status = cli_trainer_open_extension(&t, plugin, SDT_EXT_HYPERNETWORK_FILES, &extension)) == SDT_EXIT_OK) {
        const sdt_hypernetwork_files_ext *files = extension;
        sdt_hypernetwork_spec spec = {.struct_size = sizeof spec,
                                      .name = name,
                                      .output_dir = out_dir,
                                      .widths = sizes,
                                      .layer_structure = layer_structure,
                                      .activation = activation,
                                      .weight_init = init,
                                      .dropout_structure = dropout_structure,
                                      .layer_norm = layer_norm,
                                      .use_dropout = dropout,
                                      .activate_output = activate_output,
                                      .overwrite = overwrite};
        char path[4096] = "";
        sdt_status st = files->create_hypernetwork(t.trainer, &spec, path, sizeof path, NULL);
        status = cli_created(path, st == SDT_STATUS_OK ? NULL : cli_trainer_error(&t), spec_options,
                             G_N_ELEMENTS(spec_options));
        cli_trainer_close(&t);
    }
    g_option_context_free(ctx);
    g_free(name);
    g_free(sizes);
    g_free(layer_structure);
    g_free(activation);
    g_free(init);
    g_free(dropout_structure);
    g_free(out);
    g_free(plugin);
    return status;
}
