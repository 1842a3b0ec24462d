/* png_out.h - sdt-host's PNG writer for generated images: 8-bit RGB, stored (uncompressed)
 * deflate blocks, so it needs no library; written atomically (GLib: temp file, fsync, rename). */
#ifndef SDT_HOST_PNG_OUT_H
#define SDT_HOST_PNG_OUT_H

#include <glib.h>
#include <stdint.h>

/* rgb: width * height * 3 bytes, rows top to bottom. FALSE with *error set. */
gboolean png_out_write_rgb(const char *path, const uint8_t *rgb, uint32_t width, uint32_t height, GError **error);

#endif
