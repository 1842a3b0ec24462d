/* test_faults_prepare.c - faults that prepare() must refuse before any training, each with its
 * status and a sentence naming the cause, and the embedding file left byte for byte as it was:
 *  - a NaN poked into one frozen UNet weight of a copied checkpoint: the sentence names the key;
 *  - a template without [name]: SDT_STATUS_NO_GRADIENT naming the template file;
 *  - a caption that pushes the placeholder past the last 75-token chunk (600 tokens; shorter ones
 *    are encoded in chunks): SDT_STATUS_NO_GRADIENT naming the image and the template line;
 *  - an embedding file with no vectors (nothing trainable): a clear error, no crash;
 *  - an empty batch: a dataset folder that is empty, or whose only image cannot be read;
 *  - a memory estimate over the cap SDTRAIN_MEMORY_LIMIT_MB: SDT_STATUS_OUT_OF_MEMORY with what
 *    to change; the same job under a generous cap prepares;
 * and, through the public scaler "sdtrain.scaler/1": no gradient buffers (no trainable
 * parameter) and should_step without unscale (PyTorch's "No inf checks were recorded") are
 * statuses with sentences, never an abort. */
#include "trainer_fixture.h"

typedef struct prep {
    sdt_status status;
    char error[2048];
    int64_t steps_published;
    bool embedding_unchanged;
} prep;

/* prepare (and run, if prepare passes) a job; reports whether the embedding file kept its bytes. */
static prep try_prepare(const trainer_env *env, sdt_ti_config *c)
{
    prep p;
    memset(&p, 0, sizeof p);
    size_t n;
    unsigned char *before = fx_read_file(c->embedding_path, &n);
    fx_recorder rec;
    sdt_ti_trainer *t = fx_create(env, &rec);
    sdt_prepare_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    p.status = env->ti->prepare(t, c, &info);
    snprintf(p.error, sizeof p.error, "%s", fx_last_error(env, t));
    p.steps_published = rec.n_steps;
    size_t m;
    unsigned char *after = fx_read_file(c->embedding_path, &m);
    p.embedding_unchanged = before && after && n == m && memcmp(before, after, n) == 0;
    free(before);
    free(after);
    env->ti->destroy(t);
    printf("  status %d: %s\n", (int)p.status, p.error);
    return p;
}

static void check_nan_weight(const trainer_env *env, const char *emb, const char *log)
{
    printf("-- a NaN in one frozen UNet weight\n");
    char model[FX_PATH], unet[FX_PATH];
    fx_copy_model(env, fx_path(model, env->tmp, "nan-model"));
    snprintf(unet, sizeof unet, "%.4000s/unet/diffusion_pytorch_model.safetensors", model);
    const char *key = "down_blocks.1.resnets.0.conv1.weight";
    CHECK(fx_poke_f32(unet, key, 0, NAN), "poke a NaN into %s", key);
    sdt_ti_config c;
    fx_config(env, &c, emb, NULL, log, 5);
    c.model_path = model;
    prep p = try_prepare(env, &c);
    CHECK(p.status == SDT_STATUS_BAD_FORMAT, "a damaged checkpoint is BAD_FORMAT (got %d)", (int)p.status);
    /* the key as the file spells it, or its canonical (LDM) name: conv1 of a resnet is in_layers.2 */
    CHECK(strstr(p.error, "NaN") && (strstr(p.error, key) || strstr(p.error, ".0.in_layers.2.weight'")),
          "the sentence names the tensor: %s", p.error);
    CHECK(p.embedding_unchanged, "the embedding file is untouched");
}

static void check_template_without_name(const trainer_env *env, const char *emb, const char *log)
{
    printf("-- a template without [name]\n");
    char tmpl[FX_PATH];
    fx_path(tmpl, env->tmp, "no-name-template.txt");
    const char *text = "a photo of [filewords]\na picture of [filewords]\n";
    CHECK(fx_write_file(tmpl, text, strlen(text)), "write %s", tmpl);
    sdt_ti_config c;
    fx_config(env, &c, emb, NULL, log, 5);
    c.template_file = tmpl;
    prep p = try_prepare(env, &c);
    CHECK(p.status == SDT_STATUS_NO_GRADIENT, "NO_GRADIENT (got %d)", (int)p.status);
    CHECK(strstr(p.error, tmpl) && strstr(p.error, "[name]"), "the sentence names the template and [name]: %s",
          p.error);
    CHECK(p.embedding_unchanged, "the embedding file is untouched");
}

