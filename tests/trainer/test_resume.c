/* test_resume.c - resume is bit-identical on the CPU: N steps in one run equal k steps, a
 * save_state, and N-k steps prepared with resume_state_path. Compared: the final embedding
 * bytes, the AdamW moments of the state files, the per-step losses after the resume point and
 * (fp16) the scaler state. Batch 2, gradient accumulation 2, latent sampling "random", tag
 * shuffle and drop-out, and an LR schedule that changes between k and N, so the data order,
 * every RNG stream and the schedule position must all come back. Run for fp32 and fp16. */
#include <cjson/cJSON.h>

#include "trainer_fixture.h"

#define N_STEPS 6
#define K_STEPS 4

typedef struct run_result {
    char embedding[FX_PATH]; /* the trained embedding file */
    char state[FX_PATH];     /* the full-state checkpoint written at the end */
    fx_step steps[FX_MAX_STEPS];
    int n_steps;
} run_result;

static void resume_config(const trainer_env *env, sdt_ti_config *c, const char *embedding, const char *log_dir,
                          int64_t max_steps, sdt_precision precision)
{
    fx_config(env, c, embedding, NULL, log_dir, max_steps);
    c->batch_size = 2;
    c->grad_accum_steps = 2;
    c->latent_sampling = SDT_LATENT_RANDOM;
    c->shuffle_tags = true;
    c->tag_dropout = 0.3;
    c->learn_rate = "0.01:3, 0.004";
    c->precision = precision;
    c->loss_scale_init = 1024; /* small enough that fp16 gradients do not overflow at once */
}

/* prepare (optionally resuming) + run; the state file saved at the end lands in r->state. */
static bool train(const trainer_env *env, const sdt_ti_config *c, run_result *r)
{
    fx_recorder rec;
    sdt_ti_trainer *t = fx_create(env, &rec);
    if (!t) return false;
    sdt_status st = fx_prepare_run(env, t, c);
    CHECK(st == SDT_STATUS_OK, "training %s to %lld steps: %s", c->embedding_path, (long long)c->max_steps,
          fx_last_error(env, t));
    if (st == SDT_STATUS_OK) {
        if (snprintf(r->state, sizeof r->state, "%s.saved", rec.last_saved[SDT_FILE_TRAINING_STATE]) >= FX_PATH)
            return false;
        CHECK(env->ti->save_state(t, r->state) == SDT_STATUS_OK, "save_state: %s", fx_last_error(env, t));
        snprintf(r->embedding, sizeof r->embedding, "%s", rec.last_saved[SDT_FILE_EMBEDDING]);
        memcpy(r->steps, rec.steps, sizeof rec.steps);
        r->n_steps = rec.n_steps;
    }
    env->ti->destroy(t);
    return st == SDT_STATUS_OK;
}

static bool same_tensor(const char *a, const char *b, const char *name)
{
    int64_t na, nb;
    float *x = fx_read_tensor(a, name, &na), *y = fx_read_tensor(b, name, &nb);
    bool same = x && y && na == nb && na > 0 && memcmp(x, y, (size_t)na * sizeof(float)) == 0;
    int64_t first = -1;
    for (int64_t i = 0; x && y && na == nb && i < na && first < 0; i++)
        if (memcmp(&x[i], &y[i], sizeof(float)) != 0) first = i;
    if (!same && first >= 0)
        printf("  %s differs first at element %lld: %.9g vs %.9g\n", name, (long long)first, x[first], y[first]);
    free(x);
    free(y);
    return same;
}

/* The "training" JSON of a state file, parsed. */
static cJSON *state_json(const char *path)
{
    char *text = fx_read_metadata(path, "training");
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    CHECK(j != NULL, "%s: no training metadata", path);
    return j;
}

