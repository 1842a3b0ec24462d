/* test_t5_cache.c - T5's output cached once per prompt (train/t5_cache.h, sd_cond's T5 hook) on a tiny random SD3.5
 * checkpoint (sd3_gen) on the CPU, an embedding whose CLIP tables train and whose t5xxl table is frozen:
 *   - prompts are keyed on T5's ids with the placeholder's slots as their rows: repeats collapse, a prompt whose
 *     slots read other rows is another entry;
 *   - the pass with the cache (computed in one group of every prompt) equals the pass running T5 live on a batch
 *     of three, byte for byte: the loss and the CLIP tables' gradient;
 *   - once T5 is parked (sd_runtime_part_park, as the job does) none of T5's weights holds data any more, and the
 *     cached pass still gives the same bytes;
 *   - a prompt the cache does not hold, and a pass with T5 parked but no cache, are internal errors with a
 *     sentence, not a crash;
 *   - the fp32 fallback's path: the cache computed again in another dtype after sd_runtime_set_dtype matches T5
 *     live in that dtype. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "../models/model_test_util.h"
#include "flow_pass_check.h"
#include "t5_test_vocab.h"
#include "train/sd_cond.h"
#include "train/t5_cache.h"

#define B 3
#define NV 2 /* embedding vectors */
#define END 999
#define T SDT_PROMPT_TOKENS
#define L5 10 /* T5's sequence: short for the test */

static const char *const JSON = SDT_TEST_T5_TOKENIZER_JSON;

/* The run's prompts (a repeat included) and the batch trained on: three of them. */
static const char *const run_prompts[] = {"a <sks> the cat", "the dog",         "",
                                          "a <sks> <sks>",   "a <sks> the cat", "yellow star"};
static const int batch_prompt[B] = {3, 0, 2};

typedef struct problem {
    int32_t tokens[B * T], t5[B * L5];
    clip_override ov[B * T];
    t5_override ov5[B * L5];
    int n_ov5;
    float *noisy, *target, ts[B];
    sdt_pass_shape shape;
} problem;

static bool make_problem(sdt_test_rng *rng, sd_runtime *rt, const sdt_spm *spm, const sdt_t5_slot_rules *rules,
                         problem *p)
{
    memset(p, 0, sizeof *p);
    int c = rt->cfg.vae.z_channels, h = 4, w = 4;
    p->shape = (sdt_pass_shape){.batch = B, .c = c, .h = h, .w = w, .chunks = 1, .in_c = c, .t5_len = L5};
    sdt_error error = {0};
    for (int b = 0; b < B; b++) {
        int32_t *t = p->tokens + b * T;
        t[0] = END - 1; /* CLIP: start, the embedding's slots at 1 and 2, a word, end padding */
        t[1] = 0, t[2] = 0, t[3] = 5 + b;
        for (int i = 4; i < T; i++) t[i] = END;
        for (int r = 0; r < NV; r++) p->ov[b * NV + r] = (clip_override){b, 1 + r, r};
        int pos[L5], row[L5];
        sdt_t5_prompt_report rep;
        if (!sdt_t5_prompt_encode(spm, rules, run_prompts[batch_prompt[b]], L5, p->t5 + b * L5, pos, row, &rep,
                                  &error)) {
            CHECK(false, "T5's ids: %s", error.message);
            return false;
        }
        for (int s = 0; s < rep.n_slots; s++) p->ov5[p->n_ov5++] = (t5_override){b, pos[s], row[s]};
        p->ts[b] = (float)(200 + 300 * b);
    }
    CHECK(p->n_ov5 == 3 * NV, "the batch's T5 slots: %d, want %d", p->n_ov5, 3 * NV);
    int64_t numel = (int64_t)B * c * h * w;
    p->noisy = mt_alloc((size_t)numel * sizeof(float));
    p->target = mt_alloc((size_t)numel * sizeof(float));
    for (int64_t i = 0; i < numel; i++)
        p->noisy[i] = (float)sdt_test_normal(rng), p->target[i] = (float)sdt_test_normal(rng);
    return true;
}

