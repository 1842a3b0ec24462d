/* test_demo_dataset.c - sdt-make-demo-dataset writes N decodable PNGs of the
 * concept with matching captions, which the trainer's dataset loader takes
 * whole; byte-identical for a seed, different for another seed; bad arguments
 * refused. Count, size and seed are random (seed printed). */
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"
#include "concept_score.h"
#include "data/image_io.h"
#include "demo_test_util.h"
#include "io_test_util.h"
#include "sdt_test.h"

typedef struct run_args {
    int count, size;
    unsigned long long seed;
} run_args;

static int make_dataset(const char *dir, const run_args *a)
{
    char count[16], size[16], seed[32];
    snprintf(count, sizeof count, "%d", a->count);
    snprintf(size, sizeof size, "%d", a->size);
    snprintf(seed, sizeof seed, "%llu", a->seed);
    char *argv[] = {SDT_MAKE_DEMO_DATASET, (char *)dir, "--count", count, "--size", size, "--seed", seed, NULL};
    return demo_run(argv, NULL);
}

static char *stem_path(const char *dir, int i, const char *ext)
{
    return g_strdup_printf("%s/demo_%03d.%s", dir, i, ext);
}

static int count_entries(const char *dir)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    int n = 0;
    if (d) {
        while (g_dir_read_name(d)) n++;
        g_dir_close(d);
    }
    return n;
}

/* Close to the concept's colour (the yellow of world.h, which the renderer jitters by 12). */
static bool is_concept_colour(const uint8_t *p)
{
    const uint8_t *y = world_colour_rgb(WORLD_CONCEPT_COLOUR);
    int dr = p[0] - y[0], dg = p[1] - y[1], db = p[2] - y[2];
    return dr * dr + dg * dg + db * db <= 40 * 40;
}

/* Where the concept-coloured pixels are: row and column thirds by their centroid; false
 * when the centroid is within a pixel of a third's border (either name fits). */
static bool concept_position(const uint8_t *rgb, int size, int *row, int *col, int *n_orange)
{
    double sx = 0, sy = 0;
    int n = 0;
    for (int y = 0; y < size; y++)
        for (int x = 0; x < size; x++) {
            const uint8_t *p = rgb + ((size_t)y * size + x) * 3;
            if (is_concept_colour(p)) {
                sx += x + 0.5;
                sy += y + 0.5;
                n++;
            }
        }
    *n_orange = n;
    if (!n) return false;
    double cx = sx / n, cy = sy / n, third = size / 3.0;
    double dx = fabs(cx - third) < fabs(cx - 2 * third) ? fabs(cx - third) : fabs(cx - 2 * third);
    double dy = fabs(cy - third) < fabs(cy - 2 * third) ? fabs(cy - third) : fabs(cy - 2 * third);
    *col = (int)(cx / third);
    *row = (int)(cy / third);
    return dx > 1.0 && dy > 1.0;
}

static void check_caption_position(const char *caption, int row, int col, const char *name)
{
    static const char *const places[3][3] = {
        {"top left", "top", "top right"}, {"left", "center", "right"}, {"bottom left", "bottom", "bottom right"}};
    char *suffix = g_strdup_printf(" background, %s", places[row][col]);
    CHECK(g_str_has_suffix(caption, suffix), "%s: the star sits at the %s but the caption says '%s'", name,
          places[row][col], caption);
    g_free(suffix);
}

static void check_image(const char *dir, int i, int size)
{
    char *png = stem_path(dir, i, "png"), *txt = stem_path(dir, i, "txt");
    int w = 0, h = 0;
    sdt_error error = {0};
    uint8_t *rgb = sdt_image_decode(png, 3, SDT_DATASET_DEFAULT_MAX_PIXELS, &w, &h, &error);
    CHECK(rgb && w == size && h == size, "%s: decodes to %dx%d (%s), expected %dx%d", png, w, h, error.message, size,
          size);
    char *caption = NULL;
    gsize len = 0;
    CHECK(g_file_get_contents(txt, &caption, &len, NULL), "%s is missing", txt);
    if (caption) {
        CHECK(len > 0 && caption[len - 1] != '\n' && io_contains(caption, "background"),
              "%s: caption '%s' is empty, ends in a newline or names no background", txt, caption);
    }
    if (rgb && w == size && h == size) {
        int row = 0, col = 0, n_orange = 0;
        bool clear = concept_position(rgb, size, &row, &col, &n_orange);
        CHECK(n_orange * 100 >= size * size, "%s: only %d of %d pixels show the concept's colour", png, n_orange,
              size * size);
        concept_reading r = concept_score(rgb, size);
        CHECK(r.score > CONCEPT_SCORE_THRESHOLD, "%s: the concept score is %.3f (colour %.2f, star %.2f)", png, r.score,
              r.colour_share, r.star_probability);
        const int corners[4][2] = {{0, 0}, {size - 1, 0}, {0, size - 1}, {size - 1, size - 1}};
        for (int c = 0; c < 4; c++) {
            const uint8_t *p = rgb + ((size_t)corners[c][1] * size + corners[c][0]) * 3;
            CHECK(!is_concept_colour(p), "%s: the background corner has the concept's colour", png);
        }
        if (clear && caption) check_caption_position(caption, row, col, png);
    }
    free(rgb);
    g_free(caption);
    g_free(png);
    g_free(txt);
}

