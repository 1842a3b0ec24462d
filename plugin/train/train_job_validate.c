/* train_job_validate.c - the validation loss of a run (--validation-dir / --validation-split,
 * --validate-every, --stop-after-no-improvement).
 *
 * The images come from a folder read as the dataset is, or are held out of the dataset by the
 * seed (data/validation_split.h) before the batches are planned, their names logged. Each has
 * one fixed latent (the one it was encoded to) and one fixed prompt (the template's first line
 * with its caption, nothing dropped or shuffled). The loss is the mean MSE over every image and
 * the fixed timesteps below, at noise drawn from a seed derived from the run's seed for this use
 * alone, with nothing trained (forward only, a hypernetwork in eval mode): the same values give
 * the same loss at every step and in every run, and measuring draws nothing the training uses,
 * so a run with validation trains exactly as one without. A new lowest loss saves that step's
 * copy (unless save_every saves it anyway); K validations in a row without one stop the run
 * when asked (the state is saved as at an Interrupt). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/host_log.h"
#include "c_numeric.h"
#include "data/validation_split.h"
#include "sd_text_rules.h"
#include "train/rng.h"
#include "train/sd_cond.h"
#include "train/train_job.h"

/* The timesteps every image is measured at: the middles of 5 equal bands of the 1000. */
static const int validation_timesteps[] = {99, 299, 499, 699, 899};
#define N_TIMESTEPS ((int)(sizeof validation_timesteps / sizeof validation_timesteps[0]))
/* Keeps the validation noise apart from every draw of the training (rng.h streams). */
#define VALIDATION_SEED_SALT 0x76616c69646174ull /* "validat" */

/* Moves the held-out items of the dataset and its latents into the validation set. */
static bool hold_out(sdt_train_job *job, const bool *held, int n_held, sdt_error *error)
{
    sdt_job_validation *v = &job->val;
    v->ds.items = calloc((size_t)n_held, sizeof *v->ds.items);
    if (!v->ds.items || !latent_cache_init(&v->lc, n_held, LATENT_DETERMINISTIC, job->lc.scaling, job->seed))
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory holding out the validation images");
    int kept = 0, out = 0;
    for (int i = 0; i < job->ds.n_items; i++) {
        if (held[i]) {
            v->ds.items[out] = job->ds.items[i];
            v->lc.items[out++] = job->lc.items[i];
        } else {
            job->ds.items[kept] = job->ds.items[i];
            job->lc.items[kept++] = job->lc.items[i];
        }
    }
    v->ds.n_items = out;
    job->ds.n_items = job->lc.n = kept;
    return true;
}

static bool split_dataset(sdt_train_job *job, sdt_error *error)
{
    int n = job->ds.n_items, n_held = 0;
    bool *held = calloc((size_t)(n > 0 ? n : 1), sizeof *held);
    if (!held) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory choosing the validation images");
    bool ok = sdt_validation_split_choose(n, job->val.split, job->seed, held, &n_held, error);
    if (!ok) sdt_error_wrap(error, "config.train_options->validation_split (%g)", job->val.split);
    ok = ok && hold_out(job, held, n_held, error);
    free(held);
    if (!ok) return false;
    char names[2048] = "";
    for (int i = 0; i < job->val.ds.n_items; i++) {
        const char *path = job->val.ds.items[i].path, *slash = strrchr(path, '/');
        size_t at = strlen(names);
        snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "", slash ? slash + 1 : path);
    }
    sdt_host_log(job->host, SDT_LOG_INFO, "validation: %d of %d images held out of the training set (chosen by seed %llu): %s",
                 job->val.ds.n_items, n, (unsigned long long)job->seed, names);
    return true;
}

/* The folder's images, read as the dataset is, each encoded once (the VAE's mean). */
static bool load_folder(sdt_train_job *job, sdt_error *error)
{
    sdt_job_validation *v = &job->val;
    sdt_dataset_options o = {0};
    o.folder = v->dir;
    sdt_train_job_image_options(job, &o);
    if (!sdt_dataset_load(&o, &v->ds, error))
        return sdt_error_wrap(error, "config.train_options->validation_dir (%s): the validation images could not be read", v->dir);
    for (int i = 0; i < v->ds.n_warnings; i++) sdt_host_log(job->host, SDT_LOG_WARNING, "validation: %s", v->ds.warnings[i]);
    if (!latent_cache_init(&v->lc, v->ds.n_items, LATENT_DETERMINISTIC, job->rt.cfg.vae.scaling, job->seed))
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory for the validation latents");
    int f = vae_factor(&job->rt.cfg.vae) << (job->rt.cfg.unet.num_levels - 1);
    for (int i = 0; i < v->ds.n_items; i++) {
        sdt_dataset_item *it = &v->ds.items[i];
        if (it->width % f || it->height % f)
            return sdt_fail(error, SDT_ERR_VALIDATION, "%s: %dx%d is not a multiple of %d on both sides; resize the validation "
                            "image or turn off \"do not resize\"", it->path, it->width, it->height, f);
        if (!latent_cache_encode(&v->lc, i, &job->rt, &job->wa, it->pixels, it->width, it->height, it->loss_weight,
                                 it->width / 8, it->height / 8, error))
            return sdt_error_wrap(error, "%s: encoding the validation image failed", it->path);
        sdt_dataset_drop_pixels(&v->ds, i);
    }
    job->have_measured = false; /* the encoder used the work arena */
    sdt_host_log(job->host, SDT_LOG_INFO, "validation: %d images from %s, measured every %lld steps", v->ds.n_items, v->dir,
                 (long long)v->every);
    return true;
}

