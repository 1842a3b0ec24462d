/* test_exif_orientation.c - EXIF orientation: JPEG APP1 and PNG eXIf, all 8 values, both
 * byte orders, through the dataset loader; malformed EXIF leaves the image as stored. */
#include <string.h>

#include "data_test_util.h"
#include "data/dataset.h"
#include "dataset_test_util.h"
#include "data/exif_orientation.h"
#include "data/image_io.h"
#include "sdt_test.h"

#include "stb_image_write_static.h"

enum { W = 16, H = 24 }; /* not square, multiples of 8: "Do not resize" keeps them */

/* ---- an independent model of PIL's transpose methods (scatter form) ---- */

typedef struct image {
    int w, h, c;
    uint8_t *px;
} image;

static image image_new(int w, int h, int c)
{
    image im = {w, h, c, g_malloc0((size_t)w * h * c)};
    return im;
}

/* Moves input pixel (x, y) to output (to_x, to_y); out has the given size. */
typedef void (*move_fn)(const image *in, int x, int y, int *to_x, int *to_y);

static image scatter(image in, int out_w, int out_h, move_fn move)
{
    image out = image_new(out_w, out_h, in.c);
    for (int y = 0; y < in.h; y++)
        for (int x = 0; x < in.w; x++) {
            int tx, ty;
            move(&in, x, y, &tx, &ty);
            memcpy(out.px + ((size_t)ty * out_w + tx) * in.c, in.px + ((size_t)y * in.w + x) * in.c, in.c);
        }
    g_free(in.px);
    return out;
}

static void move_flip_lr(const image *in, int x, int y, int *tx, int *ty)
{
    *tx = in->w - 1 - x, *ty = y;
}
static void move_flip_tb(const image *in, int x, int y, int *tx, int *ty)
{
    *tx = x, *ty = in->h - 1 - y;
}
static void move_transpose(const image *in, int x, int y, int *tx, int *ty)
{
    (void)in, *tx = y, *ty = x;
}
/* PIL's ROTATE_90 is counter-clockwise: the top-right corner becomes the top-left. */
static void move_ccw90(const image *in, int x, int y, int *tx, int *ty)
{
    *tx = y, *ty = in->w - 1 - x;
}

static image flip_lr(image im)
{
    return scatter(im, im.w, im.h, move_flip_lr);
}
static image flip_tb(image im)
{
    return scatter(im, im.w, im.h, move_flip_tb);
}
static image transpose(image im)
{
    return scatter(im, im.h, im.w, move_transpose);
}
static image rotate_ccw(image im, int quarter_turns)
{
    for (int i = 0; i < quarter_turns; i++) im = scatter(im, im.h, im.w, move_ccw90);
    return im;
}

/* PIL's ImageOps.exif_transpose method table, applied to a copy. */
static image pil_exif_transpose(const image *src, int orientation)
{
    image im = image_new(src->w, src->h, src->c);
    memcpy(im.px, src->px, (size_t)src->w * src->h * src->c);
    switch (orientation) {
        case 2:
            return flip_lr(im); /* FLIP_LEFT_RIGHT */
        case 3:
            return rotate_ccw(im, 2); /* ROTATE_180 */
        case 4:
            return flip_tb(im); /* FLIP_TOP_BOTTOM */
        case 5:
            return transpose(im); /* TRANSPOSE */
        case 6:
            return rotate_ccw(im, 3); /* ROTATE_270 */
        case 7:
            return rotate_ccw(transpose(im), 2); /* TRANSVERSE */
        case 8:
            return rotate_ccw(im, 1); /* ROTATE_90 */
        default:
            return im;
    }
}

/* ---- building EXIF bytes ---- */

static void put16(GByteArray *a, bool big_endian, uint32_t v)
{
    uint8_t b[2] = {(uint8_t)(big_endian ? v >> 8 : v), (uint8_t)(big_endian ? v : v >> 8)};
    g_byte_array_append(a, b, 2);
}

static void put32(GByteArray *a, bool big_endian, uint32_t v)
{
    put16(a, big_endian, big_endian ? v >> 16 : v & 0xffff);
    put16(a, big_endian, big_endian ? v & 0xffff : v >> 16);
}

