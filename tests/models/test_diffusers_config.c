/* test_diffusers_config.c - a diffusers folder's JSON files (models/checkpoints/diffusers_config.h):
 *  - the generator writes model_index.json and the unet, text_encoder, vae and scheduler
 *    configs, and they say what diffusers would build: block widths and types per level,
 *    heads, layers, widths, latent channels, scaling factor, prediction type;
 *  - the folder loads with them: the detected config is the generator's;
 *  - the configs are the truth where weights are silent: prediction_type v_prediction,
 *    another scaling_factor, another head count (one number, or per level with one width);
 *  - a config contradicting the weights (in_channels) or damaged JSON is an error naming
 *    the file and the key;
 *  - text_encoder/config.json over naive shape guesses (width 128 guesses 2 heads, quick_gelu,
 *    eps 1e-5): num_attention_heads 4, hidden_act gelu, layer_norm_eps 1e-6 are taken, and the
 *    encoder computes with them; sizes that contradict the weights, an unknown activation, a
 *    head count that does not divide the width are errors naming the file and key;
 *  - unet/config.json's upcast_attention is read and written back;
 *  - model_index.json naming SDXL's refiner (bigG alone as text_encoder_2) is refused before shapes are
 *    guessed, naming the refiner (SDXL base folders load: models_test_sd_model);
 *  - SDXL's UNet config: text_time addition embedding (projection_class_embeddings_input_dim,
 *    addition_time_embed_dim), transformer_layers_per_block per level, 64-wide heads, written as
 *    diffusers' SDXL config says and checked against the weights when read;
 *  - a UNet sharded as diffusers shards it (*.safetensors.index.json and its shards) and an
 *    fp16-variant text encoder load to the same tensors as the single files. */
#include <cjson/cJSON.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "clip_text.h"
#include "diffusers_config.h"
#include "model_test_util.h"
#include "safetensors.h"
#include "sd_config_detect.h"
#include "sd_model.h"

static cJSON *load(const char *dir, const char *sub, const char *name)
{
    char *p = g_build_filename(dir, sub, name, NULL);
    gchar *text = NULL;
    cJSON *j = g_file_get_contents(p, &text, NULL, NULL) ? cJSON_Parse(text) : NULL;
    CHECK(j != NULL, "%s is written and parses", p);
    g_free(text);
    g_free(p);
    return j;
}

static void save(const char *dir, const char *sub, const char *name, cJSON *j)
{
    char *p = g_build_filename(dir, sub, name, NULL), *text = cJSON_Print(j);
    CHECK(g_file_set_contents(p, text, -1, NULL), "rewrite %s", p);
    cJSON_free(text);
    g_free(p);
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static const char *str_at(const cJSON *o, const char *key, int i)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_GetStringValue(cJSON_GetArrayItem(a, i));
}

static bool detect(const char *dir, sd_config *cfg, sdt_error *err)
{
    sdt_weights *w = sdt_weights_open(dir, err);
    bool ok = w && sd_config_detect(w, cfg, err);
    sdt_weights_close(w);
    return ok;
}

