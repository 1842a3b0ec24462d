/* dataset.h - the training images of one folder, decoded, resized and captioned.
 *
 * Like A1111 (dataset.py): a flat, non-recursive folder; every image stretched
 * to width x height (bicubic, no crop) unless do_not_resize, after being turned
 * upright by its EXIF orientation (JPEG APP1 or PNG eXIf; all channels, alpha
 * too) as PIL's ImageOps.exif_transpose does; pixels mapped to
 * [-1, 1] as x/127.5 - 1; caption from "<stem>.txt" or the file name.
 * Unlike A1111 nothing is skipped silently: each file that cannot be used
 * (0 bytes, corrupt, not an image, absurd size, unreadable caption) is named in
 * a warning. Files are visited in name order so runs are reproducible.
 *
 * With buckets (data/buckets.h) each image instead goes to the bucket nearest its aspect ratio,
 * is resized to cover it and cropped to it, the crop's place kept for SDXL's conditioning.
 *
 * Alpha as loss weight: the alpha plane of the original image is resized to
 * the latent size (width/8 x height/8) and normalised to min 0, mean 1, as
 * A1111 does; a constant alpha (e.g. a fully opaque RGBA file) gives weight 1
 * everywhere instead of A1111's 0/0 = NaN.
 */
#ifndef SDT_DATASET_H
#define SDT_DATASET_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/buckets.h"
#include "data/caption.h"

#define SDT_DATASET_DEFAULT_MAX_PIXELS (64ll * 1024 * 1024) /* 8192 x 8192 */
#define SDT_LATENT_FACTOR 8                                 /* VAE downsampling */

typedef struct sdt_dataset_item sdt_dataset_item;

typedef struct sdt_dataset_options {
    const char *folder;
    int width, height;              /* resize target (multiples of 8) */
    bool do_not_resize;             /* keep native sizes; each must be a multiple of 8 */
    const sdt_bucket_list *buckets; /* non-NULL: each image resized to cover its bucket and cropped to it */
    bool random_crop;               /* with buckets: the crop drawn from (crop_seed, file name) instead of centred */
    uint64_t crop_seed;
    bool alpha_as_loss_weight;
    int64_t max_pixels; /* per image, checked from the header; 0 = default */
    sdt_caption_rules caption;
    bool probe_only; /* captions and sizes from the headers only: nothing decoded, pixels NULL */
    /* Optional, called after each folder entry with how many of how many were visited:
     * returning false stops loading (err says "interrupted"). Progress and the interrupt button. */
    bool (*keep_going)(void *user, int visited, int total);
    /* Optional, called as soon as an item is loaded, e.g. to encode its latent and
     * drop its pixels so a large dataset never sits in memory as pixels. Returning
     * false drops the item, and the error becomes its warning. */
    bool (*item_ready)(void *user, sdt_dataset_item *item, sdt_error *error);
    void *user;
} sdt_dataset_options;

struct sdt_dataset_item {
    char *path;
    char *caption;                     /* the [filewords] */
    int width, height;                 /* of pixels (after resize) */
    int source_width, source_height;   /* the image as read (upright), before resizing: SDXL's original size */
    int resized_width, resized_height; /* what it was resized to before the crop (= width, height without buckets) */
    int crop_left, crop_top;           /* the crop's corner in the resized image (0 without buckets): SDXL's crop */
    float *pixels;                     /* [3, height, width] in [-1, 1]; NULL after sdt_dataset_drop_pixels */
    float *loss_weight;                /* [height/8, width/8], or NULL = weight 1 everywhere */
};

typedef struct sdt_dataset {
    sdt_dataset_item *items;
    int n_items;
    char **warnings; /* one sentence per skipped file */
    int n_warnings;
} sdt_dataset;

/* Loads every usable image of the folder. false + error when the folder is
 * missing or unreadable, the options are invalid, or no image is usable (the error
 * then quotes the first warning). Skipped files are in out->warnings. */
bool sdt_dataset_load(const sdt_dataset_options *opt, sdt_dataset *out, sdt_error *error);
void sdt_dataset_free(sdt_dataset *ds);

/* Frees an item's pixels once its latent is cached (they are ~3 MB at 512x512). */
void sdt_dataset_drop_pixels(sdt_dataset *ds, int index);

/* Computes the latent-resolution loss weight from the alpha (last) channel of an
 * interleaved 8-bit image (w x h, channels 2 or 4): resized to latent_w x
 * latent_h, normalised to min 0, mean 1; all ones when the alpha is constant.
 * Exposed for the tests. */
bool sdt_alpha_to_loss_weight(const uint8_t *pixels, int w, int h, int channels, float *out, int latent_w,
                              int latent_h);

#endif
