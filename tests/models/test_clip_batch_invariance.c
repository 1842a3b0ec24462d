/* test_clip_batch_invariance.c - a sequence's encoding does not depend on what shares its batch.
 *
 * The text cache (plugin/train/text_cache.h) encodes the run's prompts in groups of its own, the
 * uncached step encodes the step's batch, and the two runs must agree bit for bit
 * (e2e_text_cache). So the CPU encoder must give a sequence the same context rows and pooled vector
 * encoded alone, first or last in a batch, or among others: on SD's and SDXL's tiny encoders (CLIP-L
 * with quick GELU, bigG in the OpenCLIP layout with its pooled projection), in f32 and f16
 * activations. ctest runs it under several OPENBLAS_CORETYPE values too: OpenBLAS's Haswell and
 * Zen kernels give a GEMM row bits that depend on its place in the call, which a batch-wide GEMM
 * exposes (tests/models/CMakeLists.txt). */
#include <string.h>

#include "clip_text.h"
#include "model_test_util.h"

enum { SEQS = 5 };

/* The context [B, T, C] and, with a projection, the pooled output [B, P] of tokens [B, T], as f32. */
static bool encode(const clip_text_model *m, sdt_backend *be, const int32_t *tokens, int B, int T, sdt_dtype act,
                   float *out, float *pooled, sdt_error *error)
{
    const int64_t C = m->cfg.width, P = m->cfg.projection_dim;
    sdt_tensor tok = mt_tensor((void *)tokens, SDT_I32, 2, B, T, 0, 0);
    clip_text_inputs in = {.tokens = &tok, .act_dtype = act};
    sdt_arena meas, arena;
    clip_text_acts acts;
    sdt_arena_init_measure(&meas, be);
    if (!clip_text_forward(m, be, &meas, &in, &acts, error)) return false;
    if (!sdt_arena_init(&arena, be, meas.peak))
        return sdt_fail(error, SDT_ERR_DEVICE, "arena of %zu bytes: %s", meas.peak, be->error.message);
    bool ok = clip_text_forward(m, be, &arena, &in, &acts, error);
    if (ok) {
        sdt_load_f32(acts.out.data, acts.out.dtype, out, (int64_t)B * T * C);
        if (P > 0) sdt_load_f32(acts.pooled.data, acts.pooled.dtype, pooled, (int64_t)B * P);
    }
    sdt_arena_release(&arena);
    return ok;
}

/* SEQS sequences with their end tokens at different places; encoded as one batch, each alone, and
 * in a batch of three in another order, every sequence must come out with the same bits. */
