/* test_real_files.c - checkpoints and files as users have them (issue 9):
 *  - a lone single-file checkpoint (tiny, with CLIP's 49408-token vocabulary) and no tokenizer
 *    folder anywhere: create-embedding and training use the CLIP tokenizer built into the
 *    plugin and say so; a tokenizer folder given by the host still wins; a lone checkpoint
 *    whose vocabulary the built-in tokenizer does not fit is refused with the fix;
 *  - a dataset of WebP images (the demo pictures re-encoded, lossy and lossless) trains;
 *  - an inpainting model (a tiny UNet taking 9 channels) trains, previews included, as A1111
 *    trains on one (the extra channels: a full mask and the latent of a grey image);
 *  - the prediction type through the ABI (1.3): an SD 2.x-shaped model whose UNet answers like a
 *    v-model is detected as one and trains, the log saying so; prediction_type EPSILON overrides
 *    it; a 1.2 host's config (no prediction_type) with v_prediction still means v; v_prediction
 *    beside EPSILON, and a prediction_type out of range, are refused naming the fields;
 *  - A1111's <stem>.yaml beside the checkpoint: parameterization "v" on a model whose UNet answers
 *    like an epsilon model trains as v, the log naming the yaml (the probe does not decide);
 *    "eps" likewise; prediction_type V still wins over it; a yaml that cannot be parsed, and one
 *    whose in_channels contradicts the UNet, are refused naming the file, the line, the field. */
#include <webp/encode.h>

#include "data/image_io.h"
#include "trainer_fixture.h"

/* sdt-make-checkpoint --config tiny --out path plus extra arguments; false when it fails. */
static bool make_checkpoint(const trainer_env *env, const char *path, const char *extra)
{
    char cmd[3 * FX_PATH];
    snprintf(cmd, sizeof cmd, "'%s' --config tiny --seed 7 --out '%s' %s >/dev/null", env->make_checkpoint, path,
             extra);
    int rc = system(cmd);
    CHECK(rc == 0, "%s failed (%d)", cmd, rc);
    return rc == 0;
}

/* create_embedding from model into dir; the log goes to rec. */
static sdt_status create_embedding(const trainer_env *env, fx_recorder *rec, const char *model, const char *tokenizer,
                                   const char *dir, const char *name, char *out, char *error)
{
    sdt_ti_trainer *t = fx_create(env, rec);
    if (!t) return SDT_STATUS_INTERNAL;
    sdt_embedding_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.struct_size = sizeof spec;
    spec.vectors_per_token = 2;
    spec.name = name;
    spec.init_text = "a photo of a cat";
    spec.model_path = model;
    spec.tokenizer_path = tokenizer;
    spec.output_dir = dir;
    spec.overwrite = true;
    sdt_status st = env->ti->create_embedding(t, &spec, out, FX_PATH, NULL);
    snprintf(error, 2048, "%s", fx_last_error(env, t));
    env->ti->destroy(t);
    return st;
}

/* A tiny checkpoint <tmp>/<name>/<name>-model.safetensors made with extra arguments, alone in its
 * folder, and an embedding <name> created from it there; false when either fails. */
static bool lone_model_and_embedding(const trainer_env *env, const char *name, const char *extra, fx_recorder *rec,
                                     char *dir, char *model, char *emb)
{
    char file[256], error[2048];
    fx_subdir(env, dir, name);
    snprintf(file, sizeof file, "%s-model.safetensors", name);
    fx_path(model, dir, file);
    if (!make_checkpoint(env, model, extra)) return false;
    sdt_status st = create_embedding(env, rec, model, NULL, dir, name, emb, error);
    CHECK(st == SDT_STATUS_OK, "create_embedding from %s: %s", model, error);
    return st == SDT_STATUS_OK;
}

