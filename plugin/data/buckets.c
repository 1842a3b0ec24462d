/* buckets.c - kohya's bucket list, selection, resize and crop; see buckets.h. */
#include "data/buckets.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_rng.h"

bool sdt_bucket_rules_check(const sdt_bucket_rules *r, const char *p, sdt_error *error)
{
    if (r->step < 8 || r->step % 8 || r->step > SDT_BUCKET_MAX_SIDE_LIMIT)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%sbucket_step is %d; it must be a multiple of 8 (the VAE's factor) up to %d, "
                        "e.g. 64 (the default), which every Stable Diffusion UNet accepts",
                        p, r->step, SDT_BUCKET_MAX_SIDE_LIMIT);
    if (r->min_side < r->step || r->min_side % r->step)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%sbucket_min_side is %d; it must be a positive multiple of %sbucket_step (%d), "
                        "e.g. %d",
                        p, r->min_side, p, r->step, 4 * r->step);
    if (r->max_side < r->min_side || r->max_side % r->step || r->max_side > SDT_BUCKET_MAX_SIDE_LIMIT)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%sbucket_max_side is %d; it must be a multiple of %sbucket_step (%d) from "
                        "%sbucket_min_side (%d) to %d",
                        p, r->max_side, p, r->step, p, r->min_side, SDT_BUCKET_MAX_SIDE_LIMIT);
    int64_t square = (int64_t)(sqrt((double)r->max_area) / r->step) * r->step;
    if (square < r->min_side)
        return sdt_fail(
            error, SDT_ERR_VALIDATION,
            "%sbucket_max_area is %lld pixels, smaller than the smallest bucket "
            "(%sbucket_min_side %d squared = %lld): raise the area (0 = width x height) or lower %sbucket_min_side",
            p, (long long)r->max_area, p, r->min_side, (long long)r->min_side * r->min_side, p);
    if (square > r->max_side)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%sbucket_max_area is %lld pixels, whose square bucket (%lldx%lld) is past "
                        "%sbucket_max_side (%d): raise it to at least %lld or lower the area",
                        p, (long long)r->max_area, (long long)square, (long long)square, p, r->max_side,
                        (long long)square);
    return true;
}

static int compare_buckets(const void *a, const void *b)
{
    const sdt_bucket *x = a, *y = b;
    if (x->width != y->width) return x->width < y->width ? -1 : 1;
    return (x->height > y->height) - (x->height < y->height);
}

static void add_unique(sdt_bucket_list *l, int w, int h)
{
    for (int i = 0; i < l->n; i++)
        if (l->items[i].width == w && l->items[i].height == h) return;
    l->items[l->n++] = (sdt_bucket){w, h};
}

bool sdt_buckets_make(const sdt_bucket_rules *r, sdt_bucket_list *out, sdt_error *error)
{
    memset(out, 0, sizeof *out);
    int widths = (r->max_side - r->min_side) / r->step + 1;
    out->items = malloc((size_t)(2 * widths + 1) * sizeof *out->items);
    if (!out->items) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory for the bucket list");
    int square = (int)(sqrt((double)r->max_area) / r->step) * r->step; /* Python's int(math.sqrt(a) // d) * d */
    add_unique(out, square, square);
    for (int w = r->min_side; w <= r->max_side; w += r->step) {
        int64_t h = (r->max_area / w) / r->step * r->step;
        if (h > r->max_side) h = r->max_side;
        if (h < r->min_side) continue;
        add_unique(out, w, (int)h);
        add_unique(out, (int)h, w);
    }
    qsort(out->items, (size_t)out->n, sizeof *out->items, compare_buckets);
    return true;
}

void sdt_buckets_free(sdt_bucket_list *list)
{
    if (!list) return;
    free(list->items);
    memset(list, 0, sizeof *list);
}

/* FNV-1a of the file's name: the random crop's stream, independent of the dataset's order. */
static uint64_t name_hash(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *c = (const unsigned char *)(name ? name : ""); *c; c++) h = (h ^ *c) * 0x100000001b3ull;
    return h;
}

sdt_bucket_fit sdt_bucket_fit_image(const sdt_bucket_list *list, int w, int h, bool random_crop, uint64_t seed,
                                    const char *name)
{
    double aspect = (double)w / h;
    int best = -1;
    for (int i = 0; i < list->n && best < 0; i++)
        if (list->items[i].width == w && list->items[i].height == h) best = i;
    if (best < 0) { /* numpy's argmin of |bucket ratio - image ratio|: the first of equal errors */
        double best_error = INFINITY;
        for (int i = 0; i < list->n; i++) {
            double e = fabs((double)list->items[i].width / list->items[i].height - aspect);
            if (e < best_error) {
                best_error = e;
                best = i;
            }
        }
    }
    sdt_bucket_fit f = {.bucket = best, .width = list->items[best].width, .height = list->items[best].height};
    double scale = aspect > (double)f.width / f.height ? (double)f.height / h : (double)f.width / w;
    f.resized_width = (int)(w * scale + 0.5);
    f.resized_height = (int)(h * scale + 0.5);
    /* float rounding must never leave the resized image short of the bucket */
    if (f.resized_width < f.width) f.resized_width = f.width;
    if (f.resized_height < f.height) f.resized_height = f.height;
    int trim_w = f.resized_width - f.width, trim_h = f.resized_height - f.height;
    if (random_crop) {
        sdt_data_rng rng = sdt_data_rng_derived(seed, name_hash(name));
        f.crop_left = (int)sdt_data_rng_below(&rng, (uint64_t)trim_w + 1);
        f.crop_top = (int)sdt_data_rng_below(&rng, (uint64_t)trim_h + 1);
    } else {
        f.crop_left = trim_w / 2;
        f.crop_top = trim_h / 2;
    }
    return f;
}
