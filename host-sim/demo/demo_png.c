/* demo_png.c - see demo_png.h. */
#include "demo_png.h"

#include <glib.h>
#include <stdio.h>

#include "atomic_file.h"

#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

static void append_bytes(void *context, void *data, int size)
{
    g_byte_array_append(context, data, (guint)size);
}

bool demo_png_save(const char *path, const uint8_t *rgb, int width, int height, char *err, size_t err_size)
{
    GByteArray *png = g_byte_array_new();
    bool ok = stbi_write_png_to_func(append_bytes, png, width, height, 3, rgb, width * 3) != 0;
    if (!ok) snprintf(err, err_size, "demo_png: could not encode %s (%dx%d); try a smaller --size", path, width, height);
    else ok = sdt_atomic_write(path, png->data, png->len, err, err_size);
    g_byte_array_unref(png);
    return ok;
}
