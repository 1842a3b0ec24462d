/* validation.h - the validation images of a run and what they measured (--validation-dir /
 * --validation-split, --validate-every, --stop-after-no-improvement).
 *
 * The images come from a folder read as the dataset is, or are held out of the dataset by the
 * seed (data/validation_split.h) before the batches are planned. Each has one fixed latent (the
 * one it was encoded to). The loss is the mean over every image and the fixed timesteps of this
 * module, at noise drawn from a seed derived from the run's seed for this use alone; the pass
 * itself is the caller's (sdt_validation_measure), forward only with nothing trained, so the same
 * values give the same loss at every step and in every run. This module keeps the schedule, the
 * lowest loss and its step, early stop, and its record in the resume state. */
#ifndef SDT_TRAIN_VALIDATION_H
#define SDT_TRAIN_VALIDATION_H

#include "sdt_error.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "data/dataset.h"
#include "host/host_log.h"
#include "train/latent_cache.h"
#include "train/sd_runtime.h"
#include "train/work_arena.h"

typedef struct sdt_validation {
    bool on;
    int64_t every;            /* validate_every */
    uint32_t patience;        /* stop_after_no_improvement (0: never) */
    double split;             /* validation_split (0: a folder, validation_dir) */
    const char *dir;          /* validation_dir, or NULL */
    const char *field_prefix; /* how sentences name those two: "options->", "config.train_options->" */
    sdt_dataset ds;           /* the images (pixels dropped once encoded) */
    latent_cache lc;          /* their latents: each image's one fixed latent */
    double best_loss;         /* the lowest so far (INFINITY before the first) */
    int64_t best_step;        /* its step (-1: none yet) */
    uint32_t since_best;      /* validations since the best without a new lowest */
    double last_loss;         /* this step's, NAN when not measured at this step */
    bool stop;                /* early stop: no improvement for `patience` validations */
} sdt_validation;

/* No measurement yet (before loading, and what a state without a record leaves). */
void sdt_validation_reset(sdt_validation *v);
/* Holds the images the seed chooses (v->split of them) out of the dataset ds and its latents lc. */
bool sdt_validation_hold_out(sdt_validation *v, sdt_dataset *ds, latent_cache *lc, uint64_t seed,
                             const sdt_host_callbacks *host, sdt_error *error);
/* The folder v->dir, read with the training's image options o (o->folder is set here), each image
 * encoded once by rt's VAE (the VAE's mean) with the work arena wa. */
bool sdt_validation_load_folder(sdt_validation *v, sdt_dataset_options *o, sd_runtime *rt, work_arena *wa,
                                uint64_t seed, const sdt_host_callbacks *host, sdt_error *error);
/* Clears this step's measurement; true when the step just finished is measured. */
bool sdt_validation_due(sdt_validation *v, int64_t step);
/* One image (index into v->ds and v->lc) at one timestep with the given noise: the caller's pass,
 * forward only; *loss its loss. */
typedef bool (*sdt_validation_measure)(void *user, int item, int timestep, const float *noise, double *loss,
                                       sdt_error *error);
/* The mean loss over every image and fixed timestep, at fixed noise from the run's seed. */
bool sdt_validation_loss(const sdt_validation *v, uint64_t seed, sdt_validation_measure measure, void *user,
                         double *loss, sdt_error *error);
/* Records this step's loss; true when it is the lowest so far (the caller saves that step's copy). */
bool sdt_validation_record(sdt_validation *v, int64_t step, double loss);
/* The step's log line, and early stop once `patience` validations went by without a new lowest. */
void sdt_validation_report(sdt_validation *v, int64_t step, bool better, const sdt_host_callbacks *host);
/* The record in the resume state: written, checked (best_loss a number's text, not negative; whole
 * counts; false + a damage sentence naming the file and the field) and read back. */
void sdt_validation_to_json(const sdt_validation *v, cJSON *record);
bool sdt_validation_check_json(const cJSON *record, const char *path, sdt_error *error);
void sdt_validation_from_json(sdt_validation *v, const cJSON *record);
/* The closing line: the lowest loss and where its copy is (run_folder). */
void sdt_validation_summary(const sdt_validation *v, int64_t step, const char *run_folder,
                            const sdt_host_callbacks *host);
void sdt_validation_free(sdt_validation *v);

#endif
