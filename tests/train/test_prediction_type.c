/* test_prediction_type.c - what the model predicts (issue 9), as sd_runtime_open decides it:
 *  - the probe (models/networks/unet/prediction_probe.h) on an SD 2.x-shaped tiny model with random weights
 *    returns mean(UNet(x) - x) for A1111's input (x = 0.5 everywhere [1, 4, 8, 8], t = 999,
 *    context 0.5 [1, 2, C]), checked against the UNet run here on that input;
 *  - constructed pairs (the UNet's last conv zeroed, its bias set: the model returns that value)
 *    pin the decision and A1111's threshold: output 0.5 (= input) and -0.4 are epsilon, -0.6 and
 *    -1.5 are v, in f32 and f16;
 *  - the user's choice wins both ways without probing; SD 1.x models and SD 2.x inpainting
 *    models are never probed (epsilon, as A1111); a diffusers folder's scheduler config wins over
 *    the probe, and its text_encoder/config.json hidden_act "gelu" makes the folder SD 2.x's kind;
 *  - A1111's <stem>.yaml beside a single file decides over the probe (v on an epsilon-like UNet,
 *    eps on a v-like one, absent: eps), the user's choice over it; a yaml whose context_dim,
 *    scale_factor or use_linear_in_transformer contradicts the model is refused naming the field
 *    and both values; a diffusers folder's own configs are not joined by a .yaml beside it;
 *  - the log sentence says which of these decided, and the probe's number. */
#include <cjson/cJSON.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_gen.h"
#include "checkpoint_yaml.h"
#include "prediction_probe.h"
#include "sdt_test.h"
#include "train/sd_runtime.h"

static sdt_backend *be;
static char *dir;

typedef struct model_opts {
    bool sd2_kind;   /* OpenCLIP text encoder, linear projections */
    int in_channels; /* 0: 4 */
    bool constant;   /* the UNet returns `output` everywhere */
    float output;
    bool diffusers;
} model_opts;

static char *make_model(const char *name, model_opts o, uint64_t seed)
{
    sdt_ckpt_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.config = sd_config_preset(SD_FAMILY_TINY);
    spec.dtype = SDT_F32;
    spec.seed = seed;
    spec.perturb_all = true;
    spec.layout = o.diffusers ? SDT_CKPT_DIFFUSERS : SDT_CKPT_LDM;
    if (o.sd2_kind) {
        spec.config.clip.layout = CLIP_LAYOUT_OPENCLIP;
        spec.config.clip.act = SDT_ACT_GELU;
        spec.config.clip.default_skip = 2;
        spec.config.unet.linear_proj = true;
    }
    if (o.in_channels) spec.config.unet.in_channels = o.in_channels;
    spec.unet_output_set = o.constant;
    spec.unet_output = o.output; /* weight scale 0: exactly this value everywhere */
    char *path = g_strdup_printf("%s/%s%s", dir, name, o.diffusers ? "" : ".safetensors");
    sdt_error err = {0};
    CHECK(sdt_ckpt_generate(path, &spec, &err), "generate %s: %s", path, err.message);
    return path;
}

static bool open_rt(sd_runtime *rt, const char *path, sdt_dtype dtype, sd_prediction_choice choice, char *sentence)
{
    sdt_error err = {0};
    bool ok = sd_runtime_open(rt, path, be, dtype, choice, false, &err);
    CHECK(ok, "open %s: %s", path, err.message);
    if (ok) sd_runtime_prediction_sentence(rt, sentence, 512);
    return ok;
}

