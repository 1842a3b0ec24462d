/* serve_context.h - what every request handler of the panel reaches: the plugin, the folders,
 * the runs and their events, the guard. One per `sdt-host serve`. */
#ifndef SDT_SERVE_CONTEXT_H
#define SDT_SERVE_CONTEXT_H

#include "plugin_loader.h"
#include "serve_events.h"
#include "serve_folders.h"
#include "serve_guard.h"
#include "serve_runs.h"

typedef struct serve_context {
    host_plugin plugin;
    serve_folders folders;
    serve_guard guard;
    serve_events *events;
    serve_runs *runs;
} serve_context;

/* Registers every route (serve_api.c) on server. */
void serve_api_install(SoupServer *server, serve_context *ctx);

/* The Create tabs' handlers (serve_create.c): POST bodies are JSON objects. */
void serve_create_embedding(serve_context *ctx, SoupServerMessage *msg, const char *body, size_t n);
void serve_create_hypernetwork(serve_context *ctx, SoupServerMessage *msg, const char *body, size_t n);

#endif
