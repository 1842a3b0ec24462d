/* validation.c - see validation.h. */
#include "train/validation.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_numeric.h"
#include "data/validation_split.h"
#include "train/rng.h"

/* The timesteps every image is measured at: the middles of 5 equal bands of the 1000. */
static const int validation_timesteps[] = {99, 299, 499, 699, 899};
#define N_TIMESTEPS ((int)(sizeof validation_timesteps / sizeof validation_timesteps[0]))
/* Keeps the validation noise apart from every draw of the training (rng.h streams). */
#define VALIDATION_SEED_SALT 0x76616c69646174ull /* "validat" */

void sdt_validation_reset(sdt_validation *v)
{
    v->best_loss = INFINITY;
    v->best_step = -1;
    v->last_loss = NAN;
}

/* Moves the held-out items of the dataset and its latents into the validation set. */
static bool move_held(sdt_validation *v, sdt_dataset *ds, latent_cache *lc, uint64_t seed, const bool *held, int n_held,
                      sdt_error *error)
{
    v->ds.items = calloc((size_t)n_held, sizeof *v->ds.items);
    if (!v->ds.items || !latent_cache_init(&v->lc, n_held, LATENT_DETERMINISTIC, lc->scaling, seed))
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory holding out the validation images");
    latent_cache_set_shift(&v->lc, lc->shift);
    int kept = 0, out = 0;
    for (int i = 0; i < ds->n_items; i++) {
        if (held[i]) {
            v->ds.items[out] = ds->items[i];
            v->lc.items[out++] = lc->items[i];
        } else {
            ds->items[kept] = ds->items[i];
            lc->items[kept++] = lc->items[i];
        }
    }
    v->ds.n_items = out;
    ds->n_items = lc->n = kept;
    return true;
}

bool sdt_validation_hold_out(sdt_validation *v, sdt_dataset *ds, latent_cache *lc, uint64_t seed,
                             const sdt_host_callbacks *host, sdt_error *error)
{
    int n = ds->n_items, n_held = 0;
    bool *held = calloc((size_t)(n > 0 ? n : 1), sizeof *held);
    if (!held) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory choosing the validation images");
    bool ok = sdt_validation_split_choose(n, v->split, seed, held, &n_held, error);
    if (!ok) sdt_error_wrap(error, "%svalidation_split (%g)", v->field_prefix, v->split);
    ok = ok && move_held(v, ds, lc, seed, held, n_held, error);
    free(held);
    if (!ok) return false;
    char names[2048] = "";
    for (int i = 0; i < v->ds.n_items; i++) {
        const char *path = v->ds.items[i].path, *slash = strrchr(path, '/');
        size_t at = strlen(names);
        snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "", slash ? slash + 1 : path);
    }
    sdt_host_log(host, SDT_LOG_INFO,
                 "validation: %d of %d images held out of the training set (chosen by seed %llu): %s", v->ds.n_items, n,
                 (unsigned long long)seed, names);
    return true;
}

bool sdt_validation_load_folder(sdt_validation *v, sdt_dataset_options *o, sd_runtime *rt, work_arena *wa,
                                uint64_t seed, const sdt_host_callbacks *host, sdt_error *error)
{
    o->folder = v->dir;
    if (!sdt_dataset_load(o, &v->ds, error))
        return sdt_error_wrap(error, "%svalidation_dir (%s): the validation images could not be read", v->field_prefix,
                              v->dir);
    for (int i = 0; i < v->ds.n_warnings; i++) sdt_host_log(host, SDT_LOG_WARNING, "validation: %s", v->ds.warnings[i]);
    if (!latent_cache_init(&v->lc, v->ds.n_items, LATENT_DETERMINISTIC, rt->cfg.vae.scaling, seed))
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory for the validation latents");
    latent_cache_set_shift(&v->lc, rt->cfg.vae.shift);
    int f = sd_runtime_image_divisor(rt);
    for (int i = 0; i < v->ds.n_items; i++) {
        sdt_dataset_item *it = &v->ds.items[i];
        if (it->width % f || it->height % f)
            return sdt_fail(error, SDT_ERR_VALIDATION,
                            "%s: %dx%d is not a multiple of %d on both sides; resize the validation "
                            "image or turn off \"do not resize\"",
                            it->path, it->width, it->height, f);
        if (!latent_cache_encode(&v->lc, i, rt, wa, it->pixels, it->width, it->height, it->loss_weight, it->width / 8,
                                 it->height / 8, error))
            return sdt_error_wrap(error, "%s: encoding the validation image failed", it->path);
        sdt_dataset_drop_pixels(&v->ds, i);
    }
    sdt_host_log(host, SDT_LOG_INFO, "validation: %d images from %s, measured every %lld steps", v->ds.n_items, v->dir,
                 (long long)v->every);
    return true;
}

bool sdt_validation_due(sdt_validation *v, int64_t step)
{
    v->last_loss = NAN;
    return v->on && step % v->every == 0;
}

