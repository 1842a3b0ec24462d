/* card_pixels.c - hide and recover an embedding in card pixels, A1111 style; see card_pixels.h. */
#include "ti/card_pixels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define MAX_JSON (64u << 20)

void sdt_card_keystream(uint8_t *out, size_t n)
{
    uint32_t seed = 0;
    for (size_t i = 0; i < n; i++) {
        seed = 1664525u * seed + 1013904223u; /* mod 2^32 by unsigned wrap-around */
        out[i] = (uint8_t)(seed % 255u);
    }
}

char *sdt_inflate_limited(const uint8_t *data, size_t size, size_t max_out, size_t *out_len)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    if (size > UINT32_MAX || inflateInit(&zs) != Z_OK) return NULL;
    size_t cap = size * 4 + 1024, len = 0;
    char *out = NULL;
    int rc = Z_OK;
    zs.next_in = (Bytef *)data;
    zs.avail_in = (uInt)size;
    while (rc == Z_OK) {
        if (cap > max_out) cap = max_out;
        char *grown = len < cap ? realloc(out, cap + 1) : NULL;
        if (!grown) {
            rc = Z_MEM_ERROR; /* out of memory, or over the limit */
            break;
        }
        out = grown;
        zs.next_out = (Bytef *)out + len;
        zs.avail_out = (uInt)(cap - len);
        rc = inflate(&zs, Z_NO_FLUSH);
        len = cap - zs.avail_out;
        if (rc == Z_OK && zs.avail_out == 0)
            cap *= 2;
        else if (rc == Z_OK || rc == Z_BUF_ERROR)
            rc = Z_DATA_ERROR; /* input ended before the stream did */
    }
    inflateEnd(&zs);
    if (rc != Z_STREAM_END) {
        free(out);
        return NULL;
    }
    out[len] = 0;
    *out_len = len;
    return out;
}

/* High-nibble decoration: 6-px dots on an 8-px grid, shaded from the style
 * sequence (A1111's look); never 0, so the blocks are never cropped as black. */
static uint8_t decoration(int x, int y, const uint8_t *shades, int n_shades, bool reversed, int height)
{
    int row = (y + 6) / 8, cell_x = x + 6 - (row % 2 == 0 ? 4 : 0);
    int col = cell_x / 8;
    int dx = (cell_x % 8 + 8) % 8 - 3, dy = (y + 6) % 8 - 3;
    int index = col * ((height + 13) / 8) + row;
    uint8_t shade = n_shades ? shades[reversed ? n_shades - 1 - index % n_shades : index % n_shades] : 0x80;
    uint8_t v = dx * dx + dy * dy <= 9 ? shade : 0x30;
    return (uint8_t)((v & 0xF0) | 0x10);
}

bool sdt_card_pixels_compose(const char *json, const float *style, int n_style, const uint8_t *rgb, int w, int h,
                             uint8_t **out, int *out_w, sdt_error *error)
{
    *out = NULL;
    size_t json_len = strlen(json);
    uLongf n = compressBound((uLong)json_len);
    uint8_t *z = malloc(n);
    if (!z || compress2(z, &n, (const Bytef *)json, (uLong)json_len, 9) != Z_OK) {
        free(z);
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of memory compressing the embedding for the card picture");
        return false;
    }
    /* A1111's block size: both steps always add, even on an exact multiple. */
    size_t hh = (size_t)h, s = n + (hh - n % hh);
    s += 3 * hh - s % (3 * hh);
    size_t block_w = s / (3 * hh), total_w = block_w * 2 + 2 + (size_t)w;
    uint8_t shades[1024];
    int n_shades = n_style < 1024 ? n_style : 1024;
    float top = 0;
    for (int i = 0; i < n_shades; i++) top = fmaxf(top, fabsf(style[i]));
    for (int i = 0; i < n_shades; i++) shades[i] = top > 0 ? (uint8_t)(fabsf(style[i]) / top * 255) : 0;
    uint8_t *key = malloc(s);
    uint8_t *img = total_w < 65536 ? calloc(total_w * hh * 3, 1) : NULL;
    if (!key || !img) {
        free(z);
        free(key);
        free(img);
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "the embedding is too large for a %d-pixel-high card picture", h);
        return false;
    }
    sdt_card_keystream(key, s);
    for (size_t k = 0; k < s; k++) { /* k is the C-order index into the (h, W, 3) block */
        int y = (int)(k / (3 * block_w)), x = (int)(k / 3 % block_w), c = (int)(k % 3);
        uint8_t byte = z[k % n], lo = byte & 0x0F, hi = byte >> 4, kk = key[k] & 0x0F;
        uint8_t *left = img + ((size_t)y * total_w + x) * 3 + c;
        uint8_t *right = img + ((size_t)y * total_w + block_w + 2 + (size_t)w + x) * 3 + c;
        *left = (uint8_t)(decoration(x, y, shades, n_shades, false, h) | (lo ^ kk));
        *right = (uint8_t)(decoration(x, y, shades, n_shades, true, h) | (hi ^ kk));
    }
    for (int y = 0; y < h; y++)
        memcpy(img + ((size_t)y * total_w + block_w + 1) * 3, rgb + (size_t)y * w * 3, (size_t)w * 3);
    free(z);
    free(key);
    *out = img;
    *out_w = (int)total_w;
    return true;
}