static void check_lone_checkpoint(const trainer_env *env)
{
    printf("-- a lone single-file checkpoint, no tokenizer folder\n");
    char dir[FX_PATH], model[FX_PATH], emb[FX_PATH], log[FX_PATH], error[2048];
    fx_recorder rec;
    if (!lone_model_and_embedding(env, "lone", "--clip-vocab 49408 --dtype f16", &rec, dir, model, emb)) return;
    sdt_status st;
    CHECK(strstr(rec.log, "built into the plugin") != NULL, "create_embedding says it used the built-in tokenizer:\n%s",
          rec.log);
    int64_t n0;
    float *initial = fx_read_embedding(emb, &n0);
    CHECK(initial && n0 == 2 * 128, "the new embedding has 2 x 128 values (got %lld)", (long long)n0);
    sdt_ti_config c;
    fx_config(env, &c, emb, NULL, fx_path(log, dir, "log"), 3);
    c.model_path = model;
    sdt_ti_trainer *t = fx_create(env, &rec);
    st = fx_prepare_run(env, t, &c);
    CHECK(st == SDT_STATUS_OK, "training on a lone checkpoint: %s", fx_last_error(env, t));
    CHECK(strstr(rec.log, "built into the plugin") != NULL, "training says it used the built-in tokenizer");
    CHECK(rec.n_steps == 3, "3 steps published (got %d)", rec.n_steps);
    env->ti->destroy(t);
    CHECK(fx_embedding_check(emb, initial, n0, true), "the trained embedding is finite and moved");
    free(initial);

    printf("-- a tokenizer folder given still wins\n");
    char given[FX_PATH];
    fx_path(given, env->model, "tokenizer");
    st = create_embedding(env, &rec, model, given, dir, "given", emb, error);
    CHECK(st == SDT_STATUS_OK, "create_embedding with a given tokenizer: %s", error);
    CHECK(strstr(rec.log, "built into the plugin") == NULL, "a given tokenizer is used, not the built-in one:\n%s",
          rec.log);
}

static void check_vocab_mismatch(const trainer_env *env)
{
    printf("-- a lone checkpoint the built-in tokenizer does not fit\n");
    char dir[FX_PATH], model[FX_PATH], emb[FX_PATH], error[2048];
    fx_subdir(env, dir, "mismatch");
    fx_path(model, dir, "tiny.safetensors");
    if (!make_checkpoint(env, model, "")) return;
    fx_recorder rec;
    sdt_status st = create_embedding(env, &rec, model, NULL, dir, "mismatch", emb, error);
    printf("  status %d: %s\n", (int)st, error);
    CHECK(st != SDT_STATUS_OK && strstr(error, model) && strstr(error, "built-in CLIP tokenizer") &&
              strstr(error, "tokenizer path"),
          "refused with a sentence naming the model and the fix: %s", error);
}

static void check_webp_dataset(const trainer_env *env)
{
    printf("-- a WebP dataset\n");
    char dir[FX_PATH], data[FX_PATH], emb[FX_PATH], log[FX_PATH];
    fx_subdir(env, dir, "webp");
    fx_subdir(env, data, "webp/dataset");
    const char *stems[3] = {"demo_001", "demo_002", "demo_003"};
    for (int i = 0; i < 3; i++) {
        char png[FX_PATH], out[FX_PATH];
        sdt_error err = {0};
        snprintf(png, sizeof png, "%.3900s/%s.png", env->dataset, stems[i]);
        int w = 0, h = 0;
        uint8_t *rgb = sdt_image_decode(png, 3, 1 << 24, &w, &h, &err);
        CHECK(rgb != NULL, "decode %s: %s", png, err.message);
        if (!rgb) return;
        uint8_t *enc = NULL;
        size_t n = i % 2 ? WebPEncodeRGB(rgb, w, h, w * 3, 90, &enc) : WebPEncodeLosslessRGB(rgb, w, h, w * 3, &enc);
        snprintf(out, sizeof out, "%.3900s/%s.webp", data, stems[i]);
        CHECK(n > 0 && fx_write_file(out, enc, n), "write %s", out);
        WebPFree(enc);
        free(rgb);
        snprintf(png, sizeof png, "%.3900s/%s.txt", env->dataset, stems[i]);
        snprintf(out, sizeof out, "%.3900s/%s.txt", data, stems[i]);
        CHECK(fx_copy_file(png, out), "copy the caption %s", png);
    }
    if (!fx_make_embedding(env, dir, "webp", 2, "orange ring", emb)) return;
    int64_t n0;
    float *initial = fx_read_embedding(emb, &n0);
    sdt_ti_config c;
    fx_config(env, &c, emb, data, fx_path(log, dir, "log"), 3);
    fx_recorder rec;
    sdt_ti_trainer *t = fx_create(env, &rec);
    sdt_status st = fx_prepare_run(env, t, &c);
    CHECK(st == SDT_STATUS_OK, "training on WebP images: %s", fx_last_error(env, t));
    CHECK(strstr(rec.log, "encoded 3 training images") != NULL, "all 3 WebP images were used:\n%s", rec.log);
    env->ti->destroy(t);
    CHECK(fx_embedding_check(emb, initial, n0, true), "the embedding trained on WebP images moved");
    free(initial);
}

