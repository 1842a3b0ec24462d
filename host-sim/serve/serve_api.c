/* serve_api.c - the panel's routes: the page, its setup (folders, lists, the Train tab's
 * options with the plugin's defaults), the events, the runs, files inside the folders, and the
 * actions (create, train, interrupt). serve_guard.c has already checked each request. */
#include <string.h>

#include "file_read.h"
#include "panel_options.h"
#include "serve_context.h"
#include "serve_log_runs.h"
#include "serve_option_groups.h"
#include "serve_page.h"
#include "serve_reply.h"
#include "serve_train_request.h"
#include "serve_trainer.h"
#include "host_json.h"

/* The largest file /api/file serves: previews, CSVs, settings (a model is never asked for). */
#define SERVE_FILE_LIMIT (64 * 1024 * 1024)

static void page(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer data)
{
    (void)server, (void)query, (void)data;
    const serve_page_file *file = serve_page_find(strcmp(path, "/index.html") == 0 ? "/" : path);
    if (!file) {
        serve_reply_error(msg, SOUP_STATUS_NOT_FOUND, "No such page.");
        return;
    }
    SoupMessageHeaders *headers = soup_server_message_get_response_headers(msg);
    /* The page runs only its own scripts and loads nothing from elsewhere. */
    soup_message_headers_replace(
        headers, "Content-Security-Policy",
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'");
    soup_message_headers_replace(headers, "X-Content-Type-Options", "nosniff");
    serve_reply_bytes(msg, file->content_type, file->data, file->size);
}

static cJSON *option_json(size_t i, char **ti_defaults, char **hn_defaults)
{
    panel_option_info info;
    panel_option_describe(i, &info);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", info.name);
    cJSON_AddStringToObject(o, "kind", info.kind);
    cJSON_AddStringToObject(o, "help", info.help);
    if (info.arg) cJSON_AddStringToObject(o, "arg", info.arg);
    cJSON_AddStringToObject(o, "group", serve_option_group(info.name));
    cJSON_AddBoolToObject(o, "embedding", info.embedding);
    cJSON_AddBoolToObject(o, "hypernetwork", info.hypernetwork);
    if (info.folder) cJSON_AddStringToObject(o, "folder", info.folder);
    if (serve_option_picked(info.name)) cJSON_AddStringToObject(o, "picked", serve_option_picked(info.name));
    if (info.folder_list) cJSON_AddBoolToObject(o, "folder_list", TRUE);
    if (info.choices) {
        cJSON *choices = cJSON_AddArrayToObject(o, "choices");
        for (size_t k = 0; info.choices[k]; k++) cJSON_AddItemToArray(choices, cJSON_CreateString(info.choices[k]));
    }
    if (ti_defaults) cJSON_AddStringToObject(o, "default_embedding", ti_defaults[i]);
    if (hn_defaults) cJSON_AddStringToObject(o, "default_hypernetwork", hn_defaults[i]);
    return o;
}

static void setup(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer data)
{
    (void)server, (void)path, (void)query;
    serve_context *ctx = data;
    cJSON *j = cJSON_CreateObject();
    cJSON *folders = cJSON_AddObjectToObject(j, "folders"), *lists = cJSON_AddObjectToObject(j, "lists");
    for (int r = 0; r < SERVE_N_ROOTS; r++) {
        cJSON_AddStringToObject(folders, serve_root_name(r), ctx->folders.root[r]);
        if (r == SERVE_LOGS) continue;
        GPtrArray *names = serve_folders_list(&ctx->folders, r);
        cJSON *list = cJSON_AddArrayToObject(lists, serve_root_name(r));
        for (guint i = 0; i < names->len; i++)
            cJSON_AddItemToArray(list, cJSON_CreateString(g_ptr_array_index(names, i)));
        g_ptr_array_unref(names);
    }
    const sdt_trainer_factory *factory = host_plugin_factory(&ctx->plugin, SDT_FACTORY_TRAINER, NULL);
    panel_defaults defaults = panel_defaults_of(factory);
    char **ti_defaults = factory ? panel_default_values(&defaults, PANEL_EMBEDDING) : NULL;
    char **hn_defaults = factory ? panel_default_values(&defaults, PANEL_HYPERNETWORK) : NULL;
    cJSON *options = cJSON_AddArrayToObject(j, "options");
    for (size_t i = 0; i < panel_option_count(); i++)
        cJSON_AddItemToArray(options, option_json(i, ti_defaults, hn_defaults));
    g_strfreev(ti_defaults);
    g_strfreev(hn_defaults);
    cJSON_AddStringToObject(j, "default_template", PANEL_DEFAULT_TEMPLATE);
    serve_reply_json(msg, j);
}

static void events(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer data)
{
    (void)server, (void)path, (void)query;
    serve_events_attach(((serve_context *)data)->events, msg);
}

static void runs(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer data)
{
    (void)server, (void)path, (void)query;
    serve_context *ctx = data;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToObject(j, "active", serve_runs_json(ctx->runs));
    cJSON_AddItemToObject(j, "logs", serve_log_runs_json(&ctx->folders));
    serve_reply_json(msg, j);
}

static const char *content_type_of(const char *path)
{
    if (g_str_has_suffix(path, ".png")) return "image/png";
    if (g_str_has_suffix(path, ".json")) return "application/json";
    if (g_str_has_suffix(path, ".csv") || g_str_has_suffix(path, ".txt") || g_str_has_suffix(path, ".jsonl"))
        return "text/plain; charset=utf-8";
    return "application/octet-stream";
}

/* GET /api/file?root=logs&path=REL: a file inside a configured folder. */
static void file(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer data)
{
    (void)server, (void)path;
    serve_context *ctx = data;
    const char *root_name = query ? g_hash_table_lookup(query, "root") : NULL;
    const char *relative = query ? g_hash_table_lookup(query, "path") : NULL;
    int root = serve_root_named(root_name);
    if (root < 0 || !relative) {
        serve_reply_error(msg, SOUP_STATUS_BAD_REQUEST,
                          "Name a file with root=logs|embeddings|hypernetworks|... and path=.");
        return;
    }
    char *error = NULL, *why = NULL, *bytes = NULL;
    gsize n = 0;
    char *resolved = serve_folders_resolve(&ctx->folders, root, relative, &error);
    if (!resolved)
        serve_reply_error(msg, SOUP_STATUS_FORBIDDEN, error); /* missing, or outside the folder */
    else if (!g_file_test(resolved, G_FILE_TEST_IS_REGULAR))
        serve_reply_error(msg, SOUP_STATUS_NOT_FOUND, "Not a file.");
    else if (!host_read_file(resolved, SERVE_FILE_LIMIT, &bytes, &n, &why))
        serve_reply_error(msg, SOUP_STATUS_NOT_FOUND, why);
    else {
        soup_server_message_set_status(msg, SOUP_STATUS_OK, NULL);
        soup_message_headers_replace(soup_server_message_get_response_headers(msg), "X-Content-Type-Options",
                                     "nosniff");
        soup_server_message_set_response(msg, content_type_of(resolved), SOUP_MEMORY_TAKE, bytes, n);
        bytes = NULL;
    }
    g_free(bytes);
    g_free(why);
    g_free(error);
    g_free(resolved);
}

/* GET /api/model?path=REL: what the plugin reads from a model of the models folder (its family, text
 * encoder width, the hypernetwork sizes it takes), as `sdt-host inspect --json MODEL` prints it. */
static void model(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer data)
{
    (void)server, (void)path;
    serve_context *ctx = data;
    const char *relative = query ? g_hash_table_lookup(query, "path") : NULL;
    char *error = NULL;
    char *resolved = relative ? serve_folders_resolve(&ctx->folders, SERVE_MODELS, relative, &error) : NULL;
    serve_trainer t;
    if (!relative)
        serve_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "Name a model with path=.");
    else if (!resolved)
        serve_reply_error(msg, SOUP_STATUS_FORBIDDEN, error);
    else if (!serve_trainer_open(&t, &ctx->plugin, SDT_EXT_EMBEDDING_FILES, &error))
        serve_reply_error(msg, SOUP_STATUS_INTERNAL_SERVER_ERROR, error);
    else {
        const sdt_embedding_files_ext *files = t.extension;
        sdt_trainer *trainer = t.trainer;
        char sentence[1024] = "";
        uint32_t size = 64 * 1024, needed = 0;
        char *json = g_malloc0(size);
        sdt_status st = files->inspect(trainer, resolved, NULL, json, size, &needed);
        if (st == SDT_STATUS_BUFFER_TOO_SMALL && needed > size) {
            g_free(json);
            json = g_malloc0(needed);
            st = files->inspect(trainer, resolved, NULL, json, needed, NULL);
        }
        if (st == SDT_STATUS_OK) {
            soup_server_message_set_status(msg, SOUP_STATUS_OK, NULL);
            soup_server_message_set_response(msg, "application/json", SOUP_MEMORY_TAKE, json, strlen(json));
            json = NULL;
        } else {
            serve_trainer_error(&t, sentence, sizeof sentence);
            serve_reply_error(msg, SOUP_STATUS_UNPROCESSABLE_ENTITY, sentence);
        }
        g_free(json);
        serve_trainer_close(&t);
    }
    g_free(resolved);
    g_free(error);
}

