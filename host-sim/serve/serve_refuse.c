/* serve_refuse.c - see serve_refuse.h. */
#include <string.h>

#include "serve_refuse.h"
#include "serve_reply.h"

/* How long the unread rest of a refused body is discarded before the connection closes. */
#define DRAIN_SECONDS 2

typedef struct refusal {
    GIOStream *stream;
    GCancellable *cancel; /* cancelled when DRAIN_SECONDS pass */
    guint timeout;
    char *answer;
    char discard[16 * 1024];
} refusal;

static void finish(refusal *r)
{
    if (r->timeout) g_source_remove(r->timeout);
    g_io_stream_close(r->stream, NULL, NULL);
    g_object_unref(r->stream);
    g_object_unref(r->cancel);
    g_free(r->answer);
    g_free(r);
}

static gboolean on_timeout(gpointer data)
{
    refusal *r = data;
    r->timeout = 0;
    g_cancellable_cancel(r->cancel); /* the pending read or write ends, and with it the refusal */
    return G_SOURCE_REMOVE;
}

static void on_read(GObject *source, GAsyncResult *result, gpointer data)
{
    refusal *r = data;
    gssize n = g_input_stream_read_finish(G_INPUT_STREAM(source), result, NULL);
    if (n <= 0) { /* the client closed, an error, or the time is up */
        finish(r);
        return;
    }
    g_input_stream_read_async(g_io_stream_get_input_stream(r->stream), r->discard, sizeof r->discard,
                              G_PRIORITY_DEFAULT, r->cancel, on_read, r);
}

static void on_written(GObject *source, GAsyncResult *result, gpointer data)
{
    refusal *r = data;
    if (!g_output_stream_write_all_finish(G_OUTPUT_STREAM(source), result, NULL, NULL)) {
        finish(r);
        return;
    }
    /* libsoup keeps the socket beside the stream it hands over: the FIN tells the client the answer is whole */
    GSocket *socket = g_object_get_data(G_OBJECT(r->stream), "GSocket");
    if (socket) g_socket_shutdown(socket, FALSE, TRUE, NULL);
    g_input_stream_read_async(g_io_stream_get_input_stream(r->stream), r->discard, sizeof r->discard,
                              G_PRIORITY_DEFAULT, r->cancel, on_read, r);
}

void serve_refuse_unread(SoupServerMessage *msg, guint status, const char *sentence)
{
    char *json = serve_reply_error_text(sentence);
    gboolean head = strcmp(soup_server_message_get_method(msg), "HEAD") == 0; /* its answer has no body */
    GIOStream *stream = soup_server_message_steal_connection(msg);
    if (!stream) {
        g_free(json);
        return;
    }
    refusal *r = g_new0(refusal, 1);
    r->stream = stream;
    r->cancel = g_cancellable_new();
    r->answer = g_strdup_printf(
        "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
        "Cache-Control: no-store\r\nCross-Origin-Resource-Policy: same-origin\r\nConnection: close\r\n\r\n%s",
        status, soup_status_get_phrase(status), strlen(json), head ? "" : json);
    g_free(json);
    r->timeout = g_timeout_add_seconds(DRAIN_SECONDS, on_timeout, r);
    g_output_stream_write_all_async(g_io_stream_get_output_stream(stream), r->answer, strlen(r->answer),
                                    G_PRIORITY_DEFAULT, r->cancel, on_written, r);
}