static void set32(GByteArray *a, size_t at, bool big_endian, uint32_t v)
{
    GByteArray *tmp = g_byte_array_new();
    put32(tmp, big_endian, v);
    memcpy(a->data + at, tmp->data, 4);
    g_byte_array_unref(tmp);
}

typedef struct ifd_entry {
    uint16_t tag, type;
    uint32_t count, value;
} ifd_entry;

#define TAG_MAKE 0x010F
#define TAG_ORIENTATION 0x0112

/* A TIFF block: header, IFD0 at offset 8 with the entries, then the next-IFD offset. */
static GByteArray *tiff_build(bool big_endian, const ifd_entry *e, int n, uint32_t next_ifd)
{
    GByteArray *a = g_byte_array_new();
    g_byte_array_append(a, (const guint8 *)(big_endian ? "MM" : "II"), 2);
    put16(a, big_endian, 42);
    put32(a, big_endian, 8);
    put16(a, big_endian, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        put16(a, big_endian, e[i].tag);
        put16(a, big_endian, e[i].type);
        put32(a, big_endian, e[i].count);
        if (e[i].type == 3) { /* a SHORT sits in the first two bytes of the value field */
            put16(a, big_endian, e[i].value);
            put16(a, big_endian, 0);
        } else {
            put32(a, big_endian, e[i].value);
        }
    }
    put32(a, big_endian, next_ifd);
    return a;
}

/* The usual camera layout: Make, then Orientation (SHORT, count 1). */
static GByteArray *tiff_with_orientation(bool big_endian, uint32_t orientation)
{
    ifd_entry e[2] = {{TAG_MAKE, 2, 4, 0x00746473}, {TAG_ORIENTATION, 3, 1, orientation}};
    return tiff_build(big_endian, e, 2, 0);
}

/* jpg with an APP1 "Exif\0\0" + tiff segment right after SOI. */
static GByteArray *jpeg_with_exif(const GByteArray *jpg, const GByteArray *tiff)
{
    GByteArray *a = g_byte_array_new();
    g_byte_array_append(a, jpg->data, 2);
    uint32_t len = 2 + 6 + tiff->len;
    uint8_t marker[4] = {0xFF, 0xE1, (uint8_t)(len >> 8), (uint8_t)len};
    g_byte_array_append(a, marker, 4);
    g_byte_array_append(a, (const guint8 *)"Exif\0\0", 6);
    g_byte_array_append(a, tiff->data, tiff->len);
    g_byte_array_append(a, jpg->data + 2, jpg->len - 2);
    return a;
}

/* png with an eXIf chunk inserted at byte offset at (a chunk boundary). */
static GByteArray *png_with_exif(const GByteArray *png, size_t at, const GByteArray *tiff)
{
    GByteArray *a = g_byte_array_new();
    g_byte_array_append(a, png->data, (guint)at);
    png_chunk(a, "eXIf", tiff->data, tiff->len);
    g_byte_array_append(a, png->data + at, png->len - (guint)at);
    return a;
}

static void append_to_array(void *context, void *data, int size)
{
    g_byte_array_append(context, data, (guint)size);
}

static void write_file(const char *dir, const char *name, const GByteArray *bytes)
{
    char *p = g_build_filename(dir, name, NULL);
    CHECK(g_file_set_contents(p, (const gchar *)bytes->data, bytes->len, NULL), "write %s", p);
    g_free(p);
}

/* ---- checking what the loader produced ---- */

/* The item's planar [-1, 1] pixels are exactly the expected 8-bit image mapped as x/127.5 - 1. */
static bool item_matches(const sdt_dataset_item *item, const image *expect)
{
    if (!item || !item->pixels || item->width != expect->w || item->height != expect->h) return false;
    size_t n = (size_t)expect->w * expect->h;
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++)
            if (item->pixels[c * n + i] != expect->px[i * expect->c + c] / 127.5f - 1.0f) return false;
    return true;
}

static sdt_dataset load_folder(const char *dir, bool alpha, int width, int height)
{
    sdt_dataset_options opt = {
        .folder = dir, .do_not_resize = width == 0, .width = width, .height = height, .alpha_as_loss_weight = alpha};
    sdt_dataset ds;
    sdt_error error = {0};
    CHECK(sdt_dataset_load(&opt, &ds, &error), "dataset load: %s", error.message);
    for (int i = 0; i < ds.n_warnings; i++) CHECK(false, "unexpected warning: %s", ds.warnings[i]);
    return ds;
}

