/* webp_io.c - see webp_io.h. */
#include "data/webp_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <webp/decode.h>
#include <webp/demux.h>

#include "data/exif_orientation.h"

bool sdt_webp_is(const uint8_t *head, size_t n)
{
    return n >= 12 && memcmp(head, "RIFF", 4) == 0 && memcmp(head + 8, "WEBP", 4) == 0;
}

bool sdt_webp_header(const uint8_t *head, size_t n, int *width, int *height, int *channels, char *why, size_t why_size)
{
    WebPBitstreamFeatures f;
    VP8StatusCode st = WebPGetFeatures(head, n, &f);
    if (st != VP8_STATUS_OK || f.width <= 0 || f.height <= 0) {
        snprintf(why, why_size, "a damaged WebP header (libwebp status %d)", (int)st);
        return false;
    }
    *width = f.width;
    *height = f.height;
    *channels = f.has_alpha ? 4 : 3;
    return true;
}

/* The orientation in the container's EXIF chunk ("Exif\0\0" prefix optional, as writers differ). */
static int exif_orientation(const WebPData *data)
{
    WebPDemuxer *dmx = WebPDemux(data);
    if (!dmx) return SDT_EXIF_NORMAL;
    int orientation = SDT_EXIF_NORMAL;
    WebPChunkIterator it;
    if ((WebPDemuxGetI(dmx, WEBP_FF_FORMAT_FLAGS) & EXIF_FLAG) && WebPDemuxGetChunk(dmx, "EXIF", 1, &it)) {
        const uint8_t *p = it.chunk.bytes;
        size_t len = it.chunk.size;
        if (len >= 6 && memcmp(p, "Exif\0\0", 6) == 0) p += 6, len -= 6;
        orientation = sdt_exif_orientation_from_tiff(p, len);
        WebPDemuxReleaseChunkIterator(&it);
    }
    WebPDemuxDelete(dmx);
    return orientation;
}

/* An animation's first frame, composed on its canvas (RGBA), converted to want_channels. */
static uint8_t *first_frame(const WebPData *data, int want_channels, int *width, int *height, char *why,
                            size_t why_size)
{
    WebPAnimDecoderOptions o;
    if (!WebPAnimDecoderOptionsInit(&o)) {
        snprintf(why, why_size, "libwebp's animation decoder does not match its header");
        return NULL;
    }
    o.color_mode = MODE_RGBA;
    o.use_threads = 0;
    WebPAnimDecoder *dec = WebPAnimDecoderNew(data, &o);
    WebPAnimInfo info;
    uint8_t *canvas = NULL, *out = NULL;
    int timestamp = 0;
    if (!dec || !WebPAnimDecoderGetInfo(dec, &info) || !WebPAnimDecoderGetNext(dec, &canvas, &timestamp)) {
        snprintf(why, why_size,
                 "the WebP animation's first frame could not be decoded; the file is corrupt or truncated");
    } else if ((out = malloc((size_t)info.canvas_width * info.canvas_height * (size_t)want_channels)) == NULL) {
        snprintf(why, why_size, "out of memory decoding the WebP animation's first frame");
    } else {
        size_t n = (size_t)info.canvas_width * info.canvas_height;
        for (size_t i = 0; i < n; i++) memcpy(out + i * (size_t)want_channels, canvas + i * 4, (size_t)want_channels);
        *width = (int)info.canvas_width;
        *height = (int)info.canvas_height;
    }
    WebPAnimDecoderDelete(dec);
    return out;
}

uint8_t *sdt_webp_decode(const uint8_t *data, size_t n, int want_channels, int *width, int *height, int *orientation,
                         char *why, size_t why_size)
{
    WebPBitstreamFeatures f;
    if (WebPGetFeatures(data, n, &f) != VP8_STATUS_OK || f.width <= 0 || f.height <= 0) {
        snprintf(why, why_size, "a damaged WebP header; the file is corrupt or truncated");
        return NULL;
    }
    WebPData whole = {data, n};
    *orientation = exif_orientation(&whole);
    if (f.has_animation) return first_frame(&whole, want_channels, width, height, why, why_size);
    size_t stride = (size_t)f.width * (size_t)want_channels, size = stride * (size_t)f.height;
    uint8_t *out = malloc(size);
    if (!out) {
        snprintf(why, why_size, "out of memory decoding a %dx%d WebP image", f.width, f.height);
        return NULL;
    }
    uint8_t *ok = want_channels == 4 ? WebPDecodeRGBAInto(data, n, out, size, (int)stride)
                                     : WebPDecodeRGBInto(data, n, out, size, (int)stride);
    if (!ok) {
        free(out);
        snprintf(why, why_size, "the WebP image data could not be decoded; the file is corrupt or truncated");
        return NULL;
    }
    *width = f.width;
    *height = f.height;
    return out;
}
