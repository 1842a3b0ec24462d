/* test_arena - the activation arena: measuring mode learns the exact peak, a real arena of
 * that size holds the same sequence with 256-byte aligned, disjoint tensors, one byte less
 * overflows (flag set, NULL data), and mark/rewind reuses memory. */
#include <string.h>

#include "arena.h"
#include "kernel_test.h"

enum { ALLOCS = 23 };

typedef struct plan {
    sdt_dtype dtype[ALLOCS];
    int64_t shape[ALLOCS][3];
    int rewind_after; /* allocations after this index are scratch, rewound at the end */
} plan;

static plan random_plan(sdt_test_rng *r)
{
    plan p;
    const sdt_dtype dtypes[] = {SDT_F32, SDT_F16, SDT_BF16, SDT_I32};
    for (int i = 0; i < ALLOCS; i++) {
        p.dtype[i] = dtypes[sdt_test_next(r) % 4];
        for (int d = 0; d < 3; d++) p.shape[i][d] = 1 + (int64_t)(sdt_test_next(r) % 37);
    }
    p.rewind_after = 5 + (int)(sdt_test_next(r) % 10);
    return p;
}

/* Runs the plan; returns how many tensors came back without data. Fills data[] when not NULL. */
static int run_plan(sdt_arena *a, const plan *p, sdt_tensor *out)
{
    int missing = 0;
    size_t mark = 0;
    for (int i = 0; i < ALLOCS; i++) {
        if (i == p->rewind_after) mark = sdt_arena_mark(a);
        out[i] = sdt_arena_tensor(a, p->dtype[i], 3, p->shape[i]);
        missing += out[i].data == NULL;
    }
    sdt_arena_rewind(a, mark);
    return missing;
}

int main(void)
{
    sdt_test_rng r = sdt_test_rng_from_env("arena");
    sdt_backend *be = kt_backend();
    for (int trial = 0; trial < 20; trial++) {
        plan p = random_plan(&r);
        sdt_tensor t[ALLOCS];
        sdt_arena m;
        sdt_arena_init_measure(&m, be);
        CHECK(run_plan(&m, &p, t) == ALLOCS, "a measuring arena must hand out no memory");
        CHECK(sdt_arena_fits(&m), "a measuring arena never overflows");
        size_t needed = 0;
        for (int i = 0; i < ALLOCS; i++) needed = ((needed + 255) / 256) * 256 + sdt_tensor_nbytes(&t[i]);
        CHECK(m.peak == needed, "measured peak %zu, want %zu", m.peak, needed);
        CHECK(m.used == sdt_arena_mark(&m) && m.used < m.peak, "rewind must return used below the peak");

        sdt_arena a;
        CHECK(sdt_arena_init(&a, be, m.peak), "arena of %zu bytes failed: %s", m.peak, be->error.message);
        CHECK(run_plan(&a, &p, t) == 0 && sdt_arena_fits(&a), "the measured size must hold the same sequence");
        for (int i = 0; i < ALLOCS; i++) {
            uint8_t *s = t[i].data, *e = s + sdt_tensor_nbytes(&t[i]);
            CHECK(((uintptr_t)s & 255u) == 0, "tensor %d is not 256-byte aligned", i);
            CHECK(s >= a.base && e <= a.base + a.capacity, "tensor %d lies outside the arena", i);
            for (int j = 0; j < i; j++) {
                uint8_t *s2 = t[j].data, *e2 = s2 + sdt_tensor_nbytes(&t[j]);
                CHECK(e <= s2 || e2 <= s, "tensors %d and %d overlap", i, j);
            }
        }
        /* after the rewind the next tensor reuses the first scratch tensor's address */
        sdt_tensor again = sdt_arena_tensor(&a, p.dtype[p.rewind_after], 3, p.shape[p.rewind_after]);
        CHECK(again.data == t[p.rewind_after].data, "rewind must hand the same memory out again");
        sdt_arena_release(&a);
        CHECK(a.base == NULL && a.used == 0, "release must empty the arena");

        /* the arena rounds capacity up to 256, so 256 bytes less than the peak must overflow */
        sdt_arena small;
        CHECK(sdt_arena_init(&small, be, m.peak - 256), "small arena failed: %s", be->error.message);
        int missing = run_plan(&small, &p, t);
        CHECK(!sdt_arena_fits(&small) && missing >= 1, "an arena 256 bytes short must overflow (missing %d)", missing);
        CHECK(t[ALLOCS - 1].data == NULL, "the allocation that does not fit must get NULL data");
        /* the failing allocation made the error value: out of memory, naming the capacity */
        char capacity[64];
        snprintf(capacity, sizeof capacity, "(%zu bytes)", small.capacity);
        CHECK(small.error.code == SDT_ERR_OUT_OF_MEMORY && strstr(small.error.message, capacity),
              "an overflow must be OUT_OF_MEMORY naming the capacity, got %s: %s",
              sdt_error_code_name(small.error.code), small.error.message);
        sdt_arena_rewind(&small, 0);
        sdt_arena_clear_error(&small);
        CHECK(sdt_arena_fits(&small), "clearing the error must forget the overflow");
        CHECK(small.peak == m.peak, "an overflowing arena still reports the peak it needed");
        sdt_arena_release(&small);
    }
    be->destroy(be);
    return sdt_test_finish("arena (sdt_arena measure/alloc/overflow/rewind)");
}
