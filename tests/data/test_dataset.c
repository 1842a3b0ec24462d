/* test_dataset.c - dataset folders: formats, bad files by name, size limits, alpha weights, pixels. */
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_test_util.h"
#include "data/dataset.h"
#include "dataset_test_util.h"
#include "sdt_test.h"

#include "stb_image_write_static.h"

static char *path_in(const char *dir, const char *name)
{
    return g_build_filename(dir, name, NULL);
}

static void write_bytes(const char *dir, const char *name, const void *data, size_t n)
{
    char *p = path_in(dir, name);
    CHECK(g_file_set_contents(p, data, (gssize)n, NULL), "write %s", p);
    g_free(p);
}

static bool warned_about(const sdt_dataset *ds, const char *name)
{
    for (int i = 0; i < ds->n_warnings; i++)
        if (strstr(ds->warnings[i], name)) return true;
    return false;
}

static bool item_ready_drop_bmp(void *user, sdt_dataset_item *item, sdt_error *error)
{
    (*(int *)user)++;
    free(item->pixels); /* as a trainer does once the latent is cached */
    item->pixels = NULL;
    if (g_str_has_suffix(item->path, ".bmp")) {
        sdt_fail(error, SDT_ERR_INTERNAL, "%s: refused by the callback", item->path);
        return false;
    }
    return true;
}

