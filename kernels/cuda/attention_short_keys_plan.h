/* attention_short_keys_plan.h - the host-side arithmetic of attention_short_keys.cu in plain C, so a CPU test
 * checks it (tests/kernels/test_attention_short_keys_plan.c): which shapes the kernels take, the keys' padding,
 * the blocks per head and the shared memory a block needs. Internal to kernels/cuda. */
#ifndef SDT_KERNELS_CUDA_ATTENTION_SHORT_KEYS_PLAN_H
#define SDT_KERNELS_CUDA_ATTENTION_SHORT_KEYS_PLAN_H

#include <stdbool.h>
#include <stddef.h>

enum {
    SK_WARPS = 8,
    SK_THREADS = SK_WARPS * 32,
    SK_MAX_KEYS = 128,       /* the most keys a block holds */
    SK_CHUNK = SK_WARPS * 16 /* backward: queries per chunk, 16 per warp */
};

/* The shapes the kernels take: unmasked, 1..128 keys, head dim 40, 64 or 80 (SD 1.x/2.x and SDXL; 160 needs more
 * registers than the backward's phase 2 has). The rest of the predicate (dtypes, alignment, sm_80+ code, the
 * card's shared memory) is in attention_short_keys.cu. */
static inline bool sk_shape_fits(bool causal, int Tk, int D)
{
    return !causal && Tk >= 1 && Tk <= SK_MAX_KEYS && (D == 40 || D == 64 || D == 80);
}

/* Keys padded for the kernels: two instantiations, 80 (CLIP's 77 tokens, and anything shorter) and 128. */
static inline int sk_keys_padded(int Tk)
{
    return Tk <= 80 ? 80 : SK_MAX_KEYS;
}

/* Blocks per head for `units` units of work (16-query tiles or 128-query chunks) when `slots` blocks run at once
 * on the GPU: as many as fit one wave (no tail of a few blocks running alone), at least `min_per` units a block,
 * none empty (splits = ceil(units / per)). */
static inline void sk_split(int units, int heads, int slots, int min_per, int *splits, int *per)
{
    if (units < 1) { /* no queries: one block a head, nothing to walk */
        *splits = *per = 1;
        return;
    }
    int s = slots / heads;
    if (s > (units + min_per - 1) / min_per) s = (units + min_per - 1) / min_per;
    if (s < 1) s = 1;
    *per = (units + s - 1) / s;
    *splits = (units + *per - 1) / *per;
}

/* Shared memory of a block, bytes (the layouts the kernels carve; LD = head dim padded to 16, + 8 elements). */
static inline size_t sk_fwd_smem(int D, int KP)
{
    const size_t LD = (size_t)(D + 15) / 16 * 16 + 8;
    return (2 * (size_t)KP + 2 * 16 * SK_WARPS) * LD * 2;
}
static inline size_t sk_bwd_smem(int D, int KP)
{
    const size_t LD = (size_t)(D + 15) / 16 * 16 + 8;
    const size_t ND = (size_t)(D + 7) / 8; /* + the warps' dK, dV sums: KP / 16 warps, 4 ND fp32 a lane, twice */
    return (2 * (size_t)KP + 2 * SK_CHUNK) * LD * 2 + 2 * SK_CHUNK * sizeof(float) +
           2 * (size_t)(KP / 16) * ND * 4 * 32 * sizeof(float);
}

#endif
