/* serve_refuse.h - refusing a request without reading its body. libsoup reads a request's whole
 * body into memory before it answers, even after an early handler has set an error status, so a
 * refused upload (a 1 TiB Content-Length, an endless chunked body) would still be read. This
 * takes the connection from libsoup, writes the answer itself, closes its sending side, and
 * discards what the client still sends for a moment (so the client reads the answer rather than
 * a reset) before closing: the memory used stays one small buffer. */
#ifndef SDT_SERVE_REFUSE_H
#define SDT_SERVE_REFUSE_H

#include <libsoup/soup.h>

/* Answers msg with status and {"error": sentence}, Connection: close, and ends its connection;
 * msg must not be used afterwards (libsoup has let it go). Call from an early handler or a
 * got-chunk handler. */
void serve_refuse_unread(SoupServerMessage *msg, guint status, const char *sentence);

#endif