static void test_formats_and_bad_files(sdt_test_rng *rng)
{
    char *dir = g_dir_make_tmp("sdt-dataset-XXXXXX", NULL);
    /* random 64x64 RGB: loaded without resize, pixels must map exactly to x/127.5 - 1 */
    enum { W = 64, H = 64 };
    static uint8_t rgb[W * H * 3];
    for (size_t i = 0; i < sizeof(rgb); i++) rgb[i] = (uint8_t)(sdt_test_next(rng) & 0xff);
    char *p = path_in(dir, "01-random.png");
    CHECK(stbi_write_png(p, W, H, 3, rgb, W * 3), "write png");
    g_free(p);
    static uint8_t solid[32 * 48 * 3];
    for (size_t i = 0; i < sizeof(solid); i += 3) solid[i] = 200, solid[i + 1] = 100, solid[i + 2] = 50;
    p = path_in(dir, "b-solid.bmp");
    CHECK(stbi_write_bmp(p, 32, 48, 3, solid), "bmp");
    g_free(p);
    p = path_in(dir, "c-solid.tga");
    CHECK(stbi_write_tga(p, 32, 48, 3, solid), "tga");
    g_free(p);
    p = path_in(dir, "d-solid.jpg");
    CHECK(stbi_write_jpg(p, 32, 48, 3, solid, 95), "jpg");
    g_free(p);
    /* 1x1 white GIF */
    static const uint8_t gif[] = "GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00,\x00\x00\x00\x00\x01\x00"
                                 "\x01\x00\x00\x02\x02\x44\x01\x00;";
    write_bytes(dir, "e-white.gif", gif, sizeof(gif) - 1);
    write_bytes(dir, "e-white.txt", "white, [name] square\n", 21);
    GString *ppm = g_string_new("P6\n16 8\n255\n");
    for (int i = 0; i < 16 * 8; i++) g_string_append_len(ppm, "\x0a\x14\x1e", 3);
    write_bytes(dir, "j-netpbm.ppm", ppm->str, ppm->len);
    g_string_free(ppm, TRUE);

    /* the bad ones */
    write_bytes(dir, "f-empty.png", "", 0);
    write_bytes(dir, "g-garbage.png", "this is not an image at all", 27);
    GByteArray *huge = png_with_header(100000, 100000);
    static const uint8_t tiny_idat[] = {0x78, 0x9c, 0x63, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01};
    png_chunk(huge, "IDAT", tiny_idat, sizeof(tiny_idat));
    png_end(huge);
    write_bytes(dir, "h-huge.png", huge->data, huge->len);
    g_byte_array_unref(huge);
    GByteArray *whole = png_solid(64, 64, 1, 2, 3);
    png_end(whole);
    write_bytes(dir, "i-truncated.png", whole->data, whole->len / 2);
    g_byte_array_unref(whole);
    /* an IDAT whose length field says 1 GiB in a 60-byte file: stb would allocate 2 GiB for it */
    GByteArray *lying = png_with_header(4, 4);
    static const uint8_t lying_idat[] = {0x3f, 0xff, 0xff, 0xff, 'I', 'D', 'A', 'T', 0x78, 0x9c, 0x63, 0x00};
    g_byte_array_append(lying, lying_idat, sizeof(lying_idat));
    write_bytes(dir, "k-lying-chunk.png", lying->data, lying->len);
    g_byte_array_unref(lying);
    write_bytes(dir, "notes.json", "{}", 2);
    /* captions no image reads: one without its image, one whose extension is not ".txt" */
    write_bytes(dir, "m-orphan.txt", "a caption whose image was deleted\n", 34);
    write_bytes(dir, "c-solid.TXT", "upper-case extension\n", 21);
    char *sub = path_in(dir, "subfolder");
    g_mkdir(sub, 0755);
    g_free(sub);

    sdt_dataset ds;
    const sdt_dataset_item *it0;
    sdt_error error = {0};
    sdt_dataset_options opt = {.folder = dir, .width = 64, .height = 64};
    CHECK(sdt_dataset_load(&opt, &ds, &error), "load: %s", error.message);
    CHECK(ds.n_items == 6, "png, bmp, tga, jpg, gif and ppm load: got %d", ds.n_items);
    it0 = find_item(&ds, "j-netpbm.ppm");
    CHECK(it0 && fabsf(it0->pixels[0] - (10 / 127.5f - 1)) < 1e-6f &&
              fabsf(it0->pixels[2 * 4096] - (30 / 127.5f - 1)) < 1e-6f,
          "ppm colour");
    const char *bad[] = {"f-empty.png", "g-garbage.png", "h-huge.png",   "i-truncated.png", "k-lying-chunk.png",
                         "notes.json",  "subfolder",     "m-orphan.txt", "c-solid.TXT"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(warned_about(&ds, bad[i]), "%s is named in a warning", bad[i]);
    CHECK(!warned_about(&ds, "e-white.txt"), "the caption of e-white.gif is used, not named as unused");
    CHECK(ds.n_warnings == 9, "9 warnings, got %d", ds.n_warnings);
    for (int i = 0; i < ds.n_warnings; i++) {
        if (strstr(ds.warnings[i], "f-empty")) CHECK(strstr(ds.warnings[i], "0 bytes"), "empty: %s", ds.warnings[i]);
        if (strstr(ds.warnings[i], "h-huge"))
            CHECK(strstr(ds.warnings[i], "100000x100000"), "huge: %s", ds.warnings[i]);
        if (strstr(ds.warnings[i], "k-lying-chunk"))
            CHECK(strstr(ds.warnings[i], "length field runs past the end"), "lying chunk: %s", ds.warnings[i]);
    }

    const sdt_dataset_item *it = find_item(&ds, "01-random.png");
    (void)it0;
    CHECK(it && it->width == W && it->height == H && it->pixels, "random png kept at 64x64");
    if (it && it->pixels) {
        int bad_px = 0;
        for (int c = 0; c < 3; c++)
            for (int i = 0; i < W * H; i++)
                if (it->pixels[c * W * H + i] != rgb[i * 3 + c] / 127.5f - 1.0f) bad_px++;
        CHECK(bad_px == 0, "%d pixel values differ from x/127.5-1 (CHW order)", bad_px);
        CHECK(!strcmp(it->caption, "random"), "caption from the file name: %s", it->caption);
    }
    const char *solids[] = {"b-solid.bmp", "c-solid.tga", "d-solid.jpg"};
    for (int s = 0; s < 3; s++) {
        it = find_item(&ds, solids[s]);
        CHECK(it && it->width == 64 && it->height == 64, "%s resized to 64x64", solids[s]);
        if (!it) continue;
        double tol = strstr(solids[s], "jpg") ? 0.05 : 1e-6;
        float want[3] = {200 / 127.5f - 1, 100 / 127.5f - 1, 50 / 127.5f - 1};
        double worst = 0;
        for (int c = 0; c < 3; c++)
            for (int i = 0; i < 64 * 64; i++) worst = fmax(worst, fabs(it->pixels[c * 4096 + i] - want[c]));
        CHECK(worst <= tol, "%s: a solid colour stays solid after resize (max error %g)", solids[s], worst);
        CHECK(it->loss_weight == NULL, "no alpha requested: no weight");
    }
    it = find_item(&ds, "e-white.gif");
    CHECK(it && fabs(it->pixels[0] - 1.0f) < 1e-6 && fabs(it->pixels[3 * 4096 - 1] - 1.0f) < 1e-6, "gif is white");
    CHECK(it && !strcmp(it->caption, "white, [name] square"), "gif caption from its .txt");
    sdt_dataset_drop_pixels(&ds, 0);
    CHECK(ds.items[0].pixels == NULL, "pixels dropped");
    sdt_dataset_free(&ds);

    /* item_ready sees every item as it loads; it can drop pixels or refuse an item. */
    int calls = 0;
    opt.item_ready = item_ready_drop_bmp;
    opt.user = &calls;
    CHECK(sdt_dataset_load(&opt, &ds, &error), "load with a callback");
    CHECK(calls == 6 && ds.n_items == 5 && warned_about(&ds, "refused by the callback"), "callback: %d calls", calls);
    for (int i = 0; i < ds.n_items; i++) CHECK(ds.items[i].pixels == NULL, "pixels dropped by the callback");
    sdt_dataset_free(&ds);
    opt.item_ready = NULL;

    /* A lower pixel limit turns large images into warnings too. */
    opt.max_pixels = 32 * 32;
    CHECK(sdt_dataset_load(&opt, &ds, &error), "load with a limit");
    CHECK(ds.n_items == 2 && warned_about(&ds, "01-random.png"),
          "64x64 refused at a 1024-pixel limit (the gif and ppm stay)");
    sdt_dataset_free(&ds);

    /* Do not resize: 32x48 and 64x64 keep their sizes; the 1x1 GIF is not a multiple of 8. */
    opt.max_pixels = 0;
    opt.do_not_resize = true;
    CHECK(sdt_dataset_load(&opt, &ds, &error), "load without resize");
    it = find_item(&ds, "b-solid.bmp");
    CHECK(it && it->width == 32 && it->height == 48, "native size kept");
    CHECK(!find_item(&ds, "e-white.gif") && warned_about(&ds, "e-white.gif"), "1x1 refused by name without resize");
    sdt_dataset_free(&ds);
    test_rmtree(dir);
    g_free(dir);
}

static void test_alpha(void)
{
    char *dir = g_dir_make_tmp("sdt-alpha-XXXXXX", NULL);
    enum { W = 128, H = 64 }; /* non-square: A1111 transposes this mask */
    static uint8_t rgba[W * H * 4];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            uint8_t *p = rgba + (y * W + x) * 4;
            p[0] = p[1] = p[2] = 128;
            p[3] = x < W / 2 ? 0 : 255; /* left half transparent */
        }
    char *p = path_in(dir, "half.png");
    CHECK(stbi_write_png(p, W, H, 4, rgba, W * 4), "write");
    g_free(p);
    for (size_t i = 0; i < sizeof(rgba); i += 4) rgba[i + 3] = 255;
    p = path_in(dir, "opaque.png");
    CHECK(stbi_write_png(p, W, H, 4, rgba, W * 4), "write");
    g_free(p);
    static uint8_t rgb[W * H * 3];
    p = path_in(dir, "rgb.png");
    CHECK(stbi_write_png(p, W, H, 3, rgb, W * 3), "write");
    g_free(p);

    sdt_dataset ds;
    sdt_error error = {0};
    sdt_dataset_options opt = {.folder = dir, .width = W, .height = H, .alpha_as_loss_weight = true};
    CHECK(sdt_dataset_load(&opt, &ds, &error) && ds.n_items == 3, "load: %s", error.message);
    const int LW = W / 8, LH = H / 8;
    const sdt_dataset_item *half = find_item(&ds, "half.png"), *opaque = find_item(&ds, "opaque.png"),
                           *plain = find_item(&ds, "rgb.png");
    CHECK(half && half->loss_weight, "weight for an RGBA image");
    if (half && half->loss_weight) {
        double lo = INFINITY, sum = 0;
        for (int i = 0; i < LW * LH; i++) {
            lo = fmin(lo, half->loss_weight[i]);
            sum += half->loss_weight[i];
        }
        CHECK(fabs(lo) < 1e-6 && fabs(sum / (LW * LH) - 1) < 1e-5, "min 0, mean 1 (min %g, mean %g)", lo,
              sum / (LW * LH));
        CHECK(half->loss_weight[0] < 0.1f && half->loss_weight[LW - 1] > 1.5f &&
                  half->loss_weight[(LH - 1) * LW] < 0.1f,
              "latent %dx%d mask: transparent left, opaque right (not transposed)", LW, LH);
    }
    bool ones = opaque && opaque->loss_weight;
    for (int i = 0; ones && i < LW * LH; i++) ones = opaque->loss_weight[i] == 1.0f;
    CHECK(ones, "a fully opaque RGBA image gets weight 1 everywhere (A1111: NaN)");
    CHECK(plain && plain->loss_weight == NULL, "RGB image: no weight (1 everywhere)");
    sdt_dataset_free(&ds);
    test_rmtree(dir);
    g_free(dir);
}

