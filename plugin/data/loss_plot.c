/* loss_plot.c - see loss_plot.h. */
#include "data/loss_plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "c_numeric.h"
#include "data/pixel_font.h"
#include "data/png_write.h"

#define W SDT_LOSS_PLOT_WIDTH
#define H SDT_LOSS_PLOT_HEIGHT
#define LEFT 86 /* room for the y labels */
#define RIGHT 24
#define TOP 72    /* title, legend and the lowest validation loss */
#define BOTTOM 58 /* x labels and the axis name */
#define FONT 2    /* pixel-font scale of labels */

static const uint8_t white[3] = {255, 255, 255}, black[3] = {30, 30, 30}, grid_grey[3] = {225, 225, 225},
                     label_grey[3] = {70, 70, 70}, train_light[3] = {160, 190, 230}, mean_blue[3] = {20, 70, 170},
                     val_orange[3] = {230, 110, 0};

typedef struct canvas {
    uint8_t *rgb;
    double x0, x1, y0, y1; /* data range shown */
} canvas;

static void put(canvas *c, int x, int y, const uint8_t col[3])
{
    if (x >= 0 && x < W && y >= 0 && y < H) memcpy(c->rgb + ((size_t)y * W + x) * 3, col, 3);
}

static void square(canvas *c, int x, int y, int size, const uint8_t col[3])
{
    for (int dy = 0; dy < size; dy++)
        for (int dx = 0; dx < size; dx++) put(c, x - size / 2 + dx, y - size / 2 + dy, col);
}

static void disc(canvas *c, int x, int y, int r, const uint8_t col[3])
{
    for (int dy = -r; dy <= r; dy++)
        for (int dx = -r; dx <= r; dx++)
            if (dx * dx + dy * dy <= r * r) put(c, x + dx, y + dy, col);
}

/* Bresenham's line, each point a size x size square. */
static void line(canvas *c, int xa, int ya, int xb, int yb, int size, const uint8_t col[3])
{
    int dx = abs(xb - xa), dy = -abs(yb - ya), sx = xa < xb ? 1 : -1, sy = ya < yb ? 1 : -1, err = dx + dy;
    for (;;) {
        square(c, xa, ya, size, col);
        if (xa == xb && ya == yb) break;
        int e2 = 2 * err;
        if (e2 >= dy) err += dy, xa += sx;
        if (e2 <= dx) err += dx, ya += sy;
    }
}

static int px_x(const canvas *c, double x)
{
    double span = c->x1 - c->x0;
    return LEFT + (int)lround((x - c->x0) / (span > 0 ? span : 1) * (W - LEFT - RIGHT - 1));
}

/* Values past the range are held at its edge (a spike reads as "off the top"). */
static int px_y(const canvas *c, double y)
{
    double span = c->y1 - c->y0, t = (y - c->y0) / (span > 0 ? span : 1);
    if (t < 0) t = 0;
    if (t > 1) t = 1;
    return H - BOTTOM - 1 - (int)lround(t * (H - TOP - BOTTOM - 1));
}

