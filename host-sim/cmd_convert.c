/* cmd_convert.c - `sdt-host convert FILE --for forge --out DIR`: an SD3.5/Flux.1 embedding (a table per
 * text encoder, as ComfyUI loads it) written as the files Forge loads. Forge's CLIP engines each keep an
 * embedding database that takes a file of one tensor as wide as its encoder and names it by the file's
 * stem; a file of several tables is refused or skipped, and its T5 engine takes no embeddings
 * (docs/DESIGN.md, "Forge's embeddings"). So: the clip_l rows alone in DIR/NAME.safetensors, for SD3.5
 * the clip_g rows alone in DIR/clip_g/NAME.safetensors (the same stem; Forge reads subfolders), and the
 * T5 rows dropped with a sentence. The plugin reads and checks the file (inspect); this command copies
 * the bytes of the tables inspect reported. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_common.h"
#include "commands.h"
#include "exit_codes.h"
#include "host_json.h"
#include "safetensors_tensor.h"

/* One table of the embedding as inspect described it. */
typedef struct export_table {
    const char *key; /* clip_l, clip_g */
    int dim;         /* 0: the embedding has no such table */
} export_table;

/* The plugin's description of path: its JSON, or NULL after printing the sentence. */
static cJSON *describe(const cli_trainer *t, const sdt_embedding_files_ext *files, const char *path,
                       sdt_embedding_info *info, int *status)
{
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    uint32_t needed = 0;
    if (files->inspect(t->trainer, path, info, NULL, 0, NULL) != SDT_STATUS_OK ||
        files->inspect(t->trainer, path, NULL, NULL, 0, &needed) != SDT_STATUS_BUFFER_TOO_SMALL || !needed) {
        *status = cli_trainer_fail(t);
        return NULL;
    }
    char *text = g_malloc0(needed);
    cJSON *o = NULL;
    if (files->inspect(t->trainer, path, NULL, text, needed, NULL) == SDT_STATUS_OK)
        o = host_json_parse(text, strlen(text));
    else
        *status = cli_trainer_fail(t);
    g_free(text);
    return o;
}

/* The width inspect gives the table key in "tables" (0: none). */
static int table_dim(const cJSON *o, const char *key)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(o, "tables"))
    {
        const char *enc = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "encoder"));
        const cJSON *dim = cJSON_GetObjectItemCaseSensitive(t, "dim");
        if (enc && !strcmp(enc, key) && cJSON_IsNumber(dim)) return dim->valueint;
    }
    return 0;
}

static gboolean same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* The stem Forge names the embedding by: the file name without its extension. */
static char *file_stem(const char *path)
{
    char *base = g_path_get_basename(path);
    char *dot = strrchr(base, '.');
    if (dot && dot != base) *dot = '\0';
    return base;
}

/* The outputs' paths, refused when one exists (unless overwrite) or is the input itself; 0 or an exit status. */
static int check_outputs(const char *input, char *const *outs, int n, gboolean overwrite)
{
    for (int i = 0; i < n; i++) {
        if (same_file(input, outs[i]))
            return cli_errorf("%s is the embedding being converted; give --out another folder than the file's own.",
                              outs[i]);
        if (!overwrite && g_file_test(outs[i], G_FILE_TEST_EXISTS))
            return cli_errorf("%s exists; give --overwrite to replace it, or another --out folder.", outs[i]);
    }
    return SDT_EXIT_OK;
}

