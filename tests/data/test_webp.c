/* test_webp.c - WebP training images (plugin/data/webp_io.h through image_io.h and the dataset):
 *  - lossless RGB and RGBA decode to exactly the encoded pixels, in 3 or 4 channels;
 *  - a lossy image decodes close to its colour;
 *  - an animation gives its first frame;
 *  - an EXIF orientation chunk (6: rotate 90 clockwise) turns the pixels as exif_orientation does;
 *  - a truncated WebP and a damaged header are skipped, each named with its reason, while the
 *    good WebP files load as a dataset.
 * Seed printed; SDT_TEST_SEED replays it. */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <webp/encode.h>
#include <webp/mux.h>

#include "data/dataset.h"
#include "dataset_test_util.h"
#include "data/exif_orientation.h"
#include "data/image_io.h"
#include "sdt_test.h"

enum { W = 48, H = 32 };

static char *write_webp(const char *dir, const char *name, const uint8_t *data, size_t n)
{
    char *p = g_build_filename(dir, name, NULL);
    CHECK(g_file_set_contents(p, (const char *)data, (gssize)n, NULL), "write %s", p);
    return p;
}

static void check_pixels(const char *path, int want, const uint8_t *expect, int ew, int eh, int tolerance,
                         const char *what)
{
    sdt_error err = {0};
    int w = 0, h = 0;
    uint8_t *px = sdt_image_decode(path, want, 1 << 24, &w, &h, &err);
    CHECK(px != NULL, "%s: %s", what, err.message);
    if (!px) return;
    CHECK(w == ew && h == eh, "%s: %dx%d, expected %dx%d", what, w, h, ew, eh);
    int worst = 0;
    for (size_t i = 0; w == ew && h == eh && i < (size_t)ew * eh * want; i++) {
        int d = abs((int)px[i] - (int)expect[i]);
        if (d > worst) worst = d;
    }
    CHECK(worst <= tolerance, "%s: pixels differ by up to %d (allowed %d)", what, worst, tolerance);
    free(px);
}

static void check_animation(const char *dir)
{
    WebPAnimEncoderOptions ao;
    WebPConfig cfg;
    CHECK(WebPAnimEncoderOptionsInit(&ao) && WebPConfigInit(&cfg), "libwebp init");
    cfg.lossless = 1;
    WebPAnimEncoder *enc = WebPAnimEncoderNew(W, H, &ao);
    static uint8_t frames[2][W * H * 4];
    const uint8_t colour[2][4] = {{220, 20, 30, 255}, {10, 40, 230, 255}};
    for (int f = 0; f < 2; f++) {
        for (int i = 0; i < W * H; i++) memcpy(frames[f] + i * 4, colour[f], 4);
        WebPPicture pic;
        WebPPictureInit(&pic);
        pic.use_argb = 1;
        pic.width = W;
        pic.height = H;
        CHECK(WebPPictureImportRGBA(&pic, frames[f], W * 4) && WebPAnimEncoderAdd(enc, &pic, f * 100, &cfg),
              "encode frame %d", f);
        WebPPictureFree(&pic);
    }
    WebPAnimEncoderAdd(enc, NULL, 200, NULL);
    WebPData out;
    WebPDataInit(&out);
    CHECK(WebPAnimEncoderAssemble(enc, &out), "assemble the animation");
    char *p = write_webp(dir, "c-animated.webp", out.bytes, out.size);
    static uint8_t first_rgb[W * H * 3];
    for (int i = 0; i < W * H; i++) memcpy(first_rgb + i * 3, colour[0], 3);
    check_pixels(p, 3, first_rgb, W, H, 0, "animated WebP: the first frame");
    g_free(p);
    WebPDataClear(&out);
    WebPAnimEncoderDelete(enc);
}

