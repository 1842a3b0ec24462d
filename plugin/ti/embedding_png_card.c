/* embedding_png_card.c - A1111's PNG embedding card: write with libpng, read by walking the chunks.
 *
 * The picture carries A1111's pixel-hidden copy too (card_pixels.h), so the
 * card still loads after a service strips its metadata. An SDXL card's name,
 * step and checkpoint sit in a second text chunk (embedding_file.h), read
 * wherever it is in the file.
 *
 * The reader walks chunks itself (signature, length, type, CRC) instead of
 * decoding the picture: the card's data sits in a text chunk that may come
 * after IDAT, and a hand walk over a bounded buffer is simple to make safe
 * against any input (it is fuzzed).
 */
#include <glib.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "atomic_file.h"
#include "file_read.h"
#include "ti/card_pixels.h"
#include "ti/embedding_file.h"
#include "data/png_write.h"

#define CARD_SIZE 256
#define MAX_CARD_FILE (512u << 20)
#define MAX_TEXT (64u << 20) /* inflated text chunk limit (a 75 x 2048 card is ~5 MB) */
#define MAX_CARD_PIXELS (32u << 20)

/* ---- writing ------------------------------------------------------------ */

/* A picture of the vectors: one band per vector, columns sample its values. */
static uint8_t *generated_card(const sdt_embedding *e)
{
    uint8_t *rgb = malloc((size_t)CARD_SIZE * CARD_SIZE * 3);
    if (!rgb) return NULL;
    double scale = 0;
    size_t n = (size_t)e->n_vectors * (size_t)e->dim;
    for (size_t i = 0; i < n; i++) scale += (double)e->vectors[i] * e->vectors[i];
    scale = n ? 1.0 / (sqrt(scale / (double)n) + 1e-12) : 1;
    for (int y = 0; y < CARD_SIZE; y++)
        for (int x = 0; x < CARD_SIZE; x++) {
            uint8_t *p = rgb + ((size_t)y * CARD_SIZE + x) * 3;
            bool border = x < 8 || y < 8 || x >= CARD_SIZE - 8 || y >= CARD_SIZE - 8;
            int r = (y - 8) * e->n_vectors / (CARD_SIZE - 16), c = (x - 8) * e->dim / (CARD_SIZE - 16);
            double v = border ? 0 : tanh(e->vectors[(size_t)r * e->dim + c] * scale * 0.5);
            p[0] = border ? 24 : (uint8_t)(128 + 110 * v);
            p[1] = border ? 24 : (uint8_t)(100 + 40 * fabs(v));
            p[2] = border ? 24 : (uint8_t)(128 - 110 * v);
        }
    return rgb;
}

bool sdt_embedding_save_png_card(const sdt_embedding *e, const char *path, const uint8_t *rgb, int rgb_w, int rgb_h,
                                 bool overwrite, sdt_error *error)
{
    if (sdt_embedding_has_tables(e))
        return sdt_fail(error, SDT_ERR_UNSUPPORTED,
                        "%s: no PNG card for an %s embedding: A1111 (the only host that reads cards) cannot load "
                        "SD3.5/Flux.1 embeddings, and Forge's card reader takes no T5 table; use the .safetensors "
                        "file (ComfyUI: embedding:NAME)",
                        path, sdt_embedding_family_title(e));
    if (!sdt_embedding_check_save(e, path, overwrite, error)) return false;
    if (rgb && (rgb_w <= 0 || rgb_h <= 0 || rgb_w > 16384 || rgb_h > 16384)) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: the card picture size %dx%d is invalid", path, rgb_w, rgb_h);
        return false;
    }
    char *json = sdt_embedding_a1111_json(e);
    gchar *b64 = json ? g_base64_encode((const guchar *)json, strlen(json)) : NULL;
    uint8_t *card = rgb ? NULL : generated_card(e);
    uint8_t *composed = NULL;
    int composed_w = 0, pic_h = rgb ? rgb_h : CARD_SIZE;
    sdt_error why = {SDT_ERR_OUT_OF_MEMORY, "out of memory"};
    if (b64 && (rgb || card))
        sdt_card_pixels_compose(json, e->vectors, e->dim, rgb ? rgb : card, rgb ? rgb_w : CARD_SIZE, pic_h, &composed,
                                &composed_w, &why);
    free(json);
    free(card);
    if (!composed) {
        g_free(b64);
        sdt_fail(error, why.code, "%s: building the PNG card failed (%s)", path, why.message);
        return false;
    }
    char *info = sdt_embedding_card_info_json(e); /* SDXL: what A1111's loader must not see in the data */
    const sdt_png_text texts[2] = {{SDT_PNG_CARD_KEYWORD, b64}, {SDT_PNG_CARD_INFO_KEYWORD, info}};
    bool ok = sdt_png_write_rgb_texts(path, composed, composed_w, pic_h, texts, info ? 2 : 1, error);
    free(info);
    g_free(b64);
    free(composed);
    return ok;
}