/* A round tick spacing (1, 2 or 5 x 10^k) giving about `count` ticks over span. */
static double nice_step(double span, int count)
{
    if (!(span > 0)) return 1;
    double raw = span / count, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

static void text(canvas *c, int x, int y, const char *s, const uint8_t col[3])
{
    sdt_pixel_font_draw(c->rgb, W, H, x, y, s, FONT, col);
}

int sdt_loss_plot_mean_window(int n)
{
    int w = n / 10;
    return w < 1 ? 1 : w > 100 ? 100 : w;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The trailing mean of the finite training losses (NAN where there are none yet); malloc'd. */
static double *running_mean(const sdt_loss_series *s)
{
    double *mean = malloc((size_t)(s->n > 0 ? s->n : 1) * sizeof *mean);
    if (!mean) return NULL;
    int window = sdt_loss_plot_mean_window(s->n);
    for (int i = 0; i < s->n; i++) {
        double sum = 0;
        int k = 0;
        for (int j = i; j >= 0 && j > i - window; j--)
            if (isfinite(s->value[j])) sum += s->value[j], k++;
        mean[i] = k ? sum / k : NAN;
    }
    return mean;
}

/* The y range: the mean, the validation loss and the training losses up to their 98th percentile. */
static void y_range(const sdt_loss_plot *p, const double *mean, double *lo, double *hi)
{
    *lo = INFINITY, *hi = -INFINITY;
    double *sorted = malloc((size_t)(p->train.n > 0 ? p->train.n : 1) * sizeof *sorted);
    int n = 0;
    for (int i = 0; sorted && i < p->train.n; i++)
        if (isfinite(p->train.value[i])) sorted[n++] = p->train.value[i];
    if (n) {
        qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
        *lo = sorted[0];
        *hi = sorted[(int)floor(0.95 * (n - 1))];
    }
    free(sorted);
    for (int i = 0; i < p->train.n; i++)
        if (isfinite(mean[i])) *lo = fmin(*lo, mean[i]), *hi = fmax(*hi, mean[i]);
    for (int i = 0; i < p->validation.n; i++)
        if (isfinite(p->validation.value[i]))
            *lo = fmin(*lo, p->validation.value[i]), *hi = fmax(*hi, p->validation.value[i]);
    if (!isfinite(*lo)) *lo = 0, *hi = 1;
    double pad = (*hi - *lo) * 0.05;
    if (!(pad > 0)) pad = fabs(*hi) * 0.05 + 1e-3;
    *lo = fmax(0, *lo - pad); /* a loss is never negative: start at 0 when the padding reaches past it */
    *hi += pad;
}

static void axes(canvas *c)
{
    char label[32];
    double ys = nice_step(c->y1 - c->y0, 6);
    for (double v = ceil(c->y0 / ys) * ys; v <= c->y1 + ys * 1e-9; v += ys) {
        int y = px_y(c, v);
        for (int x = LEFT; x < W - RIGHT; x++) put(c, x, y, grid_grey);
        sdt_c_snprintf(label, sizeof label, "%.4g", fabs(v) < ys * 1e-6 ? 0.0 : v);
        text(c, LEFT - 8 - sdt_pixel_font_width(label, FONT), y - 7, label, label_grey);
    }
    double xs = nice_step(c->x1 - c->x0, 8);
    if (xs < 1) xs = 1; /* steps are whole numbers */
    for (double v = ceil(c->x0 / xs) * xs; v <= c->x1 + xs * 1e-9; v += xs) {
        int x = px_x(c, v);
        for (int y = TOP; y < H - BOTTOM; y++) put(c, x, y, grid_grey);
        sdt_c_snprintf(label, sizeof label, "%.0f", v);
        text(c, x - sdt_pixel_font_width(label, FONT) / 2, H - BOTTOM + 8, label, label_grey);
    }
    for (int x = LEFT; x < W - RIGHT; x++) put(c, x, H - BOTTOM, black);
    for (int y = TOP; y <= H - BOTTOM; y++) put(c, LEFT - 1, y, black);
    text(c, (LEFT + W - RIGHT - sdt_pixel_font_width("STEP", FONT)) / 2, H - 22, "STEP", black);
    text(c, 8, TOP - 18, "LOSS", black);
}

/* One legend entry right-aligned at *right; moves *right left past it. */
static void legend_entry(canvas *c, int *right, const char *name, const uint8_t col[3], bool thick)
{
    int tw = sdt_pixel_font_width(name, FONT), x = *right - tw;
    text(c, x, 6, name, label_grey);
    line(c, x - 30, 12, x - 8, 12, thick ? 4 : 2, col);
    *right = x - 52;
}

uint8_t *sdt_loss_plot_render(const sdt_loss_plot *p)
{
    canvas c = {malloc((size_t)W * H * 3), 0, 1, 0, 1};
    double *mean = running_mean(&p->train);
    if (!c.rgb || !mean) {
        free(c.rgb);
        free(mean);
        return NULL;
    }
    for (size_t i = 0; i < (size_t)W * H; i++) memcpy(c.rgb + i * 3, white, 3);
    int64_t first = INT64_MAX, last = INT64_MIN;
    const sdt_loss_series *all[2] = {&p->train, &p->validation};
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < all[s]->n; i++) {
            if (all[s]->step[i] < first) first = all[s]->step[i];
            if (all[s]->step[i] > last) last = all[s]->step[i];
        }
    if (first == INT64_MAX) first = 0, last = 1;
    c.x0 = (double)first;
    c.x1 = (double)(last > first ? last : first + 1);
    y_range(p, mean, &c.y0, &c.y1);
    axes(&c);
    for (int i = 0; i < p->train.n; i++) { /* the raw losses: light, joined */
        if (!isfinite(p->train.value[i])) continue;
        int x = px_x(&c, (double)p->train.step[i]), y = px_y(&c, p->train.value[i]);
        if (i > 0 && isfinite(p->train.value[i - 1]))
            line(&c, px_x(&c, (double)p->train.step[i - 1]), px_y(&c, p->train.value[i - 1]), x, y, 1, train_light);
        square(&c, x, y, 2, train_light);
    }
    for (int i = 1; i < p->train.n; i++)
        if (isfinite(mean[i - 1]) && isfinite(mean[i]))
            line(&c, px_x(&c, (double)p->train.step[i - 1]), px_y(&c, mean[i - 1]), px_x(&c, (double)p->train.step[i]),
                 px_y(&c, mean[i]), 3, mean_blue);
    int prev = -1;
    for (int i = 0; i < p->validation.n; i++) {
        if (!isfinite(p->validation.value[i])) continue;
        int x = px_x(&c, (double)p->validation.step[i]), y = px_y(&c, p->validation.value[i]);
        if (prev >= 0)
            line(&c, px_x(&c, (double)p->validation.step[prev]), px_y(&c, p->validation.value[prev]), x, y, 3,
                 val_orange);
        disc(&c, x, y, 4, val_orange);
        prev = i;
    }
    int best = -1; /* the lowest validation loss: ringed, and named under the title */
    for (int i = 0; i < p->validation.n; i++)
        if (isfinite(p->validation.value[i]) && (best < 0 || p->validation.value[i] < p->validation.value[best]))
            best = i;
    if (best >= 0) {
        int x = px_x(&c, (double)p->validation.step[best]), y = px_y(&c, p->validation.value[best]);
        for (int r = 7; r <= 8; r++)
            for (int a = 0; a < 360; a += 2)
                put(&c, x + (int)lround(r * cos(a * 0.017453292519943295)),
                    y + (int)lround(r * sin(a * 0.017453292519943295)), black);
        char note[96];
        sdt_c_snprintf(note, sizeof note, "LOWEST VALIDATION LOSS %.5g AT STEP %lld", p->validation.value[best],
                       (long long)p->validation.step[best]);
        sdt_pixel_font_draw(c.rgb, W, H, 8, 30, note, FONT, val_orange);
    }
    char name[48];
    int right = W - RIGHT;
    if (p->validation.n) legend_entry(&c, &right, "VALIDATION", val_orange, true);
    sdt_c_snprintf(name, sizeof name, "MEAN OF %d", sdt_loss_plot_mean_window(p->train.n));
    legend_entry(&c, &right, name, mean_blue, true);
    legend_entry(&c, &right, "TRAINING LOSS", train_light, false);
    if (p->title) text(&c, 8, 6, p->title, black);
    free(mean);
    return c.rgb;
}

bool sdt_loss_plot_write(const char *path, const sdt_loss_plot *plot, sdt_error *error)
{
    uint8_t *rgb = sdt_loss_plot_render(plot);
    if (!rgb) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of host memory drawing the loss plot", path);
    bool ok = sdt_png_write_rgb(path, rgb, W, H, NULL, NULL, error);
    free(rgb);
    return ok;
}