/* mean(UNet(x) - x) at A1111's probe input, computed here with the UNet directly (f32). */
static double reference_probe(sd_runtime *rt)
{
    const sdt_unet_config *c = sdt_unet_get_config(rt->model.unet);
    int64_t ls[4] = {1, c->in_channels, 8, 8}, cs[3] = {1, 2, c->context_dim}, ts1[1] = {1};
    int64_t n_lat = 4 * 64, n_ctx = 2 * c->context_dim;
    float *lat = malloc(n_lat * sizeof(float)), *ctx = malloc(n_ctx * sizeof(float)), t = 999.0f;
    for (int64_t i = 0; i < n_lat; i++) lat[i] = 0.5f;
    for (int64_t i = 0; i < n_ctx; i++) ctx[i] = 0.5f;
    sdt_tensor l = sdt_tensor_make(lat, SDT_F32, be->device, 4, ls),
               x = sdt_tensor_make(ctx, SDT_F32, be->device, 3, cs);
    sdt_tensor tt = sdt_tensor_make(&t, SDT_F32, be->device, 1, ts1), out;
    sdt_unet_options uo = sdt_unet_options_default();
    uo.for_backward = false;
    size_t bytes = 0;
    sdt_error err = {0};
    sdt_arena a;
    CHECK(sdt_unet_measure(rt->model.unet, be, &uo, 1, 8, 8, 2, false, &bytes, &err) && sdt_arena_init(&a, be, bytes),
          "reference arena: %s", err.message);
    double sum = NAN;
    if (sdt_unet_forward(rt->model.unet, be, &a, &uo, &l, &tt, &x, NULL, &out, &err)) {
        sum = 0;
        for (int64_t i = 0; i < n_lat; i++) sum += ((const float *)out.data)[i] - 0.5;
    }
    CHECK(!isnan(sum), "reference forward: %s", err.message);
    sdt_arena_release(&a);
    free(lat);
    free(ctx);
    return sum / (double)n_lat;
}

static void check_random_model(uint64_t seed)
{
    printf("-- the probe's number on a random SD 2.x-shaped model\n");
    char *path = make_model("random-sd2", (model_opts){.sd2_kind = true}, seed);
    sd_runtime rt;
    char sentence[512];
    if (open_rt(&rt, path, SDT_F32, SD_PREDICTION_AUTO, sentence)) {
        double ref = reference_probe(&rt);
        CHECK(rt.cfg.prediction_source == SD_PREDICTION_FROM_PROBE, "an SD 2.x-shaped model is probed");
        CHECK(fabs(rt.cfg.prediction_probe - ref) <= 1e-5 * (1 + fabs(ref)),
              "the probe is mean(UNet(x) - x) at x = 0.5, t = 999: %.7g vs %.7g here", rt.cfg.prediction_probe, ref);
        CHECK(rt.cfg.unet.v_prediction == (ref < -1.0), "the decision follows the number (%g)", ref);
        sd_runtime_close(&rt);
    }
    g_free(path);
}

static void check_constructed(const char *name, float output, bool v, uint64_t seed)
{
    char *path = make_model(name, (model_opts){.sd2_kind = true, .constant = true, .output = output}, seed);
    const sdt_dtype dtypes[2] = {SDT_F32, SDT_F16};
    for (int d = 0; d < 2; d++) {
        sd_runtime rt;
        char sentence[512];
        if (!open_rt(&rt, path, dtypes[d], SD_PREDICTION_AUTO, sentence)) continue;
        CHECK(rt.cfg.prediction_source == SD_PREDICTION_FROM_PROBE && rt.cfg.unet.v_prediction == v,
              "%s (returns %g, %s): detected %s, want %s", name, (double)output, d ? "f16" : "f32",
              rt.cfg.unet.v_prediction ? "v" : "epsilon", v ? "v" : "epsilon");
        CHECK(fabs(rt.cfg.prediction_probe - (output - 0.5)) < (d ? 2e-3 : 1e-6), "%s: the probe reads %g, want %g",
              name, rt.cfg.prediction_probe, output - 0.5);
        CHECK(strstr(sentence, "detected") && strstr(sentence, v ? "predicts v" : "epsilon"), "%s: the log says: %s",
              name, sentence);
        CHECK(rt.model.cfg.unet.v_prediction == v, "%s: the bound model's config agrees", name);
        sd_runtime_close(&rt);
    }
    g_free(path);
}

static void check_user_choice(uint64_t seed)
{
    printf("-- the user's choice, both ways\n");
    char *vpath = make_model("user-v", (model_opts){.sd2_kind = true, .constant = true, .output = -1.5f}, seed);
    char *epath = make_model("user-eps", (model_opts){.sd2_kind = true, .constant = true, .output = 0.5f}, seed);
    sd_runtime rt;
    char sentence[512];
    if (open_rt(&rt, vpath, SDT_F32, SD_PREDICTION_EPSILON, sentence)) {
        CHECK(!rt.cfg.unet.v_prediction && rt.cfg.prediction_source == SD_PREDICTION_FROM_USER &&
                  rt.cfg.prediction_probe == 0,
              "epsilon asked on a v-like model: epsilon, not probed");
        CHECK(strstr(sentence, "as asked") != NULL, "the log says it was asked: %s", sentence);
        sd_runtime_close(&rt);
    }
    if (open_rt(&rt, epath, SDT_F32, SD_PREDICTION_V, sentence)) {
        CHECK(rt.cfg.unet.v_prediction && rt.cfg.prediction_source == SD_PREDICTION_FROM_USER,
              "v asked on an epsilon-like model: v");
        sd_runtime_close(&rt);
    }
    g_free(vpath);
    g_free(epath);
}

