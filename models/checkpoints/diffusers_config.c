/* diffusers_config.c - see diffusers_config.h. Key names follow diffusers 0.2x and transformers 4.x. */
#include "diffusers_config.h"

#include <cjson/cJSON.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_read.h"
#include "atomic_file.h"
#include "c_numeric.h"
#include "c_json.h"

#define DIFFUSERS_VERSION "0.21.0"

/* ---- reading ------------------------------------------------------------------------- */

/* The parsed JSON of folder/sub/name; NULL when absent (*present false) or broken (*error set). */
static cJSON *read_json(const char *folder, const char *sub, const char *name, bool *present, char **path_out,
                        sdt_error *error)
{
    char *path = g_build_filename(folder, sub, name, NULL);
    *present = g_file_test(path, G_FILE_TEST_EXISTS);
    *path_out = path;
    if (!*present) return NULL;
    char *text = NULL;
    size_t len = 0;
    cJSON *j = NULL;
    if (!sdt_file_read_all(path, "model config", SDT_FILE_LIMIT_TEXT, &text, &len, error))
        ;
    else if (!(j = sdt_json_parse(text, len)) || !cJSON_IsObject(j))
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: not a JSON object; the file is damaged, restore it from the model's download", path);
    free(text);
    if (j && !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        j = NULL;
    }
    return j;
}

static bool get_number(const cJSON *o, const char *key, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) return false;
    *out = v->valuedouble;
    return true;
}

/* Heads per level from attention_head_dim (diffusers' name for the head count in SD
 * configs: 8 for SD 1.x, [5, 10, 20, 20] for SD 2.x) or num_attention_heads. */
static bool apply_heads(const cJSON *unet, const char *path, sdt_unet_config *u, sdt_error *error)
{
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(unet, "num_attention_heads");
    const char *key = "num_attention_heads";
    if (!h || cJSON_IsNull(h)) h = cJSON_GetObjectItemCaseSensitive(unet, key = "attention_head_dim");
    if (!h || cJSON_IsNull(h)) return true;
    int heads[SDT_UNET_MAX_LEVELS] = {0};
    int n = 0;
    if (cJSON_IsNumber(h)) {
        for (n = 0; n < u->num_levels; n++) heads[n] = h->valueint;
    } else if (cJSON_IsArray(h) && cJSON_GetArraySize(h) == u->num_levels) {
        for (n = 0; n < u->num_levels; n++) {
            const cJSON *e = cJSON_GetArrayItem(h, n);
            heads[n] = cJSON_IsNumber(e) ? e->valueint : 0;
        }
    } else {
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: '%s' must be a number or a list of %d numbers (one per level)", path,
                 key, u->num_levels);
        return false;
    }
    bool same_count = true, same_width = true;
    int width = 0;
    for (int l = 0; l < n; l++) {
        int ch = u->model_channels * u->channel_mult[l];
        if (heads[l] <= 0 || ch % heads[l]) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: '%s' gives %d heads at level %d, which do not divide its %d channels", path, key, heads[l], l,
                     ch);
            return false;
        }
        same_count &= heads[l] == heads[0];
        if (l == 0) width = ch / heads[l];
        same_width &= ch / heads[l] == width;
    }
    if (same_count) {
        u->num_heads = heads[0], u->head_dim = 0;
    } else if (same_width) {
        u->num_heads = 0, u->head_dim = width;
    } else {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: '%s' sets neither one head count nor one head width for every level; this UNet "
                 "layout is not supported",
                 path, key);
        return false;
    }
    return true;
}

/* A number key the weights also show: absent is fine, another value is an error. */
static bool check_number(const cJSON *o, const char *key, int weights_say, const char *what, const char *path,
                         sdt_error *error)
{
    double v;
    if (!get_number(o, key, &v) || v == (double)weights_say) return true;
    return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                    "%s: '%s' is %g but the weights' %s is %d; the config belongs to another model", path, key, v, what,
                    weights_say);
}

/* transformer_layers_per_block (one number, or one per level) must match the weights' depth at every
 * level with attention. */