/* The pass training the CLIP tables (t5xxl frozen): its loss and the rows' gradient. */
static bool pass(sd_runtime *rt, work_arena *wa, problem *p, sdt_tensor *rows, float *grad, double *loss,
                 sdt_error *error)
{
    sdt_pass_inputs in = pass_check_inputs(p->shape, p->tokens, p->ov, B * NV, p->noisy, p->target, p->ts, END);
    in.t5_tokens = p->t5, in.t5_overrides = p->ov5, in.n_t5_overrides = p->n_ov5;
    return pass_check_loss_with(rt, wa, &in, NULL, (int)rows->shape[0], rows->data, (int)rows->shape[1],
                                SDT_ENCODER_CLIP_L | SDT_ENCODER_CLIP_G, grad, loss, NULL, error);
}

/* Bytes of T5's weights (under its canonical prefix) that still hold data. */
static size_t t5_resident(const sd_runtime *rt)
{
    size_t bytes = 0, n = strlen(SD_SD3_T5_PREFIX);
    for (size_t i = 0; i < sdt_weights_count(rt->dev); i++) {
        const char *key = sdt_weights_key(rt->dev, i);
        const sdt_tensor *t = strncmp(key, SD_SD3_T5_PREFIX, n) == 0 ? sdt_weights_get(rt->dev, key) : NULL;
        if (t && t->data) bytes += sdt_tensor_nbytes(t);
    }
    return bytes;
}

static bool build_cache(sdt_t5_cache *c, sd_runtime *rt, work_arena *wa, const sdt_spm *spm,
                        const sdt_t5_slot_rules *rules, sdt_tensor *rows, sdt_error *error)
{
    sdt_t5_cache_init(c, L5);
    for (size_t i = 0; i < sizeof run_prompts / sizeof *run_prompts; i++)
        if (!sdt_t5_cache_add_prompt(c, spm, rules, run_prompts[i], error)) return false;
    if (!sdt_t5_cache_seal(c)) return false;
    sdt_tensor t5_rows = sdt_cond_t5_table(rt, rows);
    return sdt_t5_cache_encode(c, rt, wa, &t5_rows, error);
}

