/* cmd_inspect.c - `sdt-host inspect FILE [--json]`: what an embedding file, a hypernetwork file,
 * a model checkpoint or another file a run wrote holds. Each file extension of the trainer factory
 * is asked in turn: the embedding files' first (embeddings, then models), then the hypernetwork
 * files', then the run outputs. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "c_number.h"
#include "cli_common.h"
#include "commands.h"
#include "exit_codes.h"
#include "host_json.h"
#include "inspect_outputs.h"

static const char *format_name(uint32_t format)
{
    switch (format) {
        case SDT_EMBEDDING_FILE_SAFETENSORS:
            return "safetensors";
        case SDT_EMBEDDING_FILE_SAFETENSORS_SDXL:
            return "safetensors (SDXL clip_l + clip_g)";
        case SDT_EMBEDDING_FILE_A1111_PT:
            return "A1111 .pt";
        case SDT_EMBEDDING_FILE_PNG_CHUNK:
            return "PNG card (sd-ti-embedding chunk)";
        case SDT_EMBEDDING_FILE_PNG_PIXELS:
            return "PNG card (data in pixels)";
        case SDT_EMBEDDING_FILE_TRAINING_STATE:
            return "sdtrain training state";
        default:
            return "unknown";
    }
}

/* The model family an embedding of this width is for: SDXL's pair (clip_l_width > 0), or the one
 * text encoder's width. */
static const char *embedding_family(uint32_t dim, uint32_t clip_l_width)
{
    if (clip_l_width) return "SDXL (clip_l + clip_g)";
    switch (dim) {
        case 768:
            return "SD 1.x (CLIP ViT-L, 768)";
        case 1024:
            return "SD 2.x (OpenCLIP ViT-H, 1024)";
        default:
            return "a model whose text encoder is this wide (not SD 1.x's 768, SD 2.x's 1024 or SDXL's 768 + 1280)";
    }
}

/* clip_l_width: SDXL's first table's width from the plugin's JSON (0: one table). */
/* An SD3.5 / Flux.1 embedding's tables from the plugin's JSON ("tables": [{encoder, dim}], "family_title"):
 * "768 clip_l + 4096 t5xxl" into widths and the family's title; FALSE when it has none. */
static gboolean table_widths(const cJSON *o, GString *widths, const char **title)
{
    const cJSON *tables = cJSON_GetObjectItemCaseSensitive(o, "tables");
    const cJSON *family = cJSON_GetObjectItemCaseSensitive(o, "family_title");
    if (!cJSON_IsArray(tables) || !cJSON_GetArraySize(tables) || !cJSON_IsString(family)) return FALSE;
    const cJSON *t;
    cJSON_ArrayForEach(t, tables)
    {
        const cJSON *enc = cJSON_GetObjectItemCaseSensitive(t, "encoder");
        const cJSON *dim = cJSON_GetObjectItemCaseSensitive(t, "dim");
        if (cJSON_IsString(enc) && cJSON_IsNumber(dim))
            g_string_append_printf(widths, "%s%d %s", widths->len ? " + " : "", dim->valueint, enc->valuestring);
    }
    *title = family->valuestring;
    return TRUE;
}

static void print_info(const char *path, const sdt_embedding_info *info, uint32_t clip_l_width, const cJSON *described)
{
    printf("file:        %s\n", path);
    printf("format:      %s\n", format_name(info->format));
    printf("name:        %s\n", info->name);
    GString *widths = g_string_new(NULL);
    const char *title = NULL;
    if (info->vectors && table_widths(described, widths, &title)) {
        printf("vectors:     %u x %u (%s)\n", info->vectors, info->embedding_dim, widths->str);
        printf("family:      %s (a table per text encoder; ComfyUI loads it as embedding:NAME)\n", title);
    } else if (info->vectors && clip_l_width && clip_l_width < info->embedding_dim)
        printf("vectors:     %u x %u (%u clip_l + %u clip_g)\n", info->vectors, info->embedding_dim, clip_l_width,
               info->embedding_dim - clip_l_width);
    else if (info->vectors)
        printf("vectors:     %u x %u\n", info->vectors, info->embedding_dim);
    if (info->vectors && info->format != SDT_EMBEDDING_FILE_TRAINING_STATE && !title)
        printf("family:      %s\n", embedding_family(info->embedding_dim, clip_l_width));
    g_string_free(widths, TRUE);
    if (info->step >= 0) printf("step:        %lld\n", (long long)info->step);
    if (info->init_text[0]) printf("init text:   %s\n", info->init_text);
    if (info->checkpoint_name[0] || info->checkpoint_hash[0])
        printf("checkpoint:  %s [%s]\n", info->checkpoint_name, info->checkpoint_hash);
    c_number_text norm;
    if (info->vectors) printf("mean norm:   %s\n", c_number(&norm, "%.6g", info->vector_norm_mean));
    printf("finite:      %s\n", info->all_finite ? "yes" : "NO (contains NaN or Inf)");
}