static bool check_depths(const cJSON *unet, const char *path, const sdt_unet_config *u, sdt_error *error)
{
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(unet, "transformer_layers_per_block");
    if (!d || cJSON_IsNull(d)) return true;
    bool list = cJSON_IsArray(d) && cJSON_GetArraySize(d) == u->num_levels;
    if (!cJSON_IsNumber(d) && !list)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: 'transformer_layers_per_block' must be a number or a list of %d numbers "
                        "(one per level)",
                        path, u->num_levels);
    for (int l = 0; l < u->num_levels; l++) {
        const cJSON *e = list ? cJSON_GetArrayItem(d, l) : d;
        if (u->attention[l] && (!cJSON_IsNumber(e) || e->valueint != u->transformer_depth[l]))
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "%s: 'transformer_layers_per_block' gives level %d %d transformer blocks but "
                            "the weights have %d; the config belongs to another model",
                            path, l, cJSON_IsNumber(e) ? e->valueint : -1, u->transformer_depth[l]);
    }
    return true;
}

/* SDXL's addition embedding: diffusers' "text_time" is LDM's label_emb on y. */
static bool apply_addition(const cJSON *unet, const char *path, sdt_unet_config *u, sdt_error *error)
{
    if (!check_number(unet, "projection_class_embeddings_input_dim", u->adm_in_channels, "label_emb input width", path,
                      error))
        return false;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(unet, "addition_embed_type");
    const char *t = cJSON_IsString(type) ? type->valuestring : NULL;
    if (u->adm_in_channels > 0 ? !t || strcmp(t, "text_time") : t != NULL)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: 'addition_embed_type' is %s but the weights %s; the config belongs to "
                        "another model",
                        path, t ? t : "absent",
                        u->adm_in_channels > 0 ? "have SDXL's add_embedding (\"text_time\")" : "have no add_embedding");
    double dim;
    if (u->adm_in_channels > 0 && get_number(unet, "addition_time_embed_dim", &dim))
        u->addition_time_embed_dim = (int)dim;
    return true;
}

static bool apply_unet(const cJSON *unet, const char *path, sd_config *cfg, sdt_error *error)
{
    sdt_unet_config *u = &cfg->unet;
    if (!check_number(unet, "in_channels", u->in_channels, "UNet input channels", path, error) ||
        !check_number(unet, "out_channels", u->out_channels, "UNet output channels", path, error) ||
        !check_number(unet, "cross_attention_dim", u->context_dim, "cross-attention width", path, error))
        return false;
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(unet, "use_linear_projection");
    if (cJSON_IsBool(lp) && cJSON_IsTrue(lp) != u->linear_proj) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: 'use_linear_projection' is %s but the weights' proj_in is a %s; the config belongs "
                 "to another model",
                 path, cJSON_IsTrue(lp) ? "true" : "false", u->linear_proj ? "Linear" : "1x1 conv");
        return false;
    }
    /* attention scores are fp32 on both backends whatever this says (unet.h); kept for the record and the writer */
    const cJSON *up = cJSON_GetObjectItemCaseSensitive(unet, "upcast_attention");
    if (cJSON_IsBool(up)) u->upcast_attention = cJSON_IsTrue(up);
    return check_depths(unet, path, u, error) && apply_addition(unet, path, u, error) &&
           apply_heads(unet, path, u, error);
}

/* transformers' CLIPTextConfig: the head count, activation and layer-norm epsilon are the truth
 * (weights cannot show them); the sizes must match the weights. projection_dim is checked only for
 * an encoder whose pooled output is used (SDXL's bigG); SD 1.x/2.x condition on the hidden states. */