static void check_cache(sdt_test_rng *rng, sd_runtime *rt, const sdt_spm *spm, const sdt_t5_slot_rules *rules)
{
    problem p;
    if (!make_problem(rng, rt, spm, rules, &p)) return;
    int width = rt->cfg.clip.width + rt->cfg.clip2.width + rt->cfg.t5.d_model;
    float *values = mt_alloc((size_t)NV * width * sizeof(float));
    for (int i = 0; i < NV * width; i++) values[i] = (float)(0.5 * sdt_test_normal(rng));
    int64_t shape[2] = {NV, width};
    sdt_tensor rows = sdt_tensor_make(values, SDT_F32, SDT_DEVICE_CPU, 2, shape);
    float *g_live = mt_alloc((size_t)NV * width * sizeof(float)),
          *g_cached = mt_alloc((size_t)NV * width * sizeof(float));
    work_arena wa = {0};
    sdt_error error = {0};
    double live = 0, cached = 0;
    bool ok = pass(rt, &wa, &p, &rows, g_live, &live, &error);
    CHECK(ok && isfinite(live), "the pass running T5: %s", error.message);
    sdt_t5_cache c;
    ok = ok && build_cache(&c, rt, &wa, spm, rules, &rows, &error);
    CHECK(ok, "computing the T5 cache: %s", error.message);
    if (!ok) goto done;
    printf("%zu prompts, %d distinct T5 entries\n", sizeof run_prompts / sizeof *run_prompts, c.n);
    CHECK(c.n == 5, "the cache holds %d prompts; want 5 (one repeat of six)", c.n);
    rt->t5_cache = &c;
    ok = pass(rt, &wa, &p, &rows, g_cached, &cached, &error);
    CHECK(ok, "the pass with the T5 cache: %s", error.message);
    printf("loss running T5 %.9g, with the cache %.9g\n", live, cached);
    CHECK(ok && memcmp(&live, &cached, sizeof live) == 0, "the cached pass's loss %.9g differs from T5 live %.9g",
          cached, live);
    CHECK(ok && memcmp(g_live, g_cached, (size_t)NV * width * sizeof(float)) == 0,
          "the CLIP tables' gradient differs with the T5 cache");
    double mag = 0;
    for (int i = 0; i < NV * (rt->cfg.clip.width + rt->cfg.clip2.width); i++) mag += fabs(g_cached[i]);
    CHECK(mag > 0, "the CLIP tables got no gradient");

    size_t before = t5_resident(rt), freed = sd_runtime_part_park(rt, SD_PART_T5XXL);
    printf("T5's weights: %zu bytes on the backend, %zu let go of, %zu left\n", before, freed, t5_resident(rt));
    CHECK(before > 0 && freed == before && t5_resident(rt) == 0, "T5's weights are still resident after parking");
    ok = pass(rt, &wa, &p, &rows, g_cached, &cached, &error);
    CHECK(ok && memcmp(&live, &cached, sizeof live) == 0 &&
              memcmp(g_live, g_cached, (size_t)NV * width * sizeof(float)) == 0,
          "without T5's weights the cached pass differs: %s", error.message);

    /* a prompt the cache never saw */
    p.t5[0] = 7, p.t5[1] = 7, p.t5[2] = 7;
    sdt_error missing = {0};
    CHECK(!pass(rt, &wa, &p, &rows, g_cached, &cached, &missing) && missing.code == SDT_ERR_INTERNAL &&
              strstr(missing.message, "not in the T5 cache"),
          "a prompt outside the T5 cache: %s", missing.message);
    /* T5 parked and no cache: refused with a sentence, never run on released weights */
    rt->t5_cache = NULL;
    sdt_error parked = {0};
    CHECK(!pass(rt, &wa, &p, &rows, g_cached, &cached, &parked) && parked.code == SDT_ERR_INTERNAL &&
              strstr(parked.message, "T5 left the device without a T5 cache"),
          "a pass with T5 parked and no cache: %s", parked.message);
    sdt_t5_cache_free(&c);

    /* the fp32 fallback's path: T5 back in another dtype (bf16 here), the cache computed again, against T5 live */
    ok = sd_runtime_set_dtype(rt, SDT_BF16, &error);
    CHECK(ok && t5_resident(rt) > 0, "T5 back in bf16: %s", error.message);
    problem q;
    ok = ok && make_problem(rng, rt, spm, rules, &q);
    ok = ok && pass(rt, &wa, &q, &rows, g_live, &live, &error) && build_cache(&c, rt, &wa, spm, rules, &rows, &error);
    CHECK(ok, "the bf16 pass and cache: %s", error.message);
    if (ok) {
        rt->t5_cache = &c;
        sd_runtime_part_park(rt, SD_PART_T5XXL);
        ok = pass(rt, &wa, &q, &rows, g_cached, &cached, &error);
        printf("bf16: loss running T5 %.9g, with the cache %.9g\n", live, cached);
        CHECK(ok && memcmp(&live, &cached, sizeof live) == 0 &&
                  memcmp(g_live, g_cached, (size_t)NV * width * sizeof(float)) == 0,
              "bf16: the cached pass differs from T5 live: %s", error.message);
        rt->t5_cache = NULL;
        sdt_t5_cache_free(&c);
    }
    free(q.noisy), free(q.target);
done:
    work_arena_release(&wa);
    free(p.noisy), free(p.target), free(values), free(g_live), free(g_cached);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("test_t5_cache");
    sdt_error error = {0};
    sdt_spm *spm = sdt_spm_load_json_memory(JSON, strlen(JSON), "tiny.json", &error);
    CHECK(spm, "the T5 vocabulary: %s", error.message);
    if (!spm) return sdt_test_finish("test_t5_cache");
    int32_t ph = -1;
    CHECK(sdt_spm_add_token(spm, "<sks>", &ph, &error), "the placeholder: %s", error.message);
    sdt_t5_slot_rules rules = {.placeholder_id = ph, .n_vectors = NV, .slot_token = 0};
    sd_config cfg = sd_config_preset(SD_FAMILY_TINY_SD3);
    const bool in[SD_PART_COUNT] = {true, true, true, true, true};
    flow_pass_model m;
    if (flow_pass_model_open(&m, &rng, "sdt-t5cache-XXXXXX", "sd3.5_tiny.safetensors", &cfg, in, "SD3.5"))
        check_cache(&rng, &m.rt, spm, &rules);
    flow_pass_model_close(&m);
    sdt_spm_free(spm);
    return sdt_test_finish("test_t5_cache");
}
