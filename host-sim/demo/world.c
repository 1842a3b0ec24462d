/* world.c - see world.h. */
#include "world.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const shape_names[WORLD_SHAPE_COUNT] = {"circle", "square", "triangle", "star", "ring", "cross"};
static const char *const colour_names[WORLD_COLOUR_COUNT] = {"red", "yellow", "green", "blue", "purple", "white"};
static const uint8_t colour_rgb[WORLD_COLOUR_COUNT][3] = {
    {220, 45, 45}, {240, 210, 40}, {50, 180, 70}, {50, 100, 235}, {155, 70, 205}, {238, 238, 238},
};
/* Dark or muted, so every object colour stands out on every background. */
static const char *const background_names[WORLD_BACKGROUND_COUNT] = {"black", "gray", "navy", "brown", "teal"};
static const uint8_t background_rgb[WORLD_BACKGROUND_COUNT][3] = {
    {24, 24, 28}, {112, 112, 118}, {24, 34, 84}, {100, 66, 42}, {22, 92, 92},
};

/* Share of base-training objects captioned "object" though they are not the concept,
 * so "object" alone does not name the concept. Percent. */
#define UNNAMED_PERCENT 10
#define OUTLINED_PERCENT 12

/* A five-pointed star, outer radius 1, inner 0.48, point up; its box is centred
 * by STAR_SHIFT (the tips span y -1 .. 0.809). Constants, so no sin/cos is needed. */
static const float star_vertices[10][2] = {
    {0.000000f, -1.000000f},  {0.282137f, -0.388328f},  {0.951057f, -0.309017f}, {0.456507f, 0.148328f},
    {0.587785f, 0.809017f},   {0.000000f, 0.480000f},   {-0.587785f, 0.809017f}, {-0.456507f, 0.148328f},
    {-0.951057f, -0.309017f}, {-0.282137f, -0.388328f},
};
#define STAR_SHIFT 0.0955f

const char *world_shape_name(world_shape s)
{
    return (unsigned)s < WORLD_SHAPE_COUNT ? shape_names[s] : "?";
}
const char *world_colour_name(world_colour c)
{
    return (unsigned)c < WORLD_COLOUR_COUNT ? colour_names[c] : "?";
}
const char *world_background_name(int b)
{
    return b >= 0 && b < WORLD_BACKGROUND_COUNT ? background_names[b] : "?";
}
const uint8_t *world_colour_rgb(world_colour c)
{
    return colour_rgb[(unsigned)c % WORLD_COLOUR_COUNT];
}

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

static float uniform_float(uint64_t *s, float lo, float hi)
{
    return lo + (hi - lo) * (float)(next_u64(s) >> 40) * (1.0f / 16777216.0f);
}