static void check_inpainting(const trainer_env *env)
{
    printf("-- an inpainting model (9-channel UNet)\n");
    char dir[FX_PATH], model[FX_PATH], emb[FX_PATH], log[FX_PATH];
    fx_recorder rec;
    if (!lone_model_and_embedding(env, "inpaint", "--clip-vocab 49408 --unet-in-channels 9", &rec, dir, model, emb))
        return;
    sdt_status st;
    int64_t n0;
    float *initial = fx_read_embedding(emb, &n0);
    sdt_ti_config c;
    fx_config(env, &c, emb, NULL, fx_path(log, dir, "log"), 4);
    c.model_path = model;
    c.preview_every = 2;
    sdt_ti_trainer *t = fx_create(env, &rec);
    st = fx_prepare_run(env, t, &c);
    CHECK(st == SDT_STATUS_OK, "training on an inpainting model: %s", fx_last_error(env, t));
    CHECK(rec.n_steps == 4, "4 steps published (got %d)", rec.n_steps);
    CHECK(rec.saved[SDT_FILE_PREVIEW] >= 2, "previews were written (%d)", rec.saved[SDT_FILE_PREVIEW]);
    env->ti->destroy(t);
    CHECK(fx_embedding_check(emb, initial, n0, true), "the embedding trained on an inpainting model moved");
    free(initial);
}

/* prepare only; the status, the log in rec. */
static sdt_status prepare_only(const trainer_env *env, fx_recorder *rec, const sdt_ti_config *c, char *error)
{
    sdt_ti_trainer *t = fx_create(env, rec);
    sdt_prepare_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    sdt_status st = env->ti->prepare(t, c, &info);
    snprintf(error, 2048, "%s", fx_last_error(env, t));
    env->ti->destroy(t);
    return st;
}

static void check_prediction_type(const trainer_env *env)
{
    printf("-- the prediction type: detected, overridden both ways, an old host's v_prediction\n");
    char dir[FX_PATH], model[FX_PATH], emb[FX_PATH], log[FX_PATH], error[2048];
    fx_recorder rec;
    if (!lone_model_and_embedding(env, "vmodel", "--clip-vocab 49408 --openclip --unet-output -1.5", &rec, dir, model,
                                  emb))
        return;
    sdt_ti_config c;
    fx_config(env, &c, emb, NULL, fx_path(log, dir, "log"), 2);
    c.model_path = model;
    sdt_ti_trainer *t = fx_create(env, &rec);
    sdt_status st = fx_prepare_run(env, t, &c);
    CHECK(st == SDT_STATUS_OK, "training on a detected v-model: %s", fx_last_error(env, t));
    CHECK(strstr(rec.log, "predicts v (detected") != NULL, "the log says v was detected:\n%s", rec.log);
    env->ti->destroy(t);

    c.max_steps = 4; /* the embedding holds 2 steps now */
    c.prediction_type = SDT_PREDICTION_EPSILON;
    st = prepare_only(env, &rec, &c, error);
    CHECK(st == SDT_STATUS_OK && strstr(rec.log, "predicts the noise (epsilon) (as asked)"),
          "prediction_type EPSILON overrides the probe (%d: %s):\n%s", (int)st, error, rec.log);

    sdt_ti_config old = c; /* a 1.2 host: its struct ends before prediction_type */
    old.struct_size = (uint32_t)offsetof(sdt_ti_config, prediction_type);
    old.prediction_type = 0x55555555u; /* past its struct_size: never read */
    old.v_prediction = true;
    st = prepare_only(env, &rec, &old, error);
    CHECK(st == SDT_STATUS_OK && strstr(rec.log, "predicts v (as asked)"), "a 1.2 host's v_prediction means v (%d: %s)",
          (int)st, error);

    c.v_prediction = true;
    st = prepare_only(env, &rec, &c, error);
    CHECK(st == SDT_STATUS_VALIDATION && strstr(error, "v_prediction") && strstr(error, "prediction_type"),
          "v_prediction beside EPSILON is refused naming both: %s", error);
    c.v_prediction = false;
    c.prediction_type = 7;
    st = prepare_only(env, &rec, &c, error);
    CHECK(st == SDT_STATUS_VALIDATION && strstr(error, "config.prediction_type"), "prediction_type 7 is refused: %s",
          error);
}

