/* diagnosis.c - classify a NaN from the health window (see diagnosis.h). */
#include "train/diagnosis.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_numeric.h"

#define DIAG_MIN_BASELINE 3 /* finite steps before the "recent" ones needed to speak of a trend */
#define DIAG_MAX_FILES_NAMED 8

void sdt_diagnosis_init(sdt_diagnosis *d)
{
    memset(d, 0, sizeof *d);
    d->recent = 3;
    d->spike_ratio = 3.0;
}

void sdt_diagnosis_record(sdt_diagnosis *d, const sdt_health_sample *s)
{
    if (!isfinite(s->loss) || !isfinite(s->grad_norm)) return;
    int slot = (d->head + d->count) % SDT_DIAGNOSIS_WINDOW;
    d->window[slot] = *s;
    if (d->count < SDT_DIAGNOSIS_WINDOW)
        d->count++;
    else
        d->head = (d->head + 1) % SDT_DIAGNOSIS_WINDOW;
}

static const sdt_health_sample *sample_at(const sdt_diagnosis *d, int i) /* 0 = oldest */
{
    return &d->window[(d->head + i) % SDT_DIAGNOSIS_WINDOW];
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_grad_norm(const sdt_diagnosis *d, int first, int count)
{
    double values[SDT_DIAGNOSIS_WINDOW];
    for (int i = 0; i < count; i++) values[i] = sample_at(d, first + i)->grad_norm;
    qsort(values, (size_t)count, sizeof values[0], compare_doubles);
    return count % 2 ? values[count / 2] : 0.5 * (values[count / 2 - 1] + values[count / 2]);
}

/* "a.png, b.png and 3 more" or a hint when the caller has no names. */
static void join_files(const char *const *files, int count, char *out, size_t n)
{
    size_t used = 0;
    out[0] = '\0';
    int named = count < DIAG_MAX_FILES_NAMED ? count : DIAG_MAX_FILES_NAMED;
    for (int i = 0; i < named && used < n; i++)
        used += (size_t)snprintf(out + used, n - used, "%s%s", i ? ", " : "", files[i] ? files[i] : "?");
    if (count > named && used < n) snprintf(out + used, n - used, " and %d more", count - named);
    if (count <= 0 || !files) snprintf(out, n, "(the sample names of this batch were not recorded)");
}

sdt_diagnosis_kind sdt_diagnosis_classify(const sdt_diagnosis *d, int64_t nan_step, const char *const *files,
                                          int file_count, char *msg, size_t msg_size)
{
    char names[1024];
    join_files(files, files ? file_count : 0, names, sizeof names);
    int recent = d->recent > 0 ? d->recent : 1;
    int baseline = d->count - recent;
    if (baseline < DIAG_MIN_BASELINE) {
        sdt_c_snprintf(
            msg, msg_size,
            "The loss became NaN/Inf at step %lld, after only %d finite step(s), too early to see a trend: the "
            "cause is most likely a non-finite value in the model weights (check the checkpoint, e.g. re-download "
            "it) or in this batch's samples: %s.",
            (long long)nan_step, d->count, names);
        return SDT_DIAGNOSIS_TOO_EARLY;
    }
    double typical = median_grad_norm(d, 0, baseline);
    double peak = 0.0;
    for (int i = baseline; i < d->count; i++)
        if (sample_at(d, i)->grad_norm > peak) peak = sample_at(d, i)->grad_norm;
    const sdt_health_sample *last = sample_at(d, d->count - 1);
    double ratio = peak / (typical > 1e-30 ? typical : 1e-30);
    if (ratio >= d->spike_ratio) {
        sdt_c_snprintf(
            msg, msg_size,
            "The loss became NaN/Inf at step %lld right after the gradient norm spiked from a typical %.3g to "
            "%.3g (%.0fx) in the previous %d steps: the optimisation blew up, not the data; lower the learning "
            "rate (now %g), add a warm-up, or clip gradients (e.g. max norm 1.0).",
            (long long)nan_step, typical, peak, ratio, recent, last->lr);
        return SDT_DIAGNOSIS_OPTIMIZATION_BLOWUP;
    }
    sdt_c_snprintf(
        msg, msg_size,
        "The loss became NaN/Inf at step %lld while the gradient norm was flat (typical %.3g, last %.3g): the "
        "training was stable, so the data is the likely cause, not the optimisation; check or remove this "
        "batch's sample file(s): %s (a corrupt or extreme image, or a broken caption).",
        (long long)nan_step, typical, last->grad_norm, names);
    return SDT_DIAGNOSIS_DATA;
}

const char *sdt_diagnosis_kind_name(sdt_diagnosis_kind kind)
{
    switch (kind) {
        case SDT_DIAGNOSIS_TOO_EARLY:
            return "too-early";
        case SDT_DIAGNOSIS_OPTIMIZATION_BLOWUP:
            return "optimization-blowup";
        case SDT_DIAGNOSIS_DATA:
            return "data";
    }
    return "unknown";
}
