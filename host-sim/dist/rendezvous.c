/* rendezvous.c - see rendezvous.h. A rank's hello is 24 bytes: "SDTRDV01", world size, rank (big-endian
 * u32 each) and the fingerprint (u64); rank 0 answers 0 and the id, or 1, a u16 length and a sentence. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include "rendezvous.h"

#define HELLO_MAGIC "SDTRDV01"
#define HELLO_BYTES 24
#define HELLO_WAIT_MS 5000    /* a rank says its hello as soon as it connects */
#define CONNECT_TRY_MS 2000   /* one connection attempt */
#define RETRY_PAUSE_US 200000 /* between attempts while rank 0 is not listening yet */
#define MAX_NOTES 4           /* refused connections named in a sentence */

struct rendezvous_listener {
    int fd;
    char *where; /* "addr:port" for sentences */
};

static gint64 now_ms(void)
{
    return g_get_monotonic_time() / 1000;
}

static void put_u32(uint8_t *p, uint32_t x)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(x >> (24 - 8 * i));
}
static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static void put_u64(uint8_t *p, uint64_t x)
{
    put_u32(p, (uint32_t)(x >> 32));
    put_u32(p + 4, (uint32_t)x);
}
static uint64_t get_u64(const uint8_t *p)
{
    return (uint64_t)get_u32(p) << 32 | get_u32(p + 4);
}

/* Reads up to n bytes before deadline (monotonic ms); returns how many came. *closed: the peer
 * closed (or the connection failed) rather than the time running out. */
static size_t read_until(int fd, uint8_t *buf, size_t n, gint64 deadline, gboolean *closed)
{
    size_t got = 0;
    *closed = FALSE;
    while (got < n) {
        gint64 left = deadline - now_ms();
        if (left <= 0) break;
        struct pollfd p = {fd, POLLIN, 0};
        int rc = poll(&p, 1, (int)MIN(left, INT_MAX));
        if (rc < 0 && errno == EINTR) continue;
        if (rc <= 0) break;
        ssize_t r = recv(fd, buf + got, n - got, 0);
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (r <= 0) {
            *closed = TRUE;
            break;
        }
        got += (size_t)r;
    }
    return got;
}

/* Writes all of buf; MSG_NOSIGNAL: a peer gone is an error here, never SIGPIPE for the process. */
static gboolean write_all(int fd, const uint8_t *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return FALSE;
        buf += w;
        n -= (size_t)w;
    }
    return TRUE;
}

static void send_refusal(int fd, const char *sentence)
{
    size_t n = MIN(strlen(sentence), 65535);
    uint8_t *msg = g_malloc(3 + n);
    msg[0] = 1;
    msg[1] = (uint8_t)(n >> 8);
    msg[2] = (uint8_t)n;
    memcpy(msg + 3, sentence, n);
    write_all(fd, msg, 3 + n);
    g_free(msg);
}

static gboolean is_loopback(const struct sockaddr *a)
{
    if (a->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)(const void *)a)->sin_addr.s_addr) >> 24) == 127;
    if (a->sa_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)(const void *)a)->sin6_addr);
    return FALSE;
}

static struct addrinfo *resolve(const char *addr, uint16_t port, char **error)
{
    struct addrinfo hints, *found = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    char service[8];
    g_snprintf(service, sizeof service, "%u", (unsigned)port);
    int rc = getaddrinfo(addr, service, &hints, &found);
    if (rc != 0) {
        *error = g_strdup_printf("The rendezvous address %s (MASTER_ADDR) does not resolve (%s); set it to rank 0's "
                                 "machine's address or host name.",
                                 addr, gai_strerror(rc));
        return NULL;
    }
    return found;
}

