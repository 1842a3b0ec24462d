/* test_buckets.c - aspect-ratio buckets through the dataset loader: each image's bucket, resize
 * and crop (the crop's place checked on the pixels of a gradient image), the random crop's seeding,
 * and the data order's batches: one bucket each, the same after a resume. The bucket lists and
 * fits themselves are checked against kohya's code by buckets_vs_kohya.py. */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "data/data_order.h"
#include "data/dataset.h"
#include "data_test_util.h"
#include "dataset_test_util.h"
#include "sdt_test.h"

#include "stb_image_write_static.h"

/* Red = x, green = y, blue 128: a linear function survives a resize, so a pixel tells where it came from. */
static void write_gradient(const char *dir, const char *name, int w, int h)
{
    uint8_t *rgb = malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = rgb + ((size_t)y * w + x) * 3;
            p[0] = (uint8_t)x;
            p[1] = (uint8_t)y;
            p[2] = 128;
        }
    char *path = g_build_filename(dir, name, NULL);
    CHECK(stbi_write_png(path, w, h, 3, rgb, w * 3), "write %s", path);
    g_free(path);
    free(rgb);
}

/* The source coordinate a pixel of channel c at (x, y) of the item came from: its value (x or y). */
static double source_coord(const sdt_dataset_item *it, int c, int x, int y)
{
    return (it->pixels[(size_t)c * it->width * it->height + (size_t)y * it->width + x] + 1.0) * 127.5;
}

/* Where a resized pixel's centre lies in the source image (half-pixel centres, as every resize maps them). */
static double expected_coord(int resized_index, int resized, int source)
{
    return (resized_index + 0.5) * source / resized - 0.5;
}

typedef struct expect {
    const char *name;
    int w, h;                      /* the image */
    int bw, bh, rw, rh, left, top; /* by hand from kohya's rules: area 96x96, sides 32..128, step 32 */
} expect;

/* Buckets 32x128, 64x128, 96x96, 128x32, 128x64. 180x100 (1.8) is nearest 128x64 (2); it is
 * taller than the bucket's shape, so its width fits: 128 x round(100 * 128 / 180) = 128 x 71, crop
 * top (71 - 64) // 2 = 3. 160x90: 128 x 72, top 4. The tall ones mirror them; the squares go to
 * 96x96, 96x96 exactly kept. */
static const expect cases[] = {
    {"a_wide.png", 180, 100, 128, 64, 128, 71, 0, 3}, {"b_wide.png", 160, 90, 128, 64, 128, 72, 0, 4},
    {"c_tall.png", 100, 180, 64, 128, 71, 128, 3, 0}, {"d_tall.png", 90, 160, 64, 128, 72, 128, 4, 0},
    {"e_square.png", 100, 100, 96, 96, 96, 96, 0, 0}, {"f_square.png", 120, 120, 96, 96, 96, 96, 0, 0},
    {"g_square.png", 96, 96, 96, 96, 96, 96, 0, 0},
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

static bool load(const char *dir, const sdt_bucket_list *list, bool random_crop, uint64_t seed, sdt_dataset *ds)
{
    sdt_dataset_options o = {
        .folder = dir, .width = 96, .height = 96, .buckets = list, .random_crop = random_crop, .crop_seed = seed};
    sdt_error error = {0};
    bool ok = sdt_dataset_load(&o, ds, &error);
    CHECK(ok, "load: %s", error.message);
    return ok;
}

/* The item's pixels show the crop it claims: the gradient at its corner rows and columns. */
static void check_crop_pixels(const sdt_dataset_item *it, const expect *c, const char *what)
{
    double worst = 0;
    for (int y = 2; y < it->height - 2; y += 7) { /* green = the source row; away from the clamped edges */
        double want = expected_coord(y + it->crop_top, it->resized_height, c->h);
        worst = fmax(worst, fabs(source_coord(it, 1, it->width / 2, y) - want));
    }
    for (int x = 2; x < it->width - 2; x += 7) {
        double want = expected_coord(x + it->crop_left, it->resized_width, c->w);
        worst = fmax(worst, fabs(source_coord(it, 0, x, it->height / 2) - want));
    }
    CHECK(worst < 1.0, "%s %s: the pixels are off the claimed crop (left %d, top %d) by up to %.2f source pixels", what,
          c->name, it->crop_left, it->crop_top, worst);
}

static void test_fits(const char *dir, const sdt_bucket_list *list)
{
    sdt_dataset ds;
    if (!load(dir, list, false, 0, &ds)) return;
    CHECK(ds.n_items == N_CASES, "%d images loaded", ds.n_items);
    for (int i = 0; i < N_CASES; i++) {
        const expect *c = &cases[i];
        const sdt_dataset_item *it = find_item(&ds, c->name);
        if (!it) {
            CHECK(false, "%s not loaded", c->name);
            continue;
        }
        CHECK(it->width == c->bw && it->height == c->bh && it->resized_width == c->rw && it->resized_height == c->rh &&
                  it->crop_left == c->left && it->crop_top == c->top && it->source_width == c->w &&
                  it->source_height == c->h,
              "%s (%dx%d): bucket %dx%d resized %dx%d crop %d,%d; want %dx%d, %dx%d, %d,%d", c->name, c->w, c->h,
              it->width, it->height, it->resized_width, it->resized_height, it->crop_left, it->crop_top, c->bw, c->bh,
              c->rw, c->rh, c->left, c->top);
        check_crop_pixels(it, c, "centre crop");
    }
    sdt_dataset_free(&ds);
}

static void test_random_crop(const char *dir, const sdt_bucket_list *list)
{
    sdt_dataset a, b;
    int differs = 0;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        if (!load(dir, list, true, seed, &a)) return;
        if (!load(dir, list, true, seed, &b)) {
            sdt_dataset_free(&a);
            return;
        }
        for (int i = 0; i < N_CASES; i++) {
            const expect *c = &cases[i];
            const sdt_dataset_item *x = find_item(&a, c->name), *y = find_item(&b, c->name);
            if (!x || !y) continue;
            CHECK(x->crop_left >= 0 && x->crop_left <= c->rw - c->bw && x->crop_top >= 0 &&
                      x->crop_top <= c->rh - c->bh,
                  "%s: random crop %d,%d outside 0..%d, 0..%d", c->name, x->crop_left, x->crop_top, c->rw - c->bw,
                  c->rh - c->bh);
            CHECK(x->crop_left == y->crop_left && x->crop_top == y->crop_top &&
                      !memcmp(x->pixels, y->pixels, sizeof(float) * 3 * (size_t)x->width * x->height),
                  "%s: the same seed crops the same (a resumed run caches the same latents)", c->name);
            differs += x->crop_left != c->left || x->crop_top != c->top;
            check_crop_pixels(x, c, "random crop");
        }
        sdt_dataset_free(&a);
        sdt_dataset_free(&b);
    }
    CHECK(differs > 0, "the random crop never left the centre in 4 seeds x 4 croppable images");
}