bool sdt_train_job_load_validation(sdt_train_job *job, sdt_error *error)
{
    sdt_job_validation *v = &job->val;
    v->best_loss = INFINITY;
    v->best_step = -1;
    v->last_loss = NAN;
    if (!v->on) return true;
    return v->dir ? load_folder(job, error) : split_dataset(job, error);
}

/* One image at one timestep: its pass, forward only. */
static bool measure_one(sdt_train_job *job, int item, int k, double *loss, sdt_error *error)
{
    const latent_entry *e = &job->val.lc.items[item];
    int64_t n = (int64_t)e->c * e->h * e->w, hw = (int64_t)e->h * e->w;
    int extra = inpaint_extra_channels(&job->rt);
    int64_t n_in = n + (int64_t)extra * hw;
    float *noise = malloc((size_t)n * sizeof(float)), *noisy = malloc((size_t)n_in * sizeof(float));
    float *target = malloc((size_t)n * sizeof(float)), *weight = malloc((size_t)n * sizeof(float));
    int32_t *tokens = malloc(SDT_PROMPT_MAX_CHUNKS * SDT_PROMPT_TOKENS * sizeof(int32_t));
    clip_override *overrides = malloc(SDT_PROMPT_MAX_CHUNKS * SDT_PROMPT_TOKENS * sizeof(clip_override));
    sdt_prompt_encoded *enc = malloc(sizeof *enc);
    char *prompt = sdt_template_fill(job->tmpl.lines[0], job->prompt_name, job->val.ds.items[item].caption);
    bool ok = noise && noisy && target && weight && tokens && overrides && enc && prompt;
    if (!ok) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory measuring the validation loss");
    const float *cond = NULL;
    if (ok && extra) ok = (cond = inpaint_cond_get(&job->inpaint, &job->rt, &job->wa, e->h, e->w, error)) != NULL;
    if (ok) {
        int t = validation_timesteps[k];
        uint64_t seed = sdt_rng_derive(job->seed, VALIDATION_SEED_SALT);
        sdt_rng_normal_fill(seed, SDT_RNG_NOISE, ((uint64_t)item * N_TIMESTEPS + (uint64_t)k) * (uint64_t)n, noise, n);
        sdt_q_sample(&job->sched, t, e->value, noise, noisy, n);
        if (extra) memcpy(noisy + n, cond, (size_t)(n_in - n) * sizeof(float));
        sdt_training_target(&job->sched, t, job->rt.cfg.unet.v_prediction, e->value, noise, target, n);
        for (int ch = 0; ch < e->c; ch++)
            for (int64_t i = 0; i < hw; i++) weight[ch * hw + i] = e->weight ? e->weight[i] : 1.0f;
        sdt_prompt_encode(job->tok, &job->rules, prompt, enc);
        float timestep = (float)t;
        sdt_pass_inputs in = {.shape = {.batch = 1, .c = e->c, .h = e->h, .w = e->w, .chunks = 1, .in_c = e->c + extra,
                                        .weighted = job->use_alpha},
                              .tokens = tokens, .overrides = overrides, .noisy = noisy, .target = target, .weight = weight,
                              .timesteps = &timestep, .end_id = sdt_tokenizer_eos(job->tok)};
        sdt_sdxl_sizes sizes = sdt_train_job_sample_sizes(job, &job->val.ds.items[item], e, false);
        if (sd_text_rules_of(&job->rt.cfg).sdxl) in.sizes = &sizes;
        in.shape.chunks = sdt_prompt_batch(job->tok, &job->rules, enc, 1, tokens, overrides, &in.n_overrides);
        sdt_pass_options po = sdt_train_job_pass_options(job); /* the training loss, without min-SNR's weights */
        po.anomaly_check = false;
        sdt_pass_trainables tr = sdt_train_job_trainables(job);
        tr.drows = NULL; /* forward only */
        ok = sdt_train_job_ensure_arena(job, &in.shape, &po, error) &&
             sdt_pass_run(&job->rt, &job->wa, &po, &in, &tr, 1.0f, false, loss, error);
    }
    free(noise);
    free(noisy);
    free(target);
    free(weight);
    free(tokens);
    free(overrides);
    free(enc);
    free(prompt);
    return ok;
}

bool sdt_train_job_validation_loss(sdt_train_job *job, double *loss, sdt_error *error)
{
    for (int p = 0; p < job->n_parts; p++)
        if (job->parts[p].ops->begin_validation) job->parts[p].ops->begin_validation(&job->parts[p], job);
    double sum = 0;
    for (int i = 0; i < job->val.ds.n_items; i++)
        for (int k = 0; k < N_TIMESTEPS; k++) {
            double l = 0;
            if (!measure_one(job, i, k, &l, error))
                return sdt_error_wrap(error, "measuring the validation loss on %s failed", job->val.ds.items[i].path);
            sum += l;
        }
    *loss = sum / ((double)job->val.ds.n_items * N_TIMESTEPS);
    return true;
}