static bool apply_clip_config(const cJSON *te, const char *path, clip_config *c, sdt_error *error)
{
    if (c->projection_dim > 0 &&
        !check_number(te, "projection_dim", c->projection_dim, "text projection width", path, error))
        return false;
    if (!check_number(te, "hidden_size", c->width, "text encoder width", path, error) ||
        !check_number(te, "num_hidden_layers", c->layers, "text encoder layer count", path, error) ||
        !check_number(te, "intermediate_size", c->mlp_width, "text encoder MLP width", path, error) ||
        !check_number(te, "vocab_size", c->vocab, "token embedding row count", path, error) ||
        !check_number(te, "max_position_embeddings", c->positions, "position count", path, error))
        return false;
    double v;
    if (get_number(te, "num_attention_heads", &v)) {
        if (!(v >= 1 && v <= c->width) || v != (int)v || c->width % (int)v)
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "%s: 'num_attention_heads' (%g) must be a whole number that divides the "
                            "width %d",
                            path, v, c->width);
        c->heads = (int)v;
    }
    if (get_number(te, "layer_norm_eps", &v)) {
        if (!(v >= 1e-30 && v <= 1))
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "%s: 'layer_norm_eps' must be a number from 1e-30 to 1 (CLIP's is 1e-05)", path);
        c->ln_eps = (float)v;
    }
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(te, "hidden_act");
    if (act && !cJSON_IsNull(act)) {
        const char *a = cJSON_GetStringValue(act);
        if (a && !strcmp(a, "quick_gelu"))
            c->act = SDT_ACT_QUICK_GELU;
        else if (a && !strcmp(a, "gelu"))
            c->act = SDT_ACT_GELU;
        else
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "%s: 'hidden_act' is %s%s%s; SD's text encoders use quick_gelu (SD 1.x) or "
                            "gelu (SD 2.x)",
                            path, a ? "\"" : "", a ? a : "not a string", a ? "\"" : "");
    }
    return clip_config_check(c, error);
}

static bool apply_text_encoder(const cJSON *te, const char *path, sd_config *cfg, sdt_error *error)
{
    return apply_clip_config(te, path, &cfg->clip, error);
}

/* SDXL's text_encoder_2 (CLIPTextModelWithProjection); a folder without SDXL's weights has no use for it. */
static bool apply_text_encoder_2(const cJSON *te, const char *path, sd_config *cfg, sdt_error *error)
{
    return cfg->clip2.width == 0 || apply_clip_config(te, path, &cfg->clip2, error);
}

static bool apply_vae(const cJSON *vae, const char *path, sd_config *cfg, sdt_error *error)
{
    double v;
    const cJSON *upcast = cJSON_GetObjectItemCaseSensitive(vae, "force_upcast");
    cfg->vae.fp16_safe = cJSON_IsFalse(upcast) ? 1 : 0;
    if (!get_number(vae, "scaling_factor", &v)) return true;
    if (!(v >= 1e-30 && v <= 1e30))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: 'scaling_factor' must be a positive number (SD's is 0.18215)",
                        path);
    cfg->vae.scaling = (float)v;
    /* SD3's and Flux's VAEs: the pipelines decode latents / scaling_factor + shift_factor (null or absent: 0). */
    if (!get_number(vae, "shift_factor", &v)) return true;
    if (!(v >= -1e30 && v <= 1e30))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: 'shift_factor' must be a finite number (SD3's is 0.0609)",
                        path);
    cfg->vae.shift = (float)v;
    return true;
}

static bool apply_scheduler(const cJSON *s, const char *path, sd_config *cfg, sdt_error *error)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(s, "prediction_type");
    if (!p || cJSON_IsNull(p)) return true;
    const char *t = cJSON_GetStringValue(p);
    if (t && !strcmp(t, "epsilon"))
        cfg->unet.v_prediction = false;
    else if (t && !strcmp(t, "v_prediction"))
        cfg->unet.v_prediction = true;
    else {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: 'prediction_type' is %s%s%s; sdtrain trains epsilon and v_prediction models", path, t ? "\"" : "",
                 t ? t : "not a string", t ? "\"" : "");
        return false;
    }
    cfg->prediction_source = SD_PREDICTION_FROM_CONFIG;
    return true;
}

/* The [library, class] pair model_index.json gives a part, or NULL. */
static const char *part_class(const cJSON *index, const char *part)
{
    const cJSON *pair = cJSON_GetObjectItemCaseSensitive(index, part);
    return cJSON_IsArray(pair) ? cJSON_GetStringValue(cJSON_GetArrayItem(pair, 1)) : NULL;
}

/* model_index.json: the pipeline must be an SD 1.x/2.x one (a CLIP text encoder, a UNet2DConditionModel)
 * or SDXL base (a CLIPTextModel and a CLIPTextModelWithProjection as text_encoder_2); anything else (the
 * SDXL refiner: bigG alone as text_encoder_2) is named before shapes are guessed. */
