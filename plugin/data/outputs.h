/* outputs.h - the training output folder as A1111 users know it.
 *
 *   <log>/<YYYY-MM-DD>/<name>/
 *       textual_inversion_loss.csv   step,epoch,epoch_step,loss,learn_rate + health columns
 *                                    (hypernetwork_loss.csv for hypernetworks)
 *       embeddings/                  copies every N steps: <name>-<step>.safetensors
 *                                    (hypernetworks/<name>-<step>.pt for hypernetworks)
 *       images/                      previews: <name>-<step>.png
 *       image_embeddings/            PNG cards: <name>-<step>.png (embeddings only)
 *       settings-YYYY-MM-DD-HH-MM-SS.json
 * The date is local time, as A1111's datetime.now().
 */
#ifndef SDT_OUTPUTS_H
#define SDT_OUTPUTS_H

#include "sdt_error.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define SDT_PATH_MAX 4096
#define SDT_LOSS_CSV_NAME "textual_inversion_loss.csv"
#define SDT_LOSS_CSV_HEADER "step,epoch,epoch_step,loss,learn_rate,grad_norm,loss_scale,precision,skipped,images_per_s"
/* A run with validation (train/validation.h) adds one column; without it the CSV is as before. */
#define SDT_LOSS_CSV_HEADER_VALIDATION SDT_LOSS_CSV_HEADER ",validation_loss"

/* What a method's folder holds: the copies' folder name, the loss CSV's name, and whether it has
 * PNG cards (image_embeddings/). */
typedef struct sdt_output_layout {
    const char *copies;   /* "embeddings", "hypernetworks" */
    const char *loss_csv; /* SDT_LOSS_CSV_NAME, SDT_HN_LOSS_CSV_NAME */
    bool cards;
} sdt_output_layout;

#define SDT_HN_LOSS_CSV_NAME "hypernetwork_loss.csv"
extern const sdt_output_layout sdt_output_layout_embedding, sdt_output_layout_hypernetwork;
/* A hypernetwork run with an embedding whose PNG cards are written (image_embeddings/). */
extern const sdt_output_layout sdt_output_layout_hypernetwork_cards;

typedef struct sdt_output_dirs {
    char root[SDT_PATH_MAX];   /* <log>/<date>/<name> */
    char copies[SDT_PATH_MAX]; /* the layout's copies folder */
    char images[SDT_PATH_MAX];
    char image_embeddings[SDT_PATH_MAX];
    char loss_csv[SDT_PATH_MAX];
} sdt_output_dirs;

/* Fills the paths for when (local date) of the layout (NULL: the embedding's), creating nothing.
 * name must pass sdt_file_name_check. false + error when it does not or a path is too long. */
bool sdt_outputs_paths(const char *log_dir, const char *name, time_t when, const sdt_output_layout *layout,
                       sdt_output_dirs *out, sdt_error *error);
/* sdt_outputs_paths, then creates every folder of the layout. false + error when a folder cannot be made. */
bool sdt_outputs_prepare(const char *log_dir, const char *name, time_t when, const sdt_output_layout *layout,
                         sdt_output_dirs *out, sdt_error *error);

/* "<folder>/<name>-<step><ext>", e.g. ext ".safetensors". false if it does not fit. */
bool sdt_output_file(char *buf, size_t size, const char *folder, const char *name, int64_t step, const char *ext);

typedef struct sdt_loss_row {
    int64_t step, epoch, epoch_step;
    double loss, learn_rate;
    double grad_norm, loss_scale; /* NAN when not measured: written empty */
    const char *precision;        /* "fp32", "fp16", "bf16" */
    int64_t skipped;              /* optimizer steps skipped so far (non-finite gradients) */
    double images_per_s;
    bool with_validation;   /* the validation_loss column exists (the run measures it) */
    double validation_loss; /* NAN (written empty) when not measured at this step */
} sdt_loss_row;

/* Appends one row (the header first when the file is new or empty); the line
 * is written with one write() and fsynced. false + error when the existing file
 * has another header (choose another log folder) or writing fails. */
bool sdt_loss_csv_append(const char *path, const sdt_loss_row *row, sdt_error *error);
/* A row's text, without the newline (what the resume state keeps of a row not yet written);
 * false when it does not fit size (SDT_LOSS_ROW_MAX always does). */
#define SDT_LOSS_ROW_MAX 512
bool sdt_loss_row_format(const sdt_loss_row *row, char *line, size_t size);
/* sdt_loss_csv_append of a row's text (sdt_loss_row_format's) under the header with or without
 * the validation column. */
bool sdt_loss_csv_append_line(const char *path, bool with_validation, const char *row_text, sdt_error *error);

/* For resume: drops rows whose step is greater than last_step (written after
 * the checkpoint being resumed), atomically. A missing file is fine. */
bool sdt_loss_csv_truncate_after(const char *path, int64_t last_step, sdt_error *error);

/* Writes settings-<date-time>.json into folder atomically; path_out (may be
 * NULL) receives its path. */
bool sdt_settings_save(const char *folder, const cJSON *settings, time_t when, char *path_out, size_t path_size,
                       sdt_error *error);

#endif
