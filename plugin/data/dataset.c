/* dataset.c - scan, decode, resize and caption a dataset folder; see dataset.h. */
#include "data/dataset.h"

#include <glib.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/image_io.h"
#include "data/path_util.h"

static void add_warning(sdt_dataset *ds, const char *sentence)
{
    char **grown = realloc(ds->warnings, (size_t)(ds->n_warnings + 1) * sizeof(char *));
    if (!grown) return;
    ds->warnings = grown;
    ds->warnings[ds->n_warnings] = strdup(sentence);
    if (ds->warnings[ds->n_warnings]) ds->n_warnings++;
}

void sdt_dataset_drop_pixels(sdt_dataset *ds, int index)
{
    if (index < 0 || index >= ds->n_items) return;
    free(ds->items[index].pixels);
    ds->items[index].pixels = NULL;
}

static void item_free(sdt_dataset_item *item)
{
    free(item->path);
    free(item->caption);
    free(item->pixels);
    free(item->loss_weight);
}

void sdt_dataset_free(sdt_dataset *ds)
{
    if (!ds) return;
    for (int i = 0; i < ds->n_items; i++) item_free(&ds->items[i]);
    for (int i = 0; i < ds->n_warnings; i++) free(ds->warnings[i]);
    free(ds->items);
    free(ds->warnings);
    memset(ds, 0, sizeof(*ds));
}

bool sdt_alpha_to_loss_weight(const uint8_t *rgba, int w, int h, int channels, float *out, int latent_w, int latent_h)
{
    size_t n_out = (size_t)latent_w * (size_t)latent_h;
    uint8_t *small = malloc(n_out * (size_t)channels);
    if (!small) return false;
    /* Resizing all channels costs little at latent size and keeps one resize path. */
    bool ok = sdt_image_resize_u8(rgba, w, h, channels, small, latent_w, latent_h);
    float lo = INFINITY;
    for (size_t i = 0; ok && i < n_out; i++) {
        out[i] = small[i * channels + channels - 1];
        lo = fminf(lo, out[i]);
    }
    free(small);
    if (!ok) return false;
    double sum = 0;
    for (size_t i = 0; i < n_out; i++) sum += out[i] - lo;
    double mean = sum / (double)n_out;
    /* A1111 divides by this mean unconditionally: 0/0 = NaN for a constant alpha. */
    if (!(mean > 0)) {
        for (size_t i = 0; i < n_out; i++) out[i] = 1.0f;
        return true;
    }
    for (size_t i = 0; i < n_out; i++) out[i] = (float)((out[i] - lo) / mean);
    return true;
}

/* The size an image is trained at, and the resize and crop that make it. */
static sdt_bucket_fit item_fit(const sdt_dataset_options *opt, const char *path, int w, int h)
{
    if (opt->buckets) {
        const char *slash = strrchr(path, '/');
        return sdt_bucket_fit_image(opt->buckets, w, h, opt->random_crop, opt->crop_seed, slash ? slash + 1 : path);
    }
    int out_w = opt->do_not_resize ? w : opt->width, out_h = opt->do_not_resize ? h : opt->height;
    return (sdt_bucket_fit){
        .bucket = -1, .width = out_w, .height = out_h, .resized_width = out_w, .resized_height = out_h};
}

/* Resizes to fit's resized size, then crops to its bucket (the whole resized image without buckets). */
static bool resize_and_crop(const uint8_t *src, int w, int h, int channels, const sdt_bucket_fit *fit, uint8_t *out)
{
    if (fit->resized_width == fit->width && fit->resized_height == fit->height)
        return sdt_image_resize_u8(src, w, h, channels, out, fit->width, fit->height);
    size_t row = (size_t)fit->resized_width * (size_t)channels;
    uint8_t *resized = malloc(row * (size_t)fit->resized_height);
    bool ok = resized && sdt_image_resize_u8(src, w, h, channels, resized, fit->resized_width, fit->resized_height);
    for (int y = 0; ok && y < fit->height; y++)
        memcpy(out + (size_t)y * fit->width * channels,
               resized + (size_t)(y + fit->crop_top) * row + (size_t)fit->crop_left * channels,
               (size_t)fit->width * channels);
    free(resized);
    return ok;
}

