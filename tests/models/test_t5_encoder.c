/* test_t5_encoder.c - the T5 v1.1 encoder on a tiny random model (every parameter perturbed, inner width !=
 * d_model): config detection, the row gradient against central differences of the C forward (directional
 * and per element), with and without the padding mask, the mask's effect (padded keys do not change the
 * unpadded outputs), overrides equal to the embedding row they copy, a bf16 file against the f32 one, the
 * measuring arena's size being enough, the relative buckets against transformers' values, and the
 * loader's sentences for a missing, a misshaped tensor and a T5 v1.0 file. Torch parity:
 * tests/parity/t5_parity.py. */
#include <math.h>

#include "model_test_util.h"
#include "safetensors.h"
#include "shared_math.h"
#include "t5_encoder.h"
#include "t5_gen.h"

enum { B = 2, T = 11, R = 2, NOV = 3 };

typedef struct run_ctx {
    const t5_encoder *m;
    sdt_backend *be;
    const int32_t *tokens;
    const int32_t *lengths;
    const t5_override *ov;
    const float *dout; /* [B, T, D] */
} run_ctx;

/* loss = sum(dout * out) for the given rows (double accumulation); out copied when out_copy. */
static double run_loss(const run_ctx *c, const float *rows, float *out_copy, float *drows)
{
    const int D = c->m->cfg.d_model;
    sdt_tensor tok = mt_tensor((void *)c->tokens, SDT_I32, 2, B, T, 0, 0);
    sdt_tensor trows = mt_tensor((void *)rows, SDT_F32, 2, R, D, 0, 0);
    t5_inputs in = {&tok, c->lengths, &trows, c->ov, NOV, SDT_F32};
    sdt_arena measure, arena;
    t5_acts acts;
    sdt_error err = {0};
    sdt_arena_init_measure(&measure, c->be);
    bool ok = t5_encoder_forward(c->m, c->be, &measure, &in, &acts, &err);
    sdt_tensor tdout = mt_tensor((void *)c->dout, SDT_F32, 3, B, T, D, 0);
    sdt_tensor tdrows = mt_tensor(drows, SDT_F32, 2, R, D, 0, 0);
    ok = ok && t5_encoder_backward(c->m, c->be, &measure, &acts, &tdout, &tdrows, &err);
    CHECK(ok, "measuring failed: %s", err.message);
    /* exactly the measured peak must be enough */
    CHECK(sdt_arena_init(&arena, c->be, measure.peak), "arena of %zu bytes", measure.peak);
    ok = t5_encoder_forward(c->m, c->be, &arena, &in, &acts, &err);
    CHECK(ok, "forward failed: %s", err.message);
    double loss = 0;
    if (ok) {
        const float *out = acts.out.data;
        for (int64_t i = 0; i < (int64_t)B * T * D; i++) loss += (double)c->dout[i] * out[i];
        if (out_copy) memcpy(out_copy, out, sizeof(float) * (size_t)B * T * D);
        if (drows) {
            memset(drows, 0, sizeof(float) * (size_t)R * D);
            CHECK(t5_encoder_backward(c->m, c->be, &arena, &acts, &tdout, &tdrows, &err), "backward failed: %s",
                  err.message);
        }
    }
    sdt_arena_release(&arena);
    return loss;
}

