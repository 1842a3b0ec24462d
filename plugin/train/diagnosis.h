/* diagnosis.h - reads the health signals before a NaN the way an expert would.
 *
 * The trainer records one sample per finite step (loss, grad norm, lr, scale,
 * images/s) into a fixed window. When a loss turns non-finite it asks for a
 * classification:
 *  - the gradient norm spiked in the steps just before (peak of the last few
 *    norms >= spike_ratio x the median before them): the optimisation blew up;
 *    the sentence says to lower the LR, add warm-up, clip;
 *  - the gradient norm was flat: the batch is the likely cause; the sentence
 *    names the sample files of that batch;
 *  - too little history (a NaN in the first steps): the weights or the first
 *    batch; the sentence names both.
 * Pure bookkeeping, no tensors, a plain struct (no allocation).
 */
#ifndef SDT_CORE_DIAGNOSIS_H
#define SDT_CORE_DIAGNOSIS_H

#include <stddef.h>
#include <stdint.h>

#define SDT_DIAGNOSIS_WINDOW 64

typedef struct sdt_health_sample {
    int64_t step;
    double loss;
    double grad_norm; /* unscaled, before clipping */
    double lr;
    double scale; /* loss scale, 1 without one */
    double images_per_s;
} sdt_health_sample;

typedef struct sdt_diagnosis {
    sdt_health_sample window[SDT_DIAGNOSIS_WINDOW]; /* ring buffer, oldest at head once full */
    int count;
    int head;
    int recent;         /* 3: steps "just before" the NaN */
    double spike_ratio; /* 3.0 */
} sdt_diagnosis;

typedef enum sdt_diagnosis_kind {
    SDT_DIAGNOSIS_TOO_EARLY = 0,       /* not enough history: weights or first batch */
    SDT_DIAGNOSIS_OPTIMIZATION_BLOWUP, /* grad-norm spike before the NaN */
    SDT_DIAGNOSIS_DATA,                /* flat grad norm: the batch */
} sdt_diagnosis_kind;

void sdt_diagnosis_init(sdt_diagnosis *d);
/* Records a step's signals; samples with a non-finite loss or grad norm are not
 * kept (an fp16 overflow step says nothing about the trend). */
void sdt_diagnosis_record(sdt_diagnosis *d, const sdt_health_sample *s);
/* Classifies a non-finite loss at nan_step; files are the batch's sample file
 * names (may be NULL/0). Writes one actionable sentence into msg. */
sdt_diagnosis_kind sdt_diagnosis_classify(const sdt_diagnosis *d, int64_t nan_step, const char *const *files,
                                          int file_count, char *msg, size_t msg_size);
const char *sdt_diagnosis_kind_name(sdt_diagnosis_kind kind);

#endif
