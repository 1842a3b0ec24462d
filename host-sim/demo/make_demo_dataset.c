/* sdt-make-demo-dataset - draws a demo dataset: N images of the demo world (world.h)
 * with <stem>.txt captions, as A1111 reads them. The kinds:
 *   concept           the held-out concept (a filled yellow star), captions naming only the
 *                     background and the place ("navy background, top left"): the embedding
 *                     demo's, template "a [name] on a [filewords]"
 *   style             the held-out style (outlined shapes of every colour and shape) with the
 *                     base model's own captions, which never say "outline" ("a small red
 *                     circle on a navy background, top left"): the hypernetwork demo's
 *   outlined-concept  outlined yellow stars with place captions: the joint demo's (an
 *                     embedding and a hypernetwork in one run)
 *
 *   sdt-make-demo-dataset OUT_DIR [--kind K] [--count N] [--size S] [--seed S]
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

typedef enum dataset_kind { KIND_CONCEPT, KIND_STYLE, KIND_OUTLINED_CONCEPT, KIND_COUNT } dataset_kind;
static const char *const kind_names[KIND_COUNT] = {"concept", "style", "outlined-concept"};

typedef struct dataset_args {
    const char *out;
    dataset_kind kind;
    guint64 count, size, seed;
} dataset_args;

static int usage(const char *msg)
{
    if (msg) fprintf(stderr, "sdt-make-demo-dataset: %s\n", msg);
    fprintf(stderr,
            "usage: sdt-make-demo-dataset OUT_DIR [--kind K] [--count N] [--size S] [--seed S]\n"
            "  --kind K   concept (filled yellow stars, place captions; default), style (outlined\n"
            "             shapes, full captions) or outlined-concept (outlined yellow stars, place captions)\n"
            "  --count N  images (default %d)\n"
            "  --size S   width = height in pixels, %d..%d (default %d)\n"
            "  --seed S   generator seed (default 0)\n",
            DEFAULT_COUNT, MIN_SIZE, MAX_SIZE, DEFAULT_SIZE);
    return 2;
}

/* 0 when parsed, else the exit status. */
static int parse_args(int argc, char **argv, dataset_args *a)
{
    *a = (dataset_args){NULL, KIND_CONCEPT, DEFAULT_COUNT, DEFAULT_SIZE, 0};
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
        if (!strcmp(arg, "--kind")) {
            a->kind = KIND_COUNT;
            for (int k = 0; k < KIND_COUNT; k++)
                if (!strcmp(v, kind_names[k])) a->kind = (dataset_kind)k;
            if (a->kind == KIND_COUNT) return usage("--kind must be concept, style or outlined-concept");
        } else if (!strcmp(arg, "--count")) {
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

/* Scene i of the kind's set. */
static world_scene kind_scene(dataset_kind kind, uint64_t seed, uint64_t i, int size)
{
    world_scene s = world_scene_make(seed, i, size, kind == KIND_STYLE ? WORLD_PICK_STYLE : WORLD_PICK_CONCEPT);
    if (kind == KIND_OUTLINED_CONCEPT) s.outlined = true;
    return s;
}

static bool write_image(const char *dir, int index, dataset_kind kind, const world_scene *s, uint8_t *rgb,
                        sdt_error *error)
{
    char stem[32];
    snprintf(stem, sizeof stem, "demo_%03d", index);
    char *png_path = g_strdup_printf("%s/%s.png", dir, stem);
    char *txt_path = g_strdup_printf("%s/%s.txt", dir, stem);
    char caption[256];
    if (kind == KIND_STYLE)
        world_caption(s, caption, sizeof caption);
    else
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
        world_scene s = kind_scene(a.kind, a.seed, (uint64_t)i, (int)a.size);
        ok = write_image(a.out, i, a.kind, &s, rgb, &error);
    }
    g_free(rgb);
    if (!ok) {
        fprintf(stderr, "sdt-make-demo-dataset: %s.\n", error.message);
        return 1;
    }
    printf("wrote %d %s images of %dx%d with captions to %s (seed %llu)\n", (int)a.count, kind_names[a.kind],
           (int)a.size, (int)a.size, a.out, (unsigned long long)a.seed);
    return 0;
}