static void check_resume(const trainer_env *env, sdt_precision precision)
{
    const char *tag = precision == SDT_PRECISION_FP16 ? "fp16" : "fp32";
    printf("-- resume, %s: %d steps vs %d + %d\n", tag, N_STEPS, K_STEPS, N_STEPS - K_STEPS);
    char dir_a[FX_PATH], dir_b[FX_PATH], name[64], log_a[FX_PATH], log_b1[FX_PATH], log_b2[FX_PATH], emb_a[FX_PATH],
        emb_b[FX_PATH], buf[128];
    snprintf(name, sizeof name, "resume-%s", tag);
    snprintf(buf, sizeof buf, "%s-a", tag);
    fx_subdir(env, dir_a, buf);
    snprintf(buf, sizeof buf, "%s-b", tag);
    fx_subdir(env, dir_b, buf);
    snprintf(buf, sizeof buf, "%s-log-a", tag);
    fx_subdir(env, log_a, buf);
    snprintf(buf, sizeof buf, "%s-log-b1", tag);
    fx_subdir(env, log_b1, buf);
    snprintf(buf, sizeof buf, "%s-log-b2", tag);
    fx_subdir(env, log_b2, buf);
    if (!fx_make_embedding(env, dir_a, name, 2, "ring", emb_a)) return;
    if (snprintf(emb_b, sizeof emb_b, "%s/%s.safetensors", dir_b, name) >= FX_PATH) return;
    CHECK(fx_copy_file(emb_a, emb_b), "copy the embedding");
    int64_t n0;
    float *initial = fx_read_embedding(emb_a, &n0);

    sdt_ti_config c;
    run_result whole, first, rest;
    memset(&whole, 0, sizeof whole);
    memset(&first, 0, sizeof first);
    memset(&rest, 0, sizeof rest);
    resume_config(env, &c, emb_a, log_a, N_STEPS, precision);
    bool ok = train(env, &c, &whole);
    resume_config(env, &c, emb_b, log_b1, K_STEPS, precision);
    ok = ok && train(env, &c, &first);
    resume_config(env, &c, emb_b, log_b2, N_STEPS, precision);
    c.resume_state_path = first.state;
    ok = ok && train(env, &c, &rest);
    if (!ok) {
        free(initial);
        return;
    }

    /* The runs did something, and the halves are not trivially equal. */
    int64_t n;
    float *final_whole = fx_read_embedding(whole.embedding, &n);
    CHECK(final_whole && n == n0 && memcmp(final_whole, initial, (size_t)n * sizeof(float)) != 0,
          "%s: training changed the embedding", tag);
    CHECK(!same_tensor(first.state, whole.state, "emb_params"), "%s: %d steps differ from %d", tag, K_STEPS, N_STEPS);
    CHECK(whole.n_steps == N_STEPS && first.n_steps == K_STEPS && rest.n_steps == N_STEPS - K_STEPS,
          "%s: step counts %d, %d, %d", tag, whole.n_steps, first.n_steps, rest.n_steps);
    CHECK(rest.n_steps > 0 && rest.steps[0].step == K_STEPS + 1, "%s: the resumed run starts at step %d", tag,
          K_STEPS + 1);

    /* Bit for bit: embedding bytes, moments, losses, learning rates, scales. */
    CHECK(same_tensor(whole.embedding, rest.embedding, "emb_params"), "%s: final embeddings differ", tag);
    CHECK(same_tensor(whole.state, rest.state, "emb_params"), "%s: state embeddings differ", tag);
    CHECK(same_tensor(whole.state, rest.state, "adamw_m"), "%s: AdamW first moments differ", tag);
    CHECK(same_tensor(whole.state, rest.state, "adamw_v"), "%s: AdamW second moments differ", tag);
    for (int i = 0; i < rest.n_steps && K_STEPS + i < whole.n_steps; i++) {
        const fx_step *a = &whole.steps[K_STEPS + i], *b = &rest.steps[i];
        CHECK(a->step == b->step && memcmp(&a->loss, &b->loss, sizeof a->loss) == 0 && a->learn_rate == b->learn_rate &&
                  a->loss_scale == b->loss_scale && memcmp(&a->grad_norm, &b->grad_norm, sizeof a->grad_norm) == 0,
              "%s: step %lld: loss %.17g vs %.17g, lr %g vs %g, scale %g vs %g, norm %.17g vs %.17g", tag,
              (long long)a->step, a->loss, b->loss, a->learn_rate, b->learn_rate, a->loss_scale, b->loss_scale,
              a->grad_norm, b->grad_norm);
        printf("  step %lld loss %.9g lr %g scale %g\n", (long long)a->step, a->loss, a->learn_rate, a->loss_scale);
    }
    CHECK(whole.steps[N_STEPS - 1].learn_rate == 0.004 && whole.steps[0].learn_rate == 0.01,
          "%s: the schedule changed within the run (%g -> %g)", tag, whole.steps[0].learn_rate,
          whole.steps[N_STEPS - 1].learn_rate);

    cJSON *jw = state_json(whole.state), *jr = state_json(rest.state);
    if (jw && jr) {
        const char *keys[] = {"step", "optimizer_steps", "data_epoch", "data_position", "skipped"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(jw, keys[i])) ==
                      cJSON_GetNumberValue(cJSON_GetObjectItem(jr, keys[i])),
                  "%s: state '%s' differs", tag, keys[i]);
        cJSON *sw = cJSON_GetObjectItem(jw, "scaler"), *sr = cJSON_GetObjectItem(jr, "scaler");
        if (precision == SDT_PRECISION_FP16) {
            CHECK(sw && sr, "%s: the state carries the scaler", tag);
            if (sw && sr) {
                double scale_w = cJSON_GetNumberValue(cJSON_GetObjectItem(sw, "scale"));
                double gt_w = cJSON_GetNumberValue(cJSON_GetObjectItem(sw, "growth_tracker"));
                CHECK(scale_w == cJSON_GetNumberValue(cJSON_GetObjectItem(sr, "scale")) &&
                          gt_w == cJSON_GetNumberValue(cJSON_GetObjectItem(sr, "growth_tracker")),
                      "%s: scaler state differs", tag);
                /* the growth tracker counts clean steps: it must have carried across the resume */
                printf("  scaler: scale %g, growth tracker %g\n", scale_w, gt_w);
                CHECK(gt_w + (double)whole.steps[N_STEPS - 1].skipped == N_STEPS || scale_w != 1024,
                      "%s: growth tracker %g after %d steps", tag, gt_w, N_STEPS);
            }
        } else {
            CHECK(!sw && !sr, "%s: no scaler in an fp32 state", tag);
        }
    }
    cJSON_Delete(jw);
    cJSON_Delete(jr);
    free(final_whole);
    free(initial);
}