static void check_truncating_caption(const trainer_env *env, const char *emb, const char *log)
{
    printf("-- a caption that pushes the placeholder out of the window\n");
    char data[FX_PATH], caption[FX_PATH], tmpl[FX_PATH];
    const char *stems[2] = {"demo_002", "demo_003"};
    fx_copy_images(env, fx_path(data, env->tmp, "long-caption"), stems, 2);
    char text[8192] = "";
    for (int i = 0; i < 250; i++) strcat(text, i ? ", red background" : "red background");
    snprintf(caption, sizeof caption, "%.4000s/demo_003.txt", data);
    CHECK(fx_write_file(caption, text, strlen(text)), "write the long caption");
    fx_path(tmpl, env->tmp, "name-last-template.txt");
    const char *lines = "a photo of [name]\n[filewords], [name]\n";
    CHECK(fx_write_file(tmpl, lines, strlen(lines)), "write %s", tmpl);
    sdt_ti_config c;
    fx_config(env, &c, emb, data, log, 5);
    c.template_file = tmpl;
    prep p = try_prepare(env, &c);
    CHECK(p.status == SDT_STATUS_NO_GRADIENT, "NO_GRADIENT (got %d)", (int)p.status);
    CHECK(strstr(p.error, "demo_003.png") && strstr(p.error, "template line 2") && strstr(p.error, "600") &&
              !strstr(p.error, "demo_002"),
          "the sentence names the image and the template line: %s", p.error);
    CHECK(p.embedding_unchanged, "the embedding file is untouched");
}

static void check_no_vectors(const trainer_env *env, const char *log)
{
    printf("-- an embedding with no vectors (nothing to train)\n");
    char dir[FX_PATH], path[FX_PATH];
    fx_subdir(env, dir, "empty-emb");
    snprintf(path, sizeof path, "%.4000s/hollow.safetensors", dir);
    int64_t shape[2] = {0, 128};
    float dummy = 0;
    sdt_st_write_item item = {"emb_params", SDT_ST_F32, 2, shape, &dummy};
    sdt_st_kv meta[2] = {{"name", "hollow"}, {"step", "0"}};
    sdt_error error = {0};
    CHECK(sdt_st_write(path, &item, 1, meta, 2, &error), "write %s: %s", path, error.message);
    sdt_ti_config c;
    fx_config(env, &c, path, NULL, log, 5);
    prep p = try_prepare(env, &c);
    CHECK(p.status < 0 && p.status != SDT_STATUS_INTERNAL, "refused with a clear status (got %d)", (int)p.status);
    CHECK(strstr(p.error, "hollow") && strstr(p.error, "0 x 128"), "the sentence names the file and its shape: %s",
          p.error);
    CHECK(p.embedding_unchanged, "the embedding file is untouched");
}

/* An empty batch, the trainer's way: a dataset folder with nothing usable in it. */
static void check_empty_dataset(const trainer_env *env, const char *emb, const char *log)
{
    printf("-- a dataset with no usable image\n");
    char data[FX_PATH], broken[FX_PATH];
    fx_path(data, env->tmp, "empty-data");
    fx_mkdir(data);
    sdt_ti_config c;
    fx_config(env, &c, emb, data, log, 5);
    prep p = try_prepare(env, &c);
    CHECK(p.status == SDT_STATUS_VALIDATION && strstr(p.error, data), "an empty folder is refused naming it (%d): %s",
          (int)p.status, p.error);
    CHECK(p.embedding_unchanged, "the embedding file is untouched");
    CHECK(fx_write_file(fx_path(broken, data, "broken.png"), "", 0), "write a zero-byte image");
    p = try_prepare(env, &c);
    CHECK(p.status == SDT_STATUS_VALIDATION && strstr(p.error, "broken.png"),
          "a folder whose only image is unreadable is refused naming the file (%d): %s", (int)p.status, p.error);
    CHECK(p.embedding_unchanged, "the embedding file is untouched");
}

static void check_memory_cap(const trainer_env *env, const char *emb, const char *log)
{
    printf("-- a memory estimate over SDTRAIN_MEMORY_LIMIT_MB\n");
    char data[FX_PATH];
    const char *stems[2] = {"demo_004", "demo_007"};
    fx_copy_images(env, fx_path(data, env->tmp, "memory-data"), stems, 2);
    sdt_ti_config c;
    fx_config(env, &c, emb, data, log, 5);
    c.batch_size = 2;
    setenv("SDTRAIN_MEMORY_LIMIT_MB", "16", 1);
    prep p = try_prepare(env, &c);
    CHECK(p.status == SDT_STATUS_OUT_OF_MEMORY, "OUT_OF_MEMORY (got %d)", (int)p.status);
    CHECK(strstr(p.error, "MiB") && strstr(p.error, "batch size 2") && strstr(p.error, "lower the batch size") &&
              strstr(p.error, "SDTRAIN_MEMORY_LIMIT_MB"),
          "the sentence says what it needs and what to change: %s", p.error);
    CHECK(p.embedding_unchanged && p.steps_published == 0, "nothing trained, the embedding untouched");
    setenv("SDTRAIN_MEMORY_LIMIT_MB", "100000", 1);
    p = try_prepare(env, &c);
    CHECK(p.status == SDT_STATUS_OK, "under a generous cap the job prepares (got %d)", (int)p.status);
    unsetenv("SDTRAIN_MEMORY_LIMIT_MB");
}

