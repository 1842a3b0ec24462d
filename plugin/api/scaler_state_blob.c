/* scaler_state_blob.c - encode/decode of the scaler state blob (see scaler_state_blob.h).
 * Layout: "SDTSCAL" NUL, u32 version, u32 enabled, f32 scale, f64 growth_factor,
 * f64 backoff_factor, i64 growth_interval, i64 growth_tracker, i32 hysteresis,
 * i32 hysteresis_tracker, f32 min_scale: 64 bytes, every field little-endian; version 2
 * appends the CRC-32 of those 64 bytes and 4 zero bytes (72), so a flipped bit anywhere is
 * refused instead of changing the scale. Version 1 blobs (64 bytes, no CRC) are still read. */
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "api/scaler_state_blob.h"

static const uint8_t magic[8] = {'S', 'D', 'T', 'S', 'C', 'A', 'L', 0};
#define BLOB_VERSION 2u
#define BLOB_V1_SIZE 64u

static void put(uint8_t **p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) (*p)[i] = (uint8_t)(v >> (8 * i));
    *p += bytes;
}

static uint64_t get(const uint8_t **p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)(*p)[i] << (8 * i);
    *p += bytes;
    return v;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static uint64_t f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}
static float bits_f32(uint64_t u)
{
    uint32_t w = (uint32_t)u;
    float f;
    memcpy(&f, &w, 4);
    return f;
}
static double bits_f64(uint64_t u)
{
    double d;
    memcpy(&d, &u, 8);
    return d;
}

void sdt_scaler_blob_encode(const sdt_scaler_state *s, uint8_t out[SDT_SCALER_BLOB_SIZE])
{
    uint8_t *p = out;
    memcpy(p, magic, sizeof magic);
    p += sizeof magic;
    put(&p, BLOB_VERSION, 4);
    put(&p, s->enabled ? 1 : 0, 4);
    put(&p, f32_bits(s->scale), 4);
    put(&p, f64_bits(s->growth_factor), 8);
    put(&p, f64_bits(s->backoff_factor), 8);
    put(&p, (uint64_t)s->growth_interval, 8);
    put(&p, (uint64_t)s->growth_tracker, 8);
    put(&p, (uint32_t)s->hysteresis, 4);
    put(&p, (uint32_t)s->hysteresis_tracker, 4);
    put(&p, f32_bits(s->min_scale), 4);
    put(&p, (uint32_t)crc32(crc32(0L, Z_NULL, 0), out, BLOB_V1_SIZE), 4);
    put(&p, 0, 4);
}

bool sdt_scaler_blob_decode(const uint8_t *blob, size_t size, sdt_scaler_state *s, sdt_error *error)
{
    if (!blob || size < BLOB_V1_SIZE || memcmp(blob, magic, sizeof magic) != 0) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "The buffer (%zu bytes) is not a loss-scaler state from save_state(); pass the bytes "
                 "save_state wrote, unchanged.",
                 size);
        return false;
    }
    const uint8_t *p = blob + sizeof magic;
    uint32_t version = (uint32_t)get(&p, 4);
    if (version != BLOB_VERSION && version != 1) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "The loss-scaler state has version %u; this plugin reads versions 1 and %u. "
                 "Save it again with this plugin.",
                 version, BLOB_VERSION);
        return false;
    }
    if (version == BLOB_VERSION) {
        const uint8_t *tail = blob + BLOB_V1_SIZE;
        if (size < SDT_SCALER_BLOB_SIZE ||
            (uint32_t)get(&tail, 4) != (uint32_t)crc32(crc32(0L, Z_NULL, 0), blob, BLOB_V1_SIZE) ||
            get(&tail, 4) != 0) {
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "The loss-scaler state (%zu bytes) is damaged: its checksum does "
                            "not match; pass the bytes save_state wrote, unchanged.",
                            size);
        }
    }
    s->enabled = get(&p, 4) != 0;
    s->scale = bits_f32(get(&p, 4));
    s->growth_factor = bits_f64(get(&p, 8));
    s->backoff_factor = bits_f64(get(&p, 8));
    s->growth_interval = (int64_t)get(&p, 8);
    s->growth_tracker = (int64_t)get(&p, 8);
    s->hysteresis = (int32_t)(uint32_t)get(&p, 4);
    s->hysteresis_tracker = (int32_t)(uint32_t)get(&p, 4);
    s->min_scale = bits_f32(get(&p, 4));
    return true;
}
