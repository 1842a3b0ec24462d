/* test_sha256 - the checkpoint hash (models/formats/sha256.h): FIPS 180-2's example digests,
 * and the accelerated path against GLib's GChecksum on random data of every length around the
 * 64-byte block and padding edges, fed in pieces of random sizes. */
#include <glib.h>
#include <string.h>

#include "sdt_test.h"
#include "sha256.h"

static void digest(bool accelerated, const uint8_t *data, size_t n, sdt_test_rng *r, char hex[65])
{
    sdt_sha256 s;
    sdt_sha256_init(&s, accelerated);
    size_t at = 0;
    while (at < n) { /* pieces of 0..200 bytes, with now and then a long one */
        uint64_t b = sdt_test_next(r);
        size_t piece = b % 8 == 0 ? (size_t)(b >> 8) % 100000 : (size_t)(b >> 8) % 201;
        if (piece > n - at) piece = n - at;
        sdt_sha256_update(&s, data + at, piece);
        at += piece;
    }
    sdt_sha256_finish_hex(&s, hex);
}

static void check_known(bool accelerated)
{
    static const struct {
        const char *text, *hex;
    } known[] = {{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
                 {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
                 {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"}};
    sdt_test_rng r = {1};
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        char hex[65];
        digest(accelerated, (const uint8_t *)known[i].text, strlen(known[i].text), &r, hex);
        CHECK(strcmp(hex, known[i].hex) == 0, "%s SHA-256 of \"%s\" is %s, FIPS 180-2 says %s",
              accelerated ? "accelerated" : "portable", known[i].text, hex, known[i].hex);
    }
}

static void check_against_glib(sdt_test_rng *r)
{
    enum { MAX = 3 << 20 };
    uint8_t *data = g_malloc(MAX);
    for (size_t i = 0; i < MAX; i++) data[i] = (uint8_t)(sdt_test_next(r) >> 32);
    size_t lengths[302], n_lengths = 0;
    for (size_t n = 0; n <= 300; n++) lengths[n_lengths++] = n; /* every block and padding edge up to 4 blocks */
    lengths[n_lengths++] = MAX - 7;
    for (size_t k = 0; k < n_lengths; k++) {
        size_t n = lengths[k];
        char got[65];
        digest(true, data, n, r, got);
        const char *want = g_compute_checksum_for_data(G_CHECKSUM_SHA256, data, n);
        CHECK(strcmp(got, want) == 0, "SHA-256 of %zu random bytes: %s, GChecksum says %s", n, got, want);
        g_free((char *)want);
    }
    g_free(data);
}

int main(void)
{
    sdt_test_rng r = sdt_test_rng_from_env("sha256");
    printf("SHA extensions: %s\n",
           sdt_sha256_accelerated() ? "yes (the accelerated path is tested)" : "no (GChecksum only)");
    check_known(false);
    check_known(true);
    check_against_glib(&r);
    return sdt_test_finish("sha256 (FIPS 180-2 digests; the SHA-extension path = GChecksum on random data)");
}