static void check_not_probed(uint64_t seed)
{
    printf("-- SD 1.x and SD 2.x inpainting models are not probed\n");
    char *sd1 = make_model("sd1-vlike", (model_opts){.constant = true, .output = -1.5f}, seed);
    char *inpaint = make_model(
        "sd2-inpaint-vlike", (model_opts){.sd2_kind = true, .in_channels = 9, .constant = true, .output = -1.5f}, seed);
    const char *paths[2] = {sd1, inpaint};
    for (int i = 0; i < 2; i++) {
        sd_runtime rt;
        char sentence[512];
        if (!open_rt(&rt, paths[i], SDT_F32, SD_PREDICTION_AUTO, sentence)) continue;
        CHECK(!rt.cfg.unet.v_prediction && rt.cfg.prediction_source == SD_PREDICTION_FROM_DEFAULT,
              "%s: epsilon by default, not probed", paths[i]);
        CHECK(strstr(sentence, i ? "inpainting" : "SD 1.x") != NULL, "the log says why: %s", sentence);
        sd_runtime_close(&rt);
    }
    g_free(sd1);
    g_free(inpaint);
}

static void set_json(const char *path, const char *key, cJSON *value)
{
    gchar *text = NULL;
    cJSON *j = g_file_get_contents(path, &text, NULL, NULL) ? cJSON_Parse(text) : NULL;
    CHECK(j != NULL, "read %s", path);
    g_free(text);
    if (!j) return;
    cJSON_DeleteItemFromObjectCaseSensitive(j, key);
    cJSON_AddItemToObject(j, key, value);
    char *out = cJSON_Print(j);
    CHECK(g_file_set_contents(path, out, -1, NULL), "write %s", path);
    cJSON_free(out);
    cJSON_Delete(j);
}

static void check_diffusers(uint64_t seed)
{
    printf("-- a diffusers folder: the scheduler config wins over the probe\n");
    char *model = make_model("folder-vlike", (model_opts){.diffusers = true, .constant = true, .output = -1.5f}, seed);
    char *te = g_build_filename(model, "text_encoder", "config.json", NULL);
    char *sched = g_build_filename(model, "scheduler", "scheduler_config.json", NULL);
    set_json(te, "hidden_act", cJSON_CreateString("gelu")); /* SD 2.x's text encoder, by its config alone */
    sd_runtime rt;
    char sentence[512];
    if (open_rt(&rt, model, SDT_F32, SD_PREDICTION_AUTO, sentence)) {
        CHECK(rt.cfg.clip.act == SDT_ACT_GELU, "hidden_act gelu is taken from text_encoder/config.json");
        CHECK(!rt.cfg.unet.v_prediction && rt.cfg.prediction_source == SD_PREDICTION_FROM_CONFIG &&
                  rt.cfg.prediction_probe == 0,
              "prediction_type epsilon in the scheduler config decides; no probe");
        CHECK(strstr(sentence, "scheduler_config.json") != NULL, "the log names the scheduler config: %s", sentence);
        sd_runtime_close(&rt);
    }
    CHECK(g_remove(sched) == 0, "remove %s", sched);
    if (open_rt(&rt, model, SDT_F32, SD_PREDICTION_AUTO, sentence)) {
        CHECK(rt.cfg.unet.v_prediction && rt.cfg.prediction_source == SD_PREDICTION_FROM_PROBE,
              "without a scheduler config the SD 2.x-kind folder is probed: v");
        sd_runtime_close(&rt);
    }
    g_free(te);
    g_free(sched);
    g_free(model);
}

/* An LDM config for the tiny SD 2.x-kind model, with extra lines under model.params. */
static void write_yaml(const char *model, const char *params_lines)
{
    sd_config t = sd_config_preset(SD_FAMILY_TINY);
    char *path = sdt_checkpoint_yaml_path(model);
    char *text = g_strdup_printf("model:\n  target: ldm.models.diffusion.ddpm.LatentDiffusion\n  params:\n%s"
                                 "    scale_factor: 0.18215\n"
                                 "    unet_config:\n      params:\n        in_channels: %d\n        out_channels: %d\n"
                                 "        model_channels: %d\n        context_dim: %d\n"
                                 "        use_linear_in_transformer: True\n",
                                 params_lines, t.unet.in_channels, t.unet.out_channels, t.unet.model_channels,
                                 t.unet.context_dim);
    CHECK(g_file_set_contents(path, text, -1, NULL), "write %s", path);
    g_free(text);
    g_free(path);
}

