/* test_copy_out.c - copy-out buffers and struct_size-aware copies (ABI rules 3 and 5). */
#include <string.h>

#include "host/copy_out.h"
#include "sdt_test.h"

static void test_strings(sdt_test_rng *rng)
{
    char src[200];
    size_t len = (size_t)(sdt_test_next(rng) % (sizeof src - 1));
    for (size_t i = 0; i < len; i++) src[i] = (char)('a' + sdt_test_next(rng) % 26);
    src[len] = '\0';
    uint32_t needed = 0;
    CHECK(sdt_copy_string_out(src, NULL, 0, &needed) == SDT_STATUS_BUFFER_TOO_SMALL && needed == len + 1, "size query");
    CHECK(sdt_copy_string_out(src, NULL, 5, NULL) == SDT_STATUS_INVALID_ARGUMENT, "NULL buffer with a size");
    char buf[256];
    uint32_t cap = (uint32_t)(1 + sdt_test_next(rng) % (len + 2));
    memset(buf, 'Z', sizeof buf);
    sdt_status st = sdt_copy_string_out(src, buf, cap, &needed);
    size_t expect = len < cap ? len : cap - 1;
    CHECK(st == (expect == len ? SDT_STATUS_OK : SDT_STATUS_BUFFER_TOO_SMALL), "status for cap %u len %zu", cap, len);
    CHECK(strlen(buf) == expect && memcmp(buf, src, expect) == 0 && buf[cap] == 'Z',
          "truncated, terminated, in bounds");
    CHECK(sdt_copy_string_out(NULL, buf, 4, &needed) == SDT_STATUS_OK && buf[0] == '\0' && needed == 1, "NULL = \"\"");
}

typedef struct v2 {
    uint32_t struct_size;
    uint32_t a;
    double b;
    int64_t c;
} v2;

static void test_structs(sdt_test_rng *rng)
{
    v2 defaults = {sizeof(v2), 7, 2.5, -3};
    v2 host = {(uint32_t)offsetof(v2, b), 11, 99.0, 99}; /* an older host knows only a */
    v2 got = defaults;
    CHECK(sdt_struct_read_in(&got, sizeof got, &host), "read older");
    CHECK(got.struct_size == sizeof(v2) && got.a == 11 && got.b == 2.5 && got.c == -3,
          "older fields read, defaults kept");
    v2 newer_host[2];
    memset(newer_host, 0, sizeof newer_host);
    newer_host[0].struct_size = sizeof(v2) + 8; /* a newer host: extra fields we ignore */
    newer_host[0].a = (uint32_t)sdt_test_next(rng);
    got = defaults;
    CHECK(sdt_struct_read_in(&got, sizeof got, newer_host) && got.a == newer_host[0].a, "read newer");
    uint32_t bad = 3;
    CHECK(!sdt_struct_read_in(&got, sizeof got, &bad), "struct_size 3 refused");
    v2 out[2];
    memset(out, 0xEE, sizeof out);
    out[0].struct_size = (uint32_t)offsetof(v2, c);
    v2 src = {sizeof(v2), 5, 1.5, 42};
    CHECK(sdt_struct_write_out(out, &src, sizeof src), "write older");
    CHECK(out[0].struct_size == offsetof(v2, c) && out[0].a == 5 && out[0].b == 1.5, "fields written");
    unsigned char *tail = (unsigned char *)&out[0].c;
    CHECK(tail[0] == 0xEE && tail[7] == 0xEE, "nothing past the host's size");
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("test_copy_out");
    test_strings(&rng);
    test_structs(&rng);
    return sdt_test_finish("test_copy_out");
}
