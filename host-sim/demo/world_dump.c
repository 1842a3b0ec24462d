/* sdt-world-dump - draws a range of the demo world's scenes (world.h) as raw
 * pixels plus one caption line each: the base model's training set, read by
 * models/demo_model/train.py. Needs only libc and libm, so it runs on a bare GPU
 * machine.
 *
 *   sdt-world-dump --images FILE --captions FILE [--seed S] [--start I] [--count N]
 *                  [--size S] [--pick base|concept|other|style]
 *
 * FILE gets count * size * size * 3 bytes (RGB, rows top to bottom, scene after
 * scene); the captions file one line per scene: caption, then tab-separated
 * shape, colour and outlined (0/1) labels. Scene i depends only on (seed, i, pick),
 * so ranges drawn in parallel join into the same set.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "world.h"

static int usage(const char *msg)
{
    if (msg) fprintf(stderr, "sdt-world-dump: %s\n", msg);
    fprintf(stderr, "usage: sdt-world-dump --images FILE --captions FILE [--seed S] [--start I] [--count N]\n"
                    "                      [--size S] [--pick base|concept|other|style]\n");
    return 2;
}

static bool parse_u64(const char *s, unsigned long long max, unsigned long long *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || !end || *end || s[0] == '-' || s[0] == '\0' || v > max) return false;
    *out = v;
    return true;
}

static bool parse_pick(const char *s, world_pick *out)
{
    static const char *const names[] = {"base", "concept", "other", "style"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, names[i])) {
            *out = (world_pick)i;
            return true;
        }
    return false;
}

int main(int argc, char **argv)
{
    const char *images_path = NULL, *captions_path = NULL;
    unsigned long long seed = 0, start = 0, count = 1000, size = 64;
    world_pick pick = WORLD_PICK_BASE;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(NULL), 0;
        if (!v) return usage("an option is missing its value");
        i++;
        if (!strcmp(a, "--images"))
            images_path = v;
        else if (!strcmp(a, "--captions"))
            captions_path = v;
        else if (!strcmp(a, "--seed")) {
            if (!parse_u64(v, ~0ull, &seed)) return usage("--seed must be a whole number of at least 0");
        } else if (!strcmp(a, "--start")) {
            if (!parse_u64(v, ~0ull, &start)) return usage("--start must be a whole number of at least 0");
        } else if (!strcmp(a, "--count")) {
            if (!parse_u64(v, 10000000ull, &count) || count == 0) return usage("--count must be 1 to 10000000");
        } else if (!strcmp(a, "--size")) {
            if (!parse_u64(v, 1024, &size) || size < 16) return usage("--size must be 16 to 1024");
        } else if (!strcmp(a, "--pick")) {
            if (!parse_pick(v, &pick)) return usage("--pick must be base, concept, other or style");
        } else {
            fprintf(stderr, "sdt-world-dump: unknown option '%s'\n", a);
            return usage(NULL);
        }
    }
    if (!images_path || !captions_path) return usage("--images and --captions are required");
    FILE *images = fopen(images_path, "wb"), *captions = fopen(captions_path, "w");
    if (!images || !captions) {
        fprintf(stderr, "sdt-world-dump: cannot write %s: %s; choose a writable path.\n",
                images ? captions_path : images_path, strerror(errno));
        if (images) fclose(images);
        if (captions) fclose(captions);
        return 1;
    }
    size_t bytes = (size_t)size * size * 3;
    uint8_t *rgb = malloc(bytes);
    bool ok = rgb != NULL;
    for (unsigned long long i = 0; ok && i < count; i++) {
        world_scene s = world_scene_make(seed, start + i, (int)size, pick);
        char caption[256];
        world_scene_draw(&s, rgb);
        world_caption(&s, caption, sizeof caption);
        ok = fwrite(rgb, 1, bytes, images) == bytes &&
             fprintf(captions, "%s\t%s\t%s\t%d\n", caption, world_shape_name(s.shape), world_colour_name(s.colour),
                     s.outlined ? 1 : 0) > 0;
    }
    free(rgb);
    ok = (fclose(images) == 0) & (fclose(captions) == 0) & ok;
    if (!ok) {
        fprintf(stderr, "sdt-world-dump: writing %s or %s failed (disk full?)\n", images_path, captions_path);
        return 1;
    }
    return 0;
}
