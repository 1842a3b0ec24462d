/* checkpoint_describe.c - see checkpoint_describe.h. */
#include "checkpoint_describe.h"

#include "c_numeric.h"

#include <cjson/cJSON.h>
#include <glib.h>
#include <string.h>

#include "checkpoint_yaml.h"
#include "prediction_probe.h"
#include "sd_config_detect.h"
#include "sd_model.h"
#include "transformer_detect.h"
#include "weights.h"
#include "c_json.h"

/* Who decides the prediction type when training with the default (auto), as sd_runtime_open does. */
static void add_prediction(cJSON *o, const sd_config *c, const char *config_file)
{
    const char *prediction = c->unet.v_prediction ? "v" : "epsilon";
    char *decided_by;
    if (c->prediction_source == SD_PREDICTION_FROM_CHECKPOINT_YAML) {
        decided_by = g_strdup_printf("%s (model.params.parameterization%s)", config_file,
                                     c->unet.v_prediction ? ": \"v\"" : ": \"eps\" or none");
    } else if (c->prediction_source == SD_PREDICTION_FROM_CONFIG) {
        decided_by = g_strdup("scheduler/scheduler_config.json (prediction_type)");
    } else if (sd_prediction_probe_applies(c)) {
        prediction = "detected when training";
        decided_by = g_strdup("the UNet probe (A1111's test for SD 2.x models), run when training starts; put A1111's "
                              "<stem>.yaml beside the file or pass --v-prediction / --epsilon to decide it");
    } else {
        decided_by = g_strdup(c->clip2.width > 0            ? "the default for SDXL models (epsilon, as SDXL base)"
                              : c->clip.act == SDT_ACT_GELU ? "the default for SD 2.x inpainting and depth models"
                                                            : "the default for SD 1.x models");
    }
    cJSON_AddStringToObject(o, "prediction", prediction);
    cJSON_AddStringToObject(o, "prediction_decided_by", decided_by);
    g_free(decided_by);
}

/* An SD3/SD3.5 or Flux.1 checkpoint: family, variant, the parts it carries and, for those it lacks, the options. */
static cJSON *describe_transformer(const char *path, const sdt_tf_info *in)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", path);
    cJSON_AddStringToObject(o, "kind", "model checkpoint");
    cJSON_AddStringToObject(o, "layout", in->layout);
    cJSON_AddStringToObject(o, "family", sdt_tf_family_name(in->family));
    cJSON_AddStringToObject(o, "family_title", sdt_tf_family_title(in->family));
    cJSON_AddStringToObject(o, "variant", in->variant);
    /* flat, so inspect prints one line each */
    cJSON_AddNumberToObject(o, in->family == SDT_TF_FLUX ? "double_blocks" : "blocks", in->blocks);
    if (in->family == SDT_TF_FLUX) {
        cJSON_AddNumberToObject(o, "single_blocks", in->single_blocks);
        cJSON_AddBoolToObject(o, "guidance", in->guidance);
    } else {
        cJSON_AddBoolToObject(o, "qk_norm", in->qk_norm);
        cJSON_AddNumberToObject(o, "mmdit_x_blocks", in->dual_layers);
    }
    cJSON_AddNumberToObject(o, "width", (double)in->hidden);
    cJSON *carries = cJSON_AddArrayToObject(o, "carries"), *lacks = cJSON_AddArrayToObject(o, "lacks");
    for (int p = SDT_TF_CLIP_L; p < SDT_TF_PART_COUNT; p++)
        if (sdt_tf_family_needs(in->family, (sdt_tf_part)p))
            cJSON_AddItemToArray(in->has[p] ? carries : lacks, cJSON_CreateString(sdt_tf_part_name((sdt_tf_part)p)));
    char *missing = sdt_tf_missing_sentence(in, path);
    if (missing)
        cJSON_AddStringToObject(o, "missing", missing);
    else
        cJSON_AddNullToObject(o, "missing");
    g_free(missing);
    return o;
}