/* The body of a POST, or NULL after replying (a GET to a POST route). */
static const char *post_body(SoupServerMessage *msg, size_t *n)
{
    if (strcmp(soup_server_message_get_method(msg), "POST") != 0) {
        serve_reply_error(msg, SOUP_STATUS_METHOD_NOT_ALLOWED, "This action is a POST.");
        return NULL;
    }
    SoupMessageBody *body = soup_server_message_get_request_body(msg);
    GBytes *bytes = soup_message_body_flatten(body);
    g_bytes_unref(bytes); /* the body keeps its own flattened copy */
    *n = (size_t)body->length;
    return body->data ? body->data : "";
}

static void create_embedding(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                             gpointer data)
{
    (void)server, (void)path, (void)query;
    size_t n;
    const char *body = post_body(msg, &n);
    if (body) serve_create_embedding(data, msg, body, n);
}

static void create_hypernetwork(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                                gpointer data)
{
    (void)server, (void)path, (void)query;
    size_t n;
    const char *body = post_body(msg, &n);
    if (body) serve_create_hypernetwork(data, msg, body, n);
}

/* POST /api/train: the body is a panel file ([train] keys, as `sdt-host train --config` reads). */
static void train(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer data)
{
    (void)server, (void)path, (void)query;
    serve_context *ctx = data;
    size_t n;
    const char *body = post_body(msg, &n);
    if (!body) return;
    char *error = NULL;
    char *checked = serve_train_request_check(&ctx->folders, body, n, &error);
    int id = checked ? serve_runs_start(ctx->runs, checked, strlen(checked), &error) : 0;
    if (id > 0) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "run", id);
        serve_reply_json(msg, j);
    } else {
        serve_reply_error(msg, checked ? SOUP_STATUS_UNPROCESSABLE_ENTITY : SOUP_STATUS_FORBIDDEN, error);
    }
    g_free(checked);
    g_free(error);
}