static image random_image(sdt_test_rng *rng, int c)
{
    image im = image_new(W, H, c);
    for (size_t i = 0; i < (size_t)W * H * c; i++) im.px[i] = (uint8_t)(sdt_test_next(rng) & 0xff);
    return im;
}

/* The plain JPEG as decoded: JPEG is lossy, so the decoded pixels, not the
 * written ones, are what each oriented copy must turn into. */
static image decode_plain(const char *dir, const char *name)
{
    char *p = g_build_filename(dir, name, NULL);
    sdt_error error = {0};
    image im = {0, 0, 3, NULL};
    im.px = sdt_image_decode(p, 3, SDT_DATASET_DEFAULT_MAX_PIXELS, &im.w, &im.h, &error);
    CHECK(im.px && im.w == W && im.h == H, "decode %s: %s", p, error.message);
    g_free(p);
    return im;
}

static void test_jpeg_all_orientations(sdt_test_rng *rng)
{
    char *dir = g_dir_make_tmp("sdt-exif-XXXXXX", NULL);
    image src = random_image(rng, 3);
    GByteArray *jpg = g_byte_array_new();
    CHECK(stbi_write_jpg_to_func(append_to_array, jpg, W, H, 3, src.px, 95), "encode jpeg");
    write_file(dir, "plain.jpg", jpg);
    image plain = decode_plain(dir, "plain.jpg");
    for (int big = 0; big < 2; big++)
        for (int o = 1; o <= 8; o++) {
            GByteArray *tiff = tiff_with_orientation(big, (uint32_t)o);
            CHECK(sdt_exif_orientation_from_tiff(tiff->data, tiff->len) == o, "parse %s orientation %d",
                  big ? "MM" : "II", o);
            GByteArray *file = jpeg_with_exif(jpg, tiff);
            char name[64];
            snprintf(name, sizeof(name), "o%d-%s.jpg", o, big ? "mm" : "ii");
            write_file(dir, name, file);
            g_byte_array_unref(tiff);
            g_byte_array_unref(file);
        }
    sdt_dataset ds = load_folder(dir, false, 0, 0);
    CHECK(ds.n_items == 17, "17 images loaded, got %d", ds.n_items);
    CHECK(item_matches(find_item(&ds, "plain.jpg"), &plain), "plain JPEG unchanged");
    for (int big = 0; big < 2; big++)
        for (int o = 1; o <= 8; o++) {
            char name[64];
            snprintf(name, sizeof(name), "o%d-%s.jpg", o, big ? "mm" : "ii");
            image expect = pil_exif_transpose(&plain, o);
            const sdt_dataset_item *item = find_item(&ds, name);
            CHECK(item && item->width == (o >= 5 ? H : W) && item->height == (o >= 5 ? W : H), "%s: size %dx%d", name,
                  item ? item->width : 0, item ? item->height : 0);
            CHECK(item_matches(item, &expect), "%s: pixels where exif_transpose puts them", name);
            /* The random pattern has no symmetry: turning it any other way must not match. */
            for (int other = 1; other <= 8; other++) {
                if (other == o) continue;
                image wrong = pil_exif_transpose(&plain, other);
                CHECK(!item_matches(item, &wrong), "%s: does not also match orientation %d", name, other);
                g_free(wrong.px);
            }
            g_free(expect.px);
        }
    sdt_dataset_free(&ds);

    /* Turned before resizing: a 16x24 image tagged 6 is 24x16 and is then stretched to 96x64. */
    test_rmtree(dir);
    g_mkdir(dir, 0700);
    GByteArray *tiff = tiff_with_orientation(true, 6);
    GByteArray *file = jpeg_with_exif(jpg, tiff);
    write_file(dir, "rotated.jpg", file);
    ds = load_folder(dir, false, 96, 64);
    image upright = pil_exif_transpose(&plain, 6);
    image stretched = image_new(96, 64, 3);
    CHECK(sdt_image_resize_u8(upright.px, upright.w, upright.h, 3, stretched.px, 96, 64), "resize");
    CHECK(item_matches(find_item(&ds, "rotated.jpg"), &stretched), "orientation applied before the resize");
    sdt_dataset_free(&ds);
    g_free(upright.px);
    g_free(stretched.px);
    g_byte_array_unref(tiff);
    g_byte_array_unref(file);

    g_byte_array_unref(jpg);
    g_free(src.px);
    g_free(plain.px);
    test_rmtree(dir);
    g_free(dir);
}