static void check_written(const char *dir, const sd_config *c)
{
    cJSON *index = load(dir, "", "model_index.json");
    CHECK(index && !strcmp(str_at(index, "unet", 1), "UNet2DConditionModel") &&
              !strcmp(str_at(index, "vae", 1), "AutoencoderKL") &&
              !strcmp(str_at(index, "text_encoder", 1), "CLIPTextModel"),
          "model_index.json names the parts' classes");
    cJSON_Delete(index);
    cJSON *u = load(dir, "unet", "config.json");
    const sdt_unet_config *uc = &c->unet;
    const cJSON *widths = cJSON_GetObjectItemCaseSensitive(u, "block_out_channels");
    CHECK(cJSON_GetArraySize(widths) == uc->num_levels, "one block width per level");
    for (int l = 0; l < uc->num_levels; l++) {
        CHECK(cJSON_GetArrayItem(widths, l)->valueint == uc->model_channels * uc->channel_mult[l], "level %d width", l);
        CHECK(!strcmp(str_at(u, "down_block_types", l), uc->attention[l] ? "CrossAttnDownBlock2D" : "DownBlock2D"),
              "down block %d type %s", l, str_at(u, "down_block_types", l));
        CHECK(!strcmp(str_at(u, "up_block_types", uc->num_levels - 1 - l),
                      uc->attention[l] ? "CrossAttnUpBlock2D" : "UpBlock2D"),
              "up block %d type", uc->num_levels - 1 - l);
    }
    CHECK(num(u, "attention_head_dim") == sdt_unet_config_heads(uc, uc->model_channels) &&
              num(u, "layers_per_block") == uc->num_res_blocks && num(u, "cross_attention_dim") == uc->context_dim &&
              num(u, "in_channels") == uc->in_channels && num(u, "out_channels") == uc->out_channels &&
              num(u, "norm_num_groups") == uc->norm_groups && num(u, "norm_eps") == 1e-5,
          "the UNet config's heads, layers, widths and norms");
    cJSON_Delete(u);
    cJSON *v = load(dir, "vae", "config.json");
    CHECK(num(v, "latent_channels") == c->vae.z_channels && num(v, "layers_per_block") == c->vae.res_blocks &&
              num(v, "scaling_factor") == 0.18215 &&
              cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(v, "block_out_channels")) == c->vae.levels,
          "the VAE config's widths, latent channels and scaling factor");
    cJSON_Delete(v);
    cJSON *t = load(dir, "text_encoder", "config.json");
    CHECK(num(t, "hidden_size") == c->clip.width && num(t, "num_hidden_layers") == c->clip.layers &&
              num(t, "num_attention_heads") == c->clip.heads && num(t, "vocab_size") == c->clip.vocab &&
              num(t, "intermediate_size") == c->clip.mlp_width &&
              !strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "hidden_act")), "quick_gelu"),
          "the text encoder config");
    cJSON_Delete(t);
    cJSON *s = load(dir, "scheduler", "scheduler_config.json");
    CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "prediction_type")), "epsilon") &&
              num(s, "num_train_timesteps") == 1000 && num(s, "beta_start") == 0.00085 && num(s, "beta_end") == 0.012,
          "the scheduler config");
    cJSON_Delete(s);
}

static void edit(const char *dir, const char *sub, const char *name, const char *key, cJSON *value)
{
    cJSON *j = load(dir, sub, name);
    if (!j) return;
    cJSON_DeleteItemFromObjectCaseSensitive(j, key);
    cJSON_AddItemToObject(j, key, value);
    save(dir, sub, name, j);
    cJSON_Delete(j);
}

/* Splits unet/diffusion_pytorch_model.safetensors into two shards with an index, renames the
 * text encoder to its fp16 variant name; the weights must read the same as before. */
