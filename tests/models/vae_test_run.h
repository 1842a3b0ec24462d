/* vae_test_run.h - the VAE tests' encode and decode: measured first, then run in an arena of exactly the
 * measured size, so a pass that writes past what it measured fails the test (header only). */
#ifndef SDT_VAE_TEST_RUN_H
#define SDT_VAE_TEST_RUN_H

#include "sdt_error.h"

#include <stddef.h>

#include "arena.h"
#include "vae.h"

/* *peak: the arena's measured size (NULL: not wanted). */
static inline bool vt_encode(const vae_model *m, sdt_backend *be, sdt_tensor *image, sdt_tensor *mean,
                             sdt_tensor *logvar, size_t *peak, sdt_error *error)
{
    sdt_arena meas, arena;
    sdt_arena_init_measure(&meas, be);
    if (!vae_encode(m, be, &meas, image, SDT_F32, mean, logvar, error)) return false;
    if (!sdt_arena_init(&arena, be, meas.peak))
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "arena: %s", be->error.message);
    bool ok = vae_encode(m, be, &arena, image, SDT_F32, mean, logvar, error);
    sdt_arena_release(&arena);
    if (peak) *peak = meas.peak;
    return ok;
}

static inline bool vt_decode(const vae_model *m, sdt_backend *be, sdt_tensor *latents, sdt_dtype dt, sdt_tensor *image,
                             size_t *peak, sdt_error *error)
{
    sdt_arena meas, arena;
    sdt_arena_init_measure(&meas, be);
    if (!vae_decode(m, be, &meas, latents, dt, image, error)) return false;
    if (!sdt_arena_init(&arena, be, meas.peak))
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "arena: %s", be->error.message);
    bool ok = vae_decode(m, be, &arena, latents, dt, image, error);
    sdt_arena_release(&arena);
    if (peak) *peak = meas.peak;
    return ok;
}

#endif
