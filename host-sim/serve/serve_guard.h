/* serve_guard.h - the rules every request passes before a handler sees it (an early handler:
 * they run on the headers, before a body is read): the token when one is set, the Host a
 * browser used (against DNS rebinding of a loopback panel), the Origin of state-changing
 * requests, and the body: none on GET and HEAD, and at most SERVE_BODY_LIMIT bytes, refused by its
 * Content-Length before it is read, or (chunked) while it is read; a refused body is never read
 * (serve_refuse.h). Every answer carries Cross-Origin-Resource-Policy: same-origin. */
#ifndef SDT_SERVE_GUARD_H
#define SDT_SERVE_GUARD_H

#include <glib.h>
#include <libsoup/soup.h>

/* The largest request body: a panel file or a create form (bytes). */
#define SERVE_BODY_LIMIT (64 * 1024)

typedef struct serve_guard {
    char *token;       /* NULL: no token asked (loopback without --token) */
    gboolean loopback; /* listening on loopback only: Host must name it */
    guint port;
    char *listen_host; /* the address given to --listen, as a Host header may name it */
} serve_guard;

/* A random token for --listen beyond loopback without --token (g_free): 32 hex digits from the
 * system's cryptographic source (getrandom); NULL with a sentence when it gives none. */
char *serve_guard_new_token(char **error);

/* Installs the early handler for the route at path (libsoup runs the early handler of the
 * route a request matches, so every route gets one); guard must outlive the server. */
void serve_guard_install(SoupServer *server, const char *path, serve_guard *guard);

/* Whether a POST may change state: no Origin (not a browser), or the page's own (http://<Host>). */
gboolean serve_guard_origin_allowed(const char *origin, const char *host);

#endif