static void check_sharded(const char *model)
{
    sdt_error err = {0};
    sdt_weights *before = sdt_weights_open(model, &err);
    CHECK(before != NULL, "open before sharding: %s", err.message);
    char *unet = g_build_filename(model, "unet", "diffusion_pytorch_model.safetensors", NULL);
    sdt_safetensors *st = sdt_st_open(unet, &err);
    CHECK(st != NULL, "open %s: %s", unet, err.message);
    if (!st || !before) return;
    size_t n = sdt_st_count(st), half = n / 2;
    sdt_st_write_item *items = calloc(n, sizeof *items);
    cJSON *index = cJSON_CreateObject(), *map = cJSON_AddObjectToObject(index, "weight_map");
    cJSON_AddObjectToObject(index, "metadata");
    const char *shard_names[2] = {"diffusion_pytorch_model-00001-of-00002.safetensors",
                                  "diffusion_pytorch_model-00002-of-00002.safetensors"};
    for (size_t i = 0; i < n; i++) {
        const sdt_st_entry *e = sdt_st_at(st, i);
        items[i] = (sdt_st_write_item){e->name, e->dtype, e->ndim, e->shape, e->data};
        cJSON_AddStringToObject(map, e->name, shard_names[i >= half]);
    }
    for (int s = 0; s < 2; s++) {
        char *p = g_build_filename(model, "unet", shard_names[s], NULL);
        CHECK(sdt_st_write(p, items + (s ? half : 0), s ? n - half : half, NULL, 0, &err), "shard: %s", err.message);
        g_free(p);
    }
    save(model, "unet", "diffusion_pytorch_model.safetensors.index.json", index);
    cJSON_Delete(index);
    free(items);
    sdt_st_close(st);
    g_remove(unet);
    char *te = g_build_filename(model, "text_encoder", "model.safetensors", NULL);
    char *te16 = g_build_filename(model, "text_encoder", "model.fp16.safetensors", NULL);
    CHECK(g_rename(te, te16) == 0, "rename to %s", te16);

    sdt_weights *after = sdt_weights_open(model, &err);
    CHECK(after != NULL, "a sharded UNet and an fp16-variant text encoder open: %s", err.message);
    size_t same = 0;
    for (size_t i = 0; after && i < sdt_weights_count(before); i++) {
        const char *key = sdt_weights_key(before, i);
        const sdt_tensor *a = sdt_weights_get(before, key), *b = sdt_weights_get(after, key);
        if (b && a->dtype == b->dtype && sdt_tensor_nbytes(a) == sdt_tensor_nbytes(b) &&
            memcmp(a->data, b->data, sdt_tensor_nbytes(a)) == 0)
            same++;
    }
    CHECK(after && same == sdt_weights_count(before) && sdt_weights_count(after) == same,
          "every tensor reads the same from the shards (%zu of %zu)", same, sdt_weights_count(before));
    sdt_weights_close(after);
    /* a shard the index names but the folder lacks */
    char *p = g_build_filename(model, "unet", shard_names[1], NULL);
    g_remove(p);
    after = sdt_weights_open(model, &err);
    CHECK(!after && strstr(err.message, "00002-of-00002"), "a missing shard is named: %s", err.message);
    sdt_weights_close(after);
    g_free(p);
    sdt_weights_close(before);
    g_free(unet);
    g_free(te);
    g_free(te16);
}

/* The text encoder's last hidden states for a few tokens under cfg (weights from dir). */
static float *encode(const char *dir, const clip_config *cfg, int64_t *n)
{
    sdt_error err = {0};
    sdt_weights *w = sdt_weights_open(dir, &err);
    sdt_backend *be = mt_backend();
    clip_text_model m;
    float *out = NULL;
    int32_t ids[77];
    for (int i = 0; i < 77; i++) ids[i] = (i * 37 + 5) % cfg->vocab;
    int64_t tshape[2] = {1, 77};
    sdt_tensor tokens = sdt_tensor_make(ids, SDT_I32, be->device, 2, tshape);
    clip_text_inputs in = {.tokens = &tokens, .act_dtype = SDT_F32};
    clip_text_acts acts;
    sdt_arena a;
    sdt_arena_init_measure(&a, be);
    if (w && clip_text_load(&m, cfg, w, &err) && clip_text_forward(&m, be, &a, &in, &acts, &err) &&
        sdt_arena_init(&a, be, a.peak)) {
        if (clip_text_forward(&m, be, &a, &in, &acts, &err)) {
            *n = sdt_tensor_numel(&acts.out);
            out = mt_alloc((size_t)*n * sizeof(float));
            memcpy(out, acts.out.data, (size_t)*n * sizeof(float));
        }
        sdt_arena_release(&a);
    }
    CHECK(out != NULL, "encode with the config: %s", err.message);
    sdt_weights_close(w);
    be->destroy(be);
    return out;
}