/* RGBA PNG: eXIf before IDAT for 1..4, after IDAT for 5..8 (PIL reads both);
 * the alpha turns with the colour, so the loss weight follows. */
static void test_png_exif_with_alpha(sdt_test_rng *rng)
{
    char *dir = g_dir_make_tmp("sdt-exif-png-XXXXXX", NULL);
    image src = random_image(rng, 4);
    GByteArray *png = g_byte_array_new();
    CHECK(stbi_write_png_to_func(append_to_array, png, W, H, 4, src.px, W * 4), "encode png");
    const size_t after_ihdr = 8 + 12 + 13, before_iend = png->len - 12;
    CHECK(!memcmp(png->data + after_ihdr + 4, "IDAT", 4), "IDAT follows IHDR");
    CHECK(!memcmp(png->data + before_iend + 4, "IEND", 4), "IEND last");
    for (int o = 1; o <= 8; o++) {
        GByteArray *tiff = tiff_with_orientation(o % 2, (uint32_t)o);
        GByteArray *file = png_with_exif(png, o <= 4 ? after_ihdr : before_iend, tiff);
        CHECK(sdt_exif_orientation_from_file(file->data, file->len) == o, "PNG eXIf orientation %d", o);
        char name[32];
        snprintf(name, sizeof(name), "o%d.png", o);
        write_file(dir, name, file);
        g_byte_array_unref(tiff);
        g_byte_array_unref(file);
    }
    sdt_dataset ds = load_folder(dir, true, 0, 0);
    CHECK(ds.n_items == 8, "8 PNGs loaded, got %d", ds.n_items);
    for (int o = 1; o <= 8; o++) {
        char name[32];
        snprintf(name, sizeof(name), "o%d.png", o);
        const sdt_dataset_item *item = find_item(&ds, name);
        image expect = pil_exif_transpose(&src, o);
        CHECK(item_matches(item, &expect), "%s: pixels where exif_transpose puts them", name);
        int lw = expect.w / SDT_LATENT_FACTOR, lh = expect.h / SDT_LATENT_FACTOR;
        float weight[(W / 8) * (H / 8)];
        CHECK(sdt_alpha_to_loss_weight(expect.px, expect.w, expect.h, 4, weight, lw, lh), "expected weight");
        CHECK(item && item->loss_weight && !memcmp(item->loss_weight, weight, sizeof(weight)),
              "%s: the loss weight comes from the turned alpha", name);
        g_free(expect.px);
    }
    sdt_dataset_free(&ds);
    g_byte_array_unref(png);
    g_free(src.px);
    test_rmtree(dir);
    g_free(dir);
}

/* Broken EXIF blocks: each must parse as 1 and its JPEG load unturned, with no warning. */
static GByteArray *malformed_tiff(int which, const char **what)
{
    bool be = which % 2;
    GByteArray *t = tiff_with_orientation(be, 6);
    switch (which) {
        case 0:
            *what = "truncated inside the IFD";
            g_byte_array_set_size(t, 12);
            break;
        case 1:
            *what = "IFD0 offset past the end";
            set32(t, 4, be, 0xFFFFFFF0u);
            break;
        case 2:
            *what = "IFD0 offset 0 (the header read as a count)";
            set32(t, 4, be, 0);
            break;
        case 3:
            *what = "entry count past the end";
            t->data[8] = t->data[9] = 0xFF;
            break;
        case 4:
            *what = "bad byte order mark";
            t->data[1] = 'X';
            break;
        case 5:
            *what = "bad TIFF magic";
            t->data[be ? 3 : 2] = 43;
            break;
        case 6:
            *what = "empty TIFF block";
            g_byte_array_set_size(t, 0);
            break;
        case 7: {
            *what = "orientation 0, 9 and 65535";
            g_byte_array_unref(t);
            ifd_entry e[3] = {{TAG_ORIENTATION, 3, 1, 0}, {TAG_ORIENTATION, 3, 1, 9}, {TAG_ORIENTATION, 3, 1, 65535}};
            t = tiff_build(be, e, 3, 0);
            break;
        }
        case 8: {
            *what = "orientation as ASCII, and with count 2";
            g_byte_array_unref(t);
            ifd_entry e[2] = {{TAG_ORIENTATION, 2, 1, 6}, {TAG_ORIENTATION, 3, 2, 6}};
            t = tiff_build(be, e, 2, 0);
            break;
        }
        case 9: { /* IFD0 links to itself; only IFD1 (the thumbnail's) has an orientation */
            *what = "IFD loop, orientation only in IFD1";
            g_byte_array_unref(t);
            ifd_entry e[1] = {{TAG_MAKE, 2, 4, 0x00746473}};
            t = tiff_build(be, e, 1, 8);
            size_t ifd1 = t->len;
            set32(t, t->len - 4, be, (uint32_t)ifd1);
            GByteArray *tail = tiff_with_orientation(be, 6); /* reuse its IFD bytes as IFD1 */
            g_byte_array_append(t, tail->data + 8, tail->len - 12);
            put32(t, be, 8); /* IFD1 links back to IFD0 */
            g_byte_array_unref(tail);
            break;
        }
        default:
            g_byte_array_unref(t);
            return NULL;
    }
    return t;
}

