/* test_validation_split.c - the held-out images (--validation-split) are a pure function of the
 * seed and the dataset size: the same seed chooses the same files every time, another seed other
 * files, the count is round(F * n) kept within 1..n-1, and every item is equally likely over many
 * seeds (a partial Fisher-Yates shuffle, not "the first few"). A dataset of one image is refused. */
#include <math.h>
#include <string.h>

#include "data/validation_split.h"
#include "sdt_test.h"

static int choose(int n, double f, uint64_t seed, bool *held)
{
    int n_held = -1;
    sdt_error e;
    sdt_error_clear(&e);
    CHECK(sdt_validation_split_choose(n, f, seed, held, &n_held, &e), "split of %d at %g: %s", n, f, e.message);
    int count = 0;
    for (int i = 0; i < n; i++) count += held[i];
    CHECK(count == n_held, "the flags (%d) agree with the count (%d)", count, n_held);
    return n_held;
}

int main(void)
{
    bool a[100], b[100], c[100];
    /* deterministic by seed */
    choose(20, 0.25, 42, a);
    choose(20, 0.25, 42, b);
    CHECK(memcmp(a, b, sizeof(bool) * 20) == 0, "the same seed holds out the same images");
    int differ = 0;
    for (uint64_t s = 1; s <= 8; s++) {
        choose(20, 0.25, 42 + s, c);
        differ += memcmp(a, c, sizeof(bool) * 20) != 0;
    }
    CHECK(differ >= 7, "other seeds hold out other images (%d of 8 differ)", differ);
    /* counts: round(F n), at least 1, at most n - 1 */
    CHECK(choose(20, 0.25, 1, a) == 5, "25%% of 20 is 5");
    CHECK(choose(10, 0.01, 1, a) == 1, "at least one image is held out");
    CHECK(choose(10, 0.99, 1, a) == 9, "at least one image is left to train on");
    CHECK(choose(2, 0.5, 7, a) == 1, "one of two");
    /* uniform: over 4000 seeds each of 10 items is held out about 3/10 of the time */
    int hits[10] = {0};
    const int seeds = 4000;
    for (int s = 0; s < seeds; s++) {
        choose(10, 0.3, (uint64_t)s, a);
        for (int i = 0; i < 10; i++) hits[i] += a[i];
    }
    for (int i = 0; i < 10; i++) {
        double p = (double)hits[i] / seeds, sd = sqrt(0.3 * 0.7 / seeds);
        CHECK(fabs(p - 0.3) < 5 * sd, "item %d held out with frequency %.4f (expected 0.3 +- %.4f)", i, p, 5 * sd);
    }
    /* nothing to hold out */
    sdt_error e;
    sdt_error_clear(&e);
    int n_held = 0;
    CHECK(!sdt_validation_split_choose(1, 0.5, 1, a, &n_held, &e) && e.code == SDT_ERR_VALIDATION &&
              strstr(e.message, "1 image(s)") != NULL,
          "one image is refused with a sentence: %s", e.message);
    return sdt_test_finish("data_test_validation_split");
}