static int convert_for_forge(const char *path, const char *out_dir, gboolean overwrite, const char *plugin)
{
    cli_trainer t;
    const void *extension = NULL;
    int status = cli_trainer_open_extension(&t, plugin, SDT_EXT_EMBEDDING_FILES, &extension);
    if (status != SDT_EXIT_OK) return status;
    sdt_embedding_info info;
    cJSON *o = describe(&t, extension, path, &info, &status);
    cli_trainer_close(&t);
    if (!o) return status == SDT_EXIT_OK ? cli_errorf("%s: the plugin's description could not be read.", path) : status;

    const char *family = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "family"));
    const char *title = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "family_title"));
    export_table tables[] = {{"clip_l", table_dim(o, "clip_l")}, {"clip_g", table_dim(o, "clip_g")}};
    int t5_dim = table_dim(o, "t5xxl");
    char *stem = file_stem(path);
    char *outs[2] = {g_build_filename(out_dir, stem, NULL), g_build_filename(out_dir, "clip_g", stem, NULL)};
    for (int i = 0; i < 2; i++) {
        char *named = g_strconcat(outs[i], ".safetensors", NULL);
        g_free(outs[i]);
        outs[i] = named;
    }
    st_file file = {0};
    char *reason = NULL;
    if (info.format == SDT_EMBEDDING_FILE_TRAINING_STATE)
        status = cli_errorf("%s is a training state; convert the embedding a run saved (<name>.safetensors).", path);
    else if (!family || !title)
        status = cli_errorf("%s is an embedding of one table (%u x %u) for SD 1.x, SD 2.x or SDXL, which Forge "
                            "loads as it is; convert --for forge is for SD3.5/Flux.1 embeddings (a table per text "
                            "encoder).",
                            path, info.vectors, info.embedding_dim);
    else if (!info.all_finite)
        status = cli_errorf("%s holds NaN or Inf values; Forge would load them as they are, so train again from a "
                            "saved copy before the values broke.",
                            path);
    else if (!tables[0].dim)
        status = cli_errorf("%s has no clip_l table; Forge reads only CLIP-L%s rows for %s, so create the embedding "
                            "with a clip_l table (create-embedding makes every encoder's).",
                            path, strcmp(family, "sd3") ? "" : " and CLIP-G", title);
    else if (!st_file_read(path, &file, &reason))
        status = cli_errorf("%s: %s; convert copies the tables of a .safetensors embedding (sdtrain, ComfyUI and "
                            "OneTrainer write those), so save this one as .safetensors first (in Python: "
                            "safetensors.torch.save_file(torch.load(\"%s\"), \"%s.safetensors\")).",
                            path, reason, path, stem);
    int n_out = tables[1].dim ? 2 : 1;
    char *source = g_path_get_basename(path); /* the file's name, not the user's folders */
    if (status == SDT_EXIT_OK) status = check_outputs(path, outs, n_out, overwrite);
    st_tensor tensors[2];
    for (int i = 0; i < n_out && status == SDT_EXIT_OK; i++)
        if (!st_file_tensor(&file, tables[i].key, &tensors[i], &reason) || tensors[i].rows != (int64_t)info.vectors ||
            tensors[i].cols != tables[i].dim)
            status = cli_errorf("%s: %s; the plugin read a %s table of %u x %d, so the file changed while it was "
                                "read or is not what inspect saw: convert it again.",
                                path, reason ? reason : "its table has another shape", tables[i].key, info.vectors,
                                tables[i].dim);
    if (status == SDT_EXIT_OK && n_out == 2) {
        char *sub = g_path_get_dirname(outs[1]);
        status = cli_make_output_folder(sub);
        g_free(sub);
    } else if (status == SDT_EXIT_OK)
        status = cli_make_output_folder(out_dir);
    for (int i = 0; i < n_out && status == SDT_EXIT_OK; i++) {
        /* emb_params: the one-tensor layout A1111 and Forge read (any single key would do for Forge) */
        const char *const meta[][2] = {
            {"sdtrain_source", source}, {"sdtrain_table", tables[i].key}, {"sdtrain_for", "forge"}};
        GError *error = NULL;
        if (!st_write_one(outs[i], "emb_params", &tensors[i], meta, G_N_ELEMENTS(meta), &error)) {
            status = i ? cli_errorf("%s could not be written (%s); %s was written, so Forge sees the CLIP-L rows "
                                    "only until this one is.",
                                    outs[i], error->message, outs[0])
                       : cli_errorf("%s could not be written (%s).", outs[i], error->message);
            g_error_free(error);
            break;
        }
        printf("Wrote: %s (the %s rows, %u x %d: what Forge's %s engine loads)\n", outs[i], tables[i].key, info.vectors,
               tables[i].dim, i ? "CLIP-G" : "CLIP-L");
    }
    if (status == SDT_EXIT_OK) {
        if (t5_dim)
            printf("Dropped: the t5xxl rows (%u x %d): Forge's T5 engine takes no embeddings, so in Forge the "
                   "name reaches T5 as plain text.\n",
                   info.vectors, t5_dim);
        if (!strcmp(family, "sd3") && !tables[1].dim)
            printf("Note: no clip_g table, so Forge's CLIP-G engine reads the name as plain text.\n");
        printf("Forge: copy %s%s into Forge's embeddings folder and write %s in the prompt (%s).\n", outs[0],
               n_out == 2 ? " and the clip_g folder beside it" : "", stem, title);
    }
    g_free(reason);
    g_free(source);
    st_file_free(&file);
    g_free(outs[0]);
    g_free(outs[1]);
    g_free(stem);
    cJSON_Delete(o);
    return status;
}

int cmd_convert(int argc, char **argv)
{
    char *target = NULL, *out = NULL, *plugin = NULL;
    gboolean overwrite = FALSE;
    GOptionEntry entries[] = {
        {"for", 0, 0, G_OPTION_ARG_STRING, &target,
         "The host to write for: forge (its CLIP engines' one-tensor files; required)", "HOST"},
        {"out", 0, 0, G_OPTION_ARG_FILENAME, &out,
         "Output folder (created if missing; required): NAME.safetensors, and clip_g/NAME.safetensors for SD3.5",
         "DIR"},
        {"overwrite", 0, 0, G_OPTION_ARG_NONE, &overwrite, "Replace existing output files (default off)", NULL},
        CLI_PLUGIN_OPTION(plugin),
        {NULL, 0, 0, 0, NULL, NULL, NULL}};
    GOptionContext *ctx = g_option_context_new(
        "FILE - write an SD3.5/Flux.1 embedding (clip_l, clip_g, t5xxl tables) as the files Forge loads: the "
        "CLIP-L rows (and SD3.5's CLIP-G rows) each in a one-tensor file named as the embedding; the T5 rows are "
        "dropped, as Forge's T5 engine takes no embeddings");
    g_option_context_add_main_entries(ctx, entries, NULL);
    int status;
    if (!cli_parse(ctx, "convert", &argc, &argv))
        status = SDT_EXIT_USAGE;
    else if (argc != 2)
        status = cli_usage_error("convert", "give exactly one embedding FILE to convert.");
    else if (!target)
        status = cli_usage_error("convert", "--for is required: --for forge.");
    else if (strcmp(target, "forge") != 0)
        status = cli_usage_errorf("convert", "--for takes forge (ComfyUI loads the file as it is), not '%s'.", target);
    else if (!out)
        status = cli_usage_error("convert", "--out DIR is required: the folder for Forge's files.");
    else
        status = convert_for_forge(argv[1], out, overwrite, plugin);
    g_option_context_free(ctx);
    g_free(target);
    g_free(out);
    g_free(plugin);
    return status;
}
