/* test_bucket_sizes.c - SDXL's size conditioning of a bucketed image (sdt_train_job_sample_sizes):
 * the original size, the crop's corner in the resized image and the bucket as the target, the
 * crop's left mirrored for a flipped sample, as kohya's sd-scripts compute them. The expected
 * numbers are worked by hand from kohya's rules (SDXL's usual buckets: area 1024x1024, sides
 * 256..2048, step 64). */
#include <stdlib.h>

#include "data/buckets.h"
#include "sdt_test.h"
#include "train/train_job.h"

static void check_sizes(const sdt_sdxl_sizes *s, const double want[6], const char *what)
{
    const double got[6] = {s->original_height, s->original_width, s->crop_top,
                           s->crop_left,       s->target_height,  s->target_width};
    for (int i = 0; i < 6; i++)
        CHECK(got[i] == want[i],
              "%s: size conditioning [%d] is %g, want %g (original h, w, crop top, left, target h, w)", what, i, got[i],
              want[i]);
}

static sdt_dataset_item fitted(const sdt_bucket_list *list, int w, int h)
{
    sdt_bucket_fit f = sdt_bucket_fit_image(list, w, h, false, 0, "x.png");
    return (sdt_dataset_item){.width = f.width,
                              .height = f.height,
                              .source_width = w,
                              .source_height = h,
                              .resized_width = f.resized_width,
                              .resized_height = f.resized_height,
                              .crop_left = f.crop_left,
                              .crop_top = f.crop_top};
}

int main(void)
{
    sdt_train_job *job = calloc(1, sizeof *job);
    job->rt.cfg.vae.levels = 4; /* SD's VAE: a factor of 8 */
    sdt_bucket_rules rules = {1024 * 1024, 256, 2048, 64};
    sdt_bucket_list list;
    sdt_error error = {0};
    CHECK(sdt_buckets_make(&rules, &list, &error), "buckets: %s", error.message);

    /* 1920x1080 (1.778): nearest 1344x768 (1.75; 1280x768 is 1.667, 1408x704 is 2); wider than it, so the
     * height fits: 1920 * 768 / 1080 = 1365.3 -> 1365 x 768, crop left (1365 - 1344) // 2 = 10 */
    sdt_dataset_item wide = fitted(&list, 1920, 1080);
    latent_entry e = {.c = 4, .h = 768 / 8, .w = 1344 / 8};
    sdt_sdxl_sizes s = sdt_train_job_sample_sizes(job, &wide, &e, false);
    check_sizes(&s, (const double[6]){1080, 1920, 0, 10, 768, 1344}, "1920x1080");
    s = sdt_train_job_sample_sizes(job, &wide, &e, true); /* mirrored: the crop seen from the right, 1365 - 1344 - 10 */
    check_sizes(&s, (const double[6]){1080, 1920, 0, 11, 768, 1344}, "1920x1080 flipped");

    /* 800x1200 (0.667): nearest 832x1216 (0.684; 768x1280 is 0.6); narrower than it, so the width fits:
     * 1200 * 832 / 800 = 1248 -> 832 x 1248, crop top (1248 - 1216) // 2 = 16, left 0 (flipped: 832 - 832 - 0) */
    sdt_dataset_item tall = fitted(&list, 800, 1200);
    e = (latent_entry){.c = 4, .h = 1216 / 8, .w = 832 / 8};
    s = sdt_train_job_sample_sizes(job, &tall, &e, false);
    check_sizes(&s, (const double[6]){1200, 800, 16, 0, 1216, 832}, "800x1200");
    s = sdt_train_job_sample_sizes(job, &tall, &e, true);
    check_sizes(&s, (const double[6]){1200, 800, 16, 0, 1216, 832}, "800x1200 flipped");

    /* without buckets: stretched to the training size, no crop, as before */
    sdt_dataset_item stretched = {.width = 1024,
                                  .height = 1024,
                                  .source_width = 1920,
                                  .source_height = 1080,
                                  .resized_width = 1024,
                                  .resized_height = 1024};
    e = (latent_entry){.c = 4, .h = 128, .w = 128};
    s = sdt_train_job_sample_sizes(job, &stretched, &e, true);
    check_sizes(&s, (const double[6]){1080, 1920, 0, 0, 1024, 1024}, "stretched, flipped");
    sdt_buckets_free(&list);
    free(job);
    return sdt_test_finish("bucket_sizes");
}
