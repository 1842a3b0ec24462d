/* serve_reply.c - see serve_reply.h. */
#include <string.h>

#include "serve_reply.h"
#include "host_json.h"

static void reply_text(SoupServerMessage *msg, guint status, char *json_text)
{
    soup_server_message_set_status(msg, status, NULL);
    soup_message_headers_replace(soup_server_message_get_response_headers(msg), "Cache-Control", "no-store");
    soup_server_message_set_response(msg, "application/json", SOUP_MEMORY_TAKE, json_text, strlen(json_text));
}

char *serve_reply_error_text(const char *sentence)
{
    cJSON *json = cJSON_CreateObject();
    cJSON_AddStringToObject(json, "error", sentence);
    char *text = host_json_print(json);
    cJSON_Delete(json);
    char *copy = g_strdup(text);
    cJSON_free(text);
    return copy;
}

void serve_reply_error(SoupServerMessage *msg, guint status, const char *sentence)
{
    reply_text(msg, status, serve_reply_error_text(sentence));
}

void serve_reply_json(SoupServerMessage *msg, cJSON *json)
{
    char *text = host_json_print(json);
    cJSON_Delete(json);
    reply_text(msg, SOUP_STATUS_OK, g_strdup(text ? text : "null"));
    cJSON_free(text);
}

void serve_reply_bytes(SoupServerMessage *msg, const char *content_type, const void *data, size_t n)
{
    soup_server_message_set_status(msg, SOUP_STATUS_OK, NULL);
    soup_server_message_set_response(msg, content_type, SOUP_MEMORY_COPY, data, n);
}
