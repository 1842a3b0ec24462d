/* cmd_create.c - `sdt-host create-embedding`: the Create embedding tab. */
#include <stdio.h>

#include "cli_common.h"
#include "commands.h"
#include "encoder_options.h"
#include "exit_codes.h"

/* The plugin's sentences name sdt_embedding_spec fields; a terminal user sets options. */
static const char *const spec_options[][2] = {
    {"spec.name", "--name"},
    {"spec.init_text", "--init-text"},
    {"spec.vectors_per_token", "--vectors"},
    {"spec.model_path", "--model"},
    {"spec.output_dir", "--out"},
    {"spec.overwrite", "--overwrite"},
    {"spec.clip_l_path", "--clip-l"},
    {"spec.clip_g_path", "--clip-g"},
    {"spec.t5xxl_path", "--t5xxl"},
    {"spec.tokenizer_path", "--tokenizer"},
};

int cmd_create_embedding(int argc, char **argv)
{
    char *name = NULL, *init_text = NULL, *model = NULL, *out = NULL, *plugin = NULL, *vectors_text = NULL;
    char *tokenizer = NULL;
    encoder_files encoders = {0};
    gboolean overwrite = FALSE;
    GOptionEntry entries[] = {
        {"name", 0, 0, G_OPTION_ARG_STRING, &name, "Name (letters, digits, '.', '_', '-', ' '; required)", "NAME"},
        {"init-text", 0, 0, G_OPTION_ARG_STRING, &init_text, "Initialization text (default \"*\"; empty = zeros)",
         "TEXT"},
        {"vectors", 0, 0, G_OPTION_ARG_STRING, &vectors_text, "Number of vectors per token, 1..75 (default 1)", "K"},
        {"model", 0, 0, G_OPTION_ARG_FILENAME, &model,
         "Stable Diffusion checkpoint whose text encoder sets the width (required)", "PATH"},
        {"tokenizer", 0, 0, G_OPTION_ARG_FILENAME, &tokenizer,
         "Folder with vocab.json and merges.txt (default: the model's tokenizer/)", "DIR"},
        {NULL, 0, 0, 0, NULL, NULL, NULL}};
    GOptionEntry entries_after[] = {
        {"out", 0, 0, G_OPTION_ARG_FILENAME, &out, "Output folder (default: embeddings; created if missing)", "DIR"},
        {"overwrite", 0, 0, G_OPTION_ARG_NONE, &overwrite, "Overwrite an existing embedding file (default off)", NULL},
        CLI_PLUGIN_OPTION(plugin),
        {NULL, 0, 0, 0, NULL, NULL, NULL}};
    GOptionContext *ctx = g_option_context_new("- create an embedding file");
    g_option_context_add_main_entries(ctx, entries, NULL);
    encoder_options_add(ctx, &encoders, FALSE);
    g_option_context_add_main_entries(ctx, entries_after, NULL);
    guint64 vectors = 1;
    int status = cli_parse_create(ctx, "create-embedding", &argc, &argv, &name);
    if (status == SDT_EXIT_OK && vectors_text && !g_ascii_string_to_unsigned(vectors_text, 10, 1, 75, &vectors, NULL))
        status = cli_usage_error("create-embedding", "--vectors must be a whole number from 1 to 75.");
    const char *out_dir = out ? out : "embeddings";
    if (status == SDT_EXIT_OK) status = cli_make_output_folder(out_dir);
    cli_trainer t;
    const void *extension = NULL;
    if (status == SDT_EXIT_OK &&
        (status = cli_trainer_open_extension(&t, plugin, SDT_EXT_EMBEDDING_FILES, &extension)) == SDT_EXIT_OK) {
        const sdt_embedding_files_ext *files = extension;
        sdt_embedding_spec spec = {.struct_size = sizeof spec,
                                   .vectors_per_token = (uint32_t)vectors,
                                   .name = name,
                                   .init_text = init_text ? init_text : "*",
                                   .model_path = model,
                                   .output_dir = out_dir,
                                   .overwrite = overwrite,
                                   .tokenizer_path = tokenizer,
                                   .clip_l_path = encoders.clip_l,
                                   .clip_g_path = encoders.clip_g,
                                   .t5xxl_path = encoders.t5xxl};
        char path[4096] = "";
        sdt_status st = files->create_embedding(t.trainer, &spec, path, sizeof path, NULL);
        status = cli_created(path, st == SDT_STATUS_OK ? NULL : cli_trainer_error(&t), spec_options,
                             G_N_ELEMENTS(spec_options));
        cli_trainer_close(&t);
    }
    g_option_context_free(ctx);
    g_free(name);
    g_free(init_text);
    g_free(model);
    g_free(out);
    g_free(plugin);
    g_free(vectors_text);
    g_free(tokenizer);
    encoder_files_free(&encoders);
    return status;
}