bool sdt_validation_loss(const sdt_validation *v, uint64_t seed, sdt_validation_measure measure, void *user,
                         double *loss, sdt_error *error)
{
    uint64_t noise_seed = sdt_rng_derive(seed, VALIDATION_SEED_SALT);
    double sum = 0;
    for (int i = 0; i < v->ds.n_items; i++)
        for (int k = 0; k < N_TIMESTEPS; k++) {
            const latent_entry *e = &v->lc.items[i];
            int64_t n = (int64_t)e->c * e->h * e->w;
            float *noise = malloc((size_t)n * sizeof(float));
            double l = 0;
            bool ok = noise != NULL;
            if (!ok) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory measuring the validation loss");
            if (ok) {
                sdt_rng_normal_fill(noise_seed, SDT_RNG_NOISE, ((uint64_t)i * N_TIMESTEPS + (uint64_t)k) * (uint64_t)n,
                                    noise, n);
                ok = measure(user, i, validation_timesteps[k], noise, &l, error);
            }
            free(noise);
            if (!ok) return sdt_error_wrap(error, "measuring the validation loss on %s failed", v->ds.items[i].path);
            sum += l;
        }
    *loss = sum / ((double)v->ds.n_items * N_TIMESTEPS);
    return true;
}

bool sdt_validation_record(sdt_validation *v, int64_t step, double loss)
{
    v->last_loss = loss;
    bool better = isfinite(loss) && loss < v->best_loss;
    if (better) {
        v->best_loss = loss;
        v->best_step = step;
        v->since_best = 0;
    } else if (isfinite(loss)) { /* a non-finite measurement (fp16 overflow) is no evidence either way */
        v->since_best++;
    }
    return better;
}

void sdt_validation_report(sdt_validation *v, int64_t step, bool better, const sdt_host_callbacks *host)
{
    sdt_host_log(host, SDT_LOG_INFO, "step %lld: validation loss %.6f%s (lowest %.6f at step %lld)", (long long)step,
                 v->last_loss, better ? ", the lowest so far" : "", v->best_loss, (long long)v->best_step);
    if (v->patience > 0 && v->since_best >= v->patience) {
        v->stop = true;
        sdt_host_log(
            host, SDT_LOG_INFO,
            "stopping early at step %lld: the validation loss has not gone below %.6f (step "
            "%lld) in %u validations (stop_after_no_improvement); the state is saved, and --resume with a higher "
            "stop_after_no_improvement continues the run",
            (long long)step, v->best_loss, (long long)v->best_step, (unsigned)v->since_best);
    }
}

void sdt_validation_to_json(const sdt_validation *v, cJSON *record)
{
    if (!v->on) return;
    cJSON *o = cJSON_AddObjectToObject(record, "validation");
    char best[64];
    sdt_c_snprintf(best, sizeof best, "%.17g", v->best_loss); /* as text: cJSON writes no infinity */
    cJSON_AddStringToObject(o, "best_loss", best);
    cJSON_AddNumberToObject(o, "best_step", (double)v->best_step);
    cJSON_AddNumberToObject(o, "since_best", v->since_best);
}

/* The lowest loss as the state writes it: a number's whole text, not negative (infinity: none yet). */
static bool parse_best_loss(const char *text, double *loss)
{
    char *end = NULL;
    *loss = text ? sdt_c_strtod(text, &end) : NAN;
    return text && end != text && *end == '\0' && (*loss >= 0 || (isinf(*loss) && *loss > 0));
}

bool sdt_validation_check_json(const cJSON *record, const char *path, sdt_error *error)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(record, "validation");
    if (!o) return true; /* a run without validation */
    const cJSON *best = cJSON_GetObjectItemCaseSensitive(o, "best_loss"),
                *step = cJSON_GetObjectItemCaseSensitive(o, "best_step"),
                *since = cJSON_GetObjectItemCaseSensitive(o, "since_best");
    double loss, s = cJSON_GetNumberValue(step), n = cJSON_GetNumberValue(since);
    const char *bad = !cJSON_IsObject(o)                                                  ? "validation"
                      : !parse_best_loss(cJSON_GetStringValue(best), &loss)               ? "validation.best_loss"
                      : !cJSON_IsNumber(step) || !(s >= -1 && s <= 9e15 && s == floor(s)) ? "validation.best_step"
                      : !cJSON_IsNumber(since) || !(n >= 0 && n < 4e9 && n == floor(n))   ? "validation.since_best"
                                                                                          : NULL;
    if (!bad) return true;
    const char *text =
        cJSON_IsString(best) && strcmp(bad, "validation.best_loss") == 0 ? cJSON_GetStringValue(best) : NULL;
    return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                    "%s: the state's training record has %s%s%s%s, which no run writes (the file is "
                    "damaged); resume from an earlier state, or train without --resume",
                    path, bad, text ? " = \"" : "", text ? text : "", text ? "\"" : "");
}

void sdt_validation_from_json(sdt_validation *v, const cJSON *record)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(record, "validation");
    double loss;
    /* a state without it starts afresh; one with it was checked (sdt_validation_check_json) */
    if (!v->on || !o || !parse_best_loss(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "best_loss")), &loss))
        return;
    v->best_loss = loss;
    v->best_step = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "best_step"));
    v->since_best = (uint32_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "since_best"));
}

void sdt_validation_summary(const sdt_validation *v, int64_t step, const char *run_folder,
                            const sdt_host_callbacks *host)
{
    if (!v->on) return;
    if (v->best_step < 0) {
        sdt_host_log(host, SDT_LOG_INFO, "validation: no measurement was made (the run ended before step %lld)",
                     (long long)(step - step % v->every + v->every));
        return;
    }
    sdt_host_log(host, SDT_LOG_INFO,
                 "validation: the lowest validation loss was %.6f at step %lld; its copy (-%lld) is "
                 "in the run folder %s",
                 v->best_loss, (long long)v->best_step, (long long)v->best_step, run_folder);
}

void sdt_validation_free(sdt_validation *v)
{
    sdt_dataset_free(&v->ds);
    latent_cache_free(&v->lc);
}