/* POST /api/interrupt {"run": ID} */
static void interrupt(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer data)
{
    (void)server, (void)path, (void)query;
    serve_context *ctx = data;
    size_t n;
    const char *body = post_body(msg, &n);
    if (!body) return;
    cJSON *form = host_json_parse(body, n);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(form, "run");
    char *error = NULL;
    if (!cJSON_IsNumber(id))
        serve_reply_error(msg, SOUP_STATUS_BAD_REQUEST, "Name the run to interrupt: {\"run\": ID}.");
    else if (!serve_runs_interrupt(ctx->runs, id->valueint, &error))
        serve_reply_error(msg, SOUP_STATUS_CONFLICT, error);
    else
        serve_reply_json(msg, cJSON_CreateObject());
    g_free(error);
    cJSON_Delete(form);
}

void serve_api_install(SoupServer *server, serve_context *ctx)
{
    static const struct {
        const char *path;
        SoupServerCallback handler;
    } routes[] = {
        {"/", page},
        {"/api/setup", setup},
        {"/api/events", events},
        {"/api/runs", runs},
        {"/api/file", file},
        {"/api/model", model},
        {"/api/create-embedding", create_embedding},
        {"/api/create-hypernetwork", create_hypernetwork},
        {"/api/train", train},
        {"/api/interrupt", interrupt},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(routes); i++) {
        soup_server_add_handler(server, routes[i].path, routes[i].handler, ctx, NULL);
        serve_guard_install(server, routes[i].path, &ctx->guard);
    }
}
