/* test_rendezvous.c - the ranks of a data-parallel job meeting at MASTER_ADDR:MASTER_PORT (issue 33),
 * as separate processes on 127.0.0.1: 2 and 3 ranks all get rank 0's id; a rank of another job (other
 * options, another world size) is refused with its sentence while the job goes on; a rank that never
 * comes, a connection cut short, a port in use and a rank 0 that is not there each end in their
 * sentence within a short timeout. No durations are asserted: the timeouts only bound the waits. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rendezvous.h"
#include "sdt_test.h"

#define FINGERPRINT 0x1234567890abcdefull

/* What one process of a scenario does and what it must see: success with rank 0's id, or a
 * sentence containing want_error. */
typedef struct role {
    int32_t rank; /* 0: the one that listens */
    rendezvous_job job;
    uint16_t port;
    const char *want_error;
} role;

static void make_id(uint8_t id[RENDEZVOUS_ID_BYTES])
{
    for (int i = 0; i < RENDEZVOUS_ID_BYTES; i++) id[i] = (uint8_t)(i * 7 + 1);
}

/* Runs r in a child process; its exit status says whether it saw what it must. */
static pid_t start(role r)
{
    pid_t pid = fork();
    if (pid != 0) return pid;
    uint8_t id[RENDEZVOUS_ID_BYTES], want[RENDEZVOUS_ID_BYTES];
    make_id(want);
    memset(id, 0, sizeof id);
    char *error = NULL;
    gboolean ok;
    if (r.rank == 0) {
        rendezvous_listener *l = rendezvous_listen("127.0.0.1", r.port, &error);
        ok = l && rendezvous_serve(l, &r.job, want, &error);
        rendezvous_listener_free(l);
        memcpy(id, want, sizeof id);
    } else {
        ok = rendezvous_join("127.0.0.1", r.port, &r.job, r.rank, id, &error);
    }
    gboolean right =
        r.want_error ? !ok && error && strstr(error, r.want_error) : ok && memcmp(id, want, sizeof id) == 0;
    if (!right)
        fprintf(stderr, "FAIL rank %d (world %d): %s; wanted %s%s\n", r.rank, r.job.world_size,
                ok ? "it succeeded" : error, r.want_error ? "the sentence " : "rank 0's id",
                r.want_error ? r.want_error : "");
    _exit(right ? 0 : 1);
}

static void check_done(pid_t pid, const char *what)
{
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: its process saw something else (above)", what);
}

static uint16_t free_port(void)
{
    char *error = NULL;
    uint16_t port = rendezvous_free_port(&error);
    CHECK(port != 0, "no free port: %s", error ? error : "");
    g_free(error);
    return port;
}

/* Every rank of a world gets the id. */
static void check_world(int32_t world)
{
    uint16_t port = free_port();
    rendezvous_job job = {world, FINGERPRINT, 20};
    pid_t pids[8];
    for (int32_t r = world - 1; r >= 0; r--) pids[r] = start((role){r, job, port, NULL}); /* rank 0 last: they retry */
    for (int32_t r = 0; r < world; r++) check_done(pids[r], world == 2 ? "world 2" : "world 3");
}

/* A rank of another job is refused; the job's own rank then joins and the job goes on. */
static void check_other_job_refused(void)
{
    uint16_t port = free_port();
    rendezvous_job job = {2, FINGERPRINT, 20};
    pid_t server = start((role){0, job, port, NULL});
    rendezvous_job other = {2, FINGERPRINT + 1, 20};
    check_done(start((role){1, other, port, "refused rank 1: rank 1's options differ from rank 0's"}),
               "a rank with other options");
    rendezvous_job bigger = {3, FINGERPRINT, 20};
    check_done(start((role){1, bigger, port, "rank 1 says WORLD_SIZE=3, but this job has WORLD_SIZE=2"}),
               "a rank with another world size");
    check_done(start((role){1, job, port, NULL}), "the job's own rank 1 after the refusals");
    check_done(server, "rank 0 after the refusals");
}

