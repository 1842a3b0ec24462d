/* lr_schedule.c - parse and query A1111 learning-rate schedules; see lr_schedule.h. */
#include "data/lr_schedule.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_numeric.h"

#define LR_EXAMPLE                                                                                                     \
    "write a number like 0.005, or a schedule like \"0.005:100, 1e-3:1000, 1e-5\" (0.005 until step 100, 1e-3 until 1000, then 1e-5)"

/* One comma-separated entry, trimmed, as [begin, end) of the input text. */
typedef struct entry {
    const char *begin;
    size_t len;
} entry;

static void trim(const char **b, const char **e)
{
    while (*b < *e && isspace((unsigned char)**b)) (*b)++;
    while (*e > *b && isspace((unsigned char)(*e)[-1])) (*e)--;
}

/* Decimal float as Python's float() reads it (minus underscores, inf and nan,
 * which make no sense as a learning rate). */
static bool parse_rate(const char *b, const char *e, double *out)
{
    trim(&b, &e);
    const char *p = b;
    if (p < e && (*p == '+' || *p == '-')) p++;
    int digits = 0;
    while (p < e && isdigit((unsigned char)*p)) p++, digits++;
    if (p < e && *p == '.') {
        p++;
        while (p < e && isdigit((unsigned char)*p)) p++, digits++;
    }
    if (!digits) return false;
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (p >= e || !isdigit((unsigned char)*p)) return false;
        while (p < e && isdigit((unsigned char)*p)) p++;
    }
    if (p != e) return false;
    char buf[128];
    size_t n = (size_t)(e - b);
    if (n >= sizeof(buf)) return false;
    memcpy(buf, b, n);
    buf[n] = 0;
    *out = sdt_c_strtod(buf, NULL);
    return true;
}

/* Integer as Python's int() reads it: optional sign and decimal digits only. */
static bool parse_step(const char *b, const char *e, int64_t *out)
{
    trim(&b, &e);
    const char *p = b;
    if (p < e && (*p == '+' || *p == '-')) p++;
    if (p >= e) return false;
    for (const char *q = p; q < e; q++)
        if (!isdigit((unsigned char)*q)) return false;
    char buf[32];
    size_t n = (size_t)(e - b);
    if (n >= sizeof(buf)) return false;
    memcpy(buf, b, n);
    buf[n] = 0;
    errno = 0;
    long long v = strtoll(buf, NULL, 10);
    if (errno) return false;
    *out = v;
    return true;
}

static bool push_segment(sdt_lr_schedule *s, double rate, int64_t end)
{
    sdt_lr_segment *grown = realloc(s->segments, (size_t)(s->n_segments + 1) * sizeof(*grown));
    if (!grown) return false;
    s->segments = grown;
    s->segments[s->n_segments].rate = rate;
    s->segments[s->n_segments].end_step = end;
    s->n_segments++;
    return true;
}

void sdt_lr_schedule_free(sdt_lr_schedule *s)
{
    if (!s) return;
    free(s->segments);
    s->segments = NULL;
    s->n_segments = 0;
}