static void test_folder_errors(void)
{
    sdt_dataset ds;
    sdt_error error = {0};
    char *dir = g_dir_make_tmp("sdt-empty-XXXXXX", NULL);
    sdt_dataset_options opt = {.folder = dir, .width = 64, .height = 64};
    CHECK(!sdt_dataset_load(&opt, &ds, &error) && strstr(error.message, "no images"), "empty folder: %s",
          error.message);
    write_bytes(dir, "zero.png", "", 0);
    CHECK(!sdt_dataset_load(&opt, &ds, &error) && strstr(error.message, "zero.png"),
          "only bad files: the error quotes the first: %s", error.message);
    opt.folder = "/nonexistent/sdt-dataset";
    CHECK(!sdt_dataset_load(&opt, &ds, &error) && strstr(error.message, "/nonexistent/sdt-dataset"), "missing: %s",
          error.message);
    opt.folder = "";
    CHECK(!sdt_dataset_load(&opt, &ds, &error) && strstr(error.message, "empty"), "no folder: %s", error.message);
    opt.folder = dir;
    opt.width = 100;
    CHECK(!sdt_dataset_load(&opt, &ds, &error) && strstr(error.message, "multiples of 8"), "bad size: %s",
          error.message);
    opt.width = 64;
    opt.caption.word_regex = "([";
    CHECK(!sdt_dataset_load(&opt, &ds, &error) && strstr(error.message, "regex"), "bad regex: %s", error.message);
    test_rmtree(dir);
    g_free(dir);
}

