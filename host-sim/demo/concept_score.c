/* concept_score.c - see concept_score.h. */
#include "concept_score.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define OBJECT_DISTANCE 50.0f  /* RGB distance from the background that makes a pixel the object's */
#define MIN_OBJECT_SHARE 0.005f
#define SOFTMAX_TEMPERATURE 0.03f

/* Each shape's extent in radii (world.c's geometry): x half-width, y top and bottom. */
static const float extents[WORLD_SHAPE_COUNT][3] = {
    [WORLD_CIRCLE] = {1.0f, -1.0f, 1.0f},      [WORLD_SQUARE] = {0.82f, -0.82f, 0.82f},
    [WORLD_TRIANGLE] = {0.98f, -0.95f, 0.75f}, [WORLD_STAR] = {0.951f, -0.9045f, 0.9045f},
    [WORLD_RING] = {1.0f, -1.0f, 1.0f},        [WORLD_CROSS] = {0.95f, -0.95f, 0.95f},
};

static float distance3(const float a[3], const float b[3])
{
    float dr = a[0] - b[0], dg = a[1] - b[1], db = a[2] - b[2];
    return sqrtf(dr * dr + dg * dg + db * db);
}

static int compare_u8(const void *a, const void *b) { return (int)*(const uint8_t *)a - (int)*(const uint8_t *)b; }

/* Per-channel median of two border rows. */
static void border_median(const uint8_t *rgb, int size, int row, float out[3])
{
    uint8_t *v = malloc((size_t)size * 2);
    if (!v) {
        out[0] = out[1] = out[2] = 0.0f;
        return;
    }
    for (int c = 0; c < 3; c++) {
        int n = 0;
        for (int r = row; r < row + 2; r++)
            for (int x = 0; x < size; x++) v[n++] = rgb[((size_t)r * size + x) * 3 + c];
        qsort(v, (size_t)n, 1, compare_u8);
        out[c] = (float)v[n / 2];
    }
    free(v);
}

static world_colour nearest_colour(const float rgb[3])
{
    world_colour best = WORLD_RED;
    float best_d = INFINITY;
    for (int c = 0; c < WORLD_COLOUR_COUNT; c++) {
        const uint8_t *w = world_colour_rgb((world_colour)c);
        float f[3] = {w[0], w[1], w[2]};
        float d = distance3(rgb, f);
        if (d < best_d) best_d = d, best = (world_colour)c;
    }
    return best;
}

/* The coordinate below which `share` of the histogram's mass lies. */
static int percentile(const int *hist, int n, int total, float share)
{
    int need = (int)ceilf(share * (float)total), sum = 0;
    for (int i = 0; i < n; i++) {
        sum += hist[i];
        if (sum >= need && sum > 0) return i;
    }
    return n - 1;
}

/* Soft IoU of the object mask (0..1 a pixel) with the shape drawn into the box [x0, x1] x [y0, y1] (pixels). */
static float shape_iou(const float *mask, int size, world_shape shape, bool outlined, float x0, float x1, float y0,
                       float y1)
{
    const float *e = extents[shape];
    float r = 0.5f * ((x1 - x0) / (2.0f * e[0]) + (y1 - y0) / (e[2] - e[1]));
    if (r <= 0.5f) return 0.0f;
    float cx = 0.5f * (x0 + x1), cy = 0.5f * ((y0 - e[1] * r) + (y1 - e[2] * r));
    float inter = 0.0f, uni = 0.0f;
    for (int y = 0; y < size; y++)
        for (int x = 0; x < size; x++) {
            float cover = (float)world_shape_coverage(shape, outlined, cx, cy, r, x, y) / 16.0f;
            float m = mask[(size_t)y * size + x];
            inter += cover < m ? cover : m;
            uni += cover > m ? cover : m;
        }
    return uni > 0.0f ? inter / uni : 0.0f;
}

concept_reading concept_score(const uint8_t *rgb, int size)
{
    concept_reading out;
    memset(&out, 0, sizeof out);
    if (size < 16) return out;
    float top[3], bottom[3];
    border_median(rgb, size, 0, top);
    border_median(rgb, size, size - 2, bottom);
    float *mask = calloc((size_t)size * size, sizeof(float)); /* distance from the background, then coverage */
    int *hx = calloc((size_t)size, sizeof(int)), *hy = calloc((size_t)size, sizeof(int));
    if (!mask || !hx || !hy) {
        free(mask), free(hx), free(hy);
        return out;
    }
    int n_object = 0, n_concept_colour = 0;
    float sum[3] = {0, 0, 0}, full = OBJECT_DISTANCE;
    for (int y = 0; y < size; y++) {
        float t = (float)y / (float)(size - 1), bg[3];
        for (int c = 0; c < 3; c++) bg[c] = top[c] * (1.0f - t) + bottom[c] * t;
        for (int x = 0; x < size; x++) {
            const uint8_t *p = rgb + ((size_t)y * size + x) * 3;
            float f[3] = {p[0], p[1], p[2]};
            float d = distance3(f, bg);
            if (d <= OBJECT_DISTANCE) continue;
            mask[(size_t)y * size + x] = d;
            full = d > full ? d : full;
            n_object++, hx[x]++, hy[y]++;
            for (int c = 0; c < 3; c++) sum[c] += f[c];
            n_concept_colour += nearest_colour(f) == WORLD_CONCEPT_COLOUR;
        }
    }
    /* Edge pixels mix object and background: their share of the way to the object's
     * full distance is their coverage, as the renderer's coverage is. */
    for (size_t i = 0; i < (size_t)size * size; i++) mask[i] = mask[i] / full;
    out.object_share = (float)n_object / (float)(size * size);
    if (out.object_share >= MIN_OBJECT_SHARE) {
        float mean[3] = {sum[0] / n_object, sum[1] / n_object, sum[2] / n_object};
        out.colour = nearest_colour(mean);
        out.colour_share = (float)n_concept_colour / (float)n_object;
        /* The object's box without its outermost 1% of pixels on each side (stray specks). */
        float x0 = (float)percentile(hx, size, n_object, 0.01f), x1 = (float)percentile(hx, size, n_object, 0.99f) + 1;
        float y0 = (float)percentile(hy, size, n_object, 0.01f), y1 = (float)percentile(hy, size, n_object, 0.99f) + 1;
        float iou[WORLD_SHAPE_COUNT][2], best = -1.0f;
        for (int s = 0; s < WORLD_SHAPE_COUNT; s++)
            for (int o = 0; o < 2; o++) {
                iou[s][o] = shape_iou(mask, size, (world_shape)s, o == 1, x0, x1, y0, y1);
                if (iou[s][o] > best) best = iou[s][o], out.shape = (world_shape)s, out.outlined = o == 1;
            }
        out.best_iou = best;
        float z = 0.0f;
        for (int s = 0; s < WORLD_SHAPE_COUNT; s++)
            for (int o = 0; o < 2; o++) z += expf((iou[s][o] - best) / SOFTMAX_TEMPERATURE);
        out.star_probability = expf((iou[WORLD_CONCEPT_SHAPE][0] - best) / SOFTMAX_TEMPERATURE) / z;
        out.score = out.colour_share * out.star_probability;
    }
    free(mask), free(hx), free(hy);
    return out;
}