rendezvous_listener *rendezvous_listen(const char *addr, uint16_t port, char **error)
{
    struct addrinfo *found = resolve(addr, port, error);
    if (!found) return NULL;
    struct sockaddr_storage bind_to;
    socklen_t bind_len = (socklen_t)found->ai_addrlen;
    memcpy(&bind_to, found->ai_addr, found->ai_addrlen);
    int family = found->ai_family;
    freeaddrinfo(found);
    /* Another machine reaches rank 0 through whichever interface MASTER_ADDR names from there: listen
     * on all of them, unless the job is this machine's alone (a loopback address). */
    if (!is_loopback((struct sockaddr *)&bind_to)) {
        if (family == AF_INET)
            ((struct sockaddr_in *)&bind_to)->sin_addr.s_addr = htonl(INADDR_ANY);
        else if (family == AF_INET6)
            ((struct sockaddr_in6 *)&bind_to)->sin6_addr = in6addr_any;
    }
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int on = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
        bind(fd, (struct sockaddr *)&bind_to, bind_len) != 0 || listen(fd, 128) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        if (e == EADDRINUSE)
            *error = g_strdup_printf("Port %u on %s (MASTER_PORT) is in use, by another job's rank 0 or another "
                                     "program; pick another MASTER_PORT, the same for every rank.",
                                     (unsigned)port, addr);
        else
            *error = g_strdup_printf("Rank 0 could not listen on %s:%u (MASTER_ADDR:MASTER_PORT) for the other ranks "
                                     "(%s); use an address of this machine and a free port.",
                                     addr, (unsigned)port, g_strerror(e));
        return NULL;
    }
    rendezvous_listener *l = g_new0(rendezvous_listener, 1);
    l->fd = fd;
    l->where = g_strdup_printf("%s:%u", addr, (unsigned)port);
    return l;
}

void rendezvous_listener_free(rendezvous_listener *l)
{
    if (!l) return;
    close(l->fd);
    g_free(l->where);
    g_free(l);
}

/* Checks one connection's hello; the rank it joins as, or -1 after refusing it (a note for the
 * sentence in *note). */
static int32_t admit(int fd, const rendezvous_job *job, int *ranks, gint64 deadline, char **note)
{
    uint8_t hello[HELLO_BYTES];
    gboolean closed = FALSE;
    size_t got = read_until(fd, hello, sizeof hello, MIN(deadline, now_ms() + HELLO_WAIT_MS), &closed);
    if (got < sizeof hello) {
        *note = g_strdup_printf("a connection that sent %zu of the %d bytes a rank sends and %s", got, HELLO_BYTES,
                                closed ? "closed" : "went silent");
        return -1;
    }
    char *refusal = NULL;
    int32_t world = (int32_t)get_u32(hello + 8), rank = (int32_t)get_u32(hello + 12);
    if (memcmp(hello, HELLO_MAGIC, 8) != 0) {
        refusal =
            g_strdup("this port is the rendezvous of an sdt-host data-parallel job; only its ranks connect here.");
        *note = g_strdup("a connection that is not an sdt-host rank");
    } else if (world != job->world_size) {
        refusal = g_strdup_printf("rank %d says WORLD_SIZE=%d, but this job has WORLD_SIZE=%d; start every rank with "
                                  "the same WORLD_SIZE.",
                                  rank, world, job->world_size);
        *note = g_strdup_printf("a rank %d with WORLD_SIZE=%d", rank, world);
    } else if (get_u64(hello + 16) != job->fingerprint) {
        refusal = g_strdup_printf("rank %d's options differ from rank 0's (a rank of another job, or this job started "
                                  "with other options); start every rank with the same command and panel file.",
                                  rank);
        *note = g_strdup_printf("a rank %d of another job (its options differ)", rank);
    } else if (rank < 1 || rank >= world) {
        refusal = g_strdup_printf("rank %d cannot join: ranks 1 to %d join rank 0; set RANK to this process's rank.",
                                  rank, world - 1);
        *note = g_strdup_printf("a rank %d", rank);
    } else if (ranks[rank] >= 0) {
        refusal = g_strdup_printf("rank %d has already joined; give each process its own RANK.", rank);
        *note = g_strdup_printf("a second rank %d", rank);
    }
    if (refusal) {
        send_refusal(fd, refusal);
        g_free(refusal);
        return -1;
    }
    return rank;
}

