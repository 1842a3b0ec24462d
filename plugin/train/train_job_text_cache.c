/* train_job_text_cache.c - whether a run keeps its text encoders, and the text cache that replaces
 * them when it need not (train/text_cache.h): every prompt the run can produce is encoded at
 * prepare and the encoders' weights leave the device. The log says which path was taken and why,
 * in one line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/host_log.h"
#include "c_numeric.h"
#include "testhooks/test_hooks.h"
#include "train/train_job.h"

static void keep_encoders(sdt_train_job *job, const char *why)
{
    sdt_host_log(job->host, SDT_LOG_INFO, "text encoders: kept on the %s and run every step (%s)",
                 job->pb.be->device == SDT_DEVICE_CPU ? "CPU" : "GPU", why);
}

/* The prompt as sample_prompt makes it without tag shuffle or drop-out, and its truncation to the
 * last-prompt buffer a preview without a preview prompt shows. */
static bool add_prompt(sdt_train_job *job, const char *line, const char *caption, bool as_preview)
{
    char *prompt = sdt_template_fill(line, job->prompt_name, caption);
    if (!prompt) return false;
    bool ok = sdt_text_cache_add_prompt(&job->text_cache, job->tok, &job->rules, prompt);
    if (ok && as_preview && strlen(prompt) >= sizeof job->last_prompt) {
        prompt[sizeof job->last_prompt - 1] = '\0'; /* what snprintf into last_prompt keeps */
        ok = sdt_text_cache_add_prompt(&job->text_cache, job->tok, &job->rules, prompt);
    }
    free(prompt);
    return ok;
}

/* Every prompt of the run: template lines x training captions, the empty prompt (caption drop-out,
 * and every shorter prompt's padding chunk in a batch), the validation prompts (the first line),
 * the preview prompt(s) and negative prompt. */
static bool collect_prompts(sdt_train_job *job)
{
    sdt_text_cache *tc = &job->text_cache;
    bool previews_from_training = !job->preview_prompt; /* a preview then shows the last training prompt */
    bool ok = sdt_text_cache_add_prompt(tc, job->tok, &job->rules, "");
    for (int i = 0; ok && i < job->ds.n_items; i++)
        for (int l = 0; ok && l < job->tmpl.n_lines; l++)
            ok = add_prompt(job, job->tmpl.lines[l], job->ds.items[i].caption, previews_from_training);
    for (int i = 0; ok && job->val.on && job->tmpl.n_lines > 0 && i < job->val.ds.n_items; i++)
        ok = add_prompt(job, job->tmpl.lines[0], job->val.ds.items[i].caption, false);
    if (ok && job->preview_prompt) ok = sdt_text_cache_add_prompt(tc, job->tok, &job->rules, job->preview_prompt);
    if (ok) ok = sdt_text_cache_add_prompt(tc, job->tok, &job->rules, job->preview_negative ? job->preview_negative : "");
    for (int p = 0; ok && p < job->preview_prompts.count; p++)
        ok = sdt_text_cache_add_prompt(tc, job->tok, &job->rules, job->preview_prompts.prompts[p]);
    if (ok) sdt_text_cache_seal(tc);
    return ok;
}

/* Progress every few seconds (bigG on a CPU takes seconds a chunk) and the interrupt button. */
typedef struct encode_progress {
    sdt_train_job *job;
    double last;
} encode_progress;

#define ENCODE_PROGRESS_EVERY_S 3

static bool keep_encoding(void *user, int done, int total)
{
    encode_progress *p = user;
    if (p->job->control && sdt_run_control_interrupt_requested(p->job->control)) return false;
    double now = sdt_train_job_clock();
    if (now - p->last >= ENCODE_PROGRESS_EVERY_S) {
        sdt_host_log(p->job->host, SDT_LOG_INFO, "encoding the run's prompts with the text encoders: %d of %d chunks", done, total);
        p->last = now;
    }
    return true;
}

bool sdt_train_job_cache_text(sdt_train_job *job, sdt_error *error)
{
    if (job->rows || job->rules.placeholder_id >= 0) {
        keep_encoders(job, "an embedding trains through them");
        return true;
    }
    if (job->shuffle_tags) {
        keep_encoders(job, "tag shuffle makes new captions every step; turn it off to encode every prompt once and free the "
                           "encoders' memory");
        return true;
    }
    if (job->tag_dropout > 0) {
        keep_encoders(job, "tag drop-out makes new captions every step; set it to 0 to encode every prompt once and free the "
                           "encoders' memory");
        return true;
    }
    if (sdt_test_hook_text_cache_off()) {
        keep_encoders(job, "the text cache is off by " SDT_TEST_HOOK_TEXT_CACHE_OFF_NAME);
        return true;
    }
    if (!collect_prompts(job)) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory listing the run's prompts");
    size_t bytes = sdt_text_cache_bytes(&job->rt, job->rt.dtype, job->text_cache.n);
    if (bytes > SDT_TEXT_CACHE_MAX_BYTES) {
        char why[256];
        snprintf(why, sizeof why, "the run's %d distinct 77-token prompt chunks would take %zu MiB of host memory encoded, over "
                 "the text cache's %zu MiB", job->text_cache.n, bytes >> 20, SDT_TEXT_CACHE_MAX_BYTES >> 20);
        sdt_text_cache_free(&job->text_cache);
        keep_encoders(job, why);
        return true;
    }
    double start = sdt_train_job_clock();
    encode_progress progress = {job, start};
    if (!sdt_text_cache_encode(&job->text_cache, &job->rt, &job->wa, job->clip_skip, job->anomaly, keep_encoding, &progress,
                               error))
        return false;
    job->have_measured = false; /* the encoders used the work arena */
    job->rt.text_cache = &job->text_cache;
    size_t weights = sd_runtime_text_park(&job->rt);
    char line[512];
    sdt_c_snprintf(line, sizeof line, "text encoders: every prompt of the run (%d distinct 77-token chunks) encoded once in "
                   "%.1f s and kept in host memory (%zu MiB); the encoders' weights (%zu MiB) leave the %s and no step "
                   "runs them (tag shuffle or tag drop-out would keep them)", job->text_cache.n,
                   sdt_train_job_clock() - start, bytes >> 20, weights >> 20,
                   job->pb.be->device == SDT_DEVICE_CPU ? "CPU" : "GPU");
    sdt_host_log(job->host, SDT_LOG_INFO, "%s", line);
    return true;
}

bool sdt_train_job_recache_text(sdt_train_job *job, sdt_error *error)
{
    if (!job->rt.text_cache) return true;
    job->rt.text_cache = NULL; /* the fresh f32 copy of the encoders computes the values again */
    if (!sdt_text_cache_encode(&job->text_cache, &job->rt, &job->wa, job->clip_skip, job->anomaly, NULL, NULL, error))
        return false;
    job->have_measured = false;
    job->rt.text_cache = &job->text_cache;
    sd_runtime_text_park(&job->rt);
    sdt_host_log(job->host, SDT_LOG_INFO, "text encoders: the run's prompts were encoded again in %s for the fp32 fallback",
                 sdt_dtype_name(job->rt.dtype));
    return true;
}