static void check_text_encoder_config(const char *model)
{
    sd_config naive, c;
    sdt_error err = {0};
    CHECK(detect(model, &naive, &err), "detect before editing: %s", err.message);
    edit(model, "text_encoder", "config.json", "num_attention_heads", cJSON_CreateNumber(4));
    edit(model, "text_encoder", "config.json", "hidden_act", cJSON_CreateString("gelu"));
    edit(model, "text_encoder", "config.json", "layer_norm_eps", cJSON_CreateNumber(1e-6));
    CHECK(detect(model, &c, &err), "an edited text encoder config loads: %s", err.message);
    CHECK(naive.clip.heads == 2 && naive.clip.act == SDT_ACT_QUICK_GELU && c.clip.heads == 4 &&
              c.clip.act == SDT_ACT_GELU && fabsf(c.clip.ln_eps - 1e-6f) < 1e-12f,
          "the config's heads (%d), activation and epsilon win over the guesses (%d heads)", c.clip.heads,
          naive.clip.heads);
    int64_t n1 = 0, n2 = 0, n3 = 0;
    clip_config by_hand = naive.clip;
    by_hand.heads = 4, by_hand.act = SDT_ACT_GELU, by_hand.ln_eps = 1e-6f;
    float *a = encode(model, &c.clip, &n1), *b = encode(model, &by_hand, &n2), *g = encode(model, &naive.clip, &n3);
    CHECK(a && b && g && n1 == n2 && n1 == n3 && memcmp(a, b, (size_t)n1 * sizeof(float)) == 0 &&
              memcmp(a, g, (size_t)n1 * sizeof(float)) != 0,
          "the encoder computes with the config's values, not the guesses");
    free(a), free(b), free(g);
    struct {
        const char *key;
        cJSON *value;
        const char *says;
    } bad[] = {
        {"hidden_size", cJSON_CreateNumber(64), "hidden_size"},
        {"num_hidden_layers", cJSON_CreateNumber(12), "num_hidden_layers"},
        {"hidden_act", cJSON_CreateString("relu"), "relu"},
        {"num_attention_heads", cJSON_CreateNumber(3), "num_attention_heads"},
    };
    cJSON *orig = load(model, "text_encoder", "config.json");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        edit(model, "text_encoder", "config.json", bad[i].key, bad[i].value);
        CHECK(!detect(model, &c, &err) && strstr(err.message, "text_encoder") && strstr(err.message, bad[i].says),
              "text encoder '%s' bad: an error naming the file and key: %s", bad[i].key, err.message);
        save(model, "text_encoder", "config.json", orig);
    }
    cJSON_Delete(orig);
    edit(model, "text_encoder", "config.json", "num_attention_heads", cJSON_CreateNumber(naive.clip.heads));
    edit(model, "text_encoder", "config.json", "hidden_act", cJSON_CreateString("quick_gelu"));
    edit(model, "text_encoder", "config.json", "layer_norm_eps", cJSON_CreateNumber(1e-5));
}

