/* serve_guard.c - token, Host, Origin and body size (see serve_guard.h). */
#include <string.h>

#include "serve_guard.h"
#include "serve_reply.h"

char *serve_guard_new_token(void)
{
    GString *token = g_string_new(NULL);
    for (int i = 0; i < 4; i++) g_string_append_printf(token, "%08x", g_random_int());
    return g_string_free(token, FALSE);
}

/* Comparison whose time does not depend on where the strings first differ. */
static gboolean same_secret(const char *a, const char *b)
{
    if (!a || !b) return FALSE;
    size_t na = strlen(a), nb = strlen(b);
    unsigned char diff = na != nb;
    for (size_t i = 0; i < na; i++) diff |= (unsigned char)(a[i] ^ b[i % (nb ? nb : 1)]);
    return diff == 0;
}

/* The value of name in a URI's query, or NULL (g_free). */
static char *query_value(GUri *uri, const char *name)
{
    const char *query = g_uri_get_query(uri);
    if (!query) return NULL;
    GHashTable *params = g_uri_parse_params(query, -1, "&", G_URI_PARAMS_NONE, NULL);
    char *value = params ? g_strdup(g_hash_table_lookup(params, name)) : NULL;
    if (params) g_hash_table_unref(params);
    return value;
}

/* Host names a browser uses for a loopback panel: anything else is a rebound DNS name. */
static gboolean host_allowed(const serve_guard *g, const char *host)
{
    if (!g->loopback) return TRUE; /* beyond loopback the token is the guard */
    if (!host) return FALSE;
    const char *names[] = { "127.0.0.1", "localhost", "[::1]", g->listen_host };
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        if (!names[i]) continue;
        size_t n = strlen(names[i]);
        if (g_ascii_strncasecmp(host, names[i], n) == 0 && (host[n] == '\0' || host[n] == ':')) return TRUE;
    }
    return FALSE;
}

gboolean serve_guard_origin_allowed(const char *origin, const char *host)
{
    if (!origin) return TRUE; /* not a browser (curl, a script): a browser always sends Origin on POST */
    if (!host) return FALSE;
    /* The page's own origin is the address the browser opened: http://<Host>. A loopback panel has
     * checked Host already; beyond loopback the token guards, which another site's page cannot know. */
    char *own = g_strdup_printf("http://%s", host);
    gboolean same = g_ascii_strcasecmp(origin, own) == 0;
    g_free(own);
    return same;
}

static void early_handler(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer data)
{
    (void)server, (void)path, (void)query;
    const serve_guard *g = data;
    SoupMessageHeaders *headers = soup_server_message_get_request_headers(msg);
    const char *method = soup_server_message_get_method(msg);
    if (!host_allowed(g, soup_message_headers_get_one(headers, "Host"))) {
        serve_reply_error(msg, SOUP_STATUS_FORBIDDEN, "This panel answers only to 127.0.0.1 or localhost; open it at that address.");
        return;
    }
    if (g->token) {
        char *given = g_strdup(soup_message_headers_get_one(headers, "X-SDT-Token"));
        if (!given) given = query_value(soup_server_message_get_uri(msg), "token");
        gboolean ok = same_secret(given, g->token);
        g_free(given);
        if (!ok) {
            serve_reply_error(msg, SOUP_STATUS_UNAUTHORIZED,
                              "This panel needs its token: open the address sdt-host serve printed (it ends in ?token=...).");
            return;
        }
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        if (strcmp(method, "POST") != 0) {
            serve_reply_error(msg, SOUP_STATUS_METHOD_NOT_ALLOWED, "The panel takes GET and POST requests only.");
            return;
        }
        if (!serve_guard_origin_allowed(soup_message_headers_get_one(headers, "Origin"), soup_message_headers_get_one(headers, "Host"))) {
            serve_reply_error(msg, SOUP_STATUS_FORBIDDEN,
                              "This request came from another web site's page (its Origin is not this panel's); refused.");
            return;
        }
        goffset length = soup_message_headers_get_content_length(headers);
        if (soup_message_headers_get_encoding(headers) != SOUP_ENCODING_CONTENT_LENGTH && soup_message_headers_get_encoding(headers) != SOUP_ENCODING_NONE) {
            serve_reply_error(msg, SOUP_STATUS_LENGTH_REQUIRED, "A request body needs a Content-Length.");
            return;
        }
        if (length > SERVE_BODY_LIMIT) {
            char *sentence = g_strdup_printf("The request body is %" G_GOFFSET_FORMAT " bytes; the panel takes at most %d.",
                                             length, SERVE_BODY_LIMIT);
            serve_reply_error(msg, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, sentence);
            g_free(sentence);
            return;
        }
    }
}

void serve_guard_install(SoupServer *server, const char *path, serve_guard *guard)
{
    soup_server_add_early_handler(server, path, early_handler, guard, NULL);
}