/* A TIFF block with IFD0 holding one Orientation entry. */
static void check_exif_orientation(const char *dir, const uint8_t *rgb)
{
    static const uint8_t tiff[] = {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3,
                                   0,   1,   0,  0, 0, 6, 0, 0, 0, 0, 0,    0,    0};
    uint8_t *plain = NULL;
    size_t n = WebPEncodeLosslessRGB(rgb, W, H, W * 3, &plain);
    WebPData in = {plain, n}, exif = {tiff, sizeof tiff}, out;
    WebPDataInit(&out);
    WebPMux *mux = WebPMuxCreate(&in, 1);
    CHECK(mux && WebPMuxSetChunk(mux, "EXIF", &exif, 1) == WEBP_MUX_OK && WebPMuxAssemble(mux, &out) == WEBP_MUX_OK,
          "add the EXIF chunk");
    char *p = write_webp(dir, "d-exif6.webp", out.bytes, out.size);
    int tw = 0, th = 0;
    uint8_t *turned = sdt_exif_orient_pixels(rgb, W, H, 3, SDT_EXIF_ROTATE_90_CW, &tw, &th);
    check_pixels(p, 3, turned, tw, th, 0, "WebP with EXIF orientation 6");
    free(turned);
    g_free(p);
    WebPDataClear(&out);
    WebPMuxDelete(mux);
    WebPFree(plain);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("test_webp");
    char *dir = g_dir_make_tmp("sdt-webp-XXXXXX", NULL);
    static uint8_t rgb[W * H * 3], rgba[W * H * 4];
    for (size_t i = 0; i < sizeof rgb; i++) rgb[i] = (uint8_t)sdt_test_next(&rng);
    for (size_t i = 0; i < sizeof rgba; i++) rgba[i] = (uint8_t)sdt_test_next(&rng);

    uint8_t *enc = NULL;
    size_t n = WebPEncodeLosslessRGB(rgb, W, H, W * 3, &enc);
    char *lossless = write_webp(dir, "a-lossless.webp", enc, n);
    check_pixels(lossless, 3, rgb, W, H, 0, "lossless RGB WebP");
    static uint8_t rgb_opaque[W * H * 4];
    for (int i = 0; i < W * H; i++) memcpy(rgb_opaque + i * 4, rgb + i * 3, 3), rgb_opaque[i * 4 + 3] = 255;
    check_pixels(lossless, 4, rgb_opaque, W, H, 0, "lossless RGB WebP read as RGBA");
    /* the truncated copy, for the dataset below */
    char *truncated = write_webp(dir, "x-truncated.webp", enc, n / 2);
    WebPFree(enc);

    n = WebPEncodeLosslessRGBA(rgba, W, H, W * 4, &enc);
    char *alpha = write_webp(dir, "b-alpha.webp", enc, n);
    WebPFree(enc);
    sdt_image_header hdr;
    sdt_error err = {0};
    CHECK(sdt_image_probe(alpha, &hdr, &err) && hdr.channels == 4 && hdr.width == W && hdr.height == H,
          "the RGBA WebP's header: %dx%d, %d channels (%s)", hdr.width, hdr.height, hdr.channels, err.message);
    /* libwebp keeps the RGB of fully transparent pixels only with exact mode; compare visible pixels. */
    for (int i = 0; i < W * H; i++)
        if (rgba[i * 4 + 3] == 0) rgba[i * 4] = rgba[i * 4 + 1] = rgba[i * 4 + 2] = 0;
    int w = 0, h = 0;
    uint8_t *px = sdt_image_decode(alpha, 4, 1 << 24, &w, &h, &err);
    int mismatches = 0;
    for (int i = 0; px && i < W * H; i++) {
        if (px[i * 4 + 3] != rgba[i * 4 + 3])
            mismatches++;
        else if (rgba[i * 4 + 3] && memcmp(px + i * 4, rgba + i * 4, 3))
            mismatches++;
    }
    CHECK(px && mismatches == 0, "lossless RGBA WebP: %d pixels differ (%s)", mismatches, err.message);
    free(px);

    static uint8_t solid[W * H * 3];
    for (int i = 0; i < W * H; i++) solid[i * 3] = 200, solid[i * 3 + 1] = 120, solid[i * 3 + 2] = 40;
    n = WebPEncodeRGB(solid, W, H, W * 3, 90, &enc);
    char *lossy = write_webp(dir, "e-lossy.webp", enc, n);
    WebPFree(enc);
    check_pixels(lossy, 3, solid, W, H, 8, "lossy WebP");
    check_animation(dir);
    check_exif_orientation(dir, rgb);
    char *bad =
        write_webp(dir, "y-bad-header.webp", (const uint8_t *)"RIFF\x20\0\0\0WEBPVP8 \x10\0\0\0garbage!garbage!", 36);

    sdt_dataset ds;
    sdt_dataset_options opt = {.folder = dir, .width = 64, .height = 64};
    CHECK(sdt_dataset_load(&opt, &ds, &err), "load the WebP dataset: %s", err.message);
    CHECK(ds.n_items == 5, "5 WebP images load, got %d", ds.n_items);
    CHECK(find_item(&ds, "a-lossless.webp") && find_item(&ds, "c-animated.webp") && find_item(&ds, "d-exif6.webp"),
          "the WebP files are items");
    int named = 0;
    for (int i = 0; i < ds.n_warnings; i++) {
        printf("warning: %s\n", ds.warnings[i]);
        if ((strstr(ds.warnings[i], "x-truncated.webp") || strstr(ds.warnings[i], "y-bad-header.webp")) &&
            strstr(ds.warnings[i], "corrupt"))
            named++;
    }
    CHECK(named == 2 && ds.n_warnings == 2, "both broken WebP files are named with a reason (%d of %d warnings)", named,
          ds.n_warnings);
    sdt_dataset_free(&ds);

    const char *files[] = {lossless, truncated, alpha, lossy, bad};
    for (size_t i = 0; i < G_N_ELEMENTS(files); i++) g_free((char *)files[i]);
    GDir *d = g_dir_open(dir, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        char *p = g_build_filename(dir, name, NULL);
        g_unlink(p);
        g_free(p);
    }
    if (d) g_dir_close(d);
    g_rmdir(dir);
    g_free(dir);
    return sdt_test_finish("test_webp");
}
