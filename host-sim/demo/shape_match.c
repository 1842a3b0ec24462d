/* shape_match.c - see shape_match.h. */
#include "shape_match.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define OBJECT_DISTANCE 50.0f /* RGB distance from the background that makes a pixel the object's */
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

static int compare_u8(const void *a, const void *b)
{
    return (int)*(const uint8_t *)a - (int)*(const uint8_t *)b;
}

/* Per-channel median of two border rows. */
static bool border_median(const uint8_t *rgb, int size, int row, float out[3])
{
    uint8_t *v = malloc((size_t)size * 2);
    if (!v) return false;
    for (int c = 0; c < 3; c++) {
        int n = 0;
        for (int r = row; r < row + 2; r++)
            for (int x = 0; x < size; x++) v[n++] = rgb[((size_t)r * size + x) * 3 + c];
        qsort(v, (size_t)n, 1, compare_u8);
        out[c] = (float)v[n / 2];
    }
    free(v);
    return true;
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

/* The centre and radius that put the shape's extent on the box [x0, x1] x [y0, y1]. */
static float place_in_box(world_shape shape, float x0, float x1, float y0, float y1, float *cx, float *cy)
{
    const float *e = extents[shape];
    float r = 0.5f * ((x1 - x0) / (2.0f * e[0]) + (y1 - y0) / (e[2] - e[1]));
    *cx = 0.5f * (x0 + x1);
    *cy = 0.5f * ((y0 - e[1] * r) + (y1 - e[2] * r));
    return r;
}

/* Soft IoU of the mask with the shape drawn at (cx, cy, r). */
static float shape_iou(const float *mask, int size, world_shape shape, bool outlined, float cx, float cy, float r)
{
    if (r <= 0.5f) return 0.0f;
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

bool shape_match_read(shape_match *m, const uint8_t *rgb, int size)
{
    memset(m, 0, sizeof *m);
    if (size < 16) return false;
    float top[3], bottom[3];
    m->size = size;
    m->mask = calloc((size_t)size * size, sizeof(float)); /* distance from the background, then coverage */
    int *hx = calloc((size_t)size, sizeof(int)), *hy = calloc((size_t)size, sizeof(int));
    if (!m->mask || !hx || !hy || !border_median(rgb, size, 0, top) || !border_median(rgb, size, size - 2, bottom)) {
        free(hx), free(hy);
        shape_match_free(m);
        return false;
    }
    float sum[3] = {0, 0, 0}, full = OBJECT_DISTANCE;
    for (int y = 0; y < size; y++) {
        float t = (float)y / (float)(size - 1), bg[3];
        for (int c = 0; c < 3; c++) bg[c] = top[c] * (1.0f - t) + bottom[c] * t;
        for (int x = 0; x < size; x++) {
            const uint8_t *p = rgb + ((size_t)y * size + x) * 3;
            float f[3] = {p[0], p[1], p[2]};
            float d = distance3(f, bg);
            if (d <= OBJECT_DISTANCE) continue;
            m->mask[(size_t)y * size + x] = d;
            full = d > full ? d : full;
            m->n_object++, hx[x]++, hy[y]++;
            for (int c = 0; c < 3; c++) sum[c] += f[c];
            m->n_colour[nearest_colour(f)]++;
        }
    }
    /* Edge pixels mix object and background: their share of the way to the object's full
     * distance is their coverage, as the renderer's coverage is. */
    for (size_t i = 0; i < (size_t)size * size; i++) m->mask[i] = m->mask[i] / full;
    m->object_share = (float)m->n_object / (float)(size * size);
    m->found = m->object_share >= SHAPE_MATCH_MIN_OBJECT_SHARE;
    if (m->found) {
        float mean[3] = {sum[0] / m->n_object, sum[1] / m->n_object, sum[2] / m->n_object};
        m->colour = nearest_colour(mean);
        /* The object's box without its outermost 1% of pixels on each side (stray specks). */
        float x0 = (float)percentile(hx, size, m->n_object, 0.01f);
        float x1 = (float)percentile(hx, size, m->n_object, 0.99f) + 1;
        float y0 = (float)percentile(hy, size, m->n_object, 0.01f);
        float y1 = (float)percentile(hy, size, m->n_object, 0.99f) + 1;
        m->best_iou = -1.0f;
        for (int s = 0; s < WORLD_SHAPE_COUNT; s++) {
            float cx, cy, r = place_in_box((world_shape)s, x0, x1, y0, y1, &cx, &cy);
            for (int o = 0; o < 2; o++) {
                m->iou[s][o] = shape_iou(m->mask, size, (world_shape)s, o == 1, cx, cy, r);
                if (m->iou[s][o] > m->best_iou) {
                    m->best_iou = m->iou[s][o], m->shape = (world_shape)s, m->outlined = o == 1;
                    m->cx = cx, m->cy = cy, m->radius = r;
                }
            }
        }
    }
    free(hx), free(hy);
    return true;
}

void shape_match_free(shape_match *m)
{
    free(m->mask);
    m->mask = NULL;
}

float shape_match_probability(const shape_match *m, world_shape shape, bool outlined)
{
    if (!m->found || (unsigned)shape >= WORLD_SHAPE_COUNT) return 0.0f;
    float z = 0.0f;
    for (int s = 0; s < WORLD_SHAPE_COUNT; s++)
        for (int o = 0; o < 2; o++) z += expf((m->iou[s][o] - m->best_iou) / SOFTMAX_TEMPERATURE);
    return expf((m->iou[shape][outlined] - m->best_iou) / SOFTMAX_TEMPERATURE) / z;
}
