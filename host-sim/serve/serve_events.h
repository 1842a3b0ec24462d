/* serve_events.h - server-sent events: every client of /api/events gets each event the runs
 * publish, after a replay of the recent ones (so a page opened mid-run draws its loss plot). */
#ifndef SDT_SERVE_EVENTS_H
#define SDT_SERVE_EVENTS_H

#include <cjson/cJSON.h>
#include <libsoup/soup.h>

typedef struct serve_events serve_events;

serve_events *serve_events_new(void);
/* Ends every client's stream. */
void serve_events_free(serve_events *e);

/* [main thread] Turns msg into an event stream that stays open. */
void serve_events_attach(serve_events *e, SoupServerMessage *msg);

/* [main thread] Sends event (a JSON object; freed here) to every client and keeps it for replay. */
void serve_events_publish(serve_events *e, cJSON *event);

#endif
