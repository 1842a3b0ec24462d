/* launch.c - see launch.h. */
#include <errno.h>
#include <glib-unix.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "launch.h"
#include "rendezvous.h"

typedef struct launcher launcher;

/* A rank's stdout or stderr, forwarded line by line with its prefix (ranks 1..; rank 0 writes to
 * ours directly). */
typedef struct rank_stream {
    launcher *l;
    int rank;
    int fd;
    FILE *to;
    GString *partial;
} rank_stream;

typedef struct rank_proc {
    launcher *l;
    int rank;
    int gpu;
    GPid pid;
    gboolean exited;
    int wait_status;
    rank_stream streams[2];
} rank_proc;

struct launcher {
    rank_proc *ranks;
    int count;
    int live;         /* ranks not yet exited */
    int open_streams; /* pipes not yet at their end */
    GMainLoop *loop;
    int failed_rank;       /* the first rank that failed on its own, -1: none */
    int stop_signal;       /* the first stop signal the user sent, 0: none */
    gboolean start_failed; /* a rank could not start: the others are being stopped */
    guint kill_timer;
};

static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define LONGEST_LINE 65536 /* bytes of a rank's line kept before it is shown anyway */

static void quit_when_done(launcher *l)
{
    if (l->live == 0 && l->open_streams == 0) g_main_loop_quit(l->loop);
}

/* One line of a rank; on a terminal it first clears the line rank 0's progress bar is drawn on (rank 0
 * redraws it within a moment). */
static void write_line(const rank_stream *s, const char *text, int n)
{
    fprintf(s->to, "%s[rank %d] %.*s\n", isatty(fileno(s->to)) ? "\r\033[K" : "", s->rank, n, text);
}

static void write_lines(rank_stream *s, gboolean flush)
{
    char *start = s->partial->str, *end;
    while ((end = strpbrk(start, "\n\r"))) {
        if (end > start) write_line(s, start, (int)(end - start));
        start = end + 1;
    }
    if (flush && *start) write_line(s, start, (int)strlen(start)), start += strlen(start);
    g_string_erase(s->partial, 0, start - s->partial->str);
    fflush(s->to);
}

static gboolean on_output(gint fd, GIOCondition condition, gpointer data)
{
    (void)condition;
    rank_stream *s = data;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return G_SOURCE_CONTINUE;
    if (n > 0) {
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] == '\0') buf[i] = '?'; /* a line is text: a NUL would hide the rest */
        g_string_append_len(s->partial, buf, n);
        write_lines(s, s->partial->len > LONGEST_LINE); /* a line that never ends is shown in pieces */
        return G_SOURCE_CONTINUE;
    }
    write_lines(s, TRUE);
    close(fd);
    s->fd = -1;
    s->l->open_streams--;
    quit_when_done(s->l);
    return G_SOURCE_REMOVE;
}

static void signal_ranks(launcher *l, int signo)
{
    for (int r = 0; r < l->count; r++)
        if (!l->ranks[r].exited) kill(l->ranks[r].pid, signo);
}

static gboolean kill_stragglers(gpointer data)
{
    launcher *l = data;
    l->kill_timer = 0;
    signal_ranks(l, SIGKILL);
    return G_SOURCE_REMOVE;
}

static gboolean exited_well(int wait_status)
{
    return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
}

static void on_rank_exit(GPid pid, gint wait_status, gpointer data)
{
    rank_proc *p = data;
    launcher *l = p->l;
    g_spawn_close_pid(pid);
    p->exited = TRUE;
    p->wait_status = wait_status;
    l->live--;
    if (!exited_well(wait_status) && l->failed_rank < 0 && !l->stop_signal && !l->start_failed) {
        /* One rank gone stops the job: the others would wait for it at the next all-reduce. */
        l->failed_rank = p->rank;
        signal_ranks(l, SIGTERM);
        l->kill_timer = g_timeout_add_seconds(LAUNCH_STOP_GRACE_SECONDS, kill_stragglers, l);
    }
    quit_when_done(l);
}

/* Ctrl-C (and SIGTERM, SIGHUP) is every rank's Interrupt button: forwarded as it came, so a second
 * one quits them at once as it would quit one sdt-host. */
static gboolean on_stop_signal(gpointer data)
{
    launcher *l = ((void **)data)[0];
    int signo = GPOINTER_TO_INT(((void **)data)[1]);
    if (!l->stop_signal && l->failed_rank < 0 && !l->start_failed) l->stop_signal = signo;
    signal_ranks(l, signo);
    return G_SOURCE_CONTINUE;
}

/* In the child, before exec: a rank outlives no launcher killed outright (SIGKILL cannot be
 * forwarded), it gets SIGTERM, its Interrupt button. */
static void child_setup(gpointer data)
{
    (void)data;
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGTERM);
#endif
}

static char *failure_sentence(const launcher *l)
{
    const rank_proc *p = &l->ranks[l->failed_rank];
    int w = p->wait_status;
    char *how = WIFSIGNALED(w) ? g_strdup_printf("was killed by signal %d (%s)", WTERMSIG(w), g_strsignal(WTERMSIG(w)))
                               : g_strdup_printf("exited with status %d", WIFEXITED(w) ? WEXITSTATUS(w) : w);
    char *sentence = g_strdup_printf(
        "Rank %d (GPU %d) %s, so every other rank was stopped (SIGTERM, then SIGKILL after %d s); %s "
        "Resume from the last state rank 0 saved (--resume).",
        p->rank, p->gpu, how, LAUNCH_STOP_GRACE_SECONDS,
        p->rank == 0 ? "its own message is above." : "its own message is above, in the lines marked with its rank.");
    g_free(how);
    return sentence;
}

