/* serve_create.c - the Create embedding and Create hypernetwork tabs: the page's form becomes
 * the same sdt_embedding_spec / sdt_hypernetwork_spec `sdt-host create-*` passes, written into
 * the configured embeddings / hypernetworks folder. */
#include <string.h>

#include "serve_context.h"
#include "serve_reply.h"
#include "serve_trainer.h"
#include "host_json.h"

/* A string member of the form, NULL when absent or empty. */
static const char *text_of(const cJSON *form, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(form, key);
    return cJSON_IsString(item) && item->valuestring[0] ? item->valuestring : NULL;
}

static bool flag_of(const cJSON *form, const char *key)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(form, key));
}

static cJSON *parse_form(SoupServerMessage *msg, const char *body, size_t n)
{
    cJSON *form = host_json_parse(body, n);
    if (!cJSON_IsObject(form)) {
        serve_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "The form did not arrive as a JSON object; reload the page.");
        cJSON_Delete(form);
        return NULL;
    }
    if (!text_of(form, "name")) {
        serve_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "Give a name.");
        cJSON_Delete(form);
        return NULL;
    }
    return form;
}

/* The plugin's sentence with its spec fields named as the page's fields. */
static void reply_failure(SoupServerMessage *msg, const char *sentence, const char *const (*renames)[2], size_t n)
{
    GString *s = g_string_new(sentence[0] ? sentence : "The plugin could not create the file.");
    for (size_t i = 0; i < n; i++) g_string_replace(s, renames[i][0], renames[i][1], 0);
    serve_reply_error(msg, SOUP_STATUS_UNPROCESSABLE_ENTITY, s->str);
    g_string_free(s, TRUE);
}

static void reply_created(serve_context *ctx, SoupServerMessage *msg, serve_root root, const char *path)
{
    cJSON *j = cJSON_CreateObject();
    char *relative = serve_folders_relative(&ctx->folders, root, path);
    cJSON_AddStringToObject(j, "created", relative ? relative : path);
    g_free(relative);
    serve_reply_json(msg, j);
}

static const char *const embedding_fields[][2] = {
    {"spec.name", "Name"},
    {"spec.init_text", "Initialization text"},
    {"spec.vectors_per_token", "Vectors per token"},
    {"spec.model_path", "Model"},
    {"spec.overwrite", "Overwrite"},
    {"spec.output_dir", "the embeddings folder"},
    {"spec.clip_l_path", "CLIP-L"},
    {"spec.clip_g_path", "CLIP-G"},
    {"spec.t5xxl_path", "T5-XXL"},
};

/* SD3.5 / Flux.1's encoder files (form keys clip_l, clip_g, t5xxl) inside the models folder; an empty one stays NULL
 * (the model's own). FALSE with the folder's sentence in *error. */
static gboolean resolve_encoders(serve_context *ctx, const cJSON *form, char *paths[3], char **error)
{
    static const char *const keys[3] = {"clip_l", "clip_g", "t5xxl"};
    for (int k = 0; k < 3; k++) {
        const char *given = text_of(form, keys[k]);
        paths[k] = NULL;
        if (given && !(paths[k] = serve_folders_resolve(&ctx->folders, SERVE_MODELS, given, error))) return FALSE;
    }
    return TRUE;
}