static void check_encoder(sdt_test_rng *rng, sdt_backend *be, const clip_text_model *m, const char *name, sdt_dtype act)
{
    const int T = m->cfg.positions < 77 ? m->cfg.positions : 77, end_id = m->cfg.vocab - 1;
    const int64_t C = m->cfg.width, P = m->cfg.projection_dim, row = T * C, prow = P > 0 ? P : 1;
    int32_t tokens[SEQS * 77];
    for (int s = 0; s < SEQS; s++) {
        const int end = 2 + (int)(sdt_test_next(rng) % (uint64_t)(T - 3));
        for (int t = 0; t < T; t++)
            tokens[s * T + t] = t == 0     ? end_id - 1
                                : t < end  ? 1 + (int32_t)(sdt_test_next(rng) % (uint64_t)(end_id - 2))
                                : t == end ? end_id
                                           : 0;
    }
    sdt_error error = {0};
    float *all = mt_alloc(sizeof(float) * SEQS * row), *all_p = mt_alloc(sizeof(float) * SEQS * prow);
    float *one = mt_alloc(sizeof(float) * row), *one_p = mt_alloc(sizeof(float) * prow);
    float *three = mt_alloc(sizeof(float) * 3 * row), *three_p = mt_alloc(sizeof(float) * 3 * prow);
    if (!encode(m, be, tokens, SEQS, T, act, all, all_p, &error)) {
        CHECK(false, "%s (%s): a batch of %d: %s", name, sdt_dtype_name(act), SEQS, error.message);
        goto done;
    }
    for (int s = 0; s < SEQS; s++) {
        if (!encode(m, be, tokens + s * T, 1, T, act, one, one_p, &error)) {
            CHECK(false, "%s (%s): sequence %d alone: %s", name, sdt_dtype_name(act), s, error.message);
            goto done;
        }
        CHECK(memcmp(one, all + s * row, sizeof(float) * row) == 0,
              "%s (%s): sequence %d's context differs encoded alone and in a batch of %d", name, sdt_dtype_name(act), s,
              SEQS);
        CHECK(P == 0 || memcmp(one_p, all_p + s * P, sizeof(float) * P) == 0,
              "%s (%s): sequence %d's pooled output differs encoded alone and in a batch of %d", name,
              sdt_dtype_name(act), s, SEQS);
    }
    const int order[3] = {4, 1, 3}; /* another group, another order */
    int32_t grouped[3 * 77];
    for (int i = 0; i < 3; i++) memcpy(grouped + i * T, tokens + order[i] * T, sizeof(int32_t) * T);
    if (!encode(m, be, grouped, 3, T, act, three, three_p, &error)) {
        CHECK(false, "%s (%s): a batch of 3: %s", name, sdt_dtype_name(act), error.message);
        goto done;
    }
    for (int i = 0; i < 3; i++) {
        CHECK(memcmp(three + i * row, all + order[i] * row, sizeof(float) * row) == 0,
              "%s (%s): sequence %d's context differs at place %d of 3 and at place %d of %d", name,
              sdt_dtype_name(act), order[i], i, order[i], SEQS);
        CHECK(P == 0 || memcmp(three_p + i * P, all_p + order[i] * P, sizeof(float) * P) == 0,
              "%s (%s): sequence %d's pooled output differs at place %d of 3 and at place %d of %d", name,
              sdt_dtype_name(act), order[i], i, order[i], SEQS);
    }
done:
    free(all), free(all_p), free(one), free(one_p), free(three), free(three_p);
}

static void check_family(sdt_test_rng *rng, sdt_backend *be, sd_family family, const clip_slot *slots,
                         const char *const *names, int n)
{
    char path[512];
    mt_temp_path(path, sizeof(path), "clip-batch");
    sdt_weights *w = mt_make_weights(path, family, sdt_test_next(rng), true, false);
    for (int i = 0; i < n; i++) {
        sdt_error error = {0};
        clip_config cfg;
        clip_text_model m;
        if (!clip_config_detect_at(w, slots[i], &cfg, &error) || !clip_text_load(&m, &cfg, w, &error)) {
            CHECK(false, "%s: %s", names[i], error.message);
            continue;
        }
        check_encoder(rng, be, &m, names[i], SDT_F32);
        check_encoder(rng, be, &m, names[i], SDT_F16);
    }
    sdt_weights_close(w);
    unlink(path);
}

/* --blas-gemm: every GEMM through BLAS (the OPENBLAS_CORETYPE cases: what a CPU without AVX-512F runs). */
int main(int argc, char **argv)
{
    sdt_test_rng rng = sdt_test_rng_from_env("models_test_clip_batch_invariance");
    sdt_backend *be = mt_backend();
    be->blas_gemm_only = argc > 1 && strcmp(argv[1], "--blas-gemm") == 0;
    if (be->blas_gemm_only) printf("every GEMM through BLAS\n");
    const clip_slot sd_slots[1] = {CLIP_SLOT_COND_STAGE}, sdxl_slots[2] = {CLIP_SLOT_SDXL_L, CLIP_SLOT_SDXL_G};
    const char *sd_names[1] = {"SD CLIP-L"}, *sdxl_names[2] = {"SDXL CLIP-L", "SDXL bigG"};
    check_family(&rng, be, SD_FAMILY_TINY, sd_slots, sd_names, 1);
    check_family(&rng, be, SD_FAMILY_TINY_SDXL, sdxl_slots, sdxl_names, 2);
    be->destroy(be);
    return sdt_test_finish("models_test_clip_batch_invariance");
}
