/* run_previews.h - a run's previews: what they show (the preview prompt or the last training
 * prompt, a prompts file, seeds), how (sampler, steps, size, CFG) and how often, and the grid of
 * prompts x seeds with its labels and its PNG parameters text. Rendering is the job's (its
 * runtime, its parts' hooks, the average swapped in when asked: train_job_save.c); this module
 * decides the seeds and composes the picture. */
#ifndef SDT_TRAIN_RUN_PREVIEWS_H
#define SDT_TRAIN_RUN_PREVIEWS_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#include "data/preview_grid.h"
#include "data/preview_prompts.h"
#include "train/preview.h"
#include "train/sampler.h"

typedef struct sdt_run_previews {
    int64_t every;        /* preview_every (0: none) */
    const char *prompt;   /* NULL: a preview shows the last training prompt */
    const char *negative; /* "" when none */
    uint32_t steps, width, height;
    int64_t seed; /* -1: drawn per step from the run's seed */
    double cfg;
    sdt_sampler_kind sampler;
    const char *prompts_file;    /* NULL: no prompts file */
    sdt_preview_prompts prompts; /* its prompts (sdt_run_previews_load) */
    sdt_preview_seeds seeds;
    bool grid; /* a labelled grid of prompts x seeds instead of one image */
} sdt_run_previews;

/* The prompts file's prompts, when previews are on and a file is named. */
bool sdt_run_previews_load(sdt_run_previews *pv, sdt_error *error);
/* The seed of column col of the preview at step: the listed one, or counted up from the preview
 * seed, or drawn from run_seed (a grid's in 32 bits, so its label renders the cell again). */
uint64_t sdt_run_previews_seed(const sdt_run_previews *pv, uint64_t run_seed, int64_t step, int col);
/* The grid of rendered cells (rows prompts x cols seeds, row-major) as one labelled picture
 * (*rgb malloc'd, *width x *height) and its PNG parameters text (*parameters malloc'd). */
bool sdt_run_previews_compose_grid(const sdt_run_previews *pv, const sdt_preview_request *rq,
                                   const char *const *prompts, int rows, const uint64_t *seeds, int cols, int64_t step,
                                   uint8_t *const *cells, uint8_t **rgb, int *width, int *height, char **parameters,
                                   sdt_error *error);
void sdt_run_previews_free(sdt_run_previews *pv);

#endif