/* A new lowest loss: its copy now, unless the snapshot of this step will be written anyway. */
static bool save_best_copy(sdt_train_job *job, sdt_error *error)
{
    if (job->save_every > 0 && job->step % job->save_every == 0) return true;
    for (int p = 0; p < job->n_parts; p++)
        if (!job->parts[p].ops->sync(&job->parts[p], job, error) ||
            !job->parts[p].ops->save_snapshot(&job->parts[p], job, job->step, error))
            return sdt_error_wrap(error, "saving the copy of step %lld (the lowest validation loss so far) failed",
                                  (long long)job->step);
    return true;
}

bool sdt_train_job_validate_if_due(sdt_train_job *job, sdt_error *error)
{
    sdt_job_validation *v = &job->val;
    v->last_loss = NAN;
    if (!v->on || job->step % v->every != 0) return true;
    double loss;
    if (!sdt_train_job_validation_loss(job, &loss, error)) return false;
    v->last_loss = loss;
    bool better = isfinite(loss) && loss < v->best_loss;
    if (better) {
        v->best_loss = loss;
        v->best_step = job->step;
        v->since_best = 0;
        if (!save_best_copy(job, error)) return false;
    } else if (isfinite(loss)) { /* a non-finite measurement (fp16 overflow) is no evidence either way */
        v->since_best++;
    }
    sdt_host_log(job->host, SDT_LOG_INFO, "step %lld: validation loss %.6f%s (lowest %.6f at step %lld)", (long long)job->step,
                 loss, better ? ", the lowest so far" : "", v->best_loss, (long long)v->best_step);
    if (v->patience > 0 && v->since_best >= v->patience) {
        v->stop = true;
        sdt_host_log(job->host, SDT_LOG_INFO, "stopping early at step %lld: the validation loss has not gone below %.6f (step "
                     "%lld) in %u validations (stop_after_no_improvement); the state is saved, and --resume with a higher "
                     "stop_after_no_improvement continues the run", (long long)job->step, v->best_loss, (long long)v->best_step,
                     (unsigned)v->since_best);
    }
    return true;
}

void sdt_train_job_validation_to_json(const sdt_train_job *job, cJSON *record)
{
    const sdt_job_validation *v = &job->val;
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

bool sdt_train_job_validation_check_json(const cJSON *record, const char *path, sdt_error *error)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(record, "validation");
    if (!o) return true; /* a run without validation */
    const cJSON *best = cJSON_GetObjectItemCaseSensitive(o, "best_loss"), *step = cJSON_GetObjectItemCaseSensitive(o, "best_step"),
                *since = cJSON_GetObjectItemCaseSensitive(o, "since_best");
    double loss, s = cJSON_GetNumberValue(step), n = cJSON_GetNumberValue(since);
    const char *bad = !cJSON_IsObject(o) ? "validation"
                      : !parse_best_loss(cJSON_GetStringValue(best), &loss) ? "validation.best_loss"
                      : !cJSON_IsNumber(step) || !(s >= -1 && s <= 9e15 && s == floor(s)) ? "validation.best_step"
                      : !cJSON_IsNumber(since) || !(n >= 0 && n < 4e9 && n == floor(n)) ? "validation.since_best"
                                                                                            : NULL;
    if (!bad) return true;
    const char *text = cJSON_IsString(best) && strcmp(bad, "validation.best_loss") == 0 ? cJSON_GetStringValue(best) : NULL;
    return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: the state's training record has %s%s%s%s, which no run writes (the file is "
                    "damaged); resume from an earlier state, or train without --resume", path, bad, text ? " = \"" : "",
                    text ? text : "", text ? "\"" : "");
}

void sdt_train_job_validation_from_json(sdt_train_job *job, const cJSON *record)
{
    sdt_job_validation *v = &job->val;
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(record, "validation");
    double loss;
    /* a state without it starts afresh; one with it was checked (sdt_train_job_validation_check_json) */
    if (!v->on || !o || !parse_best_loss(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "best_loss")), &loss)) return;
    v->best_loss = loss;
    v->best_step = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "best_step"));
    v->since_best = (uint32_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "since_best"));
}

void sdt_train_job_validation_summary(sdt_train_job *job)
{
    const sdt_job_validation *v = &job->val;
    if (!v->on) return;
    if (v->best_step < 0) {
        sdt_host_log(job->host, SDT_LOG_INFO, "validation: no measurement was made (the run ended before step %lld)",
                     (long long)(job->step - job->step % v->every + v->every));
        return;
    }
    sdt_host_log(job->host, SDT_LOG_INFO, "validation: the lowest validation loss was %.6f at step %lld; its copy (-%lld) is "
                 "in the run folder %s", v->best_loss, (long long)v->best_step, (long long)v->best_step, job->out.root);
}