static gboolean spawn_rank(launcher *l, const char *const *argv, const char *exe, uint16_t port, int r, char **error)
{
    rank_proc *p = &l->ranks[r];
    GPtrArray *args = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(args, g_strdup(exe));
    for (int i = 0; argv[i]; i++) g_ptr_array_add(args, g_strdup(argv[i]));
    g_ptr_array_add(args, g_strdup("--gpus="));
    g_ptr_array_add(args, g_strdup_printf("--device=cuda:%d", p->gpu));
    g_ptr_array_add(args, NULL);
    char **env = g_get_environ();
    char number[32];
    g_snprintf(number, sizeof number, "%d", r);
    env = g_environ_setenv(env, "RANK", number, TRUE);
    env = g_environ_setenv(env, "LOCAL_RANK", number, TRUE);
    g_snprintf(number, sizeof number, "%d", l->count);
    env = g_environ_setenv(env, "WORLD_SIZE", number, TRUE);
    env = g_environ_setenv(env, "LOCAL_WORLD_SIZE", number, TRUE);
    env = g_environ_setenv(env, "MASTER_ADDR", "127.0.0.1", TRUE);
    g_snprintf(number, sizeof number, "%u", (unsigned)port);
    env = g_environ_setenv(env, "MASTER_PORT", number, TRUE);
    int out = -1, err = -1;
    GError *gerr = NULL;
    gboolean ok = g_spawn_async_with_pipes(NULL, (char **)args->pdata, env, G_SPAWN_DO_NOT_REAP_CHILD, child_setup,
                                           NULL, &p->pid, NULL, r == 0 ? NULL : &out, r == 0 ? NULL : &err, &gerr);
    g_strfreev(env);
    g_ptr_array_unref(args);
    if (!ok) {
        *error = g_strdup_printf("Could not start rank %d (GPU %d) as %s: %s.", r, p->gpu, exe, gerr->message);
        g_clear_error(&gerr);
        return FALSE;
    }
    l->live++;
    g_child_watch_add(p->pid, on_rank_exit, p);
    int fds[2] = {out, err};
    for (int k = 0; k < 2; k++) {
        rank_stream *s = &p->streams[k];
        *s = (rank_stream){l, r, fds[k], k == 0 ? stdout : stderr, g_string_new(NULL)};
        if (fds[k] < 0) continue;
        l->open_streams++;
        g_unix_fd_add(fds[k], G_IO_IN | G_IO_HUP | G_IO_ERR, on_output, s);
    }
    return TRUE;
}

int launch_ranks(const char *const *argv, const int32_t *gpus, int32_t count)
{
    char *error = NULL;
    char *exe = g_file_read_link("/proc/self/exe", NULL);
    uint16_t port = exe ? rendezvous_free_port(&error) : 0;
    if (!exe || !port) {
        fprintf(stderr, "sdt-host: %s\n",
                error ? error : "Could not find sdt-host's own program (/proc/self/exe) to start the ranks.");
        g_free(error);
        g_free(exe);
        return 1;
    }
    launcher l;
    memset(&l, 0, sizeof l);
    l.count = count;
    l.failed_rank = -1;
    l.ranks = g_new0(rank_proc, count);
    l.loop = g_main_loop_new(NULL, FALSE);
    void *signal_data[G_N_ELEMENTS(stop_signals)][2];
    guint signal_ids[G_N_ELEMENTS(stop_signals)];
    for (size_t i = 0; i < G_N_ELEMENTS(stop_signals); i++) {
        signal_data[i][0] = &l;
        signal_data[i][1] = GINT_TO_POINTER(stop_signals[i]);
        signal_ids[i] = g_unix_signal_add(stop_signals[i], on_stop_signal, signal_data[i]);
    }
    fprintf(stderr, "Data-parallel training on GPUs");
    for (int r = 0; r < count; r++) fprintf(stderr, "%s%d", r ? ", " : " ", gpus[r]);
    fprintf(stderr, ": one process per GPU (ranks 0 to %d; rank 0's output below, the others' marked [rank N]).\n",
            count - 1);
    gboolean started = TRUE;
    for (int r = 0; r < count && started; r++) {
        l.ranks[r] = (rank_proc){&l, r, gpus[r], 0, FALSE, 0, {{0}}};
        started = spawn_rank(&l, argv, exe, port, r, &error);
    }
    if (!started) {
        l.start_failed = TRUE;
        signal_ranks(&l, SIGTERM);
        l.kill_timer = g_timeout_add_seconds(LAUNCH_STOP_GRACE_SECONDS, kill_stragglers, &l);
    }
    if (l.live > 0 || l.open_streams > 0) g_main_loop_run(l.loop);
    if (l.kill_timer) g_source_remove(l.kill_timer);
    for (size_t i = 0; i < G_N_ELEMENTS(stop_signals); i++) g_source_remove(signal_ids[i]);
    gboolean all_well = started;
    for (int r = 0; r < count; r++) {
        all_well = all_well && l.ranks[r].exited && exited_well(l.ranks[r].wait_status);
        for (int k = 0; k < 2; k++)
            if (l.ranks[r].streams[k].partial) g_string_free(l.ranks[r].streams[k].partial, TRUE);
    }
    int status = 0;
    if (!all_well) {
        char *sentence = !started ? g_strdup(error) : l.failed_rank >= 0 ? failure_sentence(&l) : NULL;
        if (sentence) fprintf(stderr, "sdt-host: %s\n", sentence);
        status = sentence || !l.stop_signal ? 1 : 128 + l.stop_signal;
        g_free(sentence);
    }
    g_main_loop_unref(l.loop);
    g_free(l.ranks);
    g_free(exe);
    g_free(error);
    return status;
}
