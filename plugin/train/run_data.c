/* run_data.c - see run_data.h. */
#include "train/run_data.h"

#include <stdio.h>
#include <stdlib.h>

void sdt_run_data_image_options(const sdt_run_data *d, uint64_t seed, sdt_dataset_options *o)
{
    o->width = (int)d->width;
    o->height = (int)d->height;
    o->do_not_resize = d->varsize;
    o->buckets = d->buckets ? &d->bucket_list : NULL;
    o->random_crop = d->random_crop;
    o->crop_seed = seed;
    o->alpha_as_loss_weight = d->use_alpha;
    o->caption = d->caption_rules;
}

bool sdt_run_data_make_buckets(sdt_run_data *d, int f, int vae_factor, const char *model, const char *prefix,
                               sdt_error *error)
{
    if (!d->buckets) return true;
    if (d->bucket_rules.step % f)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%sbucket_step is %d, but %s needs bucket sides that are "
                        "multiples of %d (its VAE's factor %d, doubled per UNet level below the first); set "
                        "%sbucket_step to a multiple of %d, e.g. %d",
                        prefix, d->bucket_rules.step, model ? model : "the model", f, vae_factor, prefix, f,
                        (64 + f - 1) / f * f);
    return sdt_bucket_rules_check(&d->bucket_rules, prefix, error) &&
           sdt_buckets_make(&d->bucket_rules, &d->bucket_list, error);
}

/* The buckets the training images (a validation split's taken out) went to, before training:
 * "buckets: 2 of 9 used by the 6 images (...): 512x512: 4, 576x448: 2". */
static void log_bucket_counts(const sdt_run_data *d, const sdt_host_callbacks *host)
{
    if (!d->buckets) return;
    char counts[1536] = "";
    int at = 0, used = 0;
    for (int b = 0; b < d->bucket_list.n; b++) {
        const sdt_bucket *k = &d->bucket_list.items[b];
        int count = 0;
        for (int i = 0; i < d->ds.n_items; i++)
            count += d->ds.items[i].width == k->width && d->ds.items[i].height == k->height;
        if (!count) continue;
        if (at < (int)sizeof counts)
            at += snprintf(counts + at, sizeof counts - (size_t)at, "%s %dx%d: %d", used ? "," : "", k->width,
                           k->height, count);
        used++;
    }
    sdt_host_log(host, SDT_LOG_INFO,
                 "buckets: %d of %d used by the %d images (area <= %lld, sides %d..%d in steps of %d, "
                 "%s crop):%s",
                 used, d->bucket_list.n, d->ds.n_items, (long long)d->bucket_rules.max_area, d->bucket_rules.min_side,
                 d->bucket_rules.max_side, d->bucket_rules.step, d->random_crop ? "random" : "centre", counts);
}

bool sdt_run_data_plan_batches(sdt_run_data *d, uint32_t batch_size, uint32_t grad_accum, uint64_t seed,
                               const sdt_host_callbacks *host, sdt_error *error)
{
    log_bucket_counts(d, host);
    if (!sdt_data_order_init(&d->order, &d->ds, (int)batch_size, seed, error)) return false;
    d->batch = d->order.batch_size;
    int max_ga = d->ds.n_items / d->batch;
    d->grad_accum = (int)grad_accum < max_ga ? (int)grad_accum : max_ga;
    if (d->grad_accum < 1) d->grad_accum = 1;
    d->steps_per_epoch = d->ds.n_items / d->batch / d->grad_accum;
    if (d->steps_per_epoch < 1) d->steps_per_epoch = 1;
    return true;
}

void sdt_run_data_free(sdt_run_data *d)
{
    sdt_dataset_free(&d->ds);
    latent_cache_free(&d->lc);
    sdt_data_order_free(&d->order);
    sdt_buckets_free(&d->bucket_list);
}