/* A rank that never comes: rank 0 says which, after the timeout; the rank that came is told. */
static void check_missing_rank(void)
{
    uint16_t port = free_port();
    rendezvous_job job = {3, FINGERPRINT, 2};
    pid_t server = start((role){0, job, port, "Rank 2 of the 3 did not join the rendezvous at 127.0.0.1:"});
    rendezvous_job patient = {3, FINGERPRINT, 10}; /* waits longer than rank 0, so it hears rank 0 give up */
    check_done(start((role){1, patient, port, "rank 0 stopped waiting: rank 2 did not join within 2 s"}),
               "rank 1 of a job whose rank 2 never came");
    check_done(server, "rank 0 of a job whose rank 2 never came");
}

/* A connection that sends part of a hello and closes is named in rank 0's sentence. */
static void check_short_hello(void)
{
    uint16_t port = free_port();
    rendezvous_job job = {2, FINGERPRINT, 2};
    pid_t server =
        start((role){0, job, port, "(refused meanwhile: a connection that sent 10 of the 24 bytes a rank sends"});
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    gboolean sent = FALSE;
    for (int tries = 0; tries < 100 && !sent; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) sent = write(fd, "SDTRDV01xx", 10) == 10;
        close(fd);
        if (!sent) g_usleep(50000);
    }
    CHECK(sent, "could not reach rank 0 to send a short hello");
    check_done(server, "rank 0 after a short hello");
}

/* Rank 0 that answers with part of the id: the rank says so. */
static void check_short_answer(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t n = sizeof a;
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 4) == 0 &&
              getsockname(fd, (struct sockaddr *)&a, &n) == 0,
          "a listening socket");
    rendezvous_job job = {2, FINGERPRINT, 5};
    pid_t rank1 = start((role){1, job, ntohs(a.sin_port), "sent 50 of the 128 bytes of the job's id to rank 1"});
    int c = accept(fd, NULL, NULL);
    uint8_t hello[24], answer[51] = {0};
    size_t got = 0;
    while (c >= 0 && got < sizeof hello) {
        ssize_t r = read(c, hello + got, sizeof hello - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    CHECK(got == sizeof hello && memcmp(hello, "SDTRDV01", 8) == 0, "rank 1's hello");
    CHECK(c >= 0 && write(c, answer, sizeof answer) == (ssize_t)sizeof answer, "the short answer sent");
    close(c);
    close(fd);
    check_done(rank1, "rank 1 given a short answer");
}

static void check_port_in_use_and_no_rank0(void)
{
    uint16_t port = free_port();
    char *error = NULL;
    rendezvous_listener *first = rendezvous_listen("127.0.0.1", port, &error);
    CHECK(first != NULL, "listening on a free port: %s", error ? error : "");
    rendezvous_listener *second = rendezvous_listen("127.0.0.1", port, &error);
    CHECK(!second && error && strstr(error, "(MASTER_PORT) is in use") && strstr(error, "pick another MASTER_PORT"),
          "a port in use: %s", error ? error : "(accepted)");
    rendezvous_listener_free(second);
    rendezvous_listener_free(first);
    g_clear_pointer(&error, g_free);

    /* Nobody listens: the rank retries until its timeout, then says whom it could not reach. */
    rendezvous_job job = {2, FINGERPRINT, 1};
    uint8_t id[RENDEZVOUS_ID_BYTES];
    CHECK(!rendezvous_join("127.0.0.1", free_port(), &job, 1, id, &error) && error &&
              strstr(error, "Rank 1 could not reach rank 0 at 127.0.0.1:") && strstr(error, "within 1 s"),
          "no rank 0: %s", error ? error : "(joined)");
    g_free(error);
}

int main(void)
{
    check_world(2);
    check_world(3);
    check_other_job_refused();
    check_missing_rank();
    check_short_hello();
    check_short_answer();
    check_port_in_use_and_no_rank0();
    return sdt_test_finish("host_rendezvous");
}
