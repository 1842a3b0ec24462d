/* run_data.h - a run's training data: the dataset (its files, captions and sizes, then its pixels
 * until they are encoded), the latent cache (with flip's mirrored twins), the data order and the
 * batch plan, aspect-ratio buckets, and the options that shape each sample (caption drop-out,
 * tag shuffle and drop-out, keep_tokens, flip: train/sample_augment.h). The job fills the options
 * from its options value and drives the loading (its VAE, its progress and interrupt); this
 * module owns what comes of it. */
#ifndef SDT_TRAIN_RUN_DATA_H
#define SDT_TRAIN_RUN_DATA_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#include "data/buckets.h"
#include "data/caption.h"
#include "data/data_order.h"
#include "data/dataset.h"
#include "host/host_log.h"
#include "train/latent_cache.h"

typedef struct sdt_run_data {
    /* the options */
    const char *dir;          /* dataset_dir (NULL: none given) */
    uint32_t width, height;   /* the training size */
    uint32_t latent_sampling; /* latent_method */
    bool varsize, use_alpha;
    bool flip;                 /* 1.5: mirrored twins (train/sample_augment.h) */
    bool buckets, random_crop; /* 1.5: aspect-ratio buckets (data/buckets.h) */
    sdt_bucket_rules bucket_rules;
    double caption_dropout;
    uint32_t keep_tokens;
    bool shuffle_tags;
    double tag_dropout;
    sdt_caption_rules caption_rules;
    /* what comes of them */
    sdt_bucket_list bucket_list; /* made when the dataset is listed */
    sdt_dataset ds;
    latent_cache lc;
    sdt_data_order order;
    int batch, grad_accum;
    int64_t steps_per_epoch;
} sdt_run_data;

/* How the training (and validation) images are sized: the training size, varsize or buckets;
 * seed picks random crops. */
void sdt_run_data_image_options(const sdt_run_data *d, uint64_t seed, sdt_dataset_options *o);
/* The bucket list, its step checked against the model: f is the side every bucket must divide
 * by (the VAE's factor vae_factor, doubled per UNet level below the first); model names it. */
bool sdt_run_data_make_buckets(sdt_run_data *d, int f, int vae_factor, const char *model, const char *prefix,
                               sdt_error *error);
/* The bucket counts in the log, the data order (which may lower the batch size), gradient
 * accumulation capped at what the dataset holds, and the steps of one epoch. */
bool sdt_run_data_plan_batches(sdt_run_data *d, uint32_t batch_size, uint32_t grad_accum, uint64_t seed,
                               const sdt_host_callbacks *host, sdt_error *error);
void sdt_run_data_free(sdt_run_data *d);

#endif