static bool fail(sdt_lr_schedule *s, sdt_error *error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail(sdt_lr_schedule *s, sdt_error *error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sdt_failv(error, SDT_ERR_VALIDATION, fmt, ap);
    va_end(ap);
    sdt_lr_schedule_free(s);
    return false;
}

bool sdt_lr_schedule_parse(const char *text, const char *field, int64_t cur_step, int64_t max_steps,
                           sdt_lr_schedule *out, sdt_error *error)
{
    const char *w = field ? field : "learning rate schedule";
    memset(out, 0, sizeof(*out));
    out->start_step = cur_step;
    if (!text) text = "";
    if (max_steps <= cur_step)
        return fail(out, error,
                    "%s: training is already at step %" PRId64 " and Max steps is %" PRId64
                    "; raise Max steps above %" PRId64 " to train further",
                    w, cur_step, max_steps, cur_step);

    bool ended = false;         /* a bare rate, ':-1' or a step past Max steps closed the schedule */
    int64_t prev_step = 0;      /* last explicit step seen, to insist on increasing steps */
    const char *closing = NULL; /* the entry that ran to Max steps (for the error after it) */
    int closing_len = 0;
    bool any_entry = false;
    int64_t last_passed = -1; /* largest step skipped because it is <= cur_step */

    for (const char *p = text;;) {
        const char *comma = strchr(p, ',');
        const char *b = p, *e = comma ? comma : p + strlen(p);
        trim(&b, &e);
        int len = (int)(e - b);
        if (len > 0) {
            any_entry = true;
            const char *colon = memchr(b, ':', (size_t)len);
            if (colon && memchr(colon + 1, ':', (size_t)(e - colon - 1)))
                return fail(out, error,
                            "%s: entry \"%.*s\" has more than one ':'; each entry is RATE or RATE:STEP, "
                            "e.g. \"0.005:100\"",
                            w, len, b);
            double rate;
            if (!parse_rate(b, colon ? colon : e, &rate))
                return fail(out, error, "%s: \"%.*s\" in entry \"%.*s\" is not a number; " LR_EXAMPLE, w,
                            (int)((colon ? colon : e) - b), b, len, b);
            if (!isfinite(rate) || rate < 0)
                return fail(out, error, "%s: the rate in entry \"%.*s\" must be a finite number >= 0", w, len, b);
            int64_t step = -1;
            if (colon && !parse_step(colon + 1, e, &step))
                return fail(out, error,
                            "%s: the step in entry \"%.*s\" must be a whole number such as 1000 "
                            "(not 1e3 or 1000.0), or -1 for Max steps",
                            w, len, b);
            if (colon && step != -1 && step <= 0)
                return fail(out, error, "%s: the step in entry \"%.*s\" must be positive (or -1 for Max steps)", w, len,
                            b);
            if (ended && closing)
                return fail(out, error,
                            "%s: entry \"%.*s\" comes after \"%.*s\", which already runs to Max steps; "
                            "give \"%.*s\" an end step (RATE:STEP) or remove the later entries",
                            w, len, b, closing_len, closing, closing_len, closing);
            if (colon && step != -1 && step <= prev_step)
                return fail(out, error,
                            "%s: entry \"%.*s\" ends at step %" PRId64 ", not after the previous "
                            "entry's step %" PRId64 "; steps must increase from left to right",
                            w, len, b, step, prev_step);
            if (colon && step != -1) prev_step = step;
            if (!ended) {
                if (!colon || step == -1) {
                    if (!push_segment(out, rate, max_steps)) return fail(out, error, "%s: out of memory", w);
                    ended = true;
                    closing = b;
                    closing_len = len;
                } else if (step > cur_step) {
                    int64_t end = step < max_steps ? step : max_steps;
                    if ((out->n_segments == 0 || end > out->segments[out->n_segments - 1].end_step) &&
                        !push_segment(out, rate, end))
                        return fail(out, error, "%s: out of memory", w);
                    if (step >= max_steps) ended = true; /* the rest is beyond this run; still syntax-checked */
                } else {
                    last_passed = step;
                }
            }
        }
        if (!comma) break;
        p = comma + 1;
    }
    if (!any_entry) return fail(out, error, "%s is empty; " LR_EXAMPLE, w);
    if (out->n_segments == 0)
        return fail(out, error,
                    "%s \"%s\" ends at step %" PRId64 " but training is already at step %" PRId64
                    "; add a final entry without a step (e.g. \", 1e-5\") to keep training",
                    w, text, last_passed, cur_step);
    return true;
}

int sdt_lr_segment_index(const sdt_lr_schedule *s, int64_t step)
{
    for (int i = 0; i < s->n_segments; i++)
        if (step < s->segments[i].end_step) return i;
    return -1;
}

double sdt_lr_at(const sdt_lr_schedule *s, int64_t step)
{
    int i = sdt_lr_segment_index(s, step);
    return i < 0 ? -1.0 : s->segments[i].rate;
}

int64_t sdt_lr_end_step(const sdt_lr_schedule *s)
{
    return s->n_segments ? s->segments[s->n_segments - 1].end_step : s->start_step;
}

bool sdt_lr_finished(const sdt_lr_schedule *s, int64_t step)
{
    return sdt_lr_segment_index(s, step) < 0;
}

bool sdt_lr_apply_multiplier(sdt_lr_schedule *s, int64_t from_step, double factor, sdt_error *error)
{
    if (!(factor > 0) || !isfinite(factor)) {
        sdt_fail(error, SDT_ERR_VALIDATION, "learning rate backoff: the factor %g must be a finite number > 0", factor);
        return false;
    }
    int i = sdt_lr_segment_index(s, from_step);
    if (i < 0) return true; /* nothing left to scale */
    int64_t seg_start = i ? s->segments[i - 1].end_step : s->start_step;
    if (from_step > seg_start) {
        /* Split: [seg_start, from_step) keeps the old rate. */
        if (!push_segment(s, 0, 0)) {
            sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "learning rate backoff: out of memory");
            return false;
        }
        memmove(&s->segments[i + 1], &s->segments[i], (size_t)(s->n_segments - 1 - i) * sizeof(s->segments[0]));
        s->segments[i].end_step = from_step;
        i++;
    }
    for (; i < s->n_segments; i++) s->segments[i].rate *= factor;
    return true;
}

bool sdt_lr_schedule_format(const sdt_lr_schedule *s, char *buf, size_t buf_size)
{
    size_t used = 0;
    if (buf_size) buf[0] = 0;
    for (int i = 0; i < s->n_segments; i++) {
        int n = sdt_c_snprintf(buf + used, buf_size - used, "%s%.17g:%" PRId64, i ? ", " : "", s->segments[i].rate,
                               s->segments[i].end_step);
        if (n < 0 || (size_t)n >= buf_size - used) return false;
        used += (size_t)n;
    }
    return true;
}