static void check_upcast_and_index(const char *model, const char *dir)
{
    sd_config c;
    sdt_error err = {0};
    edit(model, "unet", "config.json", "upcast_attention", cJSON_CreateTrue());
    CHECK(detect(model, &c, &err) && c.unet.upcast_attention, "upcast_attention true is read: %s", err.message);
    char *copy = g_build_filename(dir, "configs-written", NULL);
    CHECK(sdt_diffusers_config_write(copy, &c, &err), "write configs: %s", err.message);
    cJSON *u = load(copy, "unet", "config.json");
    CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(u, "upcast_attention")), "upcast_attention is written back");
    cJSON_Delete(u);
    g_free(copy);
    edit(model, "unet", "config.json", "upcast_attention", cJSON_CreateFalse());

    cJSON *orig = load(model, "", "model_index.json");
    edit(model, "", "model_index.json", "_class_name", cJSON_CreateString("StableDiffusionXLImg2ImgPipeline"));
    const char *second[2] = {"transformers", "CLIPTextModelWithProjection"};
    edit(model, "", "model_index.json", "text_encoder_2", cJSON_CreateStringArray(second, 2));
    cJSON *none = cJSON_CreateArray();
    cJSON_AddItemToArray(none, cJSON_CreateNull());
    cJSON_AddItemToArray(none, cJSON_CreateNull());
    edit(model, "", "model_index.json", "text_encoder", none);
    sdt_weights *w = sdt_weights_open(model, &err);
    bool ok = w && sd_config_detect(w, &c, &err);
    CHECK(!ok && err.code == SDT_ERR_UNSUPPORTED && strstr(err.message, "model_index.json") &&
              strstr(err.message, "StableDiffusionXLImg2ImgPipeline") && strstr(err.message, "refiner"),
          "SDXL's refiner model_index.json is refused, naming the pipeline: %s", err.message);
    sdt_weights_close(w);
    save(model, "", "model_index.json", orig);
    cJSON_Delete(orig);
}

/* sample_size: the UNet's latent side and the VAE's image side at the resolution each family was
 * trained at (diffusers' pipeline defaults its image to them). */
