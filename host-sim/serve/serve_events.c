/* serve_events.c - see serve_events.h. */
#include <string.h>

#include "serve_events.h"
#include "host_json.h"

/* Events kept for a client that connects later: a long run's loss plot, the last logs. */
#define REPLAY_LIMIT 20000

/* One event as sent: "id: N\ndata: {...}\n\n". The id lets a page that reconnects (EventSource
 * does so by itself) say what it has seen (Last-Event-ID), so nothing reaches it twice. */
typedef struct sent_event {
    guint64 id;
    char *text;
} sent_event;

static void sent_event_free(gpointer p)
{
    sent_event *e = p;
    g_free(e->text);
    g_free(e);
}

struct serve_events {
    GPtrArray *clients; /* SoupServerMessage, one reference each */
    GQueue replay;      /* sent_event, oldest first */
    guint64 next_id;
    gint64 started; /* ids are "<started>-<n>": a page that saw another run of the panel gets everything */
};

serve_events *serve_events_new(void)
{
    serve_events *e = g_new0(serve_events, 1);
    e->clients = g_ptr_array_new();
    g_queue_init(&e->replay);
    e->started = g_get_real_time();
    return e;
}

static void detach(SoupServerMessage *msg, serve_events *e)
{
    if (g_ptr_array_remove(e->clients, msg)) {
        g_signal_handlers_disconnect_by_data(msg, e);
        g_object_unref(msg);
    }
}

void serve_events_free(serve_events *e)
{
    while (e->clients->len) {
        SoupServerMessage *msg = g_ptr_array_index(e->clients, 0);
        soup_message_body_complete(soup_server_message_get_response_body(msg));
        soup_server_message_unpause(msg);
        detach(msg, e);
    }
    g_ptr_array_unref(e->clients);
    g_queue_clear_full(&e->replay, sent_event_free);
    g_free(e);
}

static void send_text(SoupServerMessage *msg, const char *text)
{
    soup_message_body_append(soup_server_message_get_response_body(msg), SOUP_MEMORY_COPY, text, strlen(text));
    soup_server_message_unpause(msg);
}

void serve_events_attach(serve_events *e, SoupServerMessage *msg)
{
    soup_server_message_set_status(msg, SOUP_STATUS_OK, NULL);
    SoupMessageHeaders *headers = soup_server_message_get_response_headers(msg);
    soup_message_headers_set_content_type(headers, "text/event-stream", NULL);
    soup_message_headers_replace(headers, "Cache-Control", "no-store");
    soup_message_headers_set_encoding(headers, SOUP_ENCODING_CHUNKED);
    const char *last_seen = soup_message_headers_get_one(soup_server_message_get_request_headers(msg), "Last-Event-ID");
    guint64 seen = 0;
    char *prefix = g_strdup_printf("%" G_GINT64_FORMAT "-", e->started);
    if (!last_seen || !g_str_has_prefix(last_seen, prefix) ||
        !g_ascii_string_to_unsigned(last_seen + strlen(prefix), 10, 0, G_MAXUINT64, &seen, NULL))
        seen = 0;
    g_free(prefix);
    GString *backlog = g_string_new(": sdt-host serve\n\n");
    for (GList *l = e->replay.head; l; l = l->next)
        if (((sent_event *)l->data)->id > seen) g_string_append(backlog, ((sent_event *)l->data)->text);
    soup_message_body_append(soup_server_message_get_response_body(msg), SOUP_MEMORY_TAKE, backlog->str, backlog->len);
    g_string_free(backlog, FALSE);
    g_ptr_array_add(e->clients, g_object_ref(msg));
    g_signal_connect(msg, "finished", G_CALLBACK(detach), e);
    g_signal_connect(msg, "disconnected", G_CALLBACK(detach), e);
    soup_server_message_pause(msg);
    soup_server_message_unpause(msg);
}

void serve_events_publish(serve_events *e, cJSON *event)
{
    char *json = host_json_print(event);
    cJSON_Delete(event);
    sent_event *sent = g_new(sent_event, 1);
    sent->id = ++e->next_id;
    sent->text =
        g_strdup_printf("id: %" G_GINT64_FORMAT "-%" G_GUINT64_FORMAT "\ndata: %s\n\n", e->started, sent->id, json);
    cJSON_free(json);
    for (guint i = 0; i < e->clients->len; i++) send_text(g_ptr_array_index(e->clients, i), sent->text);
    g_queue_push_tail(&e->replay, sent);
    while (e->replay.length > REPLAY_LIMIT) sent_event_free(g_queue_pop_head(&e->replay));
}