/* Opening path is refused; the error names the yaml and holds each of the words. */
static void check_refused(const char *path, const char *what, const char *w1, const char *w2, const char *w3)
{
    sd_runtime rt;
    sdt_error err = {0};
    char *yaml = sdt_checkpoint_yaml_path(path);
    bool ok = sd_runtime_open(&rt, path, be, SDT_F32, SD_PREDICTION_AUTO, false, &err);
    CHECK(!ok && err.code == SDT_ERR_BAD_FORMAT && strstr(err.message, yaml) && strstr(err.message, w1) &&
              strstr(err.message, w2) && strstr(err.message, w3),
          "%s is refused naming %s, '%s', '%s', '%s': %s", what, yaml, w1, w2, w3, ok ? "(opened)" : err.message);
    if (ok)
        sd_runtime_close(&rt);
    else
        printf("   %s\n", err.message);
    g_free(yaml);
}

static void check_checkpoint_yaml(uint64_t seed)
{
    printf("-- A1111's <stem>.yaml beside a single file\n");
    char *eps_like =
        make_model("yaml-eps-like", (model_opts){.sd2_kind = true, .constant = true, .output = 0.5f}, seed);
    char *v_like = make_model("yaml-v-like", (model_opts){.sd2_kind = true, .constant = true, .output = -1.5f}, seed);
    sd_runtime rt;
    char sentence[512];
    write_yaml(eps_like, "    parameterization: \"v\"\n");
    if (open_rt(&rt, eps_like, SDT_F32, SD_PREDICTION_AUTO, sentence)) {
        CHECK(rt.cfg.unet.v_prediction && rt.cfg.prediction_source == SD_PREDICTION_FROM_CHECKPOINT_YAML &&
                  rt.cfg.prediction_probe == 0 && rt.model.cfg.unet.v_prediction,
              "parameterization v wins over the probe");
        CHECK(strstr(sentence, "predicts v") && strstr(sentence, "yaml-eps-like.yaml") && strstr(sentence, "\"v\""),
              "the log names the yaml: %s", sentence);
        printf("   %s\n", sentence);
        sd_runtime_close(&rt);
    }
    if (open_rt(&rt, eps_like, SDT_F32, SD_PREDICTION_EPSILON, sentence)) {
        CHECK(!rt.cfg.unet.v_prediction && rt.cfg.prediction_source == SD_PREDICTION_FROM_USER,
              "the user's epsilon wins");
        CHECK(strstr(sentence, "as asked, over ") && strstr(sentence, "yaml-eps-like.yaml") &&
                  strstr(sentence, "says v)"),
              "the log names the yaml it overrules: %s", sentence);
        sd_runtime_close(&rt);
    }
    const char *eps_lines[2] = {"    parameterization: eps # LDM's default\n", ""};
    for (int k = 0; k < 2; k++) {
        write_yaml(v_like, eps_lines[k]);
        if (!open_rt(&rt, v_like, SDT_F32, SD_PREDICTION_AUTO, sentence)) continue;
        CHECK(!rt.cfg.unet.v_prediction && rt.cfg.prediction_source == SD_PREDICTION_FROM_CHECKPOINT_YAML &&
                  rt.cfg.prediction_probe == 0,
              "parameterization %s: epsilon on a v-like UNet, no probe", k ? "absent" : "eps");
        CHECK(strstr(sentence, "epsilon") && strstr(sentence, "yaml-v-like.yaml"), "the log names the yaml: %s",
              sentence);
        sd_runtime_close(&rt);
    }
    if (open_rt(&rt, v_like, SDT_F32, SD_PREDICTION_V, sentence)) {
        CHECK(rt.cfg.unet.v_prediction && rt.cfg.prediction_source == SD_PREDICTION_FROM_USER, "the user's v wins");
        CHECK(strstr(sentence, "as asked, over ") && strstr(sentence, "says eps)"), "the yaml overruled is named: %s",
              sentence);
        sd_runtime_close(&rt);
    }
    if (open_rt(&rt, v_like, SDT_F32, SD_PREDICTION_EPSILON, sentence)) {
        CHECK(strcmp(sentence, "the model predicts the noise (epsilon) (as asked)") == 0,
              "a yaml that agrees with the user's choice is not named: %s", sentence);
        sd_runtime_close(&rt);
    }

    printf("-- a yaml that contradicts the model\n");
    sd_config t = sd_config_preset(SD_FAMILY_TINY);
    char *wrong = g_strdup_printf("    parameterization: v\n    unet_config:\n      params:\n        context_dim: %d\n",
                                  t.unet.context_dim * 2);
    write_yaml(v_like, wrong); /* context_dim given twice: the reader's refusal */
    check_refused(v_like, "a duplicate unet_config", "line", "twice", "unet_config");
    char *path = sdt_checkpoint_yaml_path(v_like);
    char *text = g_strdup_printf("model:\n  params:\n    unet_config:\n      params:\n        context_dim: %d\n",
                                 t.unet.context_dim * 2);
    char want[64], have[64];
    snprintf(want, sizeof want, "context_dim is %d", t.unet.context_dim * 2);
    snprintf(have, sizeof have, "is %d", t.unet.context_dim);
    CHECK(g_file_set_contents(path, text, -1, NULL), "write %s", path);
    check_refused(v_like, "context_dim twice the model's", "line 5", want, have);
    CHECK(g_file_set_contents(path, "model:\n  params:\n    scale_factor: 0.13025\n", -1, NULL), "write %s", path);
    check_refused(v_like, "scale_factor 0.13025", "line 3", "scale_factor is 0.13025", "0.18215");
    CHECK(g_file_set_contents(path,
                              "model:\n  params:\n    unet_config:\n      params:\n"
                              "        use_linear_in_transformer: False\n",
                              -1, NULL),
          "write %s", path);
    check_refused(v_like, "use_linear_in_transformer False on an SD 2.x UNet", "line 5", "use_linear_in_transformer",
                  "Linear layers");
    CHECK(g_file_set_contents(path, "model:\n  params:\n    parameterization: x1\n", -1, NULL), "write %s", path);
    check_refused(v_like, "parameterization x1", "line 3", "'x1'", "\"eps\"");
    CHECK(g_file_set_contents(path, "unet:\n  in_channels: 4\n", -1, NULL), "write %s", path);
    check_refused(v_like, "a yaml without model:", "'model:'", "not an LDM config", "rename");
    g_free(text);
    g_free(path);
    g_free(wrong);

    printf("-- a diffusers folder is not joined by a .yaml beside it\n");
    char *folder = make_model("yaml-folder", (model_opts){.diffusers = true}, seed);
    char *beside = g_strdup_printf("%s.yaml", folder);
    CHECK(g_file_set_contents(beside, "model:\n  params:\n    parameterization: v\n", -1, NULL), "write %s", beside);
    if (open_rt(&rt, folder, SDT_F32, SD_PREDICTION_AUTO, sentence)) {
        CHECK(rt.cfg.prediction_source == SD_PREDICTION_FROM_CONFIG && !rt.cfg.unet.v_prediction,
              "the folder's scheduler config decides: %s", sentence);
        sd_runtime_close(&rt);
    }
    g_free(beside);
    g_free(folder);
    g_free(eps_like);
    g_free(v_like);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("test_prediction_type");
    be = sdt_backend_cpu_create(2);
    dir = g_dir_make_tmp("sdt-prediction-XXXXXX", NULL);
    CHECK(be && dir, "backend and temp folder");
    if (!be || !dir) return sdt_test_finish("test_prediction_type");
    uint64_t seed = sdt_test_next(&rng);
    check_random_model(seed);
    printf("-- constructed epsilon- and v-like models around A1111's threshold\n");
    check_constructed("eps-identity", 0.5f, false, seed);
    check_constructed("eps-near", -0.4f, false, seed);
    check_constructed("v-near", -0.6f, true, seed);
    check_constructed("v-far", -1.5f, true, seed);
    check_user_choice(seed);
    check_not_probed(seed);
    check_diffusers(seed);
    check_checkpoint_yaml(seed);
    char *rm = g_strdup_printf("rm -rf '%s'", dir);
    CHECK(system(rm) == 0, "remove %s", dir);
    g_free(rm);
    g_free(dir);
    be->destroy(be);
    return sdt_test_finish("test_prediction_type");
}
