/* The per-sample choices of --flip and --caption-dropout (train/sample_augment.h): pure
 * functions of (seed, draw), so a resumed run repeats them; flip half the time and caption
 * drop-out at its rate (binomial bounds of 5 standard deviations); independent of each other. */
#include <math.h>

#include "sdt_test.h"
#include "train/sample_augment.h"

int main(void)
{
    enum { N = 200000 };
    const double p = 0.15;
    int flips = 0, drops = 0, both = 0, same_again = 1, other_seed_same = 0;
    for (uint64_t d = 0; d < N; d++) {
        bool f = sdt_augment_flip(42, d), c = sdt_augment_caption_dropped(42, d, p);
        flips += f;
        drops += c;
        both += f && c;
        same_again &= f == sdt_augment_flip(42, d) && c == sdt_augment_caption_dropped(42, d, p);
        other_seed_same += f == sdt_augment_flip(43, d);
    }
    CHECK(same_again, "the same (seed, draw) gave another choice");
    double sd_f = sqrt(N * 0.25), sd_c = sqrt(N * p * (1 - p)), sd_b = sqrt(N * 0.5 * p * (1 - 0.5 * p));
    CHECK(fabs(flips - N * 0.5) < 5 * sd_f, "flip: %d of %d, want ~%g", flips, N, N * 0.5);
    CHECK(fabs(drops - N * p) < 5 * sd_c, "caption drop-out %g: %d of %d", p, drops, N);
    CHECK(fabs(both - N * 0.5 * p) < 5 * sd_b, "flip and drop-out together %d times, want ~%g (independent)", both,
          N * 0.5 * p);
    CHECK(fabs(other_seed_same - N * 0.5) < 5 * sd_f, "seeds 42 and 43 agree on %d of %d flips", other_seed_same, N);
    int never = 0, always = 0;
    for (uint64_t d = 0; d < 1000; d++) {
        never += sdt_augment_caption_dropped(7, d, 0.0);
        always += sdt_augment_caption_dropped(7, d, 1.0);
    }
    CHECK(never == 0 && always == 1000, "p 0 dropped %d, p 1 dropped %d of 1000", never, always);
    return sdt_test_finish("train_sample_augment");
}
