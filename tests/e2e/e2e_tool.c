/* e2e_tool.c - the two things the end-to-end shell tests cannot do well in bash:
 *
 *   e2e_tool json FILE|- [KEY]   exit 0 if FILE (or stdin) is one valid JSON object; with KEY,
 *                                print that top-level value (strings raw, numbers %.17g,
 *                                booleans true/false, anything else as JSON)
 *   e2e_tool png-header W H OUT  write a PNG that is only a signature, an IHDR of W x H (8-bit
 *                                RGB) and an IEND, with correct CRCs: a "huge image" whose
 *                                header a decoder must refuse before allocating anything
 *   e2e_tool png-crop FILE X Y W H   write the raw RGB bytes of that rectangle of an 8-bit RGB,
 *                                non-interlaced PNG (what sdtrain writes) to stdout, so `cmp`
 *                                can compare a preview with a grid's cell
 * Exit 1 with a message on stderr when the JSON is invalid or the key is absent, 2 on usage. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static char *read_all(FILE *f)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                return NULL;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    if (buf) buf[n] = '\0';
    return buf;
}

static int json_command(const char *path, const char *key)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "e2e_tool: cannot open %s\n", path);
        return 1;
    }
    char *text = read_all(f);
    if (f != stdin) fclose(f);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!cJSON_IsObject(root)) {
        fprintf(stderr, "e2e_tool: %s is not one valid JSON object\n", path);
        cJSON_Delete(root);
        return 1;
    }
    int status = 0;
    if (key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
        if (!v) {
            fprintf(stderr, "e2e_tool: %s has no key '%s'\n", path, key);
            status = 1;
        } else if (cJSON_IsString(v)) {
            printf("%s\n", v->valuestring);
        } else if (cJSON_IsNumber(v)) {
            printf("%.17g\n", v->valuedouble);
        } else if (cJSON_IsBool(v)) {
            printf("%s\n", cJSON_IsTrue(v) ? "true" : "false");
        } else {
            char *s = cJSON_PrintUnformatted(v);
            printf("%s\n", s ? s : "");
            free(s);
        }
    }
    cJSON_Delete(root);
    return status;
}

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static int write_chunk(FILE *f, const char *type, const unsigned char *data, uint32_t len)
{
    unsigned char head[8], crc_bytes[4];
    put_be32(head, len);
    memcpy(head + 4, type, 4);
    uLong crc = crc32(0L, head + 4, 4);
    if (len) crc = crc32(crc, data, len);
    put_be32(crc_bytes, (uint32_t)crc);
    return fwrite(head, 1, 8, f) == 8 && (len == 0 || fwrite(data, 1, len, f) == len) &&
           fwrite(crc_bytes, 1, 4, f) == 4;
}

static int png_header_command(const char *w_text, const char *h_text, const char *out)
{
    static const unsigned char signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    unsigned long w = strtoul(w_text, NULL, 10), h = strtoul(h_text, NULL, 10);
    unsigned char ihdr[13];
    put_be32(ihdr, (uint32_t)w);
    put_be32(ihdr + 4, (uint32_t)h);
    ihdr[8] = 8; /* bit depth */
    ihdr[9] = 2; /* RGB */
    ihdr[10] = ihdr[11] = ihdr[12] = 0;
    FILE *f = fopen(out, "wb");
    int ok =
        f && fwrite(signature, 1, 8, f) == 8 && write_chunk(f, "IHDR", ihdr, 13) && write_chunk(f, "IEND", NULL, 0);
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) fprintf(stderr, "e2e_tool: cannot write %s\n", out);
    return ok ? 0 : 1;
}

