/* checkpoint_yaml.c - A1111's <stem>.yaml beside a checkpoint; see checkpoint_yaml.h. */
#include "checkpoint_yaml.h"

#include <glib.h>
#include <math.h>
#include <string.h>

#include "ldm_yaml.h"

#define UNET_PARAMS "model.params.unet_config.params."

char *sdt_checkpoint_yaml_path(const char *checkpoint_path)
{
    /* os.path.splitext: from the file name's last '.', when something not a '.' comes before it */
    const char *base = strrchr(checkpoint_path, '/');
    base = base ? base + 1 : checkpoint_path;
    const char *dot = strrchr(base, '.');
    bool has_ext = false;
    for (const char *c = base; dot && c < dot && !has_ext; c++) has_ext = *c != '.';
    size_t stem = has_ext ? (size_t)(dot - checkpoint_path) : strlen(checkpoint_path);
    return g_strdup_printf("%.*s.yaml", (int)stem, checkpoint_path);
}

char *sdt_checkpoint_yaml_beside(const char *checkpoint_path)
{
    if (g_file_test(checkpoint_path, G_FILE_TEST_IS_DIR)) return NULL; /* a diffusers folder has its own configs */
    char *yaml = sdt_checkpoint_yaml_path(checkpoint_path);
    if (g_file_test(yaml, G_FILE_TEST_EXISTS)) return yaml;
    g_free(yaml);
    return NULL;
}

/* The sentence's end for any field that contradicts the weights. */
#define ANOTHER_MODEL                                                                                                  \
    "the yaml describes another model - put the config that came with this checkpoint there, or remove it"

/* field (a dotted path), when present, must be the integer the weights show (have: what). */
static bool check_int(const sdt_yaml_doc *doc, const char *field, int have, const char *what, sdt_error *error)
{
    const sdt_yaml_node *n = sdt_yaml_get(doc->root, field);
    long long said;
    if (!n || sdt_yaml_is_null(n)) return true;
    if (!sdt_yaml_as_int(n, &said))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: line %d: %s is %s%s%s, not an integer; the checkpoint's %s is %d - "
                        "write %d there",
                        doc->path, n->line, field, n->kind == SDT_YAML_SCALAR ? "'" : "",
                        n->kind == SDT_YAML_SCALAR ? n->text : "a block", n->kind == SDT_YAML_SCALAR ? "'" : "", what,
                        have, have);
    if (said != have)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: line %d: %s is %lld but the checkpoint's %s is %d; " ANOTHER_MODEL, doc->path, n->line,
                        field, said, what, have);
    return true;
}

static bool check_scale_factor(const sdt_yaml_doc *doc, float have, sdt_error *error)
{
    const char *field = "model.params.scale_factor";
    const sdt_yaml_node *n = sdt_yaml_get(doc->root, field);
    double said;
    if (!n || sdt_yaml_is_null(n)) return true;
    if (!sdt_yaml_as_double(n, &said))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: line %d: %s is not a number; the latent scaling factor sdtrain "
                        "uses for this model is %g - write that there",
                        doc->path, n->line, field, (double)have);
    if (!(fabs(said - have) <= 1e-6 * fabs((double)have)))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: line %d: %s is %g but sdtrain scales this model's latents by %g "
                        "(SD 1.x/2.x's VAE); training at another scale would not match the model - put the config that "
                        "came with this checkpoint there, or remove it",
                        doc->path, n->line, field, said, (double)have);
    return true;
}

static bool check_linear_proj(const sdt_yaml_doc *doc, bool have, sdt_error *error)
{
    const char *field = UNET_PARAMS "use_linear_in_transformer";
    const sdt_yaml_node *n = sdt_yaml_get(doc->root, field);
    bool said;
    if (!n || sdt_yaml_is_null(n)) return true;
    if (!sdt_yaml_as_bool(n, &said))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: line %d: %s is not true or false; the checkpoint's transformers "
                        "project %s - write %s there",
                        doc->path, n->line, field,
                        have ? "with Linear layers"
                             : "with 1x1 "
                               "convolutions",
                        have ? "True" : "False");
    if (said != have)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: line %d: %s is %s but the checkpoint's transformers project with %s; " ANOTHER_MODEL,
                        doc->path, n->line, field, said ? "True" : "False",
                        have ? "Linear layers (SD 2.x)" : "1x1 convolutions (SD 1.x)");
    return true;
}

/* An integer field or none (absent, null, or LDM's -1 for "not set"); false when it is something else. */
static bool read_optional_int(const sdt_yaml_doc *doc, const char *field, long long *out, sdt_error *error)
{
    const sdt_yaml_node *n = sdt_yaml_get(doc->root, field);
    *out = -1;
    if (!n || sdt_yaml_is_null(n)) return true;
    if (!sdt_yaml_as_int(n, out))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: line %d: %s is not an integer; write a whole number (or -1 for "
                        "none) there",
                        doc->path, n->line, field);
    return true;
}

