/* buckets.h - aspect-ratio buckets as kohya's sd-scripts define them (model_util.py
 * make_bucket_resolutions, train_util.py BucketManager.select_bucket and
 * trim_and_resize_if_required).
 *
 * The buckets: the square of side floor(sqrt(max_area) / step) * step, and for every width W
 * from min_side to max_side in steps of step, H = min(max_side, floor(max_area / W / step) * step)
 * when H >= min_side, both W x H and H x W; sorted by width, then height. Every side is a
 * multiple of step (min_side and max_side must be) and no bucket holds more than max_area pixels.
 *
 * An image of its own bucket's exact size keeps it; any other goes to the bucket whose aspect
 * ratio (W / H) is nearest its own (the first in the sorted list on a tie), is resized so it
 * covers the bucket (the side that fits exactly is kohya's: the height when the image is wider
 * than the bucket, else the width; the other side rounded half up) and is cropped to it: centred
 * (kohya's trim // 2), or at random (kohya's randint(0, trim), inclusive) from a stream of the
 * seed and the file's name, so a resumed run, whose latents are cached again, crops the same.
 */
#ifndef SDT_DATA_BUCKETS_H
#define SDT_DATA_BUCKETS_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#define SDT_BUCKET_DEFAULT_MIN_SIDE 256
#define SDT_BUCKET_DEFAULT_MAX_SIDE 1024
#define SDT_BUCKET_DEFAULT_STEP 64
#define SDT_BUCKET_MAX_SIDE_LIMIT 4096 /* dataset.c's largest training side */

typedef struct sdt_bucket_rules {
    int64_t max_area; /* pixels */
    int min_side, max_side, step;
} sdt_bucket_rules;

typedef struct sdt_bucket {
    int width, height;
} sdt_bucket;

typedef struct sdt_bucket_list {
    sdt_bucket *items; /* sorted by width, then height */
    int n;
} sdt_bucket_list;

/* Where one image lands: its bucket, the size it is resized to (covering the bucket) and the
 * crop's top-left corner in the resized image's pixels (SDXL's crop conditioning). */
typedef struct sdt_bucket_fit {
    int bucket;        /* index in the list */
    int width, height; /* the bucket's */
    int resized_width, resized_height;
    int crop_left, crop_top;
} sdt_bucket_fit;

/* false + a VALIDATION sentence naming the option (`prefix` + bucket_min_side, bucket_max_side,
 * bucket_step, bucket_max_area) and the fix when the rules make no bucket list kohya would:
 * step not a positive multiple of 8, sides not multiples of the step or out of order, the
 * square bucket (the largest area's) outside the side limits. */
bool sdt_bucket_rules_check(const sdt_bucket_rules *r, const char *prefix, sdt_error *error);
/* The list; false only when out of memory (the rules are checked first). */
bool sdt_buckets_make(const sdt_bucket_rules *r, sdt_bucket_list *out, sdt_error *error);
void sdt_buckets_free(sdt_bucket_list *list);

/* The bucket of an image w x h, its resize and its crop: centred unless random_crop, then
 * drawn from (seed, name). */
sdt_bucket_fit sdt_bucket_fit_image(const sdt_bucket_list *list, int w, int h, bool random_crop, uint64_t seed,
                                    const char *name);

#endif