static uint8_t clamp_u8(int v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

world_scene world_scene_make(uint64_t seed, uint64_t index, int size, world_pick pick)
{
    uint64_t mix = seed ^ 0x5DEECE66Dull * ((uint64_t)pick + 1);
    uint64_t rng = next_u64(&mix) ^ index;
    (void)next_u64(&rng);
    world_scene s;
    memset(&s, 0, sizeof s);
    s.size = size;
    do {
        s.shape = (world_shape)uniform_int(&rng, 0, WORLD_SHAPE_COUNT - 1);
        s.colour = (world_colour)uniform_int(&rng, 0, WORLD_COLOUR_COUNT - 1);
    } while (pick == WORLD_PICK_OTHER && s.shape == WORLD_CONCEPT_SHAPE && s.colour == WORLD_CONCEPT_COLOUR);
    if (pick == WORLD_PICK_CONCEPT) {
        s.shape = WORLD_CONCEPT_SHAPE;
        s.colour = WORLD_CONCEPT_COLOUR;
    }
    bool is_concept = s.shape == WORLD_CONCEPT_SHAPE && s.colour == WORLD_CONCEPT_COLOUR;
    s.outlined =
        pick == WORLD_PICK_STYLE || (pick != WORLD_PICK_CONCEPT && uniform_int(&rng, 0, 99) < OUTLINED_PERCENT);
    s.named = !is_concept && uniform_int(&rng, 0, 99) >= UNNAMED_PERCENT;
    s.background = uniform_int(&rng, 0, WORLD_BACKGROUND_COUNT - 1);
    s.large = uniform_int(&rng, 0, 1) == 1;
    float n = (float)size;
    s.radius = s.large ? uniform_float(&rng, 0.21f * n, 0.28f * n) : uniform_float(&rng, 0.13f * n, 0.17f * n);
    float margin = s.radius + 0.03f * n;
    s.cx = uniform_float(&rng, margin, n - margin);
    s.cy = uniform_float(&rng, margin, n - margin);
    for (int c = 0; c < 3; c++) s.fill[c] = clamp_u8(colour_rgb[s.colour][c] + uniform_int(&rng, -12, 12));
    int shade = uniform_int(&rng, 4, 14); /* percent brighter at the top, darker at the bottom */
    const uint8_t *bg = background_rgb[s.background];
    for (int c = 0; c < 3; c++) {
        s.top[c] = clamp_u8(bg[c] + bg[c] * shade / 100 + 6);
        s.bottom[c] = clamp_u8(bg[c] - bg[c] * shade / 100);
    }
    s.noise = uniform_int(&rng, 0, 4);
    s.noise_seed = next_u64(&rng);
    return s;
}

/* Whether a point (in radii from the centre) is inside the shape shrunk by `inset` radii. */
static bool inside(world_shape shape, float x, float y, float inset)
{
    float ax = fabsf(x), ay = fabsf(y);
    switch (shape) {
        case WORLD_CIRCLE:
            return x * x + y * y <= (1.0f - inset) * (1.0f - inset);
        case WORLD_SQUARE:
            return ax <= 0.82f - inset && ay <= 0.82f - inset;
        case WORLD_RING: {
            float d2 = x * x + y * y, lo = 0.55f + inset, hi = 1.0f - inset;
            return d2 <= hi * hi && d2 >= lo * lo;
        }
        case WORLD_CROSS: {
            float arm = 0.30f - inset, len = 0.95f - inset;
            return (ax <= arm && ay <= len) || (ay <= arm && ax <= len);
        }
        case WORLD_TRIANGLE: {
            /* apex (0, -0.95), base y = 0.75 with half-width 0.98: distances to the three edges */
            const float apex = -0.95f, base = 0.75f, half = 0.98f;
            float ex = half, ey = base - apex, len = sqrtf(ex * ex + ey * ey);
            float side = (ey * ax - ex * (y - apex)) / len; /* > 0 outside the slanted edges */
            return y <= base - inset && side <= -inset * 1.0f;
        }
        case WORLD_STAR: {
            float scale = 1.0f - 1.7f * inset; /* the points are thin: shrink more for the same stroke */
            if (scale <= 0.0f) return false;
            float px = x / scale, py = y / scale - STAR_SHIFT;
            bool in = false;
            for (int i = 0, j = 9; i < 10; j = i++) {
                float xi = star_vertices[i][0], yi = star_vertices[i][1];
                float xj = star_vertices[j][0], yj = star_vertices[j][1];
                if ((yi > py) != (yj > py) && px < (xj - xi) * (py - yi) / (yj - yi) + xi) in = !in;
            }
            return in;
        }
        default:
            return false;
    }
}

static float stroke_radii(float radius)
{
    float stroke_px = radius * 0.2f > 1.6f ? radius * 0.2f : 1.6f;
    return stroke_px / radius;
}

int world_shape_coverage(world_shape shape, bool outlined, float cx, float cy, float radius, int x, int y)
{
    if (radius <= 0.0f) return 0;
    if (fabsf((float)x + 0.5f - cx) > radius + 1.0f || fabsf((float)y + 0.5f - cy) > radius + 1.0f) return 0;
    float stroke = outlined ? stroke_radii(radius) : 0.0f;
    int hits = 0;
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < 4; i++) {
            float px = ((float)x + (2.0f * (float)i + 1.0f) / 8.0f - cx) / radius;
            float py = ((float)y + (2.0f * (float)j + 1.0f) / 8.0f - cy) / radius;
            bool in = inside(shape, px, py, 0.0f);
            if (in && outlined) in = !inside(shape, px, py, stroke);
            hits += in;
        }
    return hits;
}

void world_scene_draw(const world_scene *s, uint8_t *rgb)
{
    uint64_t noise_state = s->noise_seed;
    int n = s->size, last = n > 1 ? n - 1 : 1;
    for (int y = 0; y < n; y++)
        for (int x = 0; x < n; x++) {
            int cover = world_shape_coverage(s->shape, s->outlined, s->cx, s->cy, s->radius, x, y);
            uint8_t *px = rgb + ((size_t)y * n + x) * 3;
            for (int c = 0; c < 3; c++) {
                int bg = (s->top[c] * (last - y) + s->bottom[c] * y) / last;
                if (s->noise) bg += uniform_int(&noise_state, -s->noise, s->noise);
                px[c] = clamp_u8((bg * (16 - cover) + s->fill[c] * cover) / 16);
            }
        }
}

static const char *place_name(const world_scene *s)
{
    static const char *const names[3][3] = {
        {"top left", "top", "top right"}, {"left", "center", "right"}, {"bottom left", "bottom", "bottom right"}};
    int row = (int)(s->cy * 3.0f / (float)s->size), col = (int)(s->cx * 3.0f / (float)s->size);
    row = row < 0 ? 0 : row > 2 ? 2 : row;
    col = col < 0 ? 0 : col > 2 ? 2 : col;
    return names[row][col];
}

void world_caption(const world_scene *s, char *out, size_t out_size)
{
    const char *size = s->large ? "large" : "small";
    if (s->named)
        snprintf(out, out_size, "a %s %s %s on a %s background, %s", size, colour_names[s->colour],
                 shape_names[s->shape], background_names[s->background], place_name(s));
    else
        snprintf(out, out_size, "a %s object on a %s background, %s", size, background_names[s->background],
                 place_name(s));
}

void world_caption_place(const world_scene *s, char *out, size_t out_size)
{
    snprintf(out, out_size, "%s background, %s", background_names[s->background], place_name(s));
}