static void check_gradient(const run_ctx *c, sdt_test_rng *rng, const char *what)
{
    const int D = c->m->cfg.d_model, n = R * D;
    float *rows = mt_alloc(sizeof(float) * n), *drows = mt_alloc(sizeof(float) * n), *p = mt_alloc(sizeof(float) * n);
    sdt_test_fill_normal(rng, rows, n, 1.0);
    run_loss(c, rows, NULL, drows);
    double gmax = 0;
    for (int i = 0; i < n; i++) gmax = fmax(gmax, fabs(drows[i]));
    CHECK(gmax > 0, "%s: the row gradient is all zero", what);
    /* directional: a random direction u, (L(r + h u) - L(r - h u)) / 2h against drows . u */
    const double h = 1e-2;
    float *u = mt_alloc(sizeof(float) * n);
    sdt_test_fill_normal(rng, u, n, 1.0);
    double an = 0, un = 0;
    for (int i = 0; i < n; i++) an += (double)drows[i] * u[i], un += fabs((double)drows[i] * u[i]);
    for (int i = 0; i < n; i++) p[i] = rows[i] + (float)h * u[i];
    double lp = run_loss(c, p, NULL, NULL);
    for (int i = 0; i < n; i++) p[i] = rows[i] - (float)h * u[i];
    double lm = run_loss(c, p, NULL, NULL);
    double fd = (lp - lm) / (2 * h), rel = fabs(fd - an) / fmax(un, 1e-12);
    printf("%s: directional analytic %.6g fd %.6g (rel %.3g)\n", what, an, fd, rel);
    CHECK(rel < 2e-3, "%s: directional derivative %.6g differs from central differences %.6g", what, an, fd);
    /* every element */
    int bad = 0;
    for (int i = 0; i < n; i++) {
        memcpy(p, rows, sizeof(float) * n);
        p[i] = rows[i] + (float)h;
        double a = run_loss(c, p, NULL, NULL);
        p[i] = rows[i] - (float)h;
        double b = run_loss(c, p, NULL, NULL);
        double e = (a - b) / (2 * h);
        if (fabs(e - drows[i]) > 5e-3 * gmax + 1e-5) {
            if (bad++ < 5) printf("%s: row element %d analytic %.6g fd %.6g\n", what, i, drows[i], e);
        }
    }
    CHECK(bad == 0, "%s: %d of %d row-gradient elements differ from central differences", what, bad, n);
    free(rows), free(drows), free(p), free(u);
}

static void check_buckets(void)
{
    /* transformers' _relative_position_bucket(bidirectional, 32 buckets, max distance 128) of key - query,
     * computed with torch 1.13 for these offsets */
    static const int rel[] = {-200, -128, -127, -64, -32, -16, -15, -12, -11, -9, -8, -7, -1, 0,  1,   7,   8,  9,
                              11,   12,   15,   16,  22,  23,  31,  32,  45,  46, 63, 64, 90, 91, 127, 128, 500};
    static const int want[] = {15, 15, 15, 14, 12, 10, 9,  9,  8,  8,  8,  7,  1,  0,  17, 23, 24, 24,
                               24, 25, 25, 26, 26, 27, 27, 28, 28, 29, 29, 30, 30, 31, 31, 31, 31};
    int bad = 0;
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        int got = t5_relative_bucket(rel[i], 32, 128);
        if (got != want[i]) {
            bad++;
            printf("bucket(%d) = %d, transformers %d\n", rel[i], got, want[i]);
        }
    }
    CHECK(bad == 0, "%d relative-position buckets differ from transformers'", bad);
}

