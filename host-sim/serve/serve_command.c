/* serve_command.c - `sdt-host serve`: the Train tab in a browser. The GLib main loop serves
 * requests (libsoup); each training runs on its own worker thread (serve_runs.c). */
#include <glib-unix.h>
#include <stdio.h>
#include <string.h>

#include "cli_common.h"
#include "commands.h"
#include "exit_codes.h"
#include "serve_context.h"

#define DEFAULT_PORT 7861 /* beside A1111's 7860 */

static gboolean on_stop(gpointer loop)
{
    g_main_loop_quit(loop);
    return G_SOURCE_CONTINUE; /* removed by cmd_serve */
}

static gboolean is_loopback(const char *address)
{
    GInetAddress *a = g_inet_address_new_from_string(address);
    gboolean yes = a && g_inet_address_get_is_loopback(a);
    if (a) g_object_unref(a);
    return yes;
}

/* Listens on address:port; FALSE with a sentence. */
static gboolean listen_on(SoupServer *server, const char *address, guint port, char **error)
{
    GInetAddress *a = g_inet_address_new_from_string(address);
    if (!a) {
        *error = g_strdup_printf("--listen %s is not an IP address (e.g. 127.0.0.1, 0.0.0.0 or ::).", address);
        return FALSE;
    }
    GSocketAddress *socket_address = g_inet_socket_address_new(a, port);
    GError *gerr = NULL;
    gboolean ok = soup_server_listen(server, socket_address, 0, &gerr);
    if (!ok) {
        *error =
            g_strdup_printf("Could not listen on %s port %u (%s); pick another --port.", address, port, gerr->message);
        g_clear_error(&gerr);
    }
    g_object_unref(socket_address);
    g_object_unref(a);
    return ok;
}

/* The port the server got (for --port 0). */
static guint bound_port(SoupServer *server)
{
    GSList *uris = soup_server_get_uris(server);
    guint port = uris ? (guint)g_uri_get_port(uris->data) : 0;
    g_slist_free_full(uris, (GDestroyNotify)g_uri_unref);
    return port;
}