/* bf16 on a device without bf16 arithmetic (SDTRAIN_DEVICE_NO_BF16, as a card below sm_80): the
 * run trains in fp16 with the loss scaler, and says so once. */
static void check_bf16_without_bf16(const trainer_env *env, const char *emb, const char *log)
{
    printf("-- bf16 asked on a device without bf16 arithmetic\n");
    sdt_ti_config c;
    fx_config(env, &c, emb, NULL, log, 2);
    c.precision = SDT_PRECISION_BF16;
    setenv("SDTRAIN_DEVICE_NO_BF16", "1", 1);
    fx_recorder rec;
    sdt_ti_trainer *t = fx_create(env, &rec);
    sdt_prepare_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    sdt_status st = env->ti->prepare(t, &c, &info);
    CHECK(st == SDT_STATUS_OK && info.precision == SDT_PRECISION_FP16, "prepared in fp16 (status %d: %s, precision %u)",
          (int)st, fx_last_error(env, t), info.precision);
    if (st == SDT_STATUS_OK) st = env->ti->run(t);
    unsetenv("SDTRAIN_DEVICE_NO_BF16");
    CHECK(st == SDT_STATUS_OK && rec.n_steps == 2, "2 steps run (status %d, %d steps)", (int)st, rec.n_steps);
    CHECK(rec.n_steps > 0 && rec.steps[0].precision == SDT_PRECISION_FP16 && rec.steps[0].loss_scale == 65536.0,
          "the steps are fp16 with the loss scaler (precision %u, scale %g)", rec.n_steps ? rec.steps[0].precision : 99,
          rec.n_steps ? rec.steps[0].loss_scale : 0.0);
    const char *first = strstr(rec.log, "no bf16 arithmetic");
    CHECK(first && !strstr(first + 1, "no bf16 arithmetic"), "said exactly once:\n%s", rec.log);
    env->ti->destroy(t);
}

static void check_public_scaler(const trainer_env *env)
{
    printf("-- the public scaler's safety checks\n");
    const sdt_loss_scaler_factory *f = (const sdt_loss_scaler_factory *)env->entry->get_factory(SDT_FACTORY_SCALER);
    CHECK(f != NULL, "the scaler factory");
    if (!f) return;
    sdt_loss_scaler_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.struct_size = sizeof cfg;
    f->config_defaults(&cfg);
    sdt_loss_scaler *s = NULL;
    char err[1024] = "";
    CHECK(f->create(&cfg, &s, err, sizeof err) == SDT_STATUS_OK, "create: %s", err);
    if (!s) return;
    float scaled;
    bool step = true;
    f->scale_loss(s, 1.0f, &scaled);
    /* no trainable parameter: no gradient buffers at all */
    CHECK(f->unscale(s, 0, NULL, NULL, 0, NULL) == SDT_STATUS_INVALID_ARGUMENT, "unscale with no buffers is refused");
    f->get_last_error(s, err, sizeof err, NULL);
    CHECK(strstr(err, "no gradient buffers") != NULL, "sentence: %s", err);
    /* the "No inf checks were recorded" misuse */
    CHECK(f->should_step(s, 0, &step) == SDT_STATUS_SCALER_MISUSE, "should_step without unscale is misuse");
    f->get_last_error(s, err, sizeof err, NULL);
    printf("  %s\n", err);
    CHECK(strstr(err, "No inf checks were recorded") && strstr(err, "unscale(0"), "sentence with the fix: %s", err);
    /* the scaler is still usable afterwards */
    float g[3] = {65536.0f, -65536.0f, 0.0f};
    float *bufs[1] = {g};
    uint64_t counts[1] = {3};
    bool inf = true;
    CHECK(f->unscale(s, 0, bufs, counts, 1, &inf) == SDT_STATUS_OK && !inf && g[0] == 1.0f,
          "after the misuse a proper iteration works");
    CHECK(f->should_step(s, 0, &step) == SDT_STATUS_OK && step && f->update(s) == SDT_STATUS_OK, "step and update");
    f->destroy(s);
}

int main(int argc, char **argv)
{
    trainer_env env;
    if (!trainer_env_open(&env, argc, argv, "trainer_faults_prepare")) return trainer_env_abandon(&env);
    char dir[FX_PATH], log[FX_PATH], emb[FX_PATH];
    fx_subdir(&env, dir, "emb");
    fx_subdir(&env, log, "log");
    if (fx_make_embedding(&env, dir, "prepfault", 2, "ring", emb)) {
        check_nan_weight(&env, emb, log);
        check_template_without_name(&env, emb, log);
        check_truncating_caption(&env, emb, log);
        check_no_vectors(&env, log);
        check_empty_dataset(&env, emb, log);
        check_memory_cap(&env, emb, log);
        check_bf16_without_bf16(&env, emb, log);
    }
    check_public_scaler(&env);
    trainer_env_close(&env);
    return sdt_test_finish("trainer_faults_prepare");
}