static bool check_index(const cJSON *index, const char *path, sdt_error *error)
{
    const char *pipeline = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(index, "_class_name"));
    const char *te = part_class(index, "text_encoder"), *unet = part_class(index, "unet");
    const char *te2 = part_class(index, "text_encoder_2");
    bool te_ok = !te || !strcmp(te, "CLIPTextModel") || !strcmp(te, "CLIPTextModelWithProjection");
    bool te2_ok = !te2 || (te && !strcmp(te2, "CLIPTextModelWithProjection"));
    bool unet_ok = !unet || !strcmp(unet, "UNet2DConditionModel");
    if (te2 && !te)
        return sdt_fail(error, SDT_ERR_UNSUPPORTED,
                        "%s: the pipeline is %s with only a second text encoder (%s), as SDXL's "
                        "refiner has; sdtrain trains SDXL base, not the refiner: use the base model",
                        path, pipeline ? pipeline : "unnamed", te2);
    if (!te_ok || !te2_ok || !unet_ok)
        return sdt_fail(
            error, SDT_ERR_UNSUPPORTED,
            "%s: the pipeline is %s (text encoder %s%s%s, UNet %s); sdtrain trains Stable "
            "Diffusion 1.x and 2.x models (StableDiffusionPipeline: one CLIPTextModel, a UNet2DConditionModel) "
            "and SDXL base (StableDiffusionXLPipeline: a CLIPTextModel and a CLIPTextModelWithProjection); "
            "use such a model",
            path, pipeline ? pipeline : "unnamed", te ? te : "none", te2 ? " and " : "", te2 ? te2 : "",
            unet ? unet : "none");
    return true;
}

bool sdt_diffusers_index_check(const char *folder, sdt_error *error)
{
    bool present;
    char *path;
    cJSON *j = read_json(folder, "", "model_index.json", &present, &path, error);
    bool ok = present ? j && check_index(j, path, error) : true;
    cJSON_Delete(j);
    g_free(path);
    return ok;
}

bool sdt_diffusers_config_apply(const char *folder, sd_config *cfg, sdt_error *error)
{
    static const struct {
        const char *sub, *name;
        bool (*apply)(const cJSON *j, const char *path, sd_config *cfg, sdt_error *error);
    } files[] = {{"unet", "config.json", apply_unet},
                 {"text_encoder", "config.json", apply_text_encoder},
                 {"text_encoder_2", "config.json", apply_text_encoder_2},
                 {"vae", "config.json", apply_vae},
                 {"scheduler", "scheduler_config.json", apply_scheduler}};
    bool ok = true;
    for (size_t i = 0; ok && i < sizeof files / sizeof files[0]; i++) {
        bool present;
        char *path;
        cJSON *j = read_json(folder, files[i].sub, files[i].name, &present, &path, error);
        if (present) ok = j && files[i].apply(j, path, cfg, error);
        cJSON_Delete(j);
        g_free(path);
    }
    return ok && sdt_unet_config_validate(&cfg->unet, error);
}

/* ---- writing ------------------------------------------------------------------------- */

/* A float config value as its shortest decimal (1e-05, not 9.99999974737875e-06). */
static double decimal(float v)
{
    char buf[32];
    sdt_c_snprintf(buf, sizeof buf, "%.7g", (double)v);
    return sdt_c_strtod(buf, NULL);
}

/* A float field written so it reads back as a float: cJSON prints 1.0 as "1", which
 * transformers' typed configs refuse ("initializer_factor expected float, got int"). */
static void add_float(cJSON *o, const char *name, double v)
{
    char buf[40];
    sdt_c_snprintf(buf, sizeof buf, "%.15g", v);
    if (!strpbrk(buf, ".eEni")) strncat(buf, ".0", sizeof buf - strlen(buf) - 1);
    cJSON_AddItemToObject(o, name, cJSON_CreateRaw(buf));
}

static cJSON *int_list(const int *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

static cJSON *str_list(const char *const *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateString(v[i]));
    return a;
}