/* The families whose cross-attention context a hypernetwork has a module for (A1111 applies a
 * module by the K/V width: 768 SD 1.x, 1024 SD 2.x, 2048 SDXL). */
static void print_hn_family(const sdt_hypernetwork_info *info)
{
    static const struct {
        uint32_t width;
        const char *family;
    } contexts[] = {{768, "SD 1.x"}, {1024, "SD 2.x"}, {2048, "SDXL"}};
    GString *names = g_string_new("");
    for (size_t k = 0; k < G_N_ELEMENTS(contexts); k++)
        for (uint32_t i = 0; i < info->width_count && i < 8; i++)
            if (info->widths[i] == contexts[k].width)
                g_string_append_printf(names, "%s%s", names->len ? ", " : "", contexts[k].family);
    printf("family:      %s\n", names->len ? names->str
                                           : "none of SD 1.x, SD 2.x or SDXL (no module for their context widths 768, "
                                             "1024, 2048)");
    g_string_free(names, TRUE);
}

/* One JSON value as inspect's text: numbers with '.', lists joined, null as "none". */
static void append_value_text(GString *out, const cJSON *v)
{
    c_number_text n;
    if (cJSON_IsString(v))
        g_string_append(out, v->valuestring);
    else if (cJSON_IsNumber(v))
        g_string_append(out, c_number(&n, "%.7g", v->valuedouble));
    else if (cJSON_IsBool(v))
        g_string_append(out, cJSON_IsTrue(v) ? "yes" : "no");
    else if (cJSON_IsNull(v))
        g_string_append(out, "none");
    else if (cJSON_IsArray(v) && !v->child)
        g_string_append(out, "none");
    else if (cJSON_IsArray(v))
        for (const cJSON *e = v->child; e; e = e->next) {
            if (e != v->child) g_string_append(out, ", ");
            append_value_text(out, e);
        }
    else {
        char *raw = host_json_print(v);
        g_string_append(out, raw ? raw : "?");
        cJSON_free(raw);
    }
}

/* The plugin's model description (a JSON object) as "key: value" lines, the key's '_' as spaces, the
 * values in one column. */
static void print_model(const char *path, const char *json)
{
    cJSON *o = host_json_parse(json, strlen(json));
    int width = (int)strlen("format:");
    for (const cJSON *item = cJSON_IsObject(o) ? o->child : NULL; item; item = item->next)
        if ((int)strlen(item->string) + 1 > width) width = (int)strlen(item->string) + 1;
    const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "kind"));
    printf("%-*s %s\n%-*s %s\n", width, "file:", path, width, "format:", kind ? kind : "model checkpoint");
    for (const cJSON *item = cJSON_IsObject(o) ? o->child : NULL; item; item = item->next) {
        if (!strcmp(item->string, "file") || !strcmp(item->string, "kind")) continue;
        char *label = g_strdup_printf("%s:", item->string);
        g_strdelimit(label, "_", ' ');
        GString *value = g_string_new("");
        append_value_text(value, item);
        printf("%-*s %s\n", width, label, value->str);
        g_string_free(value, TRUE);
        g_free(label);
    }
    if (!cJSON_IsObject(o)) printf("%-*s %s\n", width, "model:", json); /* not an object: as the plugin wrote it */
    cJSON_Delete(o);
}

static void print_hn_info(const char *path, const sdt_hypernetwork_info *info)
{
    printf("file:        %s\n", path);
    printf("kind:        hypernetwork\n");
    printf("name:        %s\n", info->name);
    printf("modules:     ");
    for (uint32_t i = 0; i < info->width_count && i < 8; i++) printf("%s%u", i ? ", " : "", info->widths[i]);
    printf("\n");
    print_hn_family(info);
    printf("structure:   %s (%u Linear layers)\n", info->layer_structure, info->layer_count);
    printf("activation:  %s%s\n", info->activation, info->activate_output ? " (also on the output)" : "");
    printf("init:        %s\n", info->weight_init);
    printf("layer norm:  %s\n", info->layer_norm ? "yes" : "no");
    printf("dropout:     %s\n", info->use_dropout ? "yes" : "no");
    printf("parameters:  %llu\n", (unsigned long long)info->parameter_count);
    if (info->step >= 0) printf("step:        %lld\n", (long long)info->step);
    if (info->checkpoint_name[0] || info->checkpoint_hash[0])
        printf("checkpoint:  %s [%s]\n", info->checkpoint_name, info->checkpoint_hash);
    printf("finite:      %s\n", info->all_finite ? "yes" : "NO (contains NaN or Inf)");
}

/* The extensions inspect asks, from one trainer (their failures leave sentences on it). */
typedef struct inspector {
    cli_trainer t;
    const sdt_embedding_files_ext *embeddings;
    const sdt_hypernetwork_files_ext *hypernetworks;
} inspector;

