/* serve_guard.c - token, Host, Origin and body size (see serve_guard.h). */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "serve_guard.h"
#include "serve_refuse.h"
#include "serve_reply.h"

char *serve_guard_new_token(char **error)
{
    guint8 bytes[16];
    size_t got = 0;
    while (got < sizeof bytes) { /* a signal may cut a read short */
        ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            *error = g_strdup_printf("Could not draw a token from the system's random source (getrandom: %s); "
                                     "give one with --token.",
                                     g_strerror(errno));
            return NULL;
        }
        got += (size_t)n;
    }
    GString *token = g_string_new(NULL);
    for (size_t i = 0; i < sizeof bytes; i++) g_string_append_printf(token, "%02x", bytes[i]);
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
    const char *names[] = {"127.0.0.1", "localhost", "[::1]", g->listen_host};
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

/* Whether a body follows the request's headers. */
static gboolean has_body(SoupMessageHeaders *headers)
{
    SoupEncoding encoding = soup_message_headers_get_encoding(headers);
    return encoding == SOUP_ENCODING_CHUNKED ||
           (encoding == SOUP_ENCODING_CONTENT_LENGTH && soup_message_headers_get_content_length(headers) > 0);
}

/* A refusal: one with a body still to come is answered without reading it (serve_refuse.h). */
static void refuse(SoupServerMessage *msg, guint status, const char *sentence)
{
    if (has_body(soup_server_message_get_request_headers(msg)))
        serve_refuse_unread(msg, status, sentence);
    else
        serve_reply_error(msg, status, sentence);
}

static char *too_large(goffset length)
{
    return g_strdup_printf("The request body is %s%" G_GOFFSET_FORMAT " bytes; the panel takes at most %d.",
                           length > SERVE_BODY_LIMIT ? "" : "over ", length, SERVE_BODY_LIMIT);
}

/* A body without a length (chunked) is counted while it is read: past the limit, it is refused. */
static void on_chunk(SoupServerMessage *msg, GBytes *chunk, gpointer data)
{
    (void)chunk, (void)data;
    goffset length = soup_server_message_get_request_body(msg)->length;
    if (length <= SERVE_BODY_LIMIT) return;
    char *sentence = too_large(length);
    serve_refuse_unread(msg, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, sentence);
    g_free(sentence);
}

static void early_handler(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                          gpointer data)
{
    (void)server, (void)path, (void)query;
    const serve_guard *g = data;
    SoupMessageHeaders *headers = soup_server_message_get_request_headers(msg);
    const char *method = soup_server_message_get_method(msg);
    /* No other site's page may embed an answer (an <img> of a preview, a script of the API). */
    soup_message_headers_replace(soup_server_message_get_response_headers(msg), "Cross-Origin-Resource-Policy",
                                 "same-origin");
    if (!host_allowed(g, soup_message_headers_get_one(headers, "Host"))) {
        refuse(msg, SOUP_STATUS_FORBIDDEN,
               "This panel answers only to 127.0.0.1 or localhost; open it at that address.");
        return;
    }
    if (g->token) {
        char *given = g_strdup(soup_message_headers_get_one(headers, "X-SDT-Token"));
        if (!given) given = query_value(soup_server_message_get_uri(msg), "token");
        gboolean ok = same_secret(given, g->token);
        g_free(given);
        if (!ok) {
            refuse(msg, SOUP_STATUS_UNAUTHORIZED,
                   "This panel needs its token: open the address sdt-host serve printed (it ends in ?token=...).");
            return;
        }
    }
    if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0) {
        if (has_body(headers)) {
            char *sentence = g_strdup_printf("A %s request carries no body; send it without one.", method);
            refuse(msg, SOUP_STATUS_BAD_REQUEST, sentence);
            g_free(sentence);
        }
        return;
    }
    if (strcmp(method, "POST") != 0) {
        refuse(msg, SOUP_STATUS_METHOD_NOT_ALLOWED, "The panel takes GET and POST requests only.");
        return;
    }
    if (!serve_guard_origin_allowed(soup_message_headers_get_one(headers, "Origin"),
                                    soup_message_headers_get_one(headers, "Host"))) {
        refuse(msg, SOUP_STATUS_FORBIDDEN,
               "This request came from another web site's page (its Origin is not this panel's); refused.");
        return;
    }
    goffset length = soup_message_headers_get_encoding(headers) == SOUP_ENCODING_CONTENT_LENGTH
                         ? soup_message_headers_get_content_length(headers)
                         : 0;
    if (length > SERVE_BODY_LIMIT) {
        char *sentence = too_large(length);
        refuse(msg, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, sentence);
        g_free(sentence);
        return;
    }
    g_signal_connect(msg, "got-chunk", G_CALLBACK(on_chunk), NULL);
}

void serve_guard_install(SoupServer *server, const char *path, serve_guard *guard)
{
    soup_server_add_early_handler(server, path, early_handler, guard, NULL);
}
