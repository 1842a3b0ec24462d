/* lr_schedule.h - A1111's learning-rate schedule string: "0.005:100, 1e-3:1000, 1e-5".
 *
 * Grammar (A1111 learn_schedule.py): entries separated by ',', blank entries
 * skipped; an entry is RATE or RATE:STEP. RATE is a float, STEP an integer
 * (no exponent, no decimal point). Parsed against the step the embedding is
 * already at (cur_step) and Max steps:
 *   - RATE:STEP with STEP > cur_step   -> segment (RATE, min(STEP, max_steps));
 *                                         STEP > max_steps ends the schedule there.
 *   - RATE:-1                          -> segment (RATE, max_steps), schedule ends.
 *   - RATE:STEP with STEP <= cur_step  -> already passed: skipped (this is how a
 *                                         resumed run lands in the right segment).
 *   - RATE alone                       -> segment (RATE, max_steps), schedule ends;
 *                                         anything after it is ignored.
 * A rate applies while step < end_step. When the last segment ends the run is
 * finished, even before Max steps ("0.01:500" with Max steps 1000 stops at 500).
 *
 * Stricter than A1111 (docs/a1111-differences.md): negative or non-finite
 * rates, STEP 0 or below -1, more than one ':' in an entry, and steps that do
 * not increase are errors naming the entry, not silently odd schedules.
 */
#ifndef SDT_LR_SCHEDULE_H
#define SDT_LR_SCHEDULE_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sdt_lr_segment {
    double rate;
    int64_t end_step; /* the rate applies to steps < end_step */
} sdt_lr_segment;

typedef struct sdt_lr_schedule {
    sdt_lr_segment *segments;
    int n_segments;
    int64_t start_step; /* cur_step at parse time: the first segment starts here */
} sdt_lr_schedule;

/* Parses text for a run at cur_step with max_steps (> cur_step). On error
 * returns false, *out is empty, and the error names `field` (the caller's name for the text,
 * e.g. "config.clip_value"; NULL: "learning rate schedule"), the bad entry and the fix. */
bool sdt_lr_schedule_parse(const char *text, const char *field, int64_t cur_step, int64_t max_steps,
                           sdt_lr_schedule *out, sdt_error *error);
void sdt_lr_schedule_free(sdt_lr_schedule *s);

/* The rate at step, or a negative value when step is at or past the end. */
double sdt_lr_at(const sdt_lr_schedule *s, int64_t step);
/* Index of the segment step falls in (the resume position), -1 when finished. */
int sdt_lr_segment_index(const sdt_lr_schedule *s, int64_t step);
/* The step at which training stops: the end of the last segment. */
int64_t sdt_lr_end_step(const sdt_lr_schedule *s);
bool sdt_lr_finished(const sdt_lr_schedule *s, int64_t step);

/* Multiplies the rate of every step >= from_step by factor (> 0), splitting the
 * segment that from_step falls in. Used by the NaN fallback's LR backoff. */
bool sdt_lr_apply_multiplier(sdt_lr_schedule *s, int64_t from_step, double factor, sdt_error *error);

/* Writes the effective schedule back in the same grammar ("r:end, r:end") with
 * round-trip precision, so a checkpoint can store it and a resumed run re-parses
 * exactly the same rates (including any backoff). Returns false if buf is too small. */
bool sdt_lr_schedule_format(const sdt_lr_schedule *s, char *buf, size_t buf_size);

#endif
