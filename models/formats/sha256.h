/* sha256.h - SHA-256 of a checkpoint (A1111's short hash is its first 10 hex digits). A 6.9 GB
 * SDXL file took ~34 s through GLib's portable GChecksum (~0.2 GB/s); with the x86 SHA
 * extensions (every x86 CPU from AMD Zen and Intel Ice Lake on) the same digest takes a tenth
 * of that. Other CPUs keep GChecksum. */
#ifndef SDT_MODELS_SHA256_H
#define SDT_MODELS_SHA256_H

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sdt_sha256 {
    uint32_t state[8];
    uint64_t total;    /* bytes hashed */
    uint8_t block[64]; /* a partial block */
    size_t used;
    GChecksum *portable; /* non-NULL where the CPU lacks the SHA extensions */
} sdt_sha256;

/* accelerated false: GChecksum even where the extensions exist (the tests compare the two). */
void sdt_sha256_init(sdt_sha256 *s, bool accelerated);
void sdt_sha256_update(sdt_sha256 *s, const void *data, size_t n);
/* Finishes: 64 lowercase hex digits and a NUL into hex; s is spent (init it again to reuse). */
void sdt_sha256_finish_hex(sdt_sha256 *s, char hex[65]);
/* Whether this CPU hashes with the SHA extensions. */
bool sdt_sha256_accelerated(void);

#endif
