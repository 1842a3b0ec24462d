/* run_t5_cache.c - see run_t5_cache.h. */
#include "train/run_t5_cache.h"

#include <stdio.h>

#include "c_numeric.h"
#include "testhooks/test_hooks.h"

#define MIB(x) ((double)(x) / (1024.0 * 1024.0))

static const char *device_name(const sd_runtime *rt)
{
    return rt->be->device == SDT_DEVICE_CPU ? "CPU" : "GPU";
}

static void keep_t5(const sd_runtime *rt, const sdt_host_callbacks *host, const char *why)
{
    sdt_host_log(host, SDT_LOG_INFO, "T5: kept on the %s and run every step (%s)", device_name(rt), why);
}

typedef struct prompt_adder {
    sdt_t5_cache *tc;
    const sdt_run_t5 *t5;
    sdt_error *error;
} prompt_adder;

static bool add_prompt(void *user, const char *prompt)
{
    prompt_adder *a = user;
    return sdt_t5_cache_add_prompt(a->tc, a->t5->spm, a->t5->rules, prompt, a->error);
}

bool sdt_run_t5_cache(sdt_t5_cache *tc, const sdt_run_prompts *prompts, const sdt_run_text_needs *needs,
                      const sdt_run_t5 *t5, sd_runtime *rt, work_arena *wa, const sdt_run_control *control,
                      const sdt_host_callbacks *host, bool *encoded, sdt_error *error)
{
    *encoded = false;
    if (t5->trains) {
        keep_t5(rt, host, "the embedding's t5xxl table trains through it");
        return true;
    }
    if (needs->shuffle_tags) {
        keep_t5(rt, host,
                "tag shuffle makes new captions every step; turn it off to compute T5's output for every prompt once "
                "and free T5's memory");
        return true;
    }
    if (needs->tag_dropout > 0) {
        keep_t5(rt, host,
                "tag drop-out makes new captions every step; set it to 0 to compute T5's output for every prompt "
                "once and free T5's memory");
        return true;
    }
    if (sdt_test_hook_text_cache_off()) {
        keep_t5(rt, host, "the text cache is off by " SDT_TEST_HOOK_TEXT_CACHE_OFF_NAME);
        return true;
    }
    sdt_t5_cache_init(tc, t5->len);
    prompt_adder adder = {tc, t5, error};
    sdt_error_clear(error);
    if (!sdt_run_prompts_each(prompts, add_prompt, &adder) || !sdt_t5_cache_seal(tc)) {
        sdt_t5_cache_free(tc);
        return error->code != SDT_ERR_OK
                   ? false
                   : sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory listing the run's prompts for T5");
    }
    size_t bytes = sdt_t5_cache_bytes(tc->len, rt->cfg.t5.d_model, rt->dtype, tc->n);
    if (bytes > SDT_T5_CACHE_MAX_BYTES) {
        char why[256];
        snprintf(why, sizeof why,
                 "the run's %d distinct prompts would take %zu MiB of host memory as T5's output, over the T5 "
                 "cache's %zu MiB",
                 tc->n, bytes >> 20, SDT_T5_CACHE_MAX_BYTES >> 20);
        sdt_t5_cache_free(tc);
        keep_t5(rt, host, why);
        return true;
    }
    if (control && sdt_run_control_interrupt_requested(control))
        return sdt_fail(error, SDT_ERR_INTERRUPTED, "computing T5's output for the run's prompts was interrupted");
    double start = sdt_run_clock();
    if (!sdt_t5_cache_encode(tc, rt, wa, t5->rows, error)) return false;
    *encoded = true; /* T5 used the work arena */
    rt->t5_cache = tc;
    size_t weights = tc->parked_bytes = sd_runtime_part_park(rt, SD_PART_T5XXL);
    char line[512];
    sdt_c_snprintf(line, sizeof line,
                   "T5: its output for every prompt of the run (%d distinct) computed once in %.1f s and kept in host "
                   "memory (%.1f MiB); T5's weights (%.1f MiB) leave the %s and no step runs it (tag shuffle, tag "
                   "drop-out or training the t5xxl table would keep it)",
                   tc->n, sdt_run_clock() - start, MIB(bytes), MIB(weights), device_name(rt));
    sdt_host_log(host, SDT_LOG_INFO, "%s", line);
    return true;
}

bool sdt_run_t5_recache(sdt_t5_cache *tc, const sdt_run_t5 *t5, sd_runtime *rt, work_arena *wa,
                        const sdt_host_callbacks *host, bool *encoded, sdt_error *error)
{
    *encoded = false;
    if (!rt->t5_cache) return true;
    rt->t5_cache = NULL; /* the fresh f32 T5 computes the values again */
    if (!sdt_t5_cache_encode(tc, rt, wa, t5->rows, error)) return false;
    *encoded = true;
    rt->t5_cache = tc;
    sd_runtime_part_park(rt, SD_PART_T5XXL);
    sdt_host_log(host, SDT_LOG_INFO, "T5: the run's prompts were computed again in %s for the fp32 fallback",
                 sdt_dtype_name(rt->dtype));
    return true;
}