/* Builds one item from a decoded image; false + err (a warning sentence) to skip it. */
static bool make_item(const sdt_dataset_options *opt, const char *path, const uint8_t *rgba, int channels, int w, int h,
                      sdt_dataset_item *item, sdt_error *error)
{
    sdt_bucket_fit fit = item_fit(opt, path, w, h);
    int out_w = fit.width, out_h = fit.height;
    if (out_w % SDT_LATENT_FACTOR || out_h % SDT_LATENT_FACTOR) {
        sdt_fail(error, SDT_ERR_VALIDATION,
                 "%s: the image is %dx%d, not a multiple of %d on each side, which the VAE needs; crop it or turn off "
                 "\"Do not resize images\"",
                 path, w, h, SDT_LATENT_FACTOR);
        return false;
    }
    size_t n_out = (size_t)out_w * (size_t)out_h;
    uint8_t *resized = malloc(n_out * (size_t)channels);
    float *chw = malloc(n_out * 3 * sizeof(float));
    bool ok = resized && chw && resize_and_crop(rgba, w, h, channels, &fit, resized);
    if (ok) /* interleaved 0..255 -> planar [-1, 1], as A1111's x / 127.5 - 1 */
        for (size_t i = 0; i < n_out; i++)
            for (int c = 0; c < 3; c++) chw[(size_t)c * n_out + i] = resized[i * channels + c] / 127.5f - 1.0f;
    float *weight = NULL;
    if (ok && opt->alpha_as_loss_weight && channels == 4) { /* a bucket's weight comes from its crop */
        int lw = out_w / SDT_LATENT_FACTOR, lh = out_h / SDT_LATENT_FACTOR;
        weight = malloc((size_t)lw * (size_t)lh * sizeof(float));
        ok = weight && (opt->buckets ? sdt_alpha_to_loss_weight(resized, out_w, out_h, 4, weight, lw, lh)
                                     : sdt_alpha_to_loss_weight(rgba, w, h, 4, weight, lw, lh));
    }
    free(resized);
    if (!ok) {
        free(chw);
        free(weight);
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory while preparing the image", path);
        return false;
    }
    item->width = out_w;
    item->height = out_h;
    item->source_width = w;
    item->source_height = h;
    item->resized_width = fit.resized_width;
    item->resized_height = fit.resized_height;
    item->crop_left = fit.crop_left;
    item->crop_top = fit.crop_top;
    item->pixels = chw;
    item->loss_weight = weight;
    return true;
}

static bool has_extension(const char *name, const char *ext)
{
    size_t n = strlen(name), e = strlen(ext);
    return n > e && g_ascii_strcasecmp(name + n - e, ext) == 0;
}

