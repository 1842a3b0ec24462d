/* demo_scene.c - see demo_scene.h. */
#include "demo_scene.h"

#include <glib.h>

typedef struct named_colour {
    const char *name;
    uint8_t rgb[3];
} named_colour;

/* Far from orange in hue, so the ring stands out and is measurable. */
static const named_colour backgrounds[] = {
    {"blue", {40, 70, 200}},   {"green", {40, 150, 60}},     {"purple", {110, 50, 160}},
    {"gray", {128, 128, 128}}, {"white", {232, 232, 236}},   {"teal", {20, 140, 140}},
    {"navy", {20, 30, 90}},    {"black", {22, 22, 24}},      {"light blue", {150, 190, 235}},
    {"dark green", {20, 80, 40}},
};
#define N_BACKGROUNDS (int)(sizeof backgrounds / sizeof backgrounds[0])

static uint64_t next_u64(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int uniform_int(uint64_t *s, int lo, int hi) /* [lo, hi] */
{
    return lo + (int)(next_u64(s) % (uint64_t)(hi - lo + 1));
}

static uint8_t clamp_u8(int v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }

demo_scene demo_scene_random(uint64_t *rng, int size)
{
    demo_scene s = {0};
    s.size = size;
    const named_colour *bg = &backgrounds[uniform_int(rng, 0, N_BACKGROUNDS - 1)];
    s.background_name = bg->name;
    int shade = uniform_int(rng, 10, 30); /* percent brighter at the top, darker at the bottom */
    for (int c = 0; c < 3; c++) {
        s.top[c] = clamp_u8(bg->rgb[c] + (bg->rgb[c] * shade) / 100 + 8);
        s.bottom[c] = clamp_u8(bg->rgb[c] - (bg->rgb[c] * shade) / 100);
    }
    s.ring[0] = (uint8_t)uniform_int(rng, 235, 255);
    s.ring[1] = (uint8_t)uniform_int(rng, 110, 150);
    s.ring[2] = (uint8_t)uniform_int(rng, 0, 30);
    int px8 = 8 * size;
    /* At least 4 px across and 2.5 px thick, so small images still show solid orange. */
    s.outer8 = MAX(uniform_int(rng, px8 * 12 / 100, px8 * 22 / 100), 32);
    s.inner8 = MIN(s.outer8 * uniform_int(rng, 50, 68) / 100, s.outer8 - 20);
    int margin = s.outer8 + 16; /* the whole ring stays inside, two pixels from the edge */
    s.cx8 = uniform_int(rng, margin, px8 - margin);
    s.cy8 = uniform_int(rng, margin, px8 - margin);
    s.noise_seed = next_u64(rng);
    s.noise = uniform_int(rng, 2, 8);
    return s;
}

/* How many of the pixel's 4x4 sample points fall on the ring (0..16). */
static int ring_coverage(const demo_scene *s, int x, int y)
{
    int64_t outer2 = (int64_t)s->outer8 * s->outer8, inner2 = (int64_t)s->inner8 * s->inner8;
    int hits = 0;
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < 4; i++) {
            int64_t dx = 8 * x + 2 * i + 1 - s->cx8, dy = 8 * y + 2 * j + 1 - s->cy8;
            int64_t d2 = dx * dx + dy * dy;
            hits += d2 <= outer2 && d2 >= inner2;
        }
    return hits;
}

void demo_scene_draw(const demo_scene *s, uint8_t *rgb)
{
    uint64_t noise_state = s->noise_seed;
    int n = s->size, last = n > 1 ? n - 1 : 1;
    for (int y = 0; y < n; y++)
        for (int x = 0; x < n; x++) {
            int cover = ring_coverage(s, x, y);
            uint8_t *px = rgb + ((size_t)y * n + x) * 3;
            for (int c = 0; c < 3; c++) {
                int bg = (s->top[c] * (last - y) + s->bottom[c] * y) / last;
                bg += uniform_int(&noise_state, -s->noise, s->noise);
                px[c] = clamp_u8((bg * (16 - cover) + s->ring[c] * cover) / 16);
            }
        }
}

static const char *third_name(int pos8, int size, const char *low, const char *mid, const char *high)
{
    int third = pos8 * 3 / (8 * size);
    return third <= 0 ? low : third == 1 ? mid : high;
}

char *demo_scene_caption(const demo_scene *s)
{
    const char *row = third_name(s->cy8, s->size, "top", "middle", "bottom");
    const char *col = third_name(s->cx8, s->size, "left", "center", "right");
    if (!g_strcmp0(row, "middle") && !g_strcmp0(col, "center"))
        return g_strdup_printf("%s background, center", s->background_name);
    return g_strdup_printf("%s background, %s %s", s->background_name, row, col);
}
