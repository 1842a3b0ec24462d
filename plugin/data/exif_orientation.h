/* exif_orientation.h - the EXIF Orientation tag (0x0112) and applying it to pixels.
 *
 * Phone cameras store pixels as the sensor saw them and record how to turn them
 * in the tag; A1111 applies it with PIL's ImageOps.exif_transpose, so images
 * must be turned the same way here or they train sideways.
 *
 * The parsers read attacker-controlled bytes: every read is bounded, and any
 * malformed structure gives SDT_EXIF_NORMAL (the image is used as stored).
 */
#ifndef SDT_EXIF_ORIENTATION_H
#define SDT_EXIF_ORIENTATION_H

#include <stddef.h>
#include <stdint.h>

/* The eight EXIF values, named by what PIL's exif_transpose does for each. */
enum sdt_exif_orientation {
    SDT_EXIF_NORMAL = 1,
    SDT_EXIF_MIRROR_HORIZONTAL = 2,
    SDT_EXIF_ROTATE_180 = 3,
    SDT_EXIF_MIRROR_VERTICAL = 4,
    SDT_EXIF_TRANSPOSE = 5, /* mirror along the top-left to bottom-right diagonal */
    SDT_EXIF_ROTATE_90_CW = 6,
    SDT_EXIF_TRANSVERSE = 7, /* mirror along the top-right to bottom-left diagonal */
    SDT_EXIF_ROTATE_270_CW = 8,
};

/* Orientation from a TIFF structure ("II*\0" or "MM\0*" header, IFD0 entries),
 * i.e. the content of a JPEG APP1 segment after "Exif\0\0", or of a PNG eXIf
 * chunk. 1..8; SDT_EXIF_NORMAL when absent or malformed. */
int sdt_exif_orientation_from_tiff(const uint8_t *tiff, size_t size);

/* Orientation from a whole image file in memory: the first APP1 "Exif\0\0"
 * segment before a JPEG's scan data, or the eXIf chunk of a PNG (before or
 * after IDAT, as PIL reads both). SDT_EXIF_NORMAL for other formats. */
int sdt_exif_orientation_from_file(const uint8_t *data, size_t size);

/* Turns interleaved 8-bit pixels (all channels, alpha included) into a new
 * malloc'd buffer as exif_transpose would; *out_w x *out_h is w x h, swapped for
 * orientations 5..8. Values outside 1..8 act as 1 (a plain copy). NULL when out
 * of memory. */
uint8_t *sdt_exif_orient_pixels(const uint8_t *in, int w, int h, int channels, int orientation, int *out_w, int *out_h);

#endif