/* Whether every file of the two datasets is byte-identical. */
static bool same_dataset(const char *a, const char *b, int count)
{
    bool same = true;
    const char *exts[] = {"png", "txt"};
    for (int i = 0; i < count; i++)
        for (int e = 0; e < 2; e++) {
            char *x = stem_path(a, i, exts[e]), *y = stem_path(b, i, exts[e]);
            same = same && demo_same_file(x, y);
            g_free(x);
            g_free(y);
        }
    return same;
}

/* The trainer's loader (plugin/data/dataset.c) takes every image, no warning, with its caption. */
static void check_loads_as_training_data(const char *dir, int count)
{
    sdt_dataset_options opt;
    memset(&opt, 0, sizeof opt);
    opt.folder = dir;
    opt.width = opt.height = 64;
    sdt_dataset ds;
    sdt_error error = {0};
    bool ok = sdt_dataset_load(&opt, &ds, &error);
    CHECK(ok, "the dataset loader refuses %s: %s", dir, error.message);
    if (!ok) return;
    CHECK(ds.n_items == count && ds.n_warnings == 0, "the loader took %d of %d images with %d warnings%s%s", ds.n_items,
          count, ds.n_warnings, ds.n_warnings ? ": " : "", ds.n_warnings ? ds.warnings[0] : "");
    for (int i = 0; i < ds.n_items; i++) {
        char *stem = g_strndup(ds.items[i].path, strlen(ds.items[i].path) - strlen(".png"));
        char *txt = g_strconcat(stem, ".txt", NULL), *caption = NULL;
        g_file_get_contents(txt, &caption, NULL, NULL);
        CHECK(!g_strcmp0(ds.items[i].caption, caption), "%s: loader caption '%s', file '%s'", ds.items[i].path,
              ds.items[i].caption, caption);
        g_free(caption);
        g_free(txt);
        g_free(stem);
    }
    sdt_dataset_free(&ds);
}

static void check_generated(sdt_test_rng *r, const char *tmp)
{
    run_args a = {2 + (int)(sdt_test_next(r) % 5), 48 + (int)(sdt_test_next(r) % 33), sdt_test_next(r) % 1000000};
    printf("count %d, size %d, seed %llu\n", a.count, a.size, a.seed);
    char *d1 = g_build_filename(tmp, "first", "dataset", NULL); /* parents are created */
    char *d2 = g_build_filename(tmp, "again", NULL), *d3 = g_build_filename(tmp, "other", NULL);
    CHECK(make_dataset(d1, &a) == 0, "the generator failed");
    CHECK(count_entries(d1) == 2 * a.count, "%s holds %d files, expected %d", d1, count_entries(d1), 2 * a.count);
    for (int i = 0; i < a.count; i++) check_image(d1, i, a.size);
    check_loads_as_training_data(d1, a.count);
    CHECK(make_dataset(d2, &a) == 0 && same_dataset(d1, d2, a.count), "the same seed gave different files");
    run_args b = a;
    b.seed++;
    CHECK(make_dataset(d3, &b) == 0 && !same_dataset(d1, d3, a.count), "seeds %llu and %llu gave the same files",
          a.seed, b.seed);
    char *first = stem_path(d1, 0, "png"), *second = stem_path(d1, 1, "png");
    CHECK(!demo_same_file(first, second), "the first two images are identical");
    g_free(first);
    g_free(second);
    g_free(d1);
    g_free(d2);
    g_free(d3);
}

static void expect_status(const char *what, char **argv, int want)
{
    int got = demo_run(argv, NULL);
    CHECK(got == want, "%s: exit %d, expected %d", what, got, want);
}

static void check_bad_arguments(const char *tmp)
{
    char *out = g_build_filename(tmp, "bad", NULL), *file = g_build_filename(tmp, "a-file", NULL);
    char *under_file = g_build_filename(file, "dataset", NULL);
    io_write_bytes(file, "x", 1);
    char *a1[] = {SDT_MAKE_DEMO_DATASET, "--count", "3", NULL};
    expect_status("no OUT_DIR", a1, 2);
    char *a2[] = {SDT_MAKE_DEMO_DATASET, out, "--size", "8", NULL};
    expect_status("--size 8", a2, 2);
    char *a3[] = {SDT_MAKE_DEMO_DATASET, out, "--count", "0", NULL};
    expect_status("--count 0", a3, 2);
    char *a4[] = {SDT_MAKE_DEMO_DATASET, out, "--seed", "-1", NULL};
    expect_status("--seed -1", a4, 2);
    char *a5[] = {SDT_MAKE_DEMO_DATASET, under_file, "--count", "1", NULL};
    expect_status("OUT_DIR under a file", a5, 1);
    g_free(out);
    g_free(file);
    g_free(under_file);
}

int main(void)
{
    sdt_test_rng r = sdt_test_rng_from_env("demo_demo_dataset");
    char *tmp = io_make_tmpdir();
    check_generated(&r, tmp);
    check_bad_arguments(tmp);
    io_rm_tree(tmp);
    g_free(tmp);
    return sdt_test_finish("demo_demo_dataset");
}
