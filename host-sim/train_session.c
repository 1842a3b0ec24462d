/* train_session.c - worker thread, GMainLoop progress and Ctrl-C (see train_session.h). */
#include <glib-unix.h>
#include <glib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli_common.h"
#include "exit_codes.h"
#include "progress_bar.h"
#include "train_session.h"

#define REDRAW_MS 200
#define PLAIN_LINE_EVERY_US (10 * G_USEC_PER_SEC) /* when stderr is not a terminal */

/* Terminal writes come from the worker (log) and the main loop (bar): one at a time. */
static GMutex terminal_lock;

static void clear_bar_line(void)
{
    if (isatty(STDERR_FILENO)) fputs("\r\033[K", stderr);
}

static void on_log(void *user_data, sdt_log_level level, const char *message)
{
    (void)user_data;
    static const char *const names[] = {"debug", "info", "warning", "error"};
    if (level == SDT_LOG_DEBUG && !g_getenv("SDTRAIN_DEBUG")) return;
    char *shown = cli_printable(message);
    g_mutex_lock(&terminal_lock);
    clear_bar_line();
    fprintf(stderr, "%s: %s\n", (unsigned)level < 4 ? names[level] : "log", shown);
    g_mutex_unlock(&terminal_lock);
    g_free(shown);
}

static void on_file_saved(void *user_data, const sdt_saved_file *file)
{
    (void)user_data;
    g_mutex_lock(&terminal_lock);
    clear_bar_line();
    fprintf(stderr, "saved: %s\n", file->path);
    g_mutex_unlock(&terminal_lock);
}

sdt_host_callbacks train_session_callbacks(void)
{
    sdt_host_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.struct_size = sizeof cb;
    cb.log = on_log;
    cb.file_saved = on_file_saved;
    return cb;
}

/* The signals that mean "stop": Ctrl-C, a terminal closed (SIGHUP), docker stop / systemd / kill
 * (SIGTERM). Each is the Interrupt button: the step finishes and everything is saved. */
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define N_STOP_SIGNALS (int)(sizeof stop_signals / sizeof stop_signals[0])
/* A second stop signal sooner than this after the first is the same request delivered twice (a
 * process-group signal from `timeout` or a supervisor reaches the process and its group), not a
 * second press of Ctrl-C. */
#define SAME_REQUEST_US (G_USEC_PER_SEC / 2)

typedef struct session session;
typedef struct stop_source {
    session *s;
    int signo;
    guint id;
} stop_source;

struct session {
    const train_target *target;
    GMainLoop *loop;
    sdt_status result; /* written by the worker before it signals done */
    long long start_step;
    gint64 last_plain_line;
    stop_source stops[N_STOP_SIGNALS];
    int first_signal;       /* the signal that asked to stop (0: none) */
    gint64 first_signal_at; /* monotonic time of it */
    gint running;           /* set by the worker once prepare() succeeded (atomic) */
};

static gboolean worker_done(gpointer data)
{
    g_main_loop_quit(((session *)data)->loop);
    return G_SOURCE_REMOVE;
}

static gpointer worker(gpointer data)
{
    session *s = data;
    sdt_prepare_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    const train_target *t = s->target;
    s->result = t->factory->prepare(t->trainer, t->config, &info);
    if (s->result == SDT_STATUS_OK) {
        s->start_step = info.start_step;
        g_atomic_int_set(&s->running, 1);
        s->result = t->factory->run(t->trainer);
    }
    g_idle_add(worker_done, s);
    return NULL;
}

/* Draws the bar while running; with final, prints the last state once on its own line. */
static void draw_progress(session *s, gboolean final)
{
    sdt_run_state state = SDT_RUN_IDLE;
    if (s->target->rank != 0) return; /* rank 0 shows the job's progress; the others' would repeat it */
    s->target->factory->get_run_state(s->target->trainer, &state);
    if (state != SDT_RUN_RUNNING && !final) return;
    sdt_metrics m;
    memset(&m, 0, sizeof m);
    m.struct_size = sizeof m;
    if (s->target->factory->get_metrics(s->target->trainer, &m) != SDT_STATUS_OK || m.step == 0) return;
    char line[512];
    progress_bar_format(&m, s->start_step, 24, line, sizeof line);
    g_mutex_lock(&terminal_lock);
    if (final) {
        clear_bar_line();
        fprintf(stderr, "%s\n", line);
    } else if (isatty(STDERR_FILENO)) {
        fprintf(stderr, "\r\033[K%s", line);
    } else if (g_get_monotonic_time() - s->last_plain_line >= PLAIN_LINE_EVERY_US) {
        fprintf(stderr, "%s\n", line);
        s->last_plain_line = g_get_monotonic_time();
    }
    fflush(stderr);
    g_mutex_unlock(&terminal_lock);
}