/* ---- reading ------------------------------------------------------------ */

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The text of the chunk named keyword in tEXt / zTXt / iTXt data, or NULL
 * (another chunk, or damaged: *damaged says which). */
static char *card_text(const char *type, const uint8_t *d, size_t n, const char *keyword, size_t *len, bool *damaged)
{
    *damaged = false;
    const uint8_t *nul = memchr(d, 0, n < 80 ? n : 80);
    if (!nul || (size_t)(nul - d) != strlen(keyword) || memcmp(d, keyword, strlen(keyword)) != 0) return NULL;
    const uint8_t *p = nul + 1, *end = d + n;
    bool compressed = false;
    if (!strcmp(type, "zTXt")) {
        if (p >= end || *p != 0) goto bad; /* method 0 = deflate */
        p++;
        compressed = true;
    } else if (!strcmp(type, "iTXt")) {
        if (end - p < 2 || p[1] != 0) goto bad;
        compressed = p[0] != 0;
        p += 2;
        for (int skip = 0; skip < 2; skip++) { /* language tag, translated keyword */
            const uint8_t *z = memchr(p, 0, (size_t)(end - p));
            if (!z) goto bad;
            p = z + 1;
        }
    }
    if (compressed) {
        char *text = sdt_inflate_limited(p, (size_t)(end - p), MAX_TEXT, len);
        if (!text) goto bad;
        return text;
    }
    char *text = malloc((size_t)(end - p) + 1);
    if (!text) goto bad;
    memcpy(text, p, (size_t)(end - p));
    text[end - p] = 0;
    *len = (size_t)(end - p);
    return text;
bad:
    *damaged = true;
    return NULL;
}

/* No text chunk: look for the copy hidden in the pixels (libpng's simplified reader). */
static bool decode_from_pixels(const void *png, size_t size, const char *origin, sdt_embedding *e, sdt_error *error)
{
    png_image img;
    memset(&img, 0, sizeof(img));
    img.version = PNG_IMAGE_VERSION;
    uint8_t *rgb = NULL;
    sdt_error why = {0};
    bool decoded =
        png_image_begin_read_from_memory(&img, png, size) && (uint64_t)img.width * img.height <= MAX_CARD_PIXELS;
    if (decoded) {
        img.format = PNG_FORMAT_RGB;
        rgb = malloc(PNG_IMAGE_SIZE(img));
        decoded = rgb && png_image_finish_read(&img, NULL, rgb, 0, NULL);
    }
    png_image_free(&img);
    size_t len = 0;
    char *json = decoded ? sdt_card_pixels_extract(rgb, (int)img.width, (int)img.height, &len, &why) : NULL;
    free(rgb);
    if (!json) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: this PNG has no \"%s\" text chunk and no embedding hidden in its pixels (%s), so it is not an "
                 "embedding card",
                 origin, SDT_PNG_CARD_KEYWORD, decoded ? why.message : "the picture cannot be decoded");
        return false;
    }
    char *stem = sdt_path_stem(origin);
    bool ok = sdt_embedding_from_a1111_json(json, len, origin, stem, e, error);
    free(stem);
    free(json);
    return ok;
}

/* -1 when text is base64 (A1111's: standard alphabet, '=' padding only at the end, length a
 * multiple of 4; whitespace ignored), else the position of the first character that is not. */
static long base64_error_at(const char *text)
{
    long symbols = 0, padding = 0;
    for (const char *p = text; *p; p++) {
        char c = *p;
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        bool alphabet = g_ascii_isalnum(c) || c == '+' || c == '/';
        if ((alphabet && padding) || (!alphabet && (c != '=' || ++padding > 2))) return (long)(p - text);
        symbols++;
    }
    return symbols % 4 ? (long)strlen(text) : -1;
}

