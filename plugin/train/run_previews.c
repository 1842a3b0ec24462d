/* run_previews.c - see run_previews.h. */
#include "train/run_previews.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_numeric.h"
#include "train/rng.h"

bool sdt_run_previews_load(sdt_run_previews *pv, sdt_error *error)
{
    return !pv->prompts_file || pv->every <= 0 || sdt_preview_prompts_load(pv->prompts_file, &pv->prompts, error);
}

/* The seed of column `col` of a preview: the listed one, or counted up from the run's preview
 * seed. When that is -1 a single preview's seed is drawn per step from the whole 64 bits (as
 * always); a grid's first seed is drawn in 32 bits, as A1111's seeds are, so the label is short
 * and `sdt-host generate --seed` takes it to render the cell again. */
uint64_t sdt_run_previews_seed(const sdt_run_previews *pv, uint64_t run_seed, int64_t step, int col)
{
    if (pv->seeds.listed) return pv->seeds.seeds[col];
    if (pv->seed >= 0) return (uint64_t)pv->seed + (uint64_t)col;
    uint64_t drawn = sdt_rng_derive(run_seed, (uint64_t)step);
    return pv->grid ? (drawn & 0xFFFFFFFFu) + (uint64_t)col : drawn;
}

/* The PNG's parameters text of a grid: what each row and column is, as the picture shows. */
static char *grid_parameters(const sdt_run_previews *pv, const sdt_preview_request *rq, const char *const *prompts,
                             int rows, const uint64_t *seeds, int cols, int64_t step)
{
    size_t size = 512;
    for (int r = 0; r < rows; r++) size += strlen(prompts[r]) + 2;
    size += strlen(rq->negative) + (size_t)cols * 24;
    char *text = malloc(size);
    if (!text) return NULL;
    size_t at = 0;
    for (int r = 0; r < rows; r++) at += (size_t)snprintf(text + at, size - at, "%s\n", prompts[r]);
    at += (size_t)sdt_c_snprintf(text + at, size - at,
                                 "Negative prompt: %s\nStep: %lld, Sampler: %s, Steps: %d, "
                                 "CFG scale: %g, Size: %dx%d, Seeds:",
                                 rq->negative, (long long)step, sdt_sampler_name(pv->sampler), rq->steps,
                                 (double)rq->cfg_scale, rq->width, rq->height);
    for (int c = 0; c < cols; c++)
        at += (size_t)snprintf(text + at, size - at, "%s %llu", c ? "," : "", (unsigned long long)seeds[c]);
    return text;
}

bool sdt_run_previews_compose_grid(const sdt_run_previews *pv, const sdt_preview_request *rq,
                                   const char *const *prompts, int rows, const uint64_t *seeds, int cols, int64_t step,
                                   uint8_t *const *cells, uint8_t **rgb, int *width, int *height, char **parameters,
                                   sdt_error *error)
{
    char title[256], seed_labels[SDT_PREVIEW_GRID_MAX_COLS][32];
    const char *col_labels[SDT_PREVIEW_GRID_MAX_COLS];
    sdt_c_snprintf(title, sizeof title, "step %lld  %s %d steps  cfg %g", (long long)step,
                   sdt_sampler_name(pv->sampler), rq->steps, (double)rq->cfg_scale);
    for (int c = 0; c < cols; c++) {
        snprintf(seed_labels[c], sizeof seed_labels[c], "seed %llu", (unsigned long long)seeds[c]);
        col_labels[c] = seed_labels[c];
    }
    sdt_preview_grid_labels labels = {rows, cols, prompts, col_labels, title};
    sdt_preview_grid_layout layout;
    bool ok =
        sdt_preview_grid_compose(&labels, (const uint8_t *const *)cells, rq->width, rq->height, rgb, &layout, error);
    *width = layout.width;
    *height = layout.height;
    *parameters = grid_parameters(pv, rq, prompts, rows, seeds, cols, step);
    if (ok && !*parameters)
        ok = sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory describing the preview grid");
    return ok;
}

void sdt_run_previews_free(sdt_run_previews *pv)
{
    sdt_preview_prompts_free(&pv->prompts);
}
