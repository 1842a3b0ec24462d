/* sdt-make-demo-dataset - draws the demo dataset: N images of the demo world's
 * held-out concept (a yellow star, see world.h) with <stem>.txt captions naming
 * only the background and the place ("navy background, top left"), as A1111 reads
 * them; the demo's template is "a [name] on a [filewords]".
 *
 *   sdt-make-demo-dataset OUT_DIR [--count N] [--size S] [--seed S]
 *
 * The same arguments give the same pixels on every machine (and the same bytes
 * with the same libpng and zlib). Files are named demo_000.png,
 * demo_000.txt, ...; other files in OUT_DIR are left alone.
 */
#include <glib.h>
#include <stdio.h>
#include <string.h>

#include "atomic_file.h"
#include "world.h"
#include "data/png_write.h"

#define DEFAULT_COUNT 12
#define DEFAULT_SIZE 64
#define MIN_SIZE 16
#define MAX_SIZE 2048
#define MAX_COUNT 100000

typedef struct dataset_args {
    const char *out;
    guint64 count, size, seed;
} dataset_args;

static int usage(const char *msg)
{
    if (msg) fprintf(stderr, "sdt-make-demo-dataset: %s\n", msg);
    fprintf(stderr, "usage: sdt-make-demo-dataset OUT_DIR [--count N] [--size S] [--seed S]\n"
                    "  --count N  images (default %d)\n"
                    "  --size S   width = height in pixels, %d..%d (default %d)\n"
                    "  --seed S   generator seed (default 0)\n",
            DEFAULT_COUNT, MIN_SIZE, MAX_SIZE, DEFAULT_SIZE);
    return 2;
}

/* 0 when parsed, else the exit status. */
static int parse_args(int argc, char **argv, dataset_args *a)
{
    *a = (dataset_args){NULL, DEFAULT_COUNT, DEFAULT_SIZE, 0};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            usage(NULL);
            return -1;
        }
        if (arg[0] != '-') {
            if (a->out) return usage("give one OUT_DIR");
            a->out = arg;
            continue;
        }
        if (!v) return usage("an option is missing its value");
        i++;
        if (!strcmp(arg, "--count")) {
            if (!g_ascii_string_to_unsigned(v, 10, 1, MAX_COUNT, &a->count, NULL))
                return usage("--count must be a whole number from 1 to 100000");
        } else if (!strcmp(arg, "--size")) {
            if (!g_ascii_string_to_unsigned(v, 10, MIN_SIZE, MAX_SIZE, &a->size, NULL))
                return usage("--size must be a whole number from 16 to 2048");
        } else if (!strcmp(arg, "--seed")) {
            if (!g_ascii_string_to_unsigned(v, 10, 0, G_MAXUINT64, &a->seed, NULL))
                return usage("--seed must be a whole number of at least 0");
        } else {
            fprintf(stderr, "sdt-make-demo-dataset: unknown option '%s'\n", arg);
            return usage(NULL);
        }
    }
    return a->out ? 0 : usage("OUT_DIR is required");
}

static bool write_image(const char *dir, int index, const world_scene *s, uint8_t *rgb, sdt_error *error)
{
    char stem[32];
    snprintf(stem, sizeof stem, "demo_%03d", index);
    char *png_path = g_strdup_printf("%s/%s.png", dir, stem);
    char *txt_path = g_strdup_printf("%s/%s.txt", dir, stem);
    char caption[256];
    world_caption_place(s, caption, sizeof caption);
    world_scene_draw(s, rgb);
    /* No trailing newline: A1111 keeps a caption file's content unstripped. */
    bool ok = sdt_png_write_rgb(png_path, rgb, s->size, s->size, NULL, NULL, error) &&
              sdt_atomic_write(txt_path, caption, strlen(caption), error);
    g_free(png_path);
    g_free(txt_path);
    return ok;
}

int main(int argc, char **argv)
{
    dataset_args a;
    int status = parse_args(argc, argv, &a);
    if (status) return status < 0 ? 0 : status;
    if (g_mkdir_with_parents(a.out, 0777) != 0) {
        fprintf(stderr, "sdt-make-demo-dataset: cannot create %s; choose a writable OUT_DIR.\n", a.out);
        return 1;
    }
    uint8_t *rgb = g_malloc((size_t)a.size * a.size * 3);
    sdt_error error = {0};
    bool ok = true;
    for (int i = 0; ok && i < (int)a.count; i++) {
        world_scene s = world_scene_make(a.seed, (uint64_t)i, (int)a.size, WORLD_PICK_CONCEPT);
        ok = write_image(a.out, i, &s, rgb, &error);
    }
    g_free(rgb);
    if (!ok) {
        fprintf(stderr, "sdt-make-demo-dataset: %s.\n", error.message);
        return 1;
    }
    printf("wrote %d images of %dx%d with captions to %s (seed %llu)\n", (int)a.count, (int)a.size, (int)a.size,
           a.out, (unsigned long long)a.seed);
    return 0;
}