/* A lone encoder or VAE file (clip_l.safetensors, t5xxl_fp16.safetensors, ae.safetensors): the option that takes
 * it. */
static cJSON *describe_lone_part(const char *path, sdt_tf_part part)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", path);
    cJSON_AddStringToObject(o, "kind", part == SDT_TF_VAE ? "VAE file" : "text encoder file");
    cJSON_AddStringToObject(o, "part", sdt_tf_part_name(part));
    cJSON_AddStringToObject(o, "part_title", sdt_tf_part_title(part));
    char *use =
        g_strdup_printf("give it with %s to an SD3/SD3.5 or Flux.1 checkpoint that lacks it", sdt_tf_part_option(part));
    cJSON_AddStringToObject(o, "use", use);
    g_free(use);
    return o;
}

char *sd_checkpoint_describe_json(const char *path, bool *is_checkpoint, sdt_error *error)
{
    *is_checkpoint = false;
    sdt_error ignored = {0};
    sdt_weights *w = sdt_weights_open(path, &ignored);
    if (!w) return NULL;
    sdt_tf_info tf;
    sdt_tf_part lone = SDT_TF_TRANSFORMER;
    if (sdt_tf_detect(w, &tf) || (lone = sdt_tf_lone_part(w)) != SDT_TF_TRANSFORMER) {
        *is_checkpoint = true;
        cJSON *o = tf.family != SDT_TF_NONE ? describe_transformer(path, &tf) : describe_lone_part(path, lone);
        char *out = sdt_json_print(o);
        cJSON_Delete(o);
        sdt_weights_close(w);
        if (!out) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory describing the model", path);
        return out;
    }
    bool folder = g_file_test(path, G_FILE_TEST_IS_DIR);
    char *yaml = sdt_checkpoint_yaml_beside(path);
    sd_config c;
    sdt_error detect = {0};
    char *text = NULL;
    bool weights_ok = sd_config_detect_weights(w, &c, &detect);
    if (weights_ok && !sd_config_apply_yaml_beside(w, &c, &detect)) {
        *is_checkpoint = true; /* a model whose yaml is wrong: that sentence is the answer */
        *error = detect;
    } else if (weights_ok) {
        *is_checkpoint = true;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "file", path);
        cJSON_AddStringToObject(o, "kind", "model checkpoint");
        cJSON_AddStringToObject(o, "layout", folder ? "diffusers folder" : "single file (LDM)");
        cJSON_AddStringToObject(o, "family", sd_family_name(c.family));
        cJSON_AddNumberToObject(o, "text_encoder_width", c.clip.width);
        if (c.clip2.width > 0) { /* SDXL: its second encoder, the pooled width y carries, its latent scale */
            cJSON_AddStringToObject(o, "family_title", sd_family_title(c.family));
            cJSON_AddNumberToObject(o, "text_encoder_2_width", c.clip2.width);
            cJSON_AddNumberToObject(o, "pooled_width", c.clip2.projection_dim);
            char scale[32]; /* the float's shortest decimal, 0.13025 */
            sdt_c_snprintf(scale, sizeof scale, "%.7g", (double)c.vae.scaling);
            cJSON_AddRawToObject(o, "vae_scaling_factor", scale);
        }
        cJSON_AddNumberToObject(o, "unet_in_channels", c.unet.in_channels);
        int sizes[SDT_UNET_MAX_KV_WIDTHS], n_sizes = sdt_unet_config_kv_widths(&c.unet, sizes);
        cJSON_AddItemToObject(o, "hypernetwork_sizes", cJSON_CreateIntArray(sizes, n_sizes));
        if (yaml)
            cJSON_AddStringToObject(o, "config_file", yaml);
        else
            cJSON_AddNullToObject(o, "config_file");
        add_prediction(o, &c, yaml);
        text = sdt_json_print(o);
        cJSON_Delete(o);
        if (!text) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory describing the model", path);
    }
    g_free(yaml);
    sdt_weights_close(w);
    return text;
}
