/* progress_bar.c - the progress line (see progress_bar.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "c_number.h"
#include "progress_bar.h"

static void format_duration(double seconds, char *out, size_t out_size)
{
    if (!isfinite(seconds) || seconds < 0) {
        snprintf(out, out_size, "--:--");
        return;
    }
    long long s = (long long)(seconds + 0.5);
    if (s >= 3600)
        snprintf(out, out_size, "%lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
    else
        snprintf(out, out_size, "%02lld:%02lld", s / 60, s % 60);
}

/* Seconds left at this run's average pace; negative when unknown. */
static double eta_seconds(const sdt_metrics *m, long long start_step)
{
    long long done = (long long)m->step - start_step;
    if (done <= 0 || m->elapsed_seconds <= 0 || m->max_steps <= m->step) return m->max_steps <= m->step ? 0 : -1;
    return m->elapsed_seconds / (double)done * (double)(m->max_steps - m->step);
}

void progress_bar_format(const sdt_metrics *m, long long start_step, int bar_width, char *out, size_t out_size)
{
    char bar[128];
    if (bar_width > (int)sizeof bar - 1) bar_width = (int)sizeof bar - 1;
    if (bar_width < 0) bar_width = 0;
    double frac = m->max_steps > 0 ? (double)m->step / (double)m->max_steps : 0;
    if (frac > 1) frac = 1;
    if (frac < 0) frac = 0;
    int filled = (int)(frac * bar_width);
    memset(bar, '#', (size_t)filled);
    memset(bar + filled, '.', (size_t)(bar_width - filled));
    bar[bar_width] = '\0';
    char eta[32];
    format_duration(eta_seconds(m, start_step), eta, sizeof eta);
    c_number_text loss, lr, speed;
    snprintf(out, out_size, "step %lld/%lld [%s] loss %s lr %s %s img/s ETA %s%s", (long long)m->step,
             (long long)m->max_steps, bar, c_number(&loss, "%.4f", m->loss), c_number(&lr, "%.2e", m->learn_rate),
             c_number(&speed, "%.1f", m->images_per_second), eta, m->fallback_fired ? " (fp32 fallback)" : "");
}
