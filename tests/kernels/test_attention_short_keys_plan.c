/* test_attention_short_keys_plan - the host-side arithmetic of the CUDA short-key attention kernels
 * (kernels/cuda/attention_short_keys_plan.h), checked on the CPU because the kernels themselves only run on a
 * GPU: which shapes they take, the keys' padding, that the blocks per head cover every query tile or chunk
 * once with no empty block and fit one wave, and that a block's shared memory is what the kernels carve and
 * fits the cards that take it. */
#include "../../kernels/cuda/attention_short_keys_plan.h"
#include "sdt_test.h"

static void check_shapes(void)
{
    static const int dims_taken[3] = {40, 64, 80}, dims_left[4] = {8, 32, 160, 512};
    for (int i = 0; i < 3; i++) {
        CHECK(sk_shape_fits(false, 77, dims_taken[i]), "cross-attention at d%d (77 keys) must be taken", dims_taken[i]);
        CHECK(sk_shape_fits(false, 1, dims_taken[i]) && sk_shape_fits(false, 128, dims_taken[i]),
              "1 and 128 keys at d%d must be taken", dims_taken[i]);
        CHECK(!sk_shape_fits(true, 77, dims_taken[i]), "causal attention (CLIP's) must be left to attention.cu");
        CHECK(!sk_shape_fits(false, 129, dims_taken[i]) && !sk_shape_fits(false, 0, dims_taken[i]),
              "0 or 129 keys at d%d must be left to the other kernels", dims_taken[i]);
    }
    for (int i = 0; i < 4; i++)
        CHECK(!sk_shape_fits(false, 77, dims_left[i]), "head dim %d must be left to the other kernels", dims_left[i]);
    CHECK(sk_keys_padded(1) == 80 && sk_keys_padded(77) == 80 && sk_keys_padded(80) == 80, "up to 80 keys pad to 80");
    CHECK(sk_keys_padded(81) == 128 && sk_keys_padded(128) == 128, "81..128 keys pad to 128");
}

/* Every (units, heads, slots, min_per): each of `splits` blocks gets `per` consecutive units, the last one at
 * least one, so together they cover [0, units) exactly once; no more blocks than run at once unless each head
 * needs one; no more splits than units / min_per rounded up. */
static void check_split(void)
{
    static const int slots_list[5] = {8, 132, 264, 396, 528}, heads_list[6] = {1, 2, 10, 40, 64, 300};
    for (int units = 0; units <= 300; units++)
        for (int hi = 0; hi < 6; hi++)
            for (int si = 0; si < 5; si++)
                for (int min_per = 1; min_per <= 8; min_per += 7) {
                    const int heads = heads_list[hi], slots = slots_list[si];
                    int splits = 0, per = 0;
                    sk_split(units, heads, slots, min_per, &splits, &per);
                    if (units == 0) {
                        CHECK(splits == 1 && per == 1, "no units: one block a head");
                        continue;
                    }
                    const int ceil_min = (units + min_per - 1) / min_per;
                    CHECK(splits >= 1 && per >= 1, "units %d heads %d slots %d: %d splits of %d", units, heads, slots,
                          splits, per);
                    CHECK((long)splits * per >= units && (long)(splits - 1) * per < units,
                          "units %d: %d blocks of %d leave a unit out or a block empty", units, splits, per);
                    CHECK(splits == 1 || (long)splits * heads <= slots,
                          "units %d heads %d: %d blocks a head exceed one wave of %d", units, heads, splits, slots);
                    CHECK(splits <= ceil_min, "units %d min_per %d: %d splits", units, min_per, splits);
                }
    /* the shapes NOTES.md run 30 predicts for (H100, 132 SMs): SDXL b4 4096x77 d64 h10 forward at 3 blocks an
     * SM (256 tiles, 9 blocks a head of 29), backward at 2 (32 chunks, 6 blocks of 6); SD 1.5 b8 d40 h8 backward */
    int splits, per;
    sk_split(256, 40, 3 * 132, SK_WARPS, &splits, &per);
    CHECK(splits == 9 && per == 29, "SDXL forward: %d blocks a head of %d tiles", splits, per);
    sk_split(32, 40, 2 * 132, 1, &splits, &per);
    CHECK(splits == 6 && per == 6, "SDXL backward: %d blocks a head of %d chunks", splits, per);
    sk_split(32, 64, 2 * 132, 1, &splits, &per);
    CHECK(splits == 4 && per == 8, "SD 1.5 backward: %d blocks a head of %d chunks", splits, per);
}

/* The bytes in the kernel file's header comment, and the cards they fit: every block under an H100's 227 KB;
 * the forward at KP 80 and the d40 backward also under sm_86/sm_89's 99 KB (the rest falls back there). */
static void check_smem(void)
{
    CHECK(sk_fwd_smem(64, 80) == 59904 && sk_bwd_smem(64, 80) == 101888, "d64 at 80 keys: %zu / %zu bytes",
          sk_fwd_smem(64, 80), sk_bwd_smem(64, 80));
    CHECK(sk_fwd_smem(40, 80) == 46592 && sk_bwd_smem(40, 80) == 73216, "d40 at 80 keys: %zu / %zu bytes",
          sk_fwd_smem(40, 80), sk_bwd_smem(40, 80));
    static const int dims[3] = {40, 64, 80}, keys[2] = {80, 128};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) {
            CHECK(sk_bwd_smem(dims[i], keys[j]) <= 227 * 1024 && sk_fwd_smem(dims[i], keys[j]) <= 227 * 1024,
                  "d%d KP %d over an H100's 227 KB a block", dims[i], keys[j]);
            CHECK(sk_fwd_smem(dims[i], 80) <= 99 * 1024, "forward d%d over sm_86's 99 KB", dims[i]);
        }
    CHECK(sk_bwd_smem(40, 80) <= 99 * 1024, "the d40 backward (SD 1.5) must fit sm_86's 99 KB");
}

int main(void)
{
    check_shapes();
    check_split();
    check_smem();
    return sdt_test_finish("attention short-key plan (shapes, splits, shared memory)");
}
