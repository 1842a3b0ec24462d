/* png_write.c - see png_write.h. */
#include "data/png_write.h"

#include <png.h>
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include "atomic_file.h"

typedef struct png_failure {
    char message[256];
    FILE *fp;
    int write_errno; /* why the file refused bytes (ENOSPC on a full disk), 0 when it did not */
} png_failure;

/* libpng's own writer says only "Write Error"; this one keeps errno, so a full disk says so. */
static void write_bytes(png_structp png, png_bytep data, size_t length)
{
    png_failure *f = png_get_io_ptr(png);
    errno = 0;
    if (fwrite(data, 1, length, f->fp) != length) {
        f->write_errno = errno ? errno : EIO;
        png_error(png, strerror(f->write_errno));
    }
}

static void flush_bytes(png_structp png)
{
    png_failure *f = png_get_io_ptr(png);
    errno = 0;
    if (fflush(f->fp) != 0) {
        f->write_errno = errno ? errno : EIO;
        png_error(png, strerror(f->write_errno));
    }
}

static void on_png_error(png_structp png, png_const_charp msg)
{
    png_failure *f = png_get_error_ptr(png);
    snprintf(f->message, sizeof(f->message), "%s", msg);
    png_longjmp(png, 1);
}

static void on_png_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

/* Writes the PNG to fp; false + message on a libpng error. */
static bool write_png(FILE *fp, const uint8_t *rgb, int w, int h, const sdt_png_text *texts, int n_texts,
                      png_failure *failure)
{
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, failure, on_png_error, on_png_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        snprintf(failure->message, sizeof(failure->message), "out of memory");
        png_destroy_write_struct(&png, NULL);
        return false;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        return false;
    }
    failure->fp = fp;
    png_set_write_fn(png, failure, write_bytes, flush_bytes);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    for (int i = 0; i < n_texts; i++) {
        png_text chunk = {0};
        chunk.compression = PNG_TEXT_COMPRESSION_NONE;
        chunk.key = (png_charp)texts[i].key;
        chunk.text = (png_charp)texts[i].text;
        png_set_text(png, info, &chunk, 1);
    }
    png_write_info(png, info);
    for (int y = 0; y < h; y++) png_write_row(png, rgb + (size_t)y * (size_t)w * 3);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    return true;
}

bool sdt_png_write_rgb(const char *path, const uint8_t *rgb, int w, int h, const char *text_key, const char *text,
                       sdt_error *error)
{
    const sdt_png_text one = {text_key, text};
    return sdt_png_write_rgb_texts(path, rgb, w, h, &one, text_key ? 1 : 0, error);
}

bool sdt_png_write_rgb_texts(const char *path, const uint8_t *rgb, int w, int h, const sdt_png_text *texts, int n_texts,
                             sdt_error *error)
{
    if (!rgb || w <= 0 || h <= 0) {
        sdt_fail(error, SDT_ERR_IO, "%s: an empty picture cannot be saved", path);
        return false;
    }
    sdt_atomic_file f;
    if (!sdt_atomic_begin(&f, path, error)) return false;
    png_failure failure = {"", NULL, 0};
    if (!write_png(f.fp, rgb, w, h, texts, n_texts, &failure)) {
        if (failure.write_errno)
            sdt_fail(error, SDT_ERR_IO,
                     "%s: writing failed (%s); the previous file, if any, is unchanged; free disk space or "
                     "choose another folder",
                     path, strerror(failure.write_errno));
        else
            sdt_fail(error, SDT_ERR_IO, "%s: writing the PNG failed (%s); the previous file, if any, is unchanged",
                     path, failure.message);
        sdt_atomic_abort(&f);
        return false;
    }
    return sdt_atomic_commit(&f, error);
}