static void test_malformed_exif(sdt_test_rng *rng)
{
    char *dir = g_dir_make_tmp("sdt-exif-bad-XXXXXX", NULL);
    image src = random_image(rng, 3);
    GByteArray *jpg = g_byte_array_new();
    CHECK(stbi_write_jpg_to_func(append_to_array, jpg, W, H, 3, src.px, 95), "encode jpeg");
    write_file(dir, "plain.jpg", jpg);
    image plain = decode_plain(dir, "plain.jpg");
    const char *what[16];
    int n = 0;
    for (GByteArray *t; (t = malformed_tiff(n, &what[n])); n++) {
        CHECK(sdt_exif_orientation_from_tiff(t->data, t->len) == SDT_EXIF_NORMAL, "%s: parses as normal", what[n]);
        GByteArray *file = jpeg_with_exif(jpg, t);
        char name[32];
        snprintf(name, sizeof(name), "bad%02d.jpg", n);
        write_file(dir, name, file);
        g_byte_array_unref(file);
        g_byte_array_unref(t);
    }
    sdt_dataset ds = load_folder(dir, false, 0, 0);
    CHECK(ds.n_items == n + 1, "every file loads (%d of %d)", ds.n_items, n + 1);
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "bad%02d.jpg", i);
        CHECK(item_matches(find_item(&ds, name), &plain), "%s (%s): loaded as stored", name, what[i]);
    }
    sdt_dataset_free(&ds);

    /* Container damage the image decoder never sees. */
    static const uint8_t jpeg_bad_length[] = {0xFF, 0xD8, 0xFF, 0xE1, 0x00, 0x01, 'E', 'x', 'i', 'f', 0, 0};
    static const uint8_t jpeg_past_end[] = {0xFF, 0xD8, 0xFF, 0xE1, 0xFF, 0xF0, 'E', 'x', 'i', 'f', 0, 0, 'M', 'M'};
    static const uint8_t jpeg_fill_only[] = {0xFF, 0xD8, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    static const uint8_t png_huge_chunk[] = "\x89PNG\r\n\x1a\n\xff\xff\xff\xf0"
                                            "eXIfMM\0*";
    CHECK(sdt_exif_orientation_from_file(jpeg_bad_length, sizeof(jpeg_bad_length)) == 1, "segment length 1");
    CHECK(sdt_exif_orientation_from_file(jpeg_past_end, sizeof(jpeg_past_end)) == 1, "segment past the end");
    CHECK(sdt_exif_orientation_from_file(jpeg_fill_only, sizeof(jpeg_fill_only)) == 1, "fill bytes only");
    CHECK(sdt_exif_orientation_from_file(png_huge_chunk, sizeof(png_huge_chunk) - 1) == 1, "chunk past the end");
    CHECK(sdt_exif_orientation_from_file(NULL, 0) == 1 && sdt_exif_orientation_from_tiff(NULL, 0) == 1, "no bytes");

    g_byte_array_unref(jpg);
    g_free(src.px);
    g_free(plain.px);
    test_rmtree(dir);
    g_free(dir);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("exif_orientation");
    test_jpeg_all_orientations(&rng);
    test_png_exif_with_alpha(&rng);
    test_malformed_exif(&rng);
    return sdt_test_finish("exif_orientation");
}