/* Writes text to the .yaml A1111 reads beside model (foo.safetensors: foo.yaml). */
static void write_yaml_beside(const char *model, const char *text)
{
    char path[FX_PATH];
    snprintf(path, sizeof path, "%.*s.yaml", (int)(strlen(model) - strlen(".safetensors")), model);
    CHECK(fx_write_file(path, text, strlen(text)), "write %s", path);
}

static void check_checkpoint_yaml(const trainer_env *env)
{
    printf("-- A1111's <stem>.yaml beside the checkpoint\n");
    char dir[FX_PATH], model[FX_PATH], emb[FX_PATH], log[FX_PATH], yaml[FX_PATH], error[2048];
    fx_recorder rec;
    /* an SD 2.x-shaped model whose UNet returns its input: the probe alone would say epsilon */
    if (!lone_model_and_embedding(env, "yamlv", "--clip-vocab 49408 --openclip --unet-output 0.5", &rec, dir, model,
                                  emb))
        return;
    fx_path(yaml, dir, "yamlv-model.yaml");
    write_yaml_beside(model, "model:\n  params:\n    parameterization: \"v\" # a 768-v model\n"
                             "    unet_config:\n      params:\n        in_channels: 4\n");
    sdt_ti_config c;
    fx_config(env, &c, emb, NULL, fx_path(log, dir, "log"), 2);
    c.model_path = model;
    sdt_ti_trainer *t = fx_create(env, &rec);
    sdt_status st = fx_prepare_run(env, t, &c);
    CHECK(st == SDT_STATUS_OK && rec.n_steps == 2, "training with parameterization v beside the model: %s",
          fx_last_error(env, t));
    CHECK(strstr(rec.log, "predicts v (") && strstr(rec.log, yaml) && !strstr(rec.log, "detected"),
          "the log says v, naming %s, and nothing was detected:\n%s", yaml, rec.log);
    env->ti->destroy(t);

    c.max_steps = 4; /* the embedding holds 2 steps now */
    write_yaml_beside(model, "model:\n  params:\n    parameterization: eps\n");
    st = prepare_only(env, &rec, &c, error);
    CHECK(st == SDT_STATUS_OK && strstr(rec.log, "predicts the noise (epsilon) (") && strstr(rec.log, yaml),
          "parameterization eps: epsilon, naming the yaml (%d: %s):\n%s", (int)st, error, rec.log);
    c.prediction_type = SDT_PREDICTION_V;
    st = prepare_only(env, &rec, &c, error);
    CHECK(st == SDT_STATUS_OK && strstr(rec.log, "predicts v (as asked, over ") && strstr(rec.log, yaml) &&
              strstr(rec.log, "which says eps)"),
          "prediction_type V wins over the yaml, the log naming it (%d: %s):\n%s", (int)st, error, rec.log);
    c.prediction_type = SDT_PREDICTION_AUTO;

    write_yaml_beside(model, "model:\n  params:\n\tparameterization: v\n");
    st = prepare_only(env, &rec, &c, error);
    CHECK(st == SDT_STATUS_BAD_FORMAT && strstr(error, yaml) && strstr(error, "line 3") && strstr(error, "tab"),
          "a yaml that cannot be parsed is refused naming it and the line (%d): %s", (int)st, error);
    printf("   %s\n", error);
    write_yaml_beside(model, "model:\n  params:\n    unet_config:\n      params:\n        in_channels: 9\n");
    st = prepare_only(env, &rec, &c, error);
    CHECK(st == SDT_STATUS_BAD_FORMAT && strstr(error, yaml) && strstr(error, "line 5") &&
              strstr(error, "in_channels is 9") && strstr(error, "is 4") &&
              strstr(error, "config that came with this checkpoint"),
          "in_channels 9 beside a 4-channel UNet is refused with both values and the fix (%d): %s", (int)st, error);
    printf("   %s\n", error);
}

int main(int argc, char **argv)
{
    trainer_env env;
    if (!trainer_env_open(&env, argc, argv, "test_real_files")) return trainer_env_abandon(&env);
    if (!env.make_checkpoint) {
        printf("test_real_files: sdt-make-checkpoint is not built; skipping\n");
        trainer_env_close(&env);
        return SDT_TEST_SKIP;
    }
    check_lone_checkpoint(&env);
    check_vocab_mismatch(&env);
    check_webp_dataset(&env);
    check_inpainting(&env);
    check_prediction_type(&env);
    check_checkpoint_yaml(&env);
    trainer_env_close(&env);
    return sdt_test_finish("test_real_files");
}