/* "1, 2 and 5" of the ranks not yet joined (at most a few named). */
static char *missing_ranks(const int *ranks, int32_t world, int *count)
{
    GString *s = g_string_new(NULL);
    *count = 0;
    for (int32_t r = 1; r < world; r++)
        if (ranks[r] < 0) ++*count;
    int shown = 0;
    for (int32_t r = 1; r < world && shown < 8; r++) {
        if (ranks[r] >= 0) continue;
        shown++;
        g_string_append_printf(s, "%s%d", shown == 1 ? "" : shown == *count || shown == 8 ? " and " : ", ", r);
    }
    if (*count > shown) g_string_append_printf(s, " (and %d more)", *count - shown);
    return g_string_free(s, FALSE);
}

gboolean rendezvous_serve(rendezvous_listener *l, const rendezvous_job *job, const uint8_t id[RENDEZVOUS_ID_BYTES],
                          char **error)
{
    int32_t world = job->world_size;
    int *ranks = g_new(int, world);
    for (int32_t r = 0; r < world; r++) ranks[r] = -1;
    GPtrArray *notes = g_ptr_array_new_with_free_func(g_free);
    int joined = 0;
    gint64 deadline = now_ms() + (gint64)job->timeout_seconds * 1000;
    while (joined < world - 1) {
        gint64 left = deadline - now_ms();
        if (left <= 0) break;
        struct pollfd p = {l->fd, POLLIN, 0};
        int rc = poll(&p, 1, (int)MIN(left, INT_MAX));
        if (rc <= 0) continue; /* EINTR or the time ran out: the loop's test decides */
        int fd = accept(l->fd, NULL, NULL);
        if (fd < 0) continue;
        fcntl(fd, F_SETFD, FD_CLOEXEC); /* a rank process started later must not inherit it */
        char *note = NULL;
        int32_t rank = admit(fd, job, ranks, deadline, &note);
        if (rank < 0) {
            close(fd);
            if (notes->len < MAX_NOTES)
                g_ptr_array_add(notes, note);
            else
                g_free(note);
            continue;
        }
        ranks[rank] = fd;
        joined++;
    }
    gboolean ok = joined == world - 1;
    if (!ok) {
        int count = 0;
        char *missing = missing_ranks(ranks, world, &count);
        GString *refused = g_string_new(NULL);
        for (guint i = 0; i < notes->len; i++)
            g_string_append_printf(refused, "%s%s", i ? "; " : "", (char *)g_ptr_array_index(notes, i));
        *error = g_strdup_printf("Rank%s %s of the %d did not join the rendezvous at %s within %d s; start every rank "
                                 "with the same WORLD_SIZE, MASTER_ADDR and MASTER_PORT, and check the port is open "
                                 "between the machines%s%s%s.",
                                 count == 1 ? "" : "s", missing, world, l->where, job->timeout_seconds,
                                 refused->len ? " (refused meanwhile: " : "", refused->str, refused->len ? ")" : "");
        char *told = g_strdup_printf("rank 0 stopped waiting: rank%s %s did not join within %d s.",
                                     count == 1 ? "" : "s", missing, job->timeout_seconds);
        for (int32_t r = 1; r < world; r++)
            if (ranks[r] >= 0) send_refusal(ranks[r], told);
        g_free(told);
        g_free(missing);
        g_string_free(refused, TRUE);
    } else {
        uint8_t answer[1 + RENDEZVOUS_ID_BYTES];
        answer[0] = 0;
        memcpy(answer + 1, id, RENDEZVOUS_ID_BYTES);
        for (int32_t r = 1; r < world && ok; r++)
            if (!write_all(ranks[r], answer, sizeof answer)) {
                *error = g_strdup_printf("Rank %d closed its connection to the rendezvous at %s before it got the "
                                         "job's id; see its output for why it stopped.",
                                         r, l->where);
                ok = FALSE;
            }
    }
    for (int32_t r = 1; r < world; r++)
        if (ranks[r] >= 0) close(ranks[r]);
    g_free(ranks);
    g_ptr_array_unref(notes);
    return ok;
}