static void check_sample_sizes(const char *dir)
{
    const struct {
        sd_family family;
        bool v;
        int unet, vae;
        const char *what;
    } cases[] = {
        {SD_FAMILY_SD1, false, 64, 512, "SD 1.x"},
        {SD_FAMILY_SD2, true, 96, 768, "SD 2.x 768-v"},
        {SD_FAMILY_SD2, false, 64, 512, "SD 2.x base (epsilon)"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        sd_config c = sd_config_preset(cases[i].family);
        c.unet.v_prediction = cases[i].v;
        sdt_error err = {0};
        char *folder = g_strdup_printf("%s/sizes-%zu", dir, i);
        CHECK(sdt_diffusers_config_write(folder, &c, &err), "write %s configs: %s", cases[i].what, err.message);
        cJSON *u = load(folder, "unet", "config.json"), *vae = load(folder, "vae", "config.json");
        CHECK(num(u, "sample_size") == cases[i].unet && num(vae, "sample_size") == cases[i].vae,
              "%s: sample_size %g / %g, expected %d / %d", cases[i].what, num(u, "sample_size"),
              num(vae, "sample_size"), cases[i].unet, cases[i].vae);
        cJSON_Delete(u);
        cJSON_Delete(vae);
        g_free(folder);
    }
}

static void check_sdxl_unet_config(const char *dir)
{
    sd_config c = sd_config_preset(SD_FAMILY_SD1), read;
    c.unet = sdt_unet_config_sdxl();
    sdt_error err = {0};
    char *folder = g_build_filename(dir, "sdxl-configs", NULL);
    CHECK(sdt_diffusers_config_write(folder, &c, &err), "write SDXL configs: %s", err.message);
    cJSON *u = load(folder, "unet", "config.json");
    const cJSON *depths = cJSON_GetObjectItemCaseSensitive(u, "transformer_layers_per_block");
    const cJSON *heads = cJSON_GetObjectItemCaseSensitive(u, "attention_head_dim");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(u, "addition_embed_type");
    CHECK(cJSON_GetArraySize(depths) == 3 && cJSON_GetArrayItem(depths, 0)->valueint == 1 &&
              cJSON_GetArrayItem(depths, 1)->valueint == 2 && cJSON_GetArrayItem(depths, 2)->valueint == 10,
          "transformer_layers_per_block is [1, 2, 10]");
    CHECK(cJSON_GetArraySize(heads) == 3 && cJSON_GetArrayItem(heads, 0)->valueint == 5 &&
              cJSON_GetArrayItem(heads, 2)->valueint == 20,
          "attention_head_dim is [5, 10, 20]");
    CHECK(cJSON_IsString(type) && !strcmp(type->valuestring, "text_time") && num(u, "addition_time_embed_dim") == 256 &&
              num(u, "projection_class_embeddings_input_dim") == 2816 && num(u, "cross_attention_dim") == 2048 &&
              !strcmp(str_at(u, "down_block_types", 0), "DownBlock2D") &&
              !strcmp(str_at(u, "down_block_types", 1), "CrossAttnDownBlock2D"),
          "SDXL's addition embedding, context width and block types");
    CHECK(num(u, "sample_size") == 128, "SDXL's UNet sample_size is 128 (1024 px), not %g", num(u, "sample_size"));
    cJSON_Delete(u);
    cJSON *vae = load(folder, "vae", "config.json");
    CHECK(num(vae, "sample_size") == 1024, "SDXL's VAE sample_size is 1024, not %g", num(vae, "sample_size"));
    cJSON_Delete(vae);
    read = c;
    read.unet.addition_time_embed_dim = 0;
    CHECK(sdt_diffusers_config_apply(folder, &read, &err) && read.unet.addition_time_embed_dim == 256 &&
              read.unet.head_dim == 64,
          "the SDXL UNet config reads back against SDXL's weights (size embedding %d, head_dim %d): %s",
          read.unet.addition_time_embed_dim, read.unet.head_dim, err.message);
    int other_depths[3] = {1, 2, 9};
    edit(folder, "unet", "config.json", "transformer_layers_per_block", cJSON_CreateIntArray(other_depths, 3));
    read = c;
    CHECK(!sdt_diffusers_config_apply(folder, &read, &err) && strstr(err.message, "transformer_layers_per_block"),
          "depths contradicting the weights are named: %s", err.message);
    edit(folder, "unet", "config.json", "transformer_layers_per_block", cJSON_CreateIntArray((int[]){1, 2, 10}, 3));
    edit(folder, "unet", "config.json", "projection_class_embeddings_input_dim", cJSON_CreateNumber(2560));
    read = c;
    CHECK(!sdt_diffusers_config_apply(folder, &read, &err) &&
              strstr(err.message, "projection_class_embeddings_input_dim"),
          "a y width contradicting label_emb is named: %s", err.message);
    edit(folder, "unet", "config.json", "projection_class_embeddings_input_dim", cJSON_CreateNumber(2816));
    edit(folder, "unet", "config.json", "addition_embed_type", cJSON_CreateNull());
    read = c;
    CHECK(!sdt_diffusers_config_apply(folder, &read, &err) && strstr(err.message, "addition_embed_type"),
          "SDXL weights with a config without text_time are named: %s", err.message);
    g_free(folder);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("test_diffusers_config");
    char *dir = g_dir_make_tmp("sdt-diffusers-XXXXXX", NULL);
    char *model = g_build_filename(dir, "model", NULL);
    sdt_ckpt_spec spec = mt_ckpt_spec(SD_FAMILY_TINY, sdt_test_next(&rng));
    spec.layout = SDT_CKPT_DIFFUSERS;
    sdt_error err = {0};
    CHECK(sdt_ckpt_generate(model, &spec, &err), "generate: %s", err.message);
    check_written(model, &spec.config);

    sd_config c;
    CHECK(detect(model, &c, &err), "the folder loads with its configs: %s", err.message);
    CHECK(c.prediction_source == SD_PREDICTION_FROM_CONFIG && !c.unet.v_prediction &&
              c.vae.scaling == spec.config.vae.scaling &&
              sdt_unet_config_heads(&c.unet, c.unet.model_channels) ==
                  sdt_unet_config_heads(&spec.config.unet, spec.config.unet.model_channels),
          "the detected config is the generator's (epsilon from the scheduler config)");

    edit(model, "scheduler", "scheduler_config.json", "prediction_type", cJSON_CreateString("v_prediction"));
    edit(model, "vae", "config.json", "scaling_factor", cJSON_CreateNumber(0.13025));
    edit(model, "unet", "config.json", "attention_head_dim", cJSON_CreateNumber(4));
    CHECK(detect(model, &c, &err), "edited configs load: %s", err.message);
    CHECK(c.unet.v_prediction && c.prediction_source == SD_PREDICTION_FROM_CONFIG,
          "prediction_type v_prediction gives a v-model");
    CHECK(fabsf(c.vae.scaling - 0.13025f) < 1e-7f, "scaling_factor is taken (%g)", (double)c.vae.scaling);
    CHECK(c.vae.shift == 0.0f, "no shift_factor: no shift (%g)", (double)c.vae.shift);
    edit(model, "vae", "config.json", "shift_factor", cJSON_CreateNumber(0.0609));
    CHECK(detect(model, &c, &err) && c.vae.shift == 0.0609f, "shift_factor is taken (%g): %s", (double)c.vae.shift,
          err.message);
    edit(model, "vae", "config.json", "shift_factor", cJSON_CreateNull());
    CHECK(detect(model, &c, &err) && c.vae.shift == 0.0f, "shift_factor null is no shift (%g)", (double)c.vae.shift);
    CHECK(c.unet.num_heads == 4 && c.unet.head_dim == 0, "attention_head_dim 4 gives 4 heads (%d, %d)",
          c.unet.num_heads, c.unet.head_dim);
    /* per-level head counts with one head width, as SD 2.x writes [5, 10, 20, 20] */
    int widths[2] = {spec.config.unet.model_channels * spec.config.unet.channel_mult[0] / 16,
                     spec.config.unet.model_channels * spec.config.unet.channel_mult[1] / 16};
    edit(model, "unet", "config.json", "attention_head_dim", cJSON_CreateIntArray(widths, 2));
    CHECK(detect(model, &c, &err) && c.unet.head_dim == 16 && c.unet.num_heads == 0,
          "a per-level head list of one width gives head_dim 16 (%d, %d): %s", c.unet.head_dim, c.unet.num_heads,
          err.message);

    edit(model, "unet", "config.json", "in_channels", cJSON_CreateNumber(9));
    CHECK(!detect(model, &c, &err) && strstr(err.message, "unet") && strstr(err.message, "config.json") &&
              strstr(err.message, "in_channels"),
          "in_channels against the weights is an error naming the file and key: %s", err.message);
    edit(model, "unet", "config.json", "in_channels", cJSON_CreateNumber(4));
    char *sched = g_build_filename(model, "scheduler", "scheduler_config.json", NULL);
    CHECK(g_file_set_contents(sched, "{\"prediction_type\": ", -1, NULL), "damage %s", sched);
    CHECK(!detect(model, &c, &err) && strstr(err.message, "scheduler_config.json") && strstr(err.message, "JSON"),
          "damaged JSON is an error naming the file: %s", err.message);
    CHECK(g_file_set_contents(sched, "{\"prediction_type\": \"sample\"}", -1, NULL), "write %s", sched);
    CHECK(!detect(model, &c, &err) && strstr(err.message, "prediction_type") && strstr(err.message, "sample"),
          "an unsupported prediction type is named: %s", err.message);
    g_remove(sched);
    CHECK(detect(model, &c, &err) && c.prediction_source != SD_PREDICTION_FROM_CONFIG && !c.unet.v_prediction,
          "without a scheduler config the default (epsilon) stays: %s", err.message);
    g_free(sched);

    check_text_encoder_config(model);
    check_upcast_and_index(model, dir);
    check_sdxl_unet_config(dir);
    check_sample_sizes(dir);
    CHECK(detect(model, &c, &err), "the restored folder loads: %s", err.message);
    check_sharded(model);

    char *rm = g_strdup_printf("rm -rf '%s'", dir);
    CHECK(system(rm) == 0, "remove %s", dir);
    g_free(rm);
    g_free(model);
    g_free(dir);
    return sdt_test_finish("test_diffusers_config");
}