int cmd_serve(int argc, char **argv)
{
    char *given[SERVE_N_ROOTS] = {NULL};
    char *webui = NULL, *listen = NULL, *token = NULL, *plugin = NULL, *port_text = NULL;
    GOptionEntry entries[] = {
        {"models", 0, 0, G_OPTION_ARG_FILENAME, &given[SERVE_MODELS],
         "Folder of Stable Diffusion checkpoints and diffusers folders", "DIR"},
        {"datasets", 0, 0, G_OPTION_ARG_FILENAME, &given[SERVE_DATASETS], "Folder whose sub-folders are datasets",
         "DIR"},
        {"embeddings", 0, 0, G_OPTION_ARG_FILENAME, &given[SERVE_EMBEDDINGS],
         "Folder of embeddings (created and trained here; made if missing)", "DIR"},
        {"hypernetworks", 0, 0, G_OPTION_ARG_FILENAME, &given[SERVE_HYPERNETWORKS],
         "Folder of hypernetworks (made if missing)", "DIR"},
        {"log-dir", 0, 0, G_OPTION_ARG_FILENAME, &given[SERVE_LOGS],
         "Log folder runs write to, DIR/<date>/<name>/ (made if missing)", "DIR"},
        {"webui", 0, 0, G_OPTION_ARG_FILENAME, &webui,
         "An A1111 folder: the folders not given are its models/Stable-diffusion, datasets, embeddings, models/hypernetworks and textual_inversion",
         "DIR"},
        {"listen", 0, 0, G_OPTION_ARG_STRING, &listen,
         "Address to listen on (default 127.0.0.1; any other needs a token)", "ADDR"},
        {"port", 0, 0, G_OPTION_ARG_STRING, &port_text, "Port (default 7861; 0 = any free port)", "N"},
        {"token", 0, 0, G_OPTION_ARG_STRING, &token,
         "Secret every request must carry (default: none on 127.0.0.1; generated and printed for another --listen)",
         "TEXT"},
        CLI_PLUGIN_OPTION(plugin),
        {NULL, 0, 0, 0, NULL, NULL, NULL}};
    GOptionContext *octx = g_option_context_new("- the training panel in a browser (A1111's Train tab)");
    g_option_context_set_description(
        octx, "Serves a local web page to create and train embeddings and hypernetworks through libsdtrain.so, with\n"
              "live progress, previews, Interrupt and Resume, and the runs of the log folder. Every file the page\n"
              "names must lie inside the folders given here. Open the address it prints; Ctrl-C stops it (runs going\n"
              "are interrupted and saved first).\n");
    g_option_context_add_main_entries(octx, entries, NULL);
    serve_context ctx;
    memset(&ctx, 0, sizeof ctx);
    char *error = NULL;
    guint64 port = DEFAULT_PORT;
    int status = SDT_EXIT_OK;
    const char *address = listen ? listen : "127.0.0.1";
    if (!cli_parse(octx, "serve", &argc, &argv))
        status = SDT_EXIT_USAGE;
    else if (argc > 1)
        status = cli_usage_error("serve", "unexpected argument; every input is an --option.");
    else if (port_text && !g_ascii_string_to_unsigned(port_text, 10, 0, 65535, &port, NULL))
        status = cli_usage_error("serve", "--port must be a whole number from 0 to 65535.");
    else if (token && strlen(token) < 8)
        status = cli_usage_error("serve", "--token must be at least 8 characters.");
    else if (!serve_folders_init(&ctx.folders, given, webui, &error))
        status = cli_usage_error("serve", error);
    else if (!host_plugin_open(&ctx.plugin, plugin, &error))
        status = cli_error(error);
    if (status != SDT_EXIT_OK) goto done;

    address = listen ? listen : "127.0.0.1";
    ctx.guard.loopback = is_loopback(address);
    ctx.guard.token = token ? g_strdup(token) : ctx.guard.loopback ? NULL : serve_guard_new_token(&error);
    ctx.guard.listen_host = g_strdup(address);
    if (error) {
        status = cli_error(error);
        goto done;
    }
    SoupServer *server = soup_server_new("server-header", "sdt-host-serve", NULL);
    ctx.events = serve_events_new();
    ctx.runs = serve_runs_new(&ctx.plugin, ctx.events, &ctx.folders);
    serve_api_install(server, &ctx);
    if (!listen_on(server, address, (guint)port, &error))
        status = cli_error(error);
    else {
        ctx.guard.port = bound_port(server);
        /* Stop signals are handled before the address is printed: a script that reads the address and
         * sends Ctrl-C at once must stop the panel (a background job starts with SIGINT ignored). A
         * closed terminal (SIGHUP) stops it as `train` stops: the runs going save first. */
        GMainLoop *loop = g_main_loop_new(NULL, FALSE);
        guint stops[] = {g_unix_signal_add(SIGINT, on_stop, loop), g_unix_signal_add(SIGTERM, on_stop, loop),
                         g_unix_signal_add(SIGHUP, on_stop, loop)};
        const char *shown = strchr(address, ':') ? g_strdup_printf("[%s]", address) : g_strdup(address);
        /* the address it listens on, as given: 127.0.0.2 or ::1 is not reachable at 127.0.0.1 */
        printf("sdt-host serve: open http://%s:%u/%s%s\n", shown, ctx.guard.port, ctx.guard.token ? "?token=" : "",
               ctx.guard.token ? ctx.guard.token : "");
        printf("Folders: models %s, datasets %s, embeddings %s, hypernetworks %s, logs %s\n",
               ctx.folders.root[SERVE_MODELS], ctx.folders.root[SERVE_DATASETS], ctx.folders.root[SERVE_EMBEDDINGS],
               ctx.folders.root[SERVE_HYPERNETWORKS], ctx.folders.root[SERVE_LOGS]);
        fflush(stdout);
        g_free((char *)shown);
        g_main_loop_run(loop);
        for (size_t i = 0; i < G_N_ELEMENTS(stops); i++) g_source_remove(stops[i]);
        if (serve_runs_busy(ctx.runs))
            fprintf(stderr, "sdt-host serve: interrupting the runs going; each saves first.\n");
        soup_server_disconnect(server);
        g_main_loop_unref(loop);
    }
    serve_runs_free(ctx.runs);
    serve_events_free(ctx.events);
    g_object_unref(server);
done:
    host_plugin_close(&ctx.plugin);
    serve_folders_clear(&ctx.folders);
    g_free(ctx.guard.token);
    g_free(ctx.guard.listen_host);
    g_option_context_free(octx);
    for (int r = 0; r < SERVE_N_ROOTS; r++) g_free(given[r]);
    g_free(webui), g_free(listen), g_free(token), g_free(plugin), g_free(port_text);
    g_free(error);
    return status;
}