/* One non-blocking connection attempt bounded by ms; the socket (blocking again) or -1 with errno. */
static int connect_once(const struct addrinfo *ai, gint64 ms)
{
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
        struct pollfd p = {fd, POLLOUT, 0};
        int e = 0;
        socklen_t n = sizeof e;
        rc = poll(&p, 1, (int)MAX(ms, 1)) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &n) == 0 && e == 0 ? 0 : -1;
        if (rc != 0) errno = e ? e : ETIMEDOUT;
    }
    if (rc != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

gboolean rendezvous_join(const char *addr, uint16_t port, const rendezvous_job *job, int32_t rank,
                         uint8_t id[RENDEZVOUS_ID_BYTES], char **error)
{
    struct addrinfo *found = resolve(addr, port, error);
    if (!found) return FALSE;
    gint64 deadline = now_ms() + (gint64)job->timeout_seconds * 1000;
    int fd = -1, last_errno = 0;
    while (fd < 0 && now_ms() < deadline) {
        for (const struct addrinfo *ai = found; ai && fd < 0; ai = ai->ai_next) {
            fd = connect_once(ai, MIN(CONNECT_TRY_MS, deadline - now_ms()));
            if (fd < 0) last_errno = errno;
        }
        if (fd < 0 && now_ms() + RETRY_PAUSE_US / 1000 < deadline)
            g_usleep(RETRY_PAUSE_US);
        else if (fd < 0)
            break;
    }
    freeaddrinfo(found);
    if (fd < 0) {
        *error = g_strdup_printf("Rank %d could not reach rank 0 at %s:%u (MASTER_ADDR:MASTER_PORT) within %d s (%s); "
                                 "start rank 0 with the same MASTER_ADDR and MASTER_PORT, and check the port is open "
                                 "between the machines.",
                                 rank, addr, (unsigned)port, job->timeout_seconds,
                                 last_errno ? g_strerror(last_errno) : "timed out");
        return FALSE;
    }
    uint8_t hello[HELLO_BYTES];
    memcpy(hello, HELLO_MAGIC, 8);
    put_u32(hello + 8, (uint32_t)job->world_size);
    put_u32(hello + 12, (uint32_t)rank);
    put_u64(hello + 16, job->fingerprint);
    uint8_t status = 0;
    gboolean closed = FALSE, ok = FALSE;
    gboolean sent = write_all(fd, hello, sizeof hello);
    if (!sent || read_until(fd, &status, 1, deadline, &closed) < 1) {
        *error = closed || !sent
                     ? g_strdup_printf("Rank 0 at %s:%u closed the connection without answering rank %d (it stopped: "
                                       "see its output).",
                                       addr, (unsigned)port, rank)
                     : g_strdup_printf("Rank 0 at %s:%u did not send the job's id to rank %d within %d s (not every "
                                       "rank joined: see rank 0's output).",
                                       addr, (unsigned)port, rank, job->timeout_seconds);
    } else if (status == 0) {
        size_t got = read_until(fd, id, RENDEZVOUS_ID_BYTES, deadline, &closed);
        ok = got == RENDEZVOUS_ID_BYTES;
        if (!ok)
            *error = g_strdup_printf("Rank 0 at %s:%u sent %zu of the %d bytes of the job's id to rank %d and %s.",
                                     addr, (unsigned)port, got, RENDEZVOUS_ID_BYTES, rank,
                                     closed ? "closed the connection" : "went silent");
    } else {
        uint8_t len[2];
        char text[65536];
        size_t n = 0;
        if (read_until(fd, len, 2, deadline, &closed) == 2)
            n = read_until(fd, (uint8_t *)text, (size_t)len[0] << 8 | len[1], deadline, &closed);
        text[n] = '\0';
        char *shown = g_utf8_make_valid(text, (gssize)n);
        *error = g_strdup_printf("Rank 0 at %s:%u refused rank %d: %s", addr, (unsigned)port, rank,
                                 n ? shown : "(no reason given).");
        g_free(shown);
    }
    close(fd);
    return ok;
}

uint16_t rendezvous_free_port(char **error)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t n = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &n) != 0) {
        *error = g_strdup_printf("Could not find a free TCP port on 127.0.0.1 for the ranks to meet (%s).",
                                 g_strerror(errno));
        if (fd >= 0) close(fd);
        return 0;
    }
    close(fd);
    return ntohs(a.sin_port);
}
