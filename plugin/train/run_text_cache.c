/* run_text_cache.c - see run_text_cache.h. */
#include "train/run_text_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_numeric.h"
#include "testhooks/test_hooks.h"
#include "train/text_cache_encode.h"

static const char *device_name(const sd_runtime *rt)
{
    return rt->be->device == SDT_DEVICE_CPU ? "CPU" : "GPU";
}

static void keep_encoders(const sd_runtime *rt, const sdt_host_callbacks *host, const char *why)
{
    sdt_host_log(host, SDT_LOG_INFO, "text encoders: kept on the %s and run every step (%s)", device_name(rt), why);
}

/* The prompt as sample_prompt makes it without tag shuffle or drop-out, and its truncation to the
 * last-prompt buffer a preview without a preview prompt shows. */
static bool each_filled(const sdt_run_prompts *rp, const char *line, const char *caption, bool as_preview,
                        sdt_run_prompt_fn each, void *user)
{
    char *prompt = sdt_template_fill(line, rp->prompt_name, caption);
    if (!prompt) return false;
    bool ok = each(user, prompt);
    if (ok && as_preview && strlen(prompt) >= rp->last_prompt_size) {
        prompt[rp->last_prompt_size - 1] = '\0'; /* what snprintf into last_prompt keeps */
        ok = each(user, prompt);
    }
    free(prompt);
    return ok;
}

bool sdt_run_prompts_each(const sdt_run_prompts *rp, sdt_run_prompt_fn each, void *user)
{
    bool previews_from_training = !rp->preview_prompt; /* a preview then shows the last training prompt */
    bool ok = each(user, "");
    for (int i = 0; ok && i < rp->train->n_items; i++)
        for (int l = 0; ok && l < rp->tmpl->n_lines; l++)
            ok = each_filled(rp, rp->tmpl->lines[l], rp->train->items[i].caption, previews_from_training, each, user);
    for (int i = 0; ok && rp->validation && rp->tmpl->n_lines > 0 && i < rp->validation->n_items; i++)
        ok = each_filled(rp, rp->tmpl->lines[0], rp->validation->items[i].caption, false, each, user);
    if (ok && rp->preview_prompt) ok = each(user, rp->preview_prompt);
    if (ok) ok = each(user, rp->preview_negative ? rp->preview_negative : "");
    for (int p = 0; ok && p < rp->preview_prompts->count; p++) ok = each(user, rp->preview_prompts->prompts[p]);
    return ok;
}

typedef struct chunk_adder {
    sdt_text_cache *tc;
    const sdt_run_prompts *rp;
} chunk_adder;

static bool add_chunks(void *user, const char *prompt)
{
    chunk_adder *a = user;
    return sdt_text_cache_add_prompt(a->tc, a->rp->tok, a->rp->rules, prompt);
}

static bool collect_prompts(sdt_text_cache *tc, const sdt_run_prompts *rp)
{
    chunk_adder a = {tc, rp};
    bool ok = sdt_run_prompts_each(rp, add_chunks, &a);
    if (ok) sdt_text_cache_seal(tc);
    return ok;
}

/* Progress every few seconds (bigG on a CPU takes seconds a chunk) and the interrupt button. */
typedef struct encode_progress {
    const sdt_run_control *control;
    const sdt_host_callbacks *host;
    double last;
} encode_progress;

#define ENCODE_PROGRESS_EVERY_S 3

static bool keep_encoding(void *user, int done, int total)
{
    encode_progress *p = user;
    if (p->control && sdt_run_control_interrupt_requested(p->control)) return false;
    double now = sdt_run_clock();
    if (now - p->last >= ENCODE_PROGRESS_EVERY_S) {
        sdt_host_log(p->host, SDT_LOG_INFO, "encoding the run's prompts with the text encoders: %d of %d chunks", done,
                     total);
        p->last = now;
    }
    return true;
}

bool sdt_run_text_cache(sdt_text_cache *tc, const sdt_run_prompts *prompts, const sdt_run_text_needs *needs,
                        sd_runtime *rt, work_arena *wa, int clip_skip, bool anomaly, const sdt_run_control *control,
                        const sdt_host_callbacks *host, bool *encoded, sdt_error *error)
{
    *encoded = false;
    if (needs->trains_text) {
        keep_encoders(rt, host, "an embedding trains through them");
        return true;
    }
    if (needs->shuffle_tags) {
        keep_encoders(rt, host,
                      "tag shuffle makes new captions every step; turn it off to encode every prompt once and free the "
                      "encoders' memory");
        return true;
    }
    if (needs->tag_dropout > 0) {
        keep_encoders(
            rt, host,
            "tag drop-out makes new captions every step; set it to 0 to encode every prompt once and free the "
            "encoders' memory");
        return true;
    }
    if (sdt_test_hook_text_cache_off()) {
        keep_encoders(rt, host, "the text cache is off by " SDT_TEST_HOOK_TEXT_CACHE_OFF_NAME);
        return true;
    }
    if (!collect_prompts(tc, prompts))
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory listing the run's prompts");
    size_t bytes = sdt_text_cache_bytes(rt, rt->dtype, tc->n);
    if (bytes > SDT_TEXT_CACHE_MAX_BYTES) {
        char why[256];
        snprintf(why, sizeof why,
                 "the run's %d distinct 77-token prompt chunks would take %zu MiB of host memory encoded, over "
                 "the text cache's %zu MiB",
                 tc->n, bytes >> 20, SDT_TEXT_CACHE_MAX_BYTES >> 20);
        sdt_text_cache_free(tc);
        keep_encoders(rt, host, why);
        return true;
    }
    double start = sdt_run_clock();
    encode_progress progress = {control, host, start};
    if (!sdt_text_cache_encode(tc, rt, wa, clip_skip, anomaly, keep_encoding, &progress, error)) return false;
    *encoded = true; /* the encoders used the work arena */
    rt->text_cache = tc;
    size_t weights = sd_runtime_text_park(rt);
    char line[512];
    sdt_c_snprintf(line, sizeof line,
                   "text encoders: every prompt of the run (%d distinct 77-token chunks) encoded once in "
                   "%.1f s and kept in host memory (%zu MiB); the encoders' weights (%zu MiB) leave the %s and no step "
                   "runs them (tag shuffle or tag drop-out would keep them)",
                   tc->n, sdt_run_clock() - start, bytes >> 20, weights >> 20, device_name(rt));
    sdt_host_log(host, SDT_LOG_INFO, "%s", line);
    return true;
}

bool sdt_run_text_recache(sdt_text_cache *tc, sd_runtime *rt, work_arena *wa, int clip_skip, bool anomaly,
                          const sdt_host_callbacks *host, bool *encoded, sdt_error *error)
{
    *encoded = false;
    if (!rt->text_cache) return true;
    rt->text_cache = NULL; /* the fresh f32 copy of the encoders computes the values again */
    if (!sdt_text_cache_encode(tc, rt, wa, clip_skip, anomaly, NULL, NULL, error)) return false;
    *encoded = true;
    rt->text_cache = tc;
    sd_runtime_text_park(rt);
    sdt_host_log(host, SDT_LOG_INFO, "text encoders: the run's prompts were encoded again in %s for the fp32 fallback",
                 sdt_dtype_name(rt->dtype));
    return true;
}