static cJSON *pair(const char *a, const char *b)
{
    const char *v[2] = {a, b};
    return str_list(v, 2);
}

static cJSON *null_pair(void)
{
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, cJSON_CreateNull());
    cJSON_AddItemToArray(a, cJSON_CreateNull());
    return a;
}

static cJSON *model_index(const sd_config *cfg)
{
    bool sdxl = cfg->clip2.width > 0;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "_class_name", sdxl ? "StableDiffusionXLPipeline" : "StableDiffusionPipeline");
    cJSON_AddStringToObject(o, "_diffusers_version", DIFFUSERS_VERSION);
    if (sdxl) { /* diffusers' SDXL base folder: no safety checker, watermark off */
        cJSON_AddBoolToObject(o, "force_zeros_for_empty_prompt", true);
    } else {
        cJSON_AddItemToObject(o, "feature_extractor", null_pair());
        cJSON_AddBoolToObject(o, "requires_safety_checker", false);
        cJSON_AddItemToObject(o, "safety_checker", null_pair());
    }
    cJSON_AddItemToObject(o, "scheduler", pair("diffusers", "PNDMScheduler"));
    cJSON_AddItemToObject(o, "text_encoder", pair("transformers", "CLIPTextModel"));
    if (sdxl) cJSON_AddItemToObject(o, "text_encoder_2", pair("transformers", "CLIPTextModelWithProjection"));
    cJSON_AddItemToObject(o, "tokenizer", pair("transformers", "CLIPTokenizer"));
    if (sdxl) cJSON_AddItemToObject(o, "tokenizer_2", pair("transformers", "CLIPTokenizer"));
    cJSON_AddItemToObject(o, "unet", pair("diffusers", "UNet2DConditionModel"));
    cJSON_AddItemToObject(o, "vae", pair("diffusers", "AutoencoderKL"));
    return o;
}

/* The latent side the model was trained at, diffusers' UNet sample_size (the pipeline's default
 * image is 8 times it): SDXL 128 (1024 px), SD 2.x's v-prediction models 96 (768-v), others 64.
 * Decided by the UNet's y input and prediction, what a folder's weights always tell. */
static int native_latent_size(const sdt_unet_config *u)
{
    return u->adm_in_channels > 0 ? 128 : u->v_prediction ? 96 : 64;
}

static cJSON *unet_json(const sdt_unet_config *u)
{
    cJSON *o = cJSON_CreateObject();
    int n = u->num_levels, out[SDT_UNET_MAX_LEVELS], heads[SDT_UNET_MAX_LEVELS];
    const char *down[SDT_UNET_MAX_LEVELS], *up[SDT_UNET_MAX_LEVELS];
    int depth = 0; /* the one depth of every level with attention, or -1 */
    for (int l = 0; l < n; l++) {
        if (u->attention[l]) depth = depth == 0 || depth == u->transformer_depth[l] ? u->transformer_depth[l] : -1;
        out[l] = u->model_channels * u->channel_mult[l];
        heads[l] = sdt_unet_config_heads(u, out[l]);
        down[l] = u->attention[l] ? "CrossAttnDownBlock2D" : "DownBlock2D";
        up[n - 1 - l] = u->attention[l] ? "CrossAttnUpBlock2D" : "UpBlock2D";
    }
    cJSON_AddStringToObject(o, "_class_name", "UNet2DConditionModel");
    cJSON_AddStringToObject(o, "_diffusers_version", DIFFUSERS_VERSION);
    cJSON_AddStringToObject(o, "act_fn", "silu");
    if (u->adm_in_channels > 0) { /* SDXL: label_emb on y is diffusers' text_time add_embedding */
        cJSON_AddStringToObject(o, "addition_embed_type", "text_time");
        cJSON_AddNumberToObject(o, "addition_time_embed_dim", u->addition_time_embed_dim);
    }
    /* diffusers' SD configs name the head count attention_head_dim: one number when every level has it */
    cJSON_AddItemToObject(o, "attention_head_dim",
                          u->num_heads > 0 ? cJSON_CreateNumber(u->num_heads) : int_list(heads, n));
    cJSON_AddItemToObject(o, "block_out_channels", int_list(out, n));
    cJSON_AddBoolToObject(o, "center_input_sample", false);
    cJSON_AddNumberToObject(o, "cross_attention_dim", u->context_dim);
    cJSON_AddItemToObject(o, "down_block_types", str_list(down, n));
    cJSON_AddNumberToObject(o, "downsample_padding", 1);
    cJSON_AddBoolToObject(o, "flip_sin_to_cos", u->flip_sin_to_cos);
    cJSON_AddNumberToObject(o, "freq_shift", decimal(u->freq_shift));
    cJSON_AddNumberToObject(o, "in_channels", u->in_channels);
    cJSON_AddNumberToObject(o, "layers_per_block", u->num_res_blocks);
    add_float(o, "mid_block_scale_factor", 1);
    add_float(o, "norm_eps", decimal(u->norm_eps));
    cJSON_AddNumberToObject(o, "norm_num_groups", u->norm_groups);
    cJSON_AddNumberToObject(o, "out_channels", u->out_channels);
    if (u->adm_in_channels > 0) cJSON_AddNumberToObject(o, "projection_class_embeddings_input_dim", u->adm_in_channels);
    cJSON_AddNumberToObject(o, "sample_size", native_latent_size(u));
    /* diffusers' mid block takes the last level's depth (SDXL: 10 and 10) */
    cJSON_AddItemToObject(o, "transformer_layers_per_block",
                          depth > 0 ? cJSON_CreateNumber(depth) : int_list(u->transformer_depth, n));
    cJSON_AddItemToObject(o, "up_block_types", str_list(up, n));
    cJSON_AddBoolToObject(o, "upcast_attention", u->upcast_attention);
    cJSON_AddBoolToObject(o, "use_linear_projection", u->linear_proj);
    return o;
}