/* A resume after the fp32 fallback fired (a NaN pixel in one image, fp16, batch 1): the state
 * carries the switch, so the resumed run computes in fp32 at the backed-off learning rate and
 * matches the uninterrupted one bit for bit. */
static void check_resume_after_fallback(const trainer_env *env)
{
    enum { N = 9, K = 7 };
    printf("-- resume after the fp32 fallback: %d steps vs %d + %d\n", N, K, N - K);
    char dir_a[FX_PATH], dir_b[FX_PATH], log_a[FX_PATH], log_b1[FX_PATH], log_b2[FX_PATH], emb_a[FX_PATH],
        emb_b[FX_PATH];
    fx_subdir(env, dir_a, "fb-a");
    fx_subdir(env, dir_b, "fb-b");
    fx_subdir(env, log_a, "fb-log-a");
    fx_subdir(env, log_b1, "fb-log-b1");
    fx_subdir(env, log_b2, "fb-log-b2");
    if (!fx_make_embedding(env, dir_a, "resume-fallback", 1, "ring", emb_a)) return;
    if (snprintf(emb_b, sizeof emb_b, "%s/resume-fallback.safetensors", dir_b) >= FX_PATH) return;
    CHECK(fx_copy_file(emb_a, emb_b), "copy the embedding");
    sdt_ti_config c;
    run_result whole, first, rest;
    memset(&whole, 0, sizeof whole);
    memset(&first, 0, sizeof first);
    memset(&rest, 0, sizeof rest);
    setenv("SDTRAIN_FAULT_NAN_PIXEL", "demo_005.png", 1);
    fx_config(env, &c, emb_a, NULL, log_a, N);
    c.precision = SDT_PRECISION_FP16;
    c.learn_rate = "0.01";
    bool ok = train(env, &c, &whole);
    fx_config(env, &c, emb_b, NULL, log_b1, K);
    c.precision = SDT_PRECISION_FP16;
    c.learn_rate = "0.01";
    ok = ok && train(env, &c, &first);
    fx_config(env, &c, emb_b, NULL, log_b2, N);
    c.precision = SDT_PRECISION_FP16;
    c.learn_rate = "0.01";
    c.resume_state_path = first.state;
    ok = ok && train(env, &c, &rest);
    unsetenv("SDTRAIN_FAULT_NAN_PIXEL");
    if (!ok) return;
    CHECK(first.n_steps == K && first.steps[K - 1].fallback, "the fallback fired within the first %d steps", K);
    for (int i = 0; i < rest.n_steps; i++)
        CHECK(rest.steps[i].fallback && rest.steps[i].precision == SDT_PRECISION_FP32 &&
                  rest.steps[i].learn_rate == 0.005,
              "resumed step %lld: fp32, lr 0.005, fallback recorded (prec %u, lr %g)", (long long)rest.steps[i].step,
              rest.steps[i].precision, rest.steps[i].learn_rate);
    CHECK(same_tensor(whole.embedding, rest.embedding, "emb_params"), "after the fallback: final embeddings differ");
    CHECK(same_tensor(whole.state, rest.state, "adamw_m") && same_tensor(whole.state, rest.state, "adamw_v"),
          "after the fallback: AdamW moments differ");
}

int main(int argc, char **argv)
{
    trainer_env env;
    if (!trainer_env_open(&env, argc, argv, "trainer_resume")) return trainer_env_abandon(&env);
    check_resume(&env, SDT_PRECISION_FP32);
    check_resume(&env, SDT_PRECISION_FP16);
    check_resume_after_fallback(&env);
    trainer_env_close(&env);
    return sdt_test_finish("trainer_resume");
}
