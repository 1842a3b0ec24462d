/* serve_reply.h - how the panel answers: JSON bodies and errors as {"error": sentence}. */
#ifndef SDT_SERVE_REPLY_H
#define SDT_SERVE_REPLY_H

#include <cjson/cJSON.h>
#include <libsoup/soup.h>

/* The JSON text {"error": sentence} (g_free). */
char *serve_reply_error_text(const char *sentence);
/* Sets status and a JSON body {"error": sentence}. */
void serve_reply_error(SoupServerMessage *msg, guint status, const char *sentence);
/* Sets 200 and json as the body; frees json. */
void serve_reply_json(SoupServerMessage *msg, cJSON *json);
/* Sets 200 and the bytes (copied) with the content type. */
void serve_reply_bytes(SoupServerMessage *msg, const char *content_type, const void *data, size_t n);

#endif