bool sdt_embedding_png_card_decode(const void *png, size_t size, const char *origin, sdt_embedding *e, sdt_error *error)
{
    memset(e, 0, sizeof(*e));
    const uint8_t *b = png;
    if (size < 8 || memcmp(b, "\x89PNG\r\n\x1a\n", 8) != 0) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: not a PNG file", origin);
        return false;
    }
    size_t pos = 8;
    bool complete = false; /* every chunk in bounds up to IEND: only then is libpng given the file */
    bool loaded = false;   /* from the text chunk; the walk goes on only to find the info chunk */
    char *info = NULL;     /* sdtrain's SDT_PNG_CARD_INFO_KEYWORD text (SDXL cards) */
    size_t info_len = 0;
    sdt_error text_err = {0};
    uint64_t pixels = UINT64_MAX;
    while (size - pos >= 12) {
        uint32_t n = be32(b + pos);
        char type[5] = {0};
        memcpy(type, b + pos + 4, 4);
        if (n > size - pos - 12) break; /* truncated: stop here */
        if (!strcmp(type, "IHDR") && n >= 8) pixels = (uint64_t)be32(b + pos + 8) * be32(b + pos + 12);
        const uint8_t *data = b + pos + 8;
        uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), b + pos + 4, n + 4);
        if (crc != be32(data + n)) {
            if (loaded) break; /* the embedding is whole; only its info may be lost */
            sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: chunk %s at byte %zu fails its CRC check; the file is damaged",
                     origin,
                     g_ascii_isalpha(type[0]) && g_ascii_isalpha(type[1]) && g_ascii_isalpha(type[2]) &&
                             g_ascii_isalpha(type[3])
                         ? type
                         : "?",
                     pos);
            free(info);
            return false;
        }
        bool text_chunk = !strcmp(type, "tEXt") || !strcmp(type, "zTXt") || !strcmp(type, "iTXt");
        if (text_chunk && !info) {
            bool damaged;
            info = card_text(type, data, n, SDT_PNG_CARD_INFO_KEYWORD, &info_len, &damaged);
        }
        if (!loaded && text_err.code == SDT_ERR_OK && text_chunk) {
            size_t len = 0;
            bool damaged;
            char *text = card_text(type, data, n, SDT_PNG_CARD_KEYWORD, &len, &damaged);
            if (damaged)
                sdt_fail(&text_err, SDT_ERR_BAD_FORMAT, "%s: the %s chunk \"%s\" cannot be read; the card is damaged",
                         origin, type, SDT_PNG_CARD_KEYWORD);
            if (text) {
                gsize raw_len = 0;
                long bad_at = base64_error_at(text);
                guchar *raw = bad_at < 0 ? g_base64_decode(text, &raw_len) : NULL;
                free(text);
                char *stem = sdt_path_stem(origin);
                bool ok = raw && raw_len &&
                          sdt_embedding_from_a1111_json((const char *)raw, raw_len, origin, stem, e, &text_err);
                if (bad_at >= 0)
                    sdt_fail(&text_err, SDT_ERR_BAD_FORMAT,
                             "%s: the \"%s\" chunk is not valid base64 (at character "
                             "%ld); the card is damaged",
                             origin, SDT_PNG_CARD_KEYWORD, bad_at);
                else if (!raw || !raw_len)
                    sdt_fail(&text_err, SDT_ERR_BAD_FORMAT,
                             "%s: the \"%s\" chunk holds no base64 data; the card is damaged", origin,
                             SDT_PNG_CARD_KEYWORD);
                free(stem);
                g_free(raw);
                loaded = ok; /* else a damaged text chunk: the copy in the pixels may still be whole */
            }
        }
        if (!strcmp(type, "IEND")) {
            complete = true;
            break;
        }
        pos += (size_t)n + 12;
    }
    bool ok = loaded;
    /* libpng allocates what chunk headers and IHDR declare, so it only sees files already checked. */
    if (!loaded && text_err.code != SDT_ERR_OK) {
        ok = complete && pixels <= MAX_CARD_PIXELS && decode_from_pixels(png, size, origin, e, error);
        if (ok) {
            char note[1100];
            snprintf(note, sizeof note, "%.1000s; the copy hidden in the pixels was used", text_err.message);
            e->from_card_pixels = true;
            sdt_embedding_set_string(&e->load_note, note); /* a courtesy: without memory, the vectors still load */
        } else if (error) {
            *error = text_err; /* the text chunk's fault is the one to report */
        }
    } else if (!loaded && (!complete || pixels > MAX_CARD_PIXELS)) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: this PNG has no \"%s\" text chunk, and it is %s, so the pixels were not searched for an "
                 "embedding",
                 origin, SDT_PNG_CARD_KEYWORD, complete ? "too large" : "truncated or damaged");
    } else if (!loaded) {
        ok = decode_from_pixels(png, size, origin, e, error);
        e->from_card_pixels = ok;
    }
    /* An info chunk that does not parse is ignored: the vectors are what a card is for. */
    if (ok && info) sdt_embedding_apply_card_info(info, info_len, e);
    free(info);
    return ok;
}

bool sdt_embedding_load_png_card(const char *path, sdt_embedding *e, sdt_error *error)
{
    memset(e, 0, sizeof(*e));
    char *data = NULL;
    size_t size = 0;
    if (!sdt_file_read_all(path, "embedding card", MAX_CARD_FILE, &data, &size, error)) return false;
    bool ok = sdt_embedding_png_card_decode(data, size, path, e, error);
    free(data);
    return ok;
}