static cJSON *text_json(const clip_config *c)
{
    cJSON *o = cJSON_CreateObject();
    const char *arch[1] = {c->projection_dim > 0 ? "CLIPTextModelWithProjection" : "CLIPTextModel"};
    cJSON_AddItemToObject(o, "architectures", str_list(arch, 1));
    add_float(o, "attention_dropout", 0.0);
    cJSON_AddNumberToObject(o, "bos_token_id", 0);
    add_float(o, "dropout", 0.0);
    cJSON_AddNumberToObject(o, "eos_token_id", 2);
    cJSON_AddStringToObject(o, "hidden_act", c->act == SDT_ACT_QUICK_GELU ? "quick_gelu" : "gelu");
    cJSON_AddNumberToObject(o, "hidden_size", c->width);
    add_float(o, "initializer_factor", 1.0);
    add_float(o, "initializer_range", 0.02);
    cJSON_AddNumberToObject(o, "intermediate_size", c->mlp_width);
    add_float(o, "layer_norm_eps", decimal(c->ln_eps));
    cJSON_AddNumberToObject(o, "max_position_embeddings", c->positions);
    cJSON_AddStringToObject(o, "model_type", "clip_text_model");
    cJSON_AddNumberToObject(o, "num_attention_heads", c->heads);
    cJSON_AddNumberToObject(o, "num_hidden_layers", c->layers);
    cJSON_AddNumberToObject(o, "pad_token_id", 1);
    cJSON_AddNumberToObject(o, "projection_dim", c->projection_dim > 0 ? c->projection_dim : c->width);
    cJSON_AddStringToObject(o, "torch_dtype", "float32");
    cJSON_AddStringToObject(o, "transformers_version", "4.25.1");
    cJSON_AddNumberToObject(o, "vocab_size", c->vocab);
    return o;
}