void serve_create_embedding(serve_context *ctx, SoupServerMessage *msg, const char *body, size_t n)
{
    cJSON *form = parse_form(msg, body, n);
    if (!form) return;
    char *error = NULL;
    const cJSON *vectors = cJSON_GetObjectItemCaseSensitive(form, "vectors");
    double k = cJSON_IsNumber(vectors) ? vectors->valuedouble : 1;
    char *model = text_of(form, "model")
                      ? serve_folders_resolve(&ctx->folders, SERVE_MODELS, text_of(form, "model"), &error)
                      : NULL;
    serve_trainer t;
    char sentence[2048] = "";
    char *encoders[3] = {NULL, NULL, NULL};
    if (!text_of(form, "model"))
        serve_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "Pick the model whose text encoder the embedding is for.");
    else if (!model)
        serve_reply_error(msg, SOUP_STATUS_FORBIDDEN, error);
    else if (!resolve_encoders(ctx, form, encoders, &error))
        serve_reply_error(msg, SOUP_STATUS_FORBIDDEN, error);
    else if (!(k >= 1 && k <= 75 && k == (double)(uint32_t)k))
        serve_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "Vectors per token must be a whole number from 1 to 75.");
    else if (!serve_trainer_open(&t, &ctx->plugin, SDT_EXT_EMBEDDING_FILES, &error))
        serve_reply_error(msg, SOUP_STATUS_INTERNAL_SERVER_ERROR, error);
    else {
        const sdt_embedding_files_ext *files = t.extension;
        const cJSON *init = cJSON_GetObjectItemCaseSensitive(form, "init_text");
        sdt_embedding_spec spec = {.struct_size = sizeof spec,
                                   .vectors_per_token = (uint32_t)k,
                                   .name = text_of(form, "name"),
                                   .init_text = cJSON_IsString(init) ? init->valuestring : "*",
                                   .model_path = model,
                                   .output_dir = ctx->folders.root[SERVE_EMBEDDINGS],
                                   .overwrite = flag_of(form, "overwrite"),
                                   .clip_l_path = encoders[0],
                                   .clip_g_path = encoders[1],
                                   .t5xxl_path = encoders[2]};
        char path[4096] = "";
        if (files->create_embedding(t.trainer, &spec, path, sizeof path, NULL) == SDT_STATUS_OK)
            reply_created(ctx, msg, SERVE_EMBEDDINGS, path);
        else {
            serve_trainer_error(&t, sentence, sizeof sentence);
            reply_failure(msg, sentence, embedding_fields, G_N_ELEMENTS(embedding_fields));
        }
        serve_trainer_close(&t);
    }
    for (int k = 0; k < 3; k++) g_free(encoders[k]);
    g_free(model);
    g_free(error);
    cJSON_Delete(form);
}

static const char *const hypernetwork_fields[][2] = {
    {"spec.name", "Name"},
    {"spec.output_dir", "the hypernetworks folder"},
    {"turn on overwrite", "tick Overwrite"},
};

void serve_create_hypernetwork(serve_context *ctx, SoupServerMessage *msg, const char *body, size_t n)
{
    cJSON *form = parse_form(msg, body, n);
    if (!form) return;
    char *error = NULL;
    serve_trainer t;
    char sentence[2048] = "";
    if (!serve_trainer_open(&t, &ctx->plugin, SDT_EXT_HYPERNETWORK_FILES, &error))
        serve_reply_error(msg, SOUP_STATUS_INTERNAL_SERVER_ERROR, error);
    else {
        const sdt_hypernetwork_files_ext *files = t.extension;
        bool dropout = flag_of(form, "dropout");
        sdt_hypernetwork_spec spec = {.struct_size = sizeof spec,
                                      .name = text_of(form, "name"),
                                      .output_dir = ctx->folders.root[SERVE_HYPERNETWORKS],
                                      .widths = text_of(form, "sizes"),
                                      .layer_structure = text_of(form, "layer_structure"),
                                      .activation = text_of(form, "activation"),
                                      .weight_init = text_of(form, "init"),
                                      .dropout_structure = dropout ? text_of(form, "dropout_structure") : NULL,
                                      .layer_norm = flag_of(form, "layer_norm"),
                                      .use_dropout = dropout,
                                      .activate_output = flag_of(form, "activate_output"),
                                      .overwrite = flag_of(form, "overwrite")};
        char path[4096] = "";
        if (files->create_hypernetwork(t.trainer, &spec, path, sizeof path, NULL) == SDT_STATUS_OK)
            reply_created(ctx, msg, SERVE_HYPERNETWORKS, path);
        else {
            serve_trainer_error(&t, sentence, sizeof sentence);
            reply_failure(msg, sentence, hypernetwork_fields, G_N_ELEMENTS(hypernetwork_fields));
        }
        serve_trainer_close(&t);
    }
    g_free(error);
    cJSON_Delete(form);
}