static void test_batches(const char *dir, const sdt_bucket_list *list)
{
    sdt_dataset ds;
    if (!load(dir, list, false, 0, &ds)) return;
    sdt_data_order o, resumed;
    sdt_error error = {0};
    CHECK(sdt_data_order_init(&o, &ds, 2, 77, &error), "order: %s", error.message);
    CHECK(o.n_groups == 3, "3 buckets are 3 groups, got %d", o.n_groups);
    int64_t epoch = 0;
    int position = 0;
    int saved[64][2];
    for (int k = 0; k < 40; k++) {
        if (k == 13) sdt_data_order_get_position(&o, &epoch, &position);
        const int *batch = sdt_data_order_next(&o, NULL, NULL);
        const sdt_dataset_item *x = &ds.items[batch[0]], *y = &ds.items[batch[1]];
        CHECK(x->width == y->width && x->height == y->height, "batch %d mixes buckets: %s %dx%d with %s %dx%d", k,
              x->path, x->width, x->height, y->path, y->width, y->height);
        if (k >= 13) memcpy(saved[k - 13], batch, sizeof saved[0]);
    }
    CHECK(sdt_data_order_init(&resumed, &ds, 2, 77, &error) &&
              sdt_data_order_set_position(&resumed, epoch, position, &error),
          "resume: %s", error.message);
    for (int k = 13; k < 40; k++) {
        const int *batch = sdt_data_order_next(&resumed, NULL, NULL);
        CHECK(batch[0] == saved[k - 13][0] && batch[1] == saved[k - 13][1], "resumed batch %d differs", k);
    }
    sdt_data_order_free(&o);
    sdt_data_order_free(&resumed);
    sdt_dataset_free(&ds);
}

int main(void)
{
    char *dir = g_dir_make_tmp("sdt-buckets-XXXXXX", NULL);
    for (int i = 0; i < N_CASES; i++) write_gradient(dir, cases[i].name, cases[i].w, cases[i].h);
    sdt_bucket_rules rules = {96 * 96, 32, 128, 32};
    sdt_bucket_list list;
    sdt_error error = {0};
    CHECK(sdt_bucket_rules_check(&rules, "", &error) && sdt_buckets_make(&rules, &list, &error), "buckets: %s",
          error.message);
    CHECK(list.n == 5 && list.items[0].width == 32 && list.items[0].height == 128 && list.items[2].width == 96 &&
              list.items[4].width == 128 && list.items[4].height == 64,
          "buckets 32x128, 64x128, 96x96, 128x32, 128x64 (got %d)", list.n);
    test_fits(dir, &list);
    test_random_crop(dir, &list);
    test_batches(dir, &list);
    sdt_buckets_free(&list);
    test_rmtree(dir);
    g_free(dir);
    return sdt_test_finish("buckets");
}