static cJSON *vae_json(const vae_config *v, int image_size)
{
    cJSON *o = cJSON_CreateObject();
    int out[VAE_MAX_LEVELS];
    const char *down[VAE_MAX_LEVELS], *up[VAE_MAX_LEVELS];
    for (int l = 0; l < v->levels; l++) {
        out[l] = v->ch * v->ch_mult[l];
        down[l] = "DownEncoderBlock2D";
        up[l] = "UpDecoderBlock2D";
    }
    cJSON_AddStringToObject(o, "_class_name", "AutoencoderKL");
    cJSON_AddStringToObject(o, "_diffusers_version", DIFFUSERS_VERSION);
    cJSON_AddStringToObject(o, "act_fn", "silu");
    cJSON_AddItemToObject(o, "block_out_channels", int_list(out, v->levels));
    cJSON_AddItemToObject(o, "down_block_types", str_list(down, v->levels));
    cJSON_AddNumberToObject(o, "in_channels", v->in_channels);
    cJSON_AddNumberToObject(o, "latent_channels", v->z_channels);
    cJSON_AddNumberToObject(o, "layers_per_block", v->res_blocks);
    cJSON_AddNumberToObject(o, "norm_num_groups", v->groups);
    cJSON_AddNumberToObject(o, "out_channels", v->in_channels);
    cJSON_AddNumberToObject(o, "sample_size", image_size);
    add_float(o, "scaling_factor", decimal(v->scaling));
    /* Written only for the 16-channel VAE's kind, so SD's configs stay as SD's folders ship them. */
    if (v->shift != 0.0f) add_float(o, "shift_factor", decimal(v->shift));
    cJSON_AddItemToObject(o, "up_block_types", str_list(up, v->levels));
    if (!v->has_quant_conv) {
        cJSON_AddBoolToObject(o, "use_post_quant_conv", false);
        cJSON_AddBoolToObject(o, "use_quant_conv", false);
    }
    return o;
}

/* SD's training schedule (scaled linear betas 0.00085..0.012 over 1000 steps) as the PNDM
 * scheduler SD 1.5's folder ships; prediction_type says eps or v. */
static cJSON *scheduler_json(bool v_prediction)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "_class_name", "PNDMScheduler");
    cJSON_AddStringToObject(o, "_diffusers_version", DIFFUSERS_VERSION);
    cJSON_AddNumberToObject(o, "beta_end", 0.012);
    cJSON_AddStringToObject(o, "beta_schedule", "scaled_linear");
    cJSON_AddNumberToObject(o, "beta_start", 0.00085);
    cJSON_AddBoolToObject(o, "clip_sample", false);
    cJSON_AddNumberToObject(o, "num_train_timesteps", 1000);
    cJSON_AddStringToObject(o, "prediction_type", v_prediction ? "v_prediction" : "epsilon");
    cJSON_AddBoolToObject(o, "set_alpha_to_one", false);
    cJSON_AddBoolToObject(o, "skip_prk_steps", true);
    cJSON_AddNumberToObject(o, "steps_offset", 1);
    cJSON_AddNullToObject(o, "trained_betas");
    return o;
}

static bool write_json(const char *folder, const char *sub, const char *name, cJSON *j, sdt_error *error)
{
    char *dir = sub ? g_build_filename(folder, sub, NULL) : g_strdup(folder);
    char *path = g_build_filename(dir, name, NULL);
    char *json = j ? sdt_json_print(j) : NULL;
    char *text = json ? g_strconcat(json, "\n", NULL) : NULL;
    bool ok = text != NULL;
    if (!ok) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory writing the config", path);
    if (ok && g_mkdir_with_parents(dir, 0755) != 0) {
        sdt_fail(error, SDT_ERR_IO, "%s: the folder cannot be created; check the permissions", dir);
        ok = false;
    }
    if (ok) ok = sdt_atomic_write(path, text, strlen(text), error);
    cJSON_free(json);
    g_free(text);
    cJSON_Delete(j);
    g_free(path);
    g_free(dir);
    return ok;
}

bool sdt_diffusers_config_write(const char *folder, const sd_config *cfg, sdt_error *error)
{
    return write_json(folder, NULL, "model_index.json", model_index(cfg), error) &&
           write_json(folder, "unet", "config.json", unet_json(&cfg->unet), error) &&
           write_json(folder, "text_encoder", "config.json", text_json(&cfg->clip), error) &&
           (cfg->clip2.width == 0 ||
            write_json(folder, "text_encoder_2", "config.json", text_json(&cfg->clip2), error)) &&
           write_json(folder, "vae", "config.json", vae_json(&cfg->vae, 8 * native_latent_size(&cfg->unet)), error) &&
           write_json(folder, "scheduler", "scheduler_config.json", scheduler_json(cfg->unet.v_prediction), error);
}