static gboolean redraw(gpointer data)
{
    draw_progress(data, FALSE);
    return G_SOURCE_CONTINUE;
}

static void say(const char *sentence)
{
    g_mutex_lock(&terminal_lock);
    clear_bar_line();
    fprintf(stderr, "%s\n", sentence);
    g_mutex_unlock(&terminal_lock);
}

static const char *signal_name(int signo)
{
    return signo == SIGINT ? "Ctrl-C" : signo == SIGTERM ? "SIGTERM" : signo == SIGHUP ? "SIGHUP" : "a signal";
}

/* 128 + the signal, as a shell reports a program a signal stopped (130 for Ctrl-C). */
static int exit_status_of_signal(int signo)
{
    return 128 + signo;
}

/* The first stop signal is the Interrupt button: in preparation it stops at the next image; while
 * training the current step finishes and everything is saved. A second one a moment later quits
 * at once: saves are atomic, so nothing already saved is damaged; what was trained since the last
 * save is lost, and the user is told so. */
static gboolean on_stop_signal(gpointer data)
{
    stop_source *src = data;
    session *s = src->s;
    gint64 now = g_get_monotonic_time();
    if (!s->first_signal) {
        s->first_signal = src->signo;
        s->first_signal_at = now;
        s->target->factory->interrupt(s->target->trainer);
        char *sentence = g_strdup_printf(g_atomic_int_get(&s->running)
                                             ? "%s: interrupting, finishing the current step and saving (Ctrl-C again "
                                               "quits at once, without saving)."
                                             : "%s: interrupting the preparation (Ctrl-C again quits at once).",
                                         signal_name(src->signo));
        say(sentence);
        g_free(sentence);
        return G_SOURCE_CONTINUE;
    }
    if (now - s->first_signal_at < SAME_REQUEST_US) return G_SOURCE_CONTINUE; /* the same request, delivered twice */
    say(g_atomic_int_get(&s->running)
            ? "Quit at once: this run was not saved since its last save (the state and copies written before are kept)."
            : "Quit at once during preparation: nothing was trained or saved.");
    _exit(exit_status_of_signal(s->first_signal));
    return G_SOURCE_REMOVE;
}

static int exit_status_for(const session *s, train_session_explain_fn explain, const void *explain_data)
{
    if (s->result == SDT_STATUS_OK) return SDT_EXIT_OK;
    if (s->result == SDT_STATUS_INTERRUPTED)
        return s->first_signal ? exit_status_of_signal(s->first_signal) : SDT_EXIT_INTERRUPTED;
    char sentence[2048] = "";
    s->target->factory->get_last_error(s->target->trainer, sentence, sizeof sentence, NULL);
    char *shown = g_strdup(sentence[0] ? sentence : "training failed without a message from the plugin.");
    if (explain) {
        char *explained = explain(explain_data, shown);
        g_free(shown);
        shown = explained;
    }
    int status = cli_error(shown);
    g_free(shown);
    return status;
}

int train_session_run(const train_target *target, train_session_explain_fn explain, const void *explain_data)
{
    session s;
    memset(&s, 0, sizeof s);
    s.target = target;
    s.loop = g_main_loop_new(NULL, FALSE);
    s.result = SDT_STATUS_OK;
    for (int i = 0; i < N_STOP_SIGNALS; i++) {
        s.stops[i] = (stop_source){&s, stop_signals[i], 0};
        s.stops[i].id = g_unix_signal_add(stop_signals[i], on_stop_signal, &s.stops[i]);
    }
    guint timer = g_timeout_add(REDRAW_MS, redraw, &s);
    GThread *thread = g_thread_new("sdt-train", worker, &s);
    g_main_loop_run(s.loop);
    g_thread_join(thread);
    g_source_remove(timer);
    for (int i = 0; i < N_STOP_SIGNALS; i++) g_source_remove(s.stops[i].id);
    draw_progress(&s, TRUE);
    g_main_loop_unref(s.loop);
    int status = exit_status_for(&s, explain, explain_data);
    if (s.result == SDT_STATUS_INTERRUPTED)
        fprintf(stderr, "%s\n",
                !s.running     ? "Interrupted during preparation; nothing was trained or saved."
                : target->rank ? "Interrupted after the step; rank 0 saves the job's training state."
                               : "Interrupted; the training state was saved.");
    return status;
}
