/* test_faults_optim.c - optimisation faults of issue 5, through the ABI.
 *  1. A huge learning rate ("1e6"): AdamW moves each element by about the learning rate, so the
 *     vector leaves the scale of prompt vectors at once (in fp32 nothing turns NaN: the loss just
 *     stalls, which is why the trainer watches the embedding's norm). The run stops at step 1
 *     with SDT_STATUS_NUMERICAL and a sentence that blames the optimisation (learning rate,
 *     warm-up, clipping), the step is undone: the embedding file keeps its vectors and the state
 *     file has zero AdamW moments and zero optimizer steps. fp32 and fp16.
 *  2. fp16 with an initial loss scale of 2^40: the scaled gradients overflow, each such step is
 *     skipped and the scale halves (exactly one halving per skipped step, the sequence
 *     2^39, 2^38, ... until the gradients fit); training then proceeds in fp16 (no fallback: the
 *     scale never reaches its minimum), the loss is finite on every step, the embedding moves
 *     and stays finite. */
#include <cjson/cJSON.h>

#include "trainer_fixture.h"

static void check_huge_lr(const trainer_env *env, sdt_precision precision)
{
    const char *tag = precision == SDT_PRECISION_FP16 ? "fp16" : "fp32";
    printf("-- learning rate 1e6, %s\n", tag);
    char dir[FX_PATH], log[FX_PATH], emb[FX_PATH], name[32], buf[64];
    snprintf(name, sizeof name, "hugelr-%s", tag);
    snprintf(buf, sizeof buf, "%s-emb", name);
    fx_subdir(env, dir, buf);
    snprintf(buf, sizeof buf, "%s-log", name);
    fx_subdir(env, log, buf);
    if (!fx_make_embedding(env, dir, name, 2, "ring", emb)) return;
    int64_t n0;
    float *initial = fx_read_embedding(emb, &n0);
    fx_recorder rec;
    sdt_ti_trainer *t = fx_create(env, &rec);
    sdt_ti_config c;
    fx_config(env, &c, emb, NULL, log, 10);
    c.learn_rate = "1e6";
    c.precision = precision;
    sdt_status st = fx_prepare_run(env, t, &c);
    const char *msg = fx_last_error(env, t);
    printf("  status %d after %d steps: %s\n", (int)st, rec.n_steps, msg);
    CHECK(st == SDT_STATUS_NUMERICAL, "%s: stops with SDT_STATUS_NUMERICAL (got %d)", tag, (int)st);
    CHECK(strstr(msg, "learning rate") && strstr(msg, "warm-up") && strstr(msg, "clip") &&
              strstr(msg, "not the data") && strstr(msg, "1e+06"),
          "%s: the sentence points at the optimisation and names the rate: %s", tag, msg);
    CHECK(rec.n_steps == 0, "%s: no step was published (%d)", tag, rec.n_steps);
    CHECK(fx_embedding_check(emb, initial, n0, false), "%s: the embedding file keeps its vectors", tag);
    const char *state = rec.last_saved[SDT_FILE_TRAINING_STATE];
    int64_t nm;
    float *m = state[0] ? fx_read_tensor(state, "adamw_m", &nm) : NULL;
    bool zero = m != NULL;
    for (int64_t i = 0; m && i < nm; i++) zero &= m[i] == 0.0f;
    CHECK(zero, "%s: the undone step left no AdamW moment in the saved state", tag);
    char *training = state[0] ? fx_read_metadata(state, "training") : NULL;
    cJSON *j = training ? cJSON_Parse(training) : NULL;
    CHECK(j && cJSON_GetNumberValue(cJSON_GetObjectItem(j, "optimizer_steps")) == 0 &&
              cJSON_GetNumberValue(cJSON_GetObjectItem(j, "step")) == 0,
          "%s: the state is at step 0: %s", tag, training ? training : "-");
    cJSON_Delete(j);
    free(training);
    free(m);
    free(initial);
    env->ti->destroy(t);
}

static void check_scale_overflow(const trainer_env *env)
{
    printf("-- fp16, initial loss scale 2^40\n");
    char dir[FX_PATH], log[FX_PATH], emb[FX_PATH];
    fx_subdir(env, dir, "scale40-emb");
    fx_subdir(env, log, "scale40-log");
    if (!fx_make_embedding(env, dir, "scale40", 1, "ring", emb)) return;
    int64_t n0;
    float *initial = fx_read_embedding(emb, &n0);
    fx_recorder rec;
    sdt_ti_trainer *t = fx_create(env, &rec);
    sdt_ti_config c;
    fx_config(env, &c, emb, NULL, log, 24);
    c.precision = SDT_PRECISION_FP16;
    c.loss_scale_init = ldexp(1.0, 40);
    sdt_status st = fx_prepare_run(env, t, &c);
    CHECK(st == SDT_STATUS_OK, "the run finishes: %s", fx_last_error(env, t));
    printf("  scale after each step:");
    double scale = ldexp(1.0, 40);
    int64_t skipped = 0, first_clean = -1;
    for (int i = 0; i < rec.n_steps; i++) {
        const fx_step *s = &rec.steps[i];
        printf(" %g%s", log2(s->loss_scale), s->skipped > skipped ? "*" : "");
        bool overflowed = s->skipped > skipped;
        CHECK(s->skipped - skipped <= 1, "step %lld: at most one skip per step", (long long)s->step);
        CHECK(s->loss_scale == (overflowed ? scale / 2 : scale),
              "step %lld: the scale halves exactly on an overflow (%g -> %g, overflow %d)", (long long)s->step, scale,
              s->loss_scale, overflowed);
        CHECK(isfinite(s->loss) && !s->fallback && s->precision == SDT_PRECISION_FP16,
              "step %lld: finite loss, fp16, no fallback", (long long)s->step);
        if (!overflowed && first_clean < 0) first_clean = s->step;
        if (first_clean < 0)
            CHECK(s->loss_scale == ldexp(1.0, 40 - (int)s->step), "step %lld: scale 2^%d while overflowing",
                  (long long)s->step, 40 - (int)s->step);
        scale = s->loss_scale;
        skipped = s->skipped;
    }
    printf("  (* = overflow, step skipped)\n  first clean step %lld, %lld skipped of %d\n", (long long)first_clean,
           (long long)skipped, rec.n_steps);
    CHECK(rec.n_steps == 24 && first_clean > 1 && skipped < rec.n_steps, "overflow first, then clean steps");
    CHECK(scale < ldexp(1.0, 40) && scale > 1, "the scale settled between 1 and 2^40 (%g)", scale);
    CHECK(fx_embedding_check(emb, initial, n0, true), "the embedding trained and is finite");
    free(initial);
    env->ti->destroy(t);
}

int main(int argc, char **argv)
{
    trainer_env env;
    if (!trainer_env_open(&env, argc, argv, "trainer_faults_optim")) return trainer_env_abandon(&env);
    check_huge_lr(&env, SDT_PRECISION_FP32);
    check_huge_lr(&env, SDT_PRECISION_FP16);
    check_scale_overflow(&env);
    trainer_env_close(&env);
    return sdt_test_finish("trainer_faults_optim");
}