/* Index of the first true value scanning forward (or backward), 0 when none, like numpy argmax. */
static size_t first_true(const bool *v, size_t n, bool backward)
{
    for (size_t i = 0; i < n; i++)
        if (v[backward ? n - 1 - i : i]) return i;
    return 0;
}

char *sdt_card_pixels_extract(const uint8_t *rgb, int w, int h, size_t *len, sdt_error *error)
{
    sdt_error_clear(error);
    size_t W = (size_t)w, H = (size_t)h;
    bool *row_any = calloc(H, 1), *col_any = calloc(W, 1);
    uint32_t *col_sum = NULL;
    char *json = NULL;
    if (!row_any || !col_any) goto done;
    for (size_t y = 0; y < H; y++)
        for (size_t x = 0; x < W; x++) {
            const uint8_t *p = rgb + (y * W + x) * 3;
            bool lit = p[0] > 0 && p[1] > 0 && p[2] > 0;
            row_any[y] |= lit;
            col_any[x] |= lit;
        }
    /* A1111's crop_black: the bounding box of pixels whose three channels are all > 0. */
    size_t c0 = first_true(col_any, W, false), c1 = W - first_true(col_any, W, true);
    size_t r0 = first_true(row_any, H, false), r1 = H - first_true(row_any, H, true);
    if (c0 >= c1 || r0 >= r1) goto none;
    size_t cw = c1 - c0, ch = r1 - r0;
    col_sum = calloc(cw, sizeof(uint32_t));
    if (!col_sum) goto done;
    for (size_t y = r0; y < r1; y++)
        for (size_t x = c0; x < c1; x++)
            for (int c = 0; c < 3; c++) col_sum[x - c0] += rgb[(y * W + x) * 3 + c] & 0x0F;
    size_t first = cw, last = 0, zeros = 0;
    for (size_t x = 0; x < cw; x++)
        if (!col_sum[x]) {
            if (first == cw) first = x;
            last = x;
            zeros++;
        }
    size_t bw = first, upper_w = cw - last - 1;
    if (zeros < 2 || bw == 0 || bw != upper_w) goto none;
    size_t s = ch * bw * 3;
    uint8_t *bytes = malloc(s), *key = malloc(s);
    if (bytes && key) {
        sdt_card_keystream(key, s);
        for (size_t k = 0; k < s; k++) {
            size_t y = r0 + k / (3 * bw), x = k / 3 % bw, c = k % 3;
            uint8_t lo = (rgb[(y * W + c0 + x) * 3 + c] & 0x0F) ^ (key[k] & 0x0F);
            uint8_t hi = (rgb[(y * W + c0 + last + 1 + x) * 3 + c] & 0x0F) ^ (key[k] & 0x0F);
            bytes[k] = (uint8_t)(hi << 4 | lo);
        }
        json = sdt_inflate_limited(bytes, s, MAX_JSON, len);
        if (!json) sdt_fail(error, SDT_ERR_BAD_FORMAT, "the data hidden in the card picture is damaged");
    } else {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of memory reading the card picture");
    }
    free(bytes);
    free(key);
    goto done;
none:
    sdt_fail(error, SDT_ERR_BAD_FORMAT, "no embedding data is hidden in the picture");
done:
    if (!json && error->code == SDT_ERR_OK)
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of memory reading the card picture");
    free(row_any);
    free(col_any);
    free(col_sum);
    return json;
}