/* The head split, which the weights cannot show: LDM's UNetModel takes num_head_channels (a fixed
 * head width; SD 2.x: 64) when it is not -1, else num_heads (a fixed count; SD 1.x: 8). Either
 * must split every level's width; the result goes to *u only when it does. */
static bool read_heads(const sdt_yaml_doc *doc, sdt_unet_config *u, sdt_error *error)
{
    long long width, count;
    if (!read_optional_int(doc, UNET_PARAMS "num_head_channels", &width, error) ||
        !read_optional_int(doc, UNET_PARAMS "num_heads", &count, error))
        return false;
    const char *field = width != -1 ? UNET_PARAMS "num_head_channels" : UNET_PARAMS "num_heads";
    long long value = width != -1 ? width : count;
    if (value == -1) return true;
    for (int l = 0; l < u->num_levels; l++) {
        int ch = u->model_channels * u->channel_mult[l];
        if (value <= 0 || ch % value)
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "%s: line %d: %s is %lld, which does not split the UNet's level %d "
                            "(%d channels) into %s; " ANOTHER_MODEL,
                            doc->path, sdt_yaml_get(doc->root, field)->line, field, value, l, ch,
                            width != -1 ? "heads of that width" : "that many heads");
    }
    u->num_heads = width != -1 ? 0 : (int)value;
    u->head_dim = width != -1 ? (int)value : 0;
    return true;
}

/* model.params.parameterization: "v", "eps" or absent (LDM's default, eps). */
static bool read_parameterization(const sdt_yaml_doc *doc, bool *v, sdt_error *error)
{
    const char *field = "model.params.parameterization";
    const sdt_yaml_node *n = sdt_yaml_get(doc->root, field);
    *v = false;
    if (!n || sdt_yaml_is_null(n)) return true;
    if (n->kind == SDT_YAML_SCALAR && strcmp(n->text, "v") == 0)
        *v = true;
    else if (n->kind == SDT_YAML_SCALAR && strcmp(n->text, "eps") == 0)
        *v = false;
    else if (n->kind == SDT_YAML_SCALAR && strcmp(n->text, "x0") == 0)
        return sdt_fail(error, SDT_ERR_UNSUPPORTED, "%s: line %d: %s is \"x0\"; sdtrain trains eps and v models only",
                        doc->path, n->line, field);
    else
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: line %d: %s is %s%s%s; it must be \"eps\" (the noise, SD 1.x and "
                        "SD 2.x 512) or \"v\" (SD 2.x 768-v) - fix the line",
                        doc->path, n->line, field, n->kind == SDT_YAML_SCALAR ? "'" : "",
                        n->kind == SDT_YAML_SCALAR ? n->text : "a block", n->kind == SDT_YAML_SCALAR ? "'" : "");
    return true;
}

static bool apply_doc(const sdt_yaml_doc *doc, sd_config *cfg, sdt_error *error)
{
    const sdt_yaml_node *model = sdt_yaml_get(doc->root, "model");
    if (!model || model->kind != SDT_YAML_MAPPING)
        return sdt_fail(
            error, SDT_ERR_BAD_FORMAT,
            "%s: no 'model:' mapping at the top, so this is not an LDM config - put "
            "the model's config there (e.g. v2-inference-v.yaml for an SD 2.x 768-v model) or rename the file",
            doc->path);
    bool v;
    if (!read_parameterization(doc, &v, error)) return false;
    if (!check_int(doc, UNET_PARAMS "in_channels", cfg->unet.in_channels, "UNet input channels", error) ||
        !check_int(doc, UNET_PARAMS "out_channels", cfg->unet.out_channels, "UNet output channels", error) ||
        !check_int(doc, UNET_PARAMS "model_channels", cfg->unet.model_channels, "UNet base width", error) ||
        !check_int(doc, UNET_PARAMS "context_dim", cfg->unet.context_dim, "cross-attention width (the text encoder's)",
                   error) ||
        !check_linear_proj(doc, cfg->unet.linear_proj, error) ||
        !check_int(doc, "model.params.first_stage_config.params.ddconfig.z_channels", cfg->vae.z_channels,
                   "VAE latent channels", error) ||
        !check_scale_factor(doc, cfg->vae.scaling, error))
        return false;
    sdt_unet_config unet = cfg->unet;
    if (!read_heads(doc, &unet, error)) return false;
    cfg->unet = unet;
    cfg->unet.v_prediction = v;
    cfg->prediction_source = SD_PREDICTION_FROM_CHECKPOINT_YAML;
    return true;
}

bool sdt_checkpoint_yaml_apply(const char *yaml_path, sd_config *cfg, sdt_error *error)
{
    sdt_yaml_doc doc;
    if (!sdt_yaml_read_file(yaml_path, &doc, error)) return false;
    bool ok = apply_doc(&doc, cfg, error);
    sdt_yaml_doc_free(&doc);
    return ok;
}