/* The hypernetwork files' view of path: TRUE when it printed it. */
static gboolean inspect_hypernetwork(const inspector *in, const char *path, gboolean json)
{
    gboolean done = FALSE;
    if (!json) {
        sdt_hypernetwork_info info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        done = in->hypernetworks->inspect(in->t.trainer, path, &info, NULL, 0, NULL) == SDT_STATUS_OK;
        if (done) print_hn_info(path, &info);
    } else {
        uint32_t needed = 0;
        if (in->hypernetworks->inspect(in->t.trainer, path, NULL, NULL, 0, &needed) == SDT_STATUS_BUFFER_TOO_SMALL &&
            needed) {
            char *text = g_malloc0(needed);
            done = in->hypernetworks->inspect(in->t.trainer, path, NULL, text, needed, NULL) == SDT_STATUS_OK;
            if (done) printf("%s\n", text);
            g_free(text);
        }
    }
    return done;
}

/* The plugin's JSON for path (g_free). Each call reads the file, so the first offers a buffer
 * that fits any usual embedding, and only a larger JSON costs a second call at its size. */
static sdt_status fetch_json(const inspector *in, const char *path, char **text)
{
    uint32_t size = 64 * 1024, needed = 0;
    *text = g_malloc0(size);
    sdt_status st = in->embeddings->inspect(in->t.trainer, path, NULL, *text, size, &needed);
    if (st == SDT_STATUS_BUFFER_TOO_SMALL && needed > size) {
        g_free(*text);
        *text = g_malloc0(needed);
        st = in->embeddings->inspect(in->t.trainer, path, NULL, *text, needed, NULL);
    }
    return st;
}

/* What the embedding files' inspect makes of path: TRUE when it printed it (an embedding, a
 * training state or, without --json, a model checkpoint). */
static gboolean inspect_embedding(const inspector *in, const char *path, gboolean json)
{
    char *text = NULL;
    gboolean done = FALSE;
    sdt_embedding_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (json) {
        done = fetch_json(in, path, &text) == SDT_STATUS_OK;
        if (done) printf("%s\n", text);
    } else if (in->embeddings->inspect(in->t.trainer, path, &info, NULL, 0, NULL) == SDT_STATUS_OK) {
        bool state = info.format == SDT_EMBEDDING_FILE_TRAINING_STATE;
        bool described = fetch_json(in, path, &text) == SDT_STATUS_OK;
        cJSON *o = described && !state ? host_json_parse(text, strlen(text))
                                       : NULL; /* SDXL's two widths and SD3.5/Flux's tables are in the JSON only */
        const cJSON *clip_l = cJSON_GetObjectItemCaseSensitive(o, "clip_l_dim");
        print_info(path, &info, cJSON_IsNumber(clip_l) && clip_l->valuedouble > 0 ? (uint32_t)clip_l->valuedouble : 0,
                   o);
        cJSON_Delete(o);
        /* a run's state: what it trains, its paired files and hashes, precision, scale */
        if (state && described) printf("state:       %s\n", text);
        done = TRUE;
    } else if (fetch_json(in, path, &text) == SDT_STATUS_OK) {
        /* not an embedding: the plugin's JSON may describe a model checkpoint (the yaml beside it too) */
        print_model(path, text);
        done = TRUE;
    }
    g_free(text);
    return done;
}

static int inspect_file(const char *path, gboolean json, const char *plugin)
{
    inspector in;
    memset(&in, 0, sizeof in);
    int status = cli_trainer_open(&in.t, plugin);
    if (status != SDT_EXIT_OK) return status;
    if ((in.embeddings = cli_trainer_extension(&in.t, SDT_EXT_EMBEDDING_FILES, &status)) &&
        (in.hypernetworks = cli_trainer_extension(&in.t, SDT_EXT_HYPERNETWORK_FILES, &status)) &&
        !inspect_embedding(&in, path, json)) {
        /* the embedding reader's sentence when no reader takes the file: one line, as every error */
        char *sentence = cli_trainer_error(&in.t);
        if (!inspect_hypernetwork(&in, path, json) && !inspect_output_file(path, json))
            status = cli_error(sentence[0] ? sentence : "the plugin reported a failure without a message.");
        g_free(sentence);
    }
    cli_trainer_close(&in.t);
    return status;
}

int cmd_inspect(int argc, char **argv)
{
    gboolean json = FALSE;
    char *plugin = NULL;
    GOptionEntry entries[] = {{"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print one JSON object (default: text)", NULL},
                              CLI_PLUGIN_OPTION(plugin),
                              {NULL, 0, 0, 0, NULL, NULL, NULL}};
    GOptionContext *ctx = g_option_context_new(
        "FILE - show what an embedding file (safetensors, .pt, PNG card, training state), a hypernetwork file (.pt, .safetensors), a model checkpoint (with A1111's .yaml beside it) or another file a run wrote (preview, loss CSV, settings) holds");
    g_option_context_add_main_entries(ctx, entries, NULL);
    int status;
    if (!cli_parse(ctx, "inspect", &argc, &argv))
        status = SDT_EXIT_USAGE;
    else if (argc != 2)
        status = cli_usage_error("inspect", "give exactly one FILE to inspect.");
    else
        status = inspect_file(argv[1], json, plugin);
    g_option_context_free(ctx);
    g_free(plugin);
    return status;
}
