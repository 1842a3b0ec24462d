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

char *sd_checkpoint_describe_json(const char *path, bool *is_checkpoint, sdt_error *error)
{
    *is_checkpoint = false;
    sdt_error ignored = {0};
    sdt_weights *w = sdt_weights_open(path, &ignored);
    if (!w) return NULL;
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