static uint32_t get_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int paeth(int a, int b, int c)
{
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/* The PNG's pixels, unfiltered: *w x *h x 3 bytes. NULL with a message on failure. */
static unsigned char *png_rgb(const char *path, uint32_t *w, uint32_t *h)
{
    FILE *f = fopen(path, "rb");
    char *data = f ? read_all(f) : NULL;
    long size = f ? ftell(f) : 0;
    if (f) fclose(f);
    if (!data || size < 33 || memcmp(data, "\x89PNG", 4) != 0) {
        fprintf(stderr, "e2e_tool: %s is not a readable PNG\n", path);
        free(data);
        return NULL;
    }
    const unsigned char *u = (const unsigned char *)data;
    *w = get_be32(u + 16);
    *h = get_be32(u + 20);
    if (u[24] != 8 || u[25] != 2 || u[28] != 0 || *w > 16384 || *h > 16384) {
        fprintf(stderr, "e2e_tool: %s is not an 8-bit RGB non-interlaced PNG of a sane size\n", path);
        free(data);
        return NULL;
    }
    size_t idat_n = 0, stride = (size_t)*w * 3;
    unsigned char *idat = malloc((size_t)size), *raw = malloc((stride + 1) * *h), *rgb = malloc(stride * *h);
    for (long at = 8; idat && at + 12 <= size;) {
        uint32_t len = get_be32(u + at);
        if (at + 12 + (long)len > size) break;
        if (!memcmp(u + at + 4, "IDAT", 4)) memcpy(idat + idat_n, u + at + 8, len), idat_n += len;
        at += 12 + (long)len;
    }
    uLongf raw_n = (uLongf)((stride + 1) * *h);
    int ok = idat && raw && rgb && uncompress(raw, &raw_n, idat, (uLong)idat_n) == Z_OK && raw_n == (stride + 1) * *h;
    for (uint32_t y = 0; ok && y < *h; y++) {
        const unsigned char *line = raw + y * (stride + 1) + 1;
        unsigned char *out = rgb + y * stride, *up = y ? rgb + (y - 1) * stride : NULL;
        for (size_t x = 0; x < stride; x++) {
            int a = x >= 3 ? out[x - 3] : 0, b = up ? up[x] : 0, c = up && x >= 3 ? up[x - 3] : 0;
            int pred = 0;
            switch (line[-1]) {
                case 0:
                    pred = 0;
                    break;
                case 1:
                    pred = a;
                    break;
                case 2:
                    pred = b;
                    break;
                case 3:
                    pred = (a + b) / 2;
                    break;
                case 4:
                    pred = paeth(a, b, c);
                    break;
                default:
                    ok = 0;
            }
            out[x] = (unsigned char)(line[x] + pred);
        }
    }
    if (!ok) fprintf(stderr, "e2e_tool: cannot decode %s\n", path);
    free(data);
    free(idat);
    free(raw);
    if (!ok) {
        free(rgb);
        return NULL;
    }
    return rgb;
}

static int png_crop_command(char **argv)
{
    uint32_t w, h;
    unsigned long x = strtoul(argv[3], NULL, 10), y = strtoul(argv[4], NULL, 10), cw = strtoul(argv[5], NULL, 10),
                  ch = strtoul(argv[6], NULL, 10);
    unsigned char *rgb = png_rgb(argv[2], &w, &h);
    if (!rgb) return 1;
    if (x + cw > w || y + ch > h) {
        fprintf(stderr, "e2e_tool: %lux%lu at %lu,%lu is outside %s (%ux%u)\n", cw, ch, x, y, argv[2], w, h);
        free(rgb);
        return 1;
    }
    for (unsigned long row = y; row < y + ch; row++) fwrite(rgb + ((size_t)row * w + x) * 3, 1, cw * 3, stdout);
    free(rgb);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && argc <= 4 && strcmp(argv[1], "json") == 0)
        return json_command(argv[2], argc == 4 ? argv[3] : NULL);
    if (argc == 5 && strcmp(argv[1], "png-header") == 0) return png_header_command(argv[2], argv[3], argv[4]);
    if (argc == 7 && strcmp(argv[1], "png-crop") == 0) return png_crop_command(argv);
    fprintf(stderr,
            "usage: e2e_tool json FILE|- [KEY] | e2e_tool png-header W H OUT | e2e_tool png-crop FILE X Y W H\n");
    return 2;
}