/* Tries one folder entry; adds it to ds or records why not. */
static void load_entry(const sdt_dataset_options *opt, const char *path, sdt_dataset *ds)
{
    sdt_error why = {0};
    sdt_image_header hdr;
    if (!sdt_image_probe(path, &hdr, &why)) {
        add_warning(ds, why.message);
        return;
    }
    if (opt->probe_only) {
        sdt_dataset_item item = {0};
        sdt_bucket_fit fit = opt->buckets ? item_fit(opt, path, hdr.width, hdr.height)
                                          : (sdt_bucket_fit){.width = hdr.width, .height = hdr.height};
        item.width = fit.width;
        item.height = fit.height;
        item.source_width = hdr.width;
        item.source_height = hdr.height;
        item.caption = sdt_caption_for_image(path, &opt->caption, &why);
        item.path = item.caption ? strdup(path) : NULL;
        sdt_dataset_item *grown = item.path ? realloc(ds->items, (size_t)(ds->n_items + 1) * sizeof(*grown)) : NULL;
        if (!grown) {
            if (item.caption)
                sdt_fail(&why, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory while listing the dataset", path);
            add_warning(ds, why.message);
            item_free(&item);
            return;
        }
        ds->items = grown;
        ds->items[ds->n_items++] = item;
        return;
    }
    int want = (opt->alpha_as_loss_weight && (hdr.channels == 2 || hdr.channels == 4)) ? 4 : 3;
    int w = 0, h = 0;
    uint8_t *pixels = sdt_image_decode(path, want, opt->max_pixels, &w, &h, &why);
    if (!pixels) {
        add_warning(ds, why.message);
        return;
    }
    sdt_dataset_item item = {0};
    item.caption = sdt_caption_for_image(path, &opt->caption, &why);
    bool ok = item.caption && make_item(opt, path, pixels, want, w, h, &item, &why);
    free(pixels);
    sdt_dataset_item *grown = ok ? realloc(ds->items, (size_t)(ds->n_items + 1) * sizeof(*grown)) : NULL;
    item.path = ok ? strdup(path) : NULL;
    if (!grown || !item.path) {
        if (ok) sdt_fail(&why, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory while loading the dataset", path);
        add_warning(ds, why.message);
        item_free(&item);
        return;
    }
    ds->items = grown;
    if (opt->item_ready && !opt->item_ready(opt->user, &item, &why)) {
        add_warning(ds, why.message);
        item_free(&item);
        return;
    }
    ds->items[ds->n_items++] = item;
}

/* The stems of the folder's other files: a caption "<stem>.txt" is read for the file "<stem>.<ext>"
 * (sdt_caption_for_image), so a .txt whose stem is not among them belongs to no image. */
static GHashTable *image_stems(const GPtrArray *names)
{
    GHashTable *stems = g_hash_table_new_full(g_str_hash, g_str_equal, free, NULL);
    for (guint i = 0; i < names->len; i++) {
        const char *name = names->pdata[i];
        char *stem = has_extension(name, ".txt") ? NULL : sdt_path_stem(name);
        if (stem) g_hash_table_add(stems, stem);
    }
    return stems;
}

/* A .txt is used only as the caption of an image beside it; any other is named as unused. */
static void check_caption_file(GHashTable *stems, const char *name, const char *path, sdt_dataset *ds)
{
    char *stem = sdt_path_stem(name);
    char w[1400];
    if (!has_extension(name, ".txt") || strcmp(name + strlen(name) - 4, ".txt") != 0)
        snprintf(w, sizeof w, "%s: not used; a caption file's name ends in lower-case .txt", path);
    else if (!stem || !g_hash_table_contains(stems, stem))
        snprintf(w, sizeof w,
                 "%s: not used, as no image named %s.<ext> is beside it; add the image or remove the caption", path,
                 stem ? stem : "");
    else
        w[0] = '\0';
    if (w[0]) add_warning(ds, w);
    free(stem);
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool check_options(const sdt_dataset_options *opt, sdt_error *error)
{
    if (!opt->folder || !opt->folder[0]) {
        sdt_fail(error, SDT_ERR_VALIDATION, "Dataset directory is empty; choose the folder with the training images");
        return false;
    }
    if (!opt->do_not_resize && (opt->width < 64 || opt->height < 64 || opt->width > 4096 || opt->height > 4096 ||
                                opt->width % SDT_LATENT_FACTOR || opt->height % SDT_LATENT_FACTOR)) {
        sdt_fail(error, SDT_ERR_VALIDATION,
                 "training size %dx%d: width and height must be multiples of 8 between 64 and 4096", opt->width,
                 opt->height);
        return false;
    }
    return sdt_caption_rules_check(&opt->caption, error);
}

bool sdt_dataset_load(const sdt_dataset_options *opt_in, sdt_dataset *out, sdt_error *error)
{
    memset(out, 0, sizeof(*out));
    sdt_dataset_options opt = *opt_in;
    if (opt.max_pixels <= 0) opt.max_pixels = SDT_DATASET_DEFAULT_MAX_PIXELS;
    if (!check_options(&opt, error)) return false;

    GError *gerr = NULL;
    GDir *dir = g_dir_open(opt.folder, 0, &gerr);
    if (!dir) {
        sdt_fail(error, SDT_ERR_VALIDATION, "%s: the dataset directory cannot be opened (%s); check the path",
                 opt.folder, gerr ? gerr->message : "unknown error");
        g_clear_error(&gerr);
        return false;
    }
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    for (const char *name; (name = g_dir_read_name(dir));) g_ptr_array_add(names, g_strdup(name));
    g_dir_close(dir);
    if (names->len) qsort(names->pdata, names->len, sizeof(char *), compare_names);

    GHashTable *stems = image_stems(names);
    bool interrupted = false;
    for (guint i = 0; i < names->len && !interrupted; i++) {
        const char *name = names->pdata[i];
        char *path = g_build_filename(opt.folder, name, NULL);
        /* Captions belong to images; sub-folders are not part of the dataset (A1111 is flat too). */
        if (has_extension(name, ".txt")) {
            check_caption_file(stems, name, path, out);
        } else if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
            char w[1200];
            snprintf(w, sizeof(w), "%s: sub-folders are not searched; move its images into the dataset folder", path);
            add_warning(out, w);
        } else {
            load_entry(&opt, path, out);
        }
        g_free(path);
        interrupted = opt.keep_going && !opt.keep_going(opt.user, (int)i + 1, (int)names->len);
    }
    g_ptr_array_free(names, TRUE);
    g_hash_table_destroy(stems);

    if (interrupted) {
        sdt_fail(error, SDT_ERR_VALIDATION, "dataset loading was interrupted");
        sdt_dataset_free(out);
        return false;
    }
    if (out->n_items == 0) {
        if (out->n_warnings)
            sdt_fail(error, SDT_ERR_VALIDATION,
                     "%s: no usable images in the dataset folder (%d file(s) skipped, first: %s)", opt.folder,
                     out->n_warnings, out->warnings[0]);
        else
            sdt_fail(error, SDT_ERR_VALIDATION,
                     "%s: no images have been found in the dataset folder; add PNG or JPEG images", opt.folder);
        sdt_dataset_free(out);
        return false;
    }
    return true;
}