static void check_refusals(const sdt_weights *w, const t5_config *cfg)
{
    char path[512];
    sdt_error err = {0};
    t5_encoder m;
    /* a missing tensor */
    mt_temp_path(path, sizeof path, "t5-missing");
    mt_copy_without(w, path, "encoder.block.1.layer.1.DenseReluDense.wi_1.weight", NULL, NULL, 0);
    sdt_weights *mw = sdt_weights_open(path, &err);
    CHECK(mw != NULL, "open: %s", err.message);
    if (mw) {
        CHECK(!t5_encoder_load(&m, cfg, mw, &err) &&
                  strstr(err.message, "encoder.block.1.layer.1.DenseReluDense.wi_1.weight") &&
                  strstr(err.message, path) && strstr(err.message, "T5 v1.1 encoder file"),
              "a missing wi_1 must be named with the file: \"%s\"", err.message);
        printf("missing: %s\n", err.message);
        sdt_weights_close(mw);
    }
    unlink(path);
    /* a misshaped tensor: the config's d_ff one more than the file's */
    t5_config wide = *cfg;
    wide.d_ff++;
    CHECK(!t5_encoder_load(&m, &wide, w, &err) && strstr(err.message, "wi_0.weight"),
          "a misshaped wi_0 must be named: \"%s\"", err.message);
    printf("misshaped: %s\n", err.message);
    /* T5 v1.0: one ReLU wi */
    mt_temp_path(path, sizeof path, "t5-v10");
    static float wi[40 * 32];
    sdt_tensor twi = mt_tensor(wi, SDT_F32, 2, 40, 32, 0, 0);
    const char *names[1] = {"encoder.block.0.layer.1.DenseReluDense.wi.weight"};
    mt_copy_without(w, path, "encoder.block.0.layer.1.DenseReluDense.wi_0.weight", names, &twi, 1);
    mw = sdt_weights_open(path, &err);
    t5_config got;
    CHECK(mw && !t5_config_detect(mw, "", &got, &err) && err.code == SDT_ERR_UNSUPPORTED &&
              strstr(err.message, "T5 v1.0"),
          "a T5 v1.0 file must be refused by name: \"%s\"", err.message);
    printf("v1.0: %s\n", err.message);
    if (mw) sdt_weights_close(mw);
    unlink(path);
    /* no T5 at all */
    CHECK(!t5_config_detect(w, "text_encoders.t5xxl.transformer.", &got, &err) &&
              strstr(err.message, "text_encoders.t5xxl.transformer.shared.weight"),
          "a missing T5 must name the key it looked for: \"%s\"", err.message);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("t5_encoder");
    check_buckets();
    sdt_backend *be = mt_backend();
    char path[512], path16[512];
    mt_temp_path(path, sizeof path, "t5");
    mt_temp_path(path16, sizeof path16, "t5-bf16");
    t5_config cfg = t5_config_tiny();
    sdt_error err = {0};
    CHECK(t5_generate(path, &cfg, SDT_F32, 7, true, &err), "generate: %s", err.message);
    CHECK(t5_generate(path16, &cfg, SDT_BF16, 7, true, &err), "generate bf16: %s", err.message);
    sdt_weights *w = sdt_weights_open(path, &err), *w16 = sdt_weights_open(path16, &err);
    CHECK(w && w16, "open: %s", err.message);
    if (!w || !w16) return sdt_test_finish("t5_encoder");

    t5_config det;
    CHECK(t5_config_detect(w, "", &det, &err), "detect: %s", err.message);
    CHECK(det.vocab == cfg.vocab && det.d_model == cfg.d_model && det.layers == cfg.layers && det.heads == cfg.heads &&
              det.d_kv == cfg.d_kv && det.d_ff == cfg.d_ff && det.rel_buckets == cfg.rel_buckets &&
              det.rel_max_distance == 128,
          "detected vocab %d d_model %d layers %d heads %d d_kv %d d_ff %d buckets %d", det.vocab, det.d_model,
          det.layers, det.heads, det.d_kv, det.d_ff, det.rel_buckets);
    t5_encoder m, m16;
    CHECK(t5_encoder_load(&m, &cfg, w, &err) && t5_encoder_load(&m16, &cfg, w16, &err), "load: %s", err.message);

    const int D = cfg.d_model;
    int32_t tokens[B * T], lengths[B] = {T, 6};
    for (int i = 0; i < B * T; i++) tokens[i] = (int32_t)((i * 37 + 5) % cfg.vocab);
    tokens[T - 1] = 1, tokens[T + 5] = 1;              /* the end tokens */
    for (int i = T + 6; i < 2 * T; i++) tokens[i] = 0; /* pads */
    t5_override ov[NOV] = {{0, 2, 0}, {1, 1, 1}, {1, 3, 0}};
    float *dout = mt_alloc(sizeof(float) * B * T * D);
    sdt_test_fill_normal(&rng, dout, (int64_t)B * T * D, 1.0);
    run_ctx c = {&m, be, tokens, NULL, ov, dout};
    check_gradient(&c, &rng, "no mask");
    c.lengths = lengths;
    check_gradient(&c, &rng, "padding mask");

    /* the mask: changing the pads of sequence 1 changes none of the outputs at its first 6 positions (they
     * attend only to keys < 6) nor sequence 0's (the batch rows do not see each other) */
    float *rows = mt_alloc(sizeof(float) * R * D), *o1 = mt_alloc(sizeof(float) * B * T * D);
    float *o2 = mt_alloc(sizeof(float) * B * T * D);
    sdt_test_fill_normal(&rng, rows, R * D, 1.0);
    run_loss(&c, rows, o1, NULL);
    int32_t tokens2[B * T];
    memcpy(tokens2, tokens, sizeof tokens);
    for (int i = T + 6; i < 2 * T; i++) tokens2[i] = 50;
    run_ctx c2 = c;
    c2.tokens = tokens2;
    run_loss(&c2, rows, o2, NULL);
    CHECK(memcmp(o1, o2, sizeof(float) * (T + 6) * D) == 0,
          "with the mask, the pads' ids must not change the real tokens' outputs");
    CHECK(memcmp(o1 + (T + 6) * D, o2 + (T + 6) * D, sizeof(float) * (T - 6) * D) != 0, "the pads' own outputs change");
    c.lengths = NULL, c2.lengths = NULL;
    run_loss(&c, rows, o1, NULL);
    run_loss(&c2, rows, o2, NULL);
    CHECK(memcmp(o1 + T * D, o2 + T * D, sizeof(float) * 6 * D) != 0, "without the mask the pads are attended");

    /* an override holding the embedding row of the token it replaces gives the plain encoding */
    float *tok_rows = mt_alloc(sizeof(float) * R * D);
    int32_t ids[R] = {tokens[2], tokens[T + 1]};
    sdt_tensor trows = mt_tensor(tok_rows, SDT_F32, 2, R, D, 0, 0);
    CHECK(t5_encoder_token_rows(&m, be, ids, R, &trows, &err), "token rows: %s", err.message);
    t5_override same[2] = {{0, 2, 0}, {1, 1, 1}};
    sdt_tensor tok = mt_tensor(tokens, SDT_I32, 2, B, T, 0, 0);
    t5_inputs in_ov = {&tok, NULL, &trows, same, 2, SDT_F32}, in_plain = {&tok, NULL, NULL, NULL, 0, SDT_F32};
    sdt_arena ar;
    t5_acts acts;
    CHECK(sdt_arena_init(&ar, be, 8u << 20), "arena");
    CHECK(t5_encoder_forward(&m, be, &ar, &in_ov, &acts, &err), "forward: %s", err.message);
    memcpy(o1, acts.out.data, sizeof(float) * B * T * D);
    sdt_arena_rewind(&ar, 0);
    CHECK(t5_encoder_forward(&m, be, &ar, &in_plain, &acts, &err), "forward: %s", err.message);
    CHECK(memcmp(o1, acts.out.data, sizeof(float) * B * T * D) == 0,
          "an override with the token's own row must change nothing");
    /* the bf16 file (bf16 weights, f32 activations) within bf16's rounding of the f32 one */
    sdt_arena_rewind(&ar, 0);
    CHECK(t5_encoder_forward(&m16, be, &ar, &in_plain, &acts, &err), "bf16 forward: %s", err.message);
    double num = 0, den = 0;
    for (int64_t i = 0; i < (int64_t)B * T * D; i++) {
        double d = (double)((float *)acts.out.data)[i] - o1[i];
        num += d * d, den += (double)o1[i] * o1[i];
    }
    printf("bf16 file vs f32 file: relative rms difference %.3g\n", sqrt(num / den));
    CHECK(sqrt(num / den) < 3e-2 && sqrt(num / den) > 0, "bf16 weights: relative rms difference %.3g", sqrt(num / den));
    /* bad inputs */
    int32_t bad_len[B] = {T + 1, 3};
    t5_inputs in_bad = {&tok, bad_len, NULL, NULL, 0, SDT_F32};
    sdt_arena_rewind(&ar, 0);
    CHECK(!t5_encoder_forward(&m, be, &ar, &in_bad, &acts, &err) && strstr(err.message, "length 12"),
          "a length past the sequence must be refused: \"%s\"", err.message);
    sdt_arena_release(&ar);

    check_refusals(w, &cfg);
    sdt_weights_close(w);
    sdt_weights_close(w16);
    unlink(path);
    unlink(path16);
    free(dout), free(rows), free(o1), free(o2), free(tok_rows);
    be->destroy(be);
    return sdt_test_finish("t5_encoder");
}