/* Issue 20: files that are not what they seem. A FIFO named as a caption or an image would block
 * open() and read() forever (this test would hang), a caption linked to /dev/zero would be read
 * until memory ran out, and a truncated JPEG was reported with the PNG decoder's "Not a PNG".
 * Each is skipped with a warning that names the file and what is wrong with it. */
static void test_special_files(sdt_test_rng *rng)
{
    char *dir = g_dir_make_tmp("sdt-special-XXXXXX", NULL);
    enum { W = 64, H = 64 };
    static uint8_t rgb[W * H * 3];
    for (size_t i = 0; i < sizeof(rgb); i++) rgb[i] = (uint8_t)(sdt_test_next(rng) & 0xff);
    const char *images[] = {"a-piped-caption.png", "b-zero-caption.png", "e-fine.png"};
    for (size_t i = 0; i < 3; i++) {
        char *p = path_in(dir, images[i]);
        CHECK(stbi_write_png(p, W, H, 3, rgb, W * 3), "write %s", p);
        g_free(p);
    }
    char *p = path_in(dir, "a-piped-caption.txt");
    CHECK(mkfifo(p, 0644) == 0, "mkfifo %s", p);
    g_free(p);
    p = path_in(dir, "b-zero-caption.txt");
    CHECK(symlink("/dev/zero", p) == 0, "symlink %s", p);
    g_free(p);
    p = path_in(dir, "c-piped.png");
    CHECK(mkfifo(p, 0644) == 0, "mkfifo %s", p);
    g_free(p);
    /* a JPEG cut in the middle of its entropy-coded data, and one cut inside its header */
    p = path_in(dir, "whole.jpg");
    CHECK(stbi_write_jpg(p, W, H, 3, rgb, 95), "jpg");
    gchar *jpg = NULL;
    gsize jpg_len = 0;
    CHECK(g_file_get_contents(p, &jpg, &jpg_len, NULL) && jpg_len > 400, "read %s", p);
    g_unlink(p);
    g_free(p);
    write_bytes(dir, "d-truncated.jpg", jpg, jpg_len / 2);
    write_bytes(dir, "d-truncated-header.jpg", jpg, 40);
    g_free(jpg);

    sdt_dataset ds;
    sdt_error error = {0};
    sdt_dataset_options opt = {.folder = dir, .width = 64, .height = 64};
    CHECK(sdt_dataset_load(&opt, &ds, &error), "load: %s", error.message);
    CHECK(ds.n_items == 1 && find_item(&ds, "e-fine.png"), "only e-fine.png loads: %d items", ds.n_items);
    struct {
        const char *name, *why;
    } expected[] = {
        {"a-piped-caption.txt", "named pipe (FIFO)"}, {"b-zero-caption.txt", "character device"},
        {"c-piped.png", "named pipe (FIFO)"},         {"d-truncated.jpg", "JPEG"},
        {"d-truncated-header.jpg", "JPEG"},
    };
    for (size_t k = 0; k < sizeof expected / sizeof expected[0]; k++) {
        const char *found = NULL;
        for (int i = 0; i < ds.n_warnings; i++)
            if (strstr(ds.warnings[i], expected[k].name) && !strstr(ds.warnings[i], "Not a PNG"))
                found = ds.warnings[i];
        CHECK(found && strstr(found, expected[k].why), "%s: a warning saying %s: %s", expected[k].name, expected[k].why,
              found ? found : "(none without \"Not a PNG\")");
    }
    for (int i = 0; i < ds.n_warnings; i++) printf("   warning: %s\n", ds.warnings[i]);
    sdt_dataset_free(&ds);
    test_rmtree(dir);
    g_free(dir);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("dataset");
    test_formats_and_bad_files(&rng);
    test_alpha();
    test_folder_errors();
    test_special_files(&rng);
    return sdt_test_finish("dataset");
}
