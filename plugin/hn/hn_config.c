/* hn_config.c - hypernetwork description, its checks and its layer plan; see hn_config.h. */
#include "hn/hn_config.h"

#include <ctype.h>
#include <glib.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_numeric.h"
#include "data/file_name.h"

/* A1111's fixed names first (swish is torch.nn.Hardswish there, not SiLU), then the
 * lower-case torch.nn activation classes that take no required argument and act
 * elementwise, at their torch defaults. "linear" (and a missing name in old files)
 * adds no layer. */
typedef struct hn_activation_entry {
    const char *name;
    sdt_activation act;
} hn_activation_entry;

static const hn_activation_entry hn_activations[] = {
    {"linear", SDT_ACT_IDENTITY},
    {"relu", SDT_ACT_RELU},
    {"leakyrelu", SDT_ACT_LEAKY_RELU},
    {"elu", SDT_ACT_ELU},
    {"swish", SDT_ACT_HARDSWISH},
    {"tanh", SDT_ACT_TANH},
    {"sigmoid", SDT_ACT_SIGMOID},
    {"hardswish", SDT_ACT_HARDSWISH},
    {"gelu", SDT_ACT_GELU},
    {"silu", SDT_ACT_SILU},
    {"mish", SDT_ACT_MISH},
    {"softplus", SDT_ACT_SOFTPLUS},
    {"softsign", SDT_ACT_SOFTSIGN},
    {"tanhshrink", SDT_ACT_TANHSHRINK},
    {"hardtanh", SDT_ACT_HARDTANH},
    {"relu6", SDT_ACT_RELU6},
    {"hardsigmoid", SDT_ACT_HARDSIGMOID},
    {"selu", SDT_ACT_SELU},
    {"celu", SDT_ACT_ELU}, /* CELU with its default alpha 1 is ELU */
    {"logsigmoid", SDT_ACT_LOGSIGMOID},
    {"hardshrink", SDT_ACT_HARDSHRINK},
    {"softshrink", SDT_ACT_SOFTSHRINK},
};
#define HN_ACTIVATION_COUNT ((int)(sizeof(hn_activations) / sizeof(hn_activations[0])))

/* torch.nn.modules.activation classes A1111 would list but that cannot work here, and why. */
typedef struct hn_refused_activation {
    const char *name;
    const char *why;
} hn_refused_activation;

static const hn_refused_activation hn_refused[] = {
    {"prelu", "has a learned slope parameter that sdtrain does not train; use \"leakyrelu\""},
    {"rrelu", "draws a random slope at every training step; use \"leakyrelu\""},
    {"threshold", "needs threshold and value arguments A1111 never passes (it fails to build there too)"},
    {"glu", "halves the width, so the next Linear does not fit (it fails in A1111 too)"},
    {"softmax", "normalises across a whole dimension instead of acting on each value"},
    {"softmin", "normalises across a whole dimension instead of acting on each value"},
    {"logsoftmax", "normalises across a whole dimension instead of acting on each value"},
    {"softmax2d", "normalises across channels instead of acting on each value"},
    {"multiheadattention", "is an attention layer, not an activation"},
};

static const char *const hn_init_names[SDT_HN_INIT_COUNT] = {"Normal", "XavierUniform", "XavierNormal",
                                                             "KaimingUniform", "KaimingNormal"};

sdt_hn_config sdt_hn_config_default(void)
{
    sdt_hn_config c;
    memset(&c, 0, sizeof(c));
    static const int widths[] = {768, 320, 640, 1280};
    c.width_count = 4;
    memcpy(c.widths, widths, sizeof(widths));
    c.entry_count = 3;
    c.layer_structure[0] = 1, c.layer_structure[1] = 2, c.layer_structure[2] = 1;
    snprintf(c.activation, sizeof(c.activation), "linear");
    c.init = SDT_HN_INIT_NORMAL;
    return c;
}

bool sdt_hn_activation_lookup(const char *name, sdt_activation *out, sdt_error *error)
{
    for (int i = 0; i < HN_ACTIVATION_COUNT; i++)
        if (name && strcmp(name, hn_activations[i].name) == 0) {
            if (out) *out = hn_activations[i].act;
            return true;
        }
    for (size_t i = 0; name && i < sizeof(hn_refused) / sizeof(hn_refused[0]); i++)
        if (strcmp(name, hn_refused[i].name) == 0) {
            sdt_fail(error, SDT_ERR_VALIDATION, "activation: \"%s\" %s", name, hn_refused[i].why);
            return false;
        }
    char list[512] = "";
    size_t used = 0;
    for (int i = 0; i < HN_ACTIVATION_COUNT && used < sizeof(list); i++)
        used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", hn_activations[i].name);
    sdt_fail(error, SDT_ERR_VALIDATION,
             "activation: \"%s\" is not an activation sdtrain knows; use one of %s (lower "
             "case)",
             name ? name : "(none)", list);
    return false;
}

const char *sdt_hn_activation_name_at(int index)
{
    return index >= 0 && index < HN_ACTIVATION_COUNT ? hn_activations[index].name : NULL;
}

const char *sdt_hn_init_name(sdt_hn_init init)
{
    return (int)init >= 0 && init < SDT_HN_INIT_COUNT ? hn_init_names[init] : "unknown";
}

bool sdt_hn_init_parse(const char *name, sdt_hn_init *out, sdt_error *error)
{
    for (int i = 0; i < SDT_HN_INIT_COUNT; i++)
        if (name && strcmp(name, hn_init_names[i]) == 0) {
            *out = (sdt_hn_init)i;
            return true;
        }
    sdt_fail(error, SDT_ERR_VALIDATION,
             "weight initialization: \"%s\" is not one of Normal, XavierUniform, XavierNormal, KaimingUniform, "
             "KaimingNormal (spelled as A1111 does)",
             name ? name : "(none)");
    return false;
}

int sdt_hn_layer_size(int width, double multiplier)
{
    double v = (double)width * multiplier;
    if (!(v < (double)SDT_HN_MAX_HIDDEN + 1)) return SDT_HN_MAX_HIDDEN + 1; /* too big or NaN: caught by checks */
    return v <= 0 ? 0 : (int)v;
}

double sdt_hn_config_dropout(const sdt_hn_config *c, int layer)
{
    if (!c->use_dropout || layer < 0 || layer + 1 >= c->entry_count) return 0.0;
    return c->dropout_structure[layer + 1];
}

bool sdt_hn_config_last_layer_dropout(const sdt_hn_config *c)
{
    return c->use_dropout && c->entry_count >= 2 && c->dropout_structure[c->entry_count - 2] != 0.0;
}

void sdt_hn_legacy_dropout(int entry_count, bool use_dropout, bool last_layer_dropout, double *out)
{
    for (int i = 0; i < entry_count; i++) out[i] = 0.0;
    if (!use_dropout || entry_count < 2) return;
    for (int i = 1; i <= entry_count - 3; i++) out[i] = SDT_HN_LEGACY_DROPOUT;
    if (last_layer_dropout && entry_count >= 3) out[entry_count - 2] = SDT_HN_LEGACY_DROPOUT;
}

bool sdt_hn_config_has_width(const sdt_hn_config *c, int width)
{
    for (int i = 0; i < c->width_count; i++)
        if (c->widths[i] == width) return true;
    return false;
}

/* ---- parsing ---- */

/* Splits text at commas into trimmed tokens; calls take(token) for each. An empty
 * token (",," or a trailing comma) is an error, as float("") is in A1111. */
typedef bool (*hn_token_fn)(const char *field, const char *token, int index, void *out, sdt_error *error);

static bool hn_split(const char *field, const char *text, int max, int *count, hn_token_fn take, void *out,
                     sdt_error *error)
{
    *count = 0;
    if (!text) text = "";
    const char *p = text;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        while (len && isspace((unsigned char)*p)) p++, len--;
        while (len && isspace((unsigned char)p[len - 1])) len--;
        char token[64];
        if (len == 0) {
            sdt_fail(error, SDT_ERR_VALIDATION,
                     "%s: \"%s\" has an empty entry; write numbers separated by commas, "
                     "e.g. \"1, 2, 1\"",
                     field, text);
            return false;
        }
        if (len >= sizeof(token)) {
            sdt_fail(error, SDT_ERR_VALIDATION,
                     "%s: an entry of \"%s\" is too long to be a number; write numbers "
                     "separated by commas",
                     field, text);
            return false;
        }
        if (*count >= max) {
            sdt_fail(error, SDT_ERR_VALIDATION,
                     "%s: \"%s\" has more than %d entries; use at most "
                     "%d",
                     field, text, max, max);
            return false;
        }
        memcpy(token, p, len);
        token[len] = '\0';
        if (!take(field, token, *count, out, error)) return false;
        (*count)++;
        if (!comma) return true;
        p = comma + 1;
    }
}

static bool hn_take_double(const char *field, const char *token, int index, void *out, sdt_error *error)
{
    char *end;
    errno = 0;
    double v = sdt_c_strtod(token, &end);
    if (*end != '\0' || end == token) {
        sdt_fail(error, SDT_ERR_VALIDATION,
                 "%s: entry %d \"%s\" is not a number; write numbers such as 1, 2 or "
                 "0.5",
                 field, index + 1, token);
        return false;
    }
    ((double *)out)[index] = v;
    return true;
}

static bool hn_take_int(const char *field, const char *token, int index, void *out, sdt_error *error)
{
    char *end;
    errno = 0;
    long v = strtol(token, &end, 10);
    if (*end != '\0' || end == token || errno || v < 1 || v > SDT_HN_MAX_WIDTH) {
        sdt_fail(error, SDT_ERR_VALIDATION,
                 "%s: entry %d \"%s\" is not a width in 1..%d; write widths such as 768, "
                 "320, 640, 1280",
                 field, index + 1, token, SDT_HN_MAX_WIDTH);
        return false;
    }
    ((int *)out)[index] = (int)v;
    return true;
}

bool sdt_hn_parse_numbers(const char *field, const char *text, double *out, int max, int *count, sdt_error *error)
{
    return hn_split(field, text, max, count, hn_take_double, out, error);
}

bool sdt_hn_parse_layer_structure(const char *text, sdt_hn_config *c, sdt_error *error)
{
    return sdt_hn_parse_numbers("layer "
                                "structure",
                                text, c->layer_structure, SDT_HN_MAX_ENTRIES, &c->entry_count, error);
}

bool sdt_hn_parse_dropout_structure(const char *text, sdt_hn_config *c, sdt_error *error)
{
    double values[SDT_HN_MAX_ENTRIES];
    int count = 0;
    if (!sdt_hn_parse_numbers("dropout structure", text, values, SDT_HN_MAX_ENTRIES, &count, error)) return false;
    if (count != c->entry_count)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "dropout structure: \"%s\" has %d entries but the layer structure "
                        "has %d; give one per layer-structure entry, e.g. \"0, 0.05, 0.15\" for \"1, 2, 1\"",
                        text, count, c->entry_count);
    memcpy(c->dropout_structure, values, sizeof(values));
    return true;
}

/* The K/V widths of each model family's attentions (sdt_unet_config_kv_widths of its preset):
 * the cross-attention context first, then the self-attention widths. */
static const struct {
    const char *name, *widths;
} hn_width_presets[] = {
    {"sd1", "768, 320, 640, 1280"},
    {"sd2", "1024, 320, 640, 1280"},
    {"sdxl", "2048, 640, 1280"},
};

bool sdt_hn_parse_widths(const char *text, int *out, int max, int *count, sdt_error *error)
{
    for (size_t i = 0; text && i < sizeof hn_width_presets / sizeof hn_width_presets[0]; i++)
        if (g_ascii_strcasecmp(text, hn_width_presets[i].name) == 0) text = hn_width_presets[i].widths;
    return hn_split("modules", text, max, count, hn_take_int, out, error);
}

/* ---- validation ---- */

static bool hn_check_widths(const sdt_hn_config *c, sdt_error *error)
{
    if (c->width_count < 1 || c->width_count > SDT_HN_MAX_WIDTHS)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "modules: %d widths given; choose 1 to %d of 768, 1024, 320, 640, "
                        "1280 (768 and 320, 640, 1280 for SD 1.x, 1024 for SD 2.x cross-attention)",
                        c->width_count, SDT_HN_MAX_WIDTHS);
    for (int i = 0; i < c->width_count; i++) {
        if (c->widths[i] < 1 || c->widths[i] > SDT_HN_MAX_WIDTH)
            return sdt_fail(error, SDT_ERR_VALIDATION,
                            "modules: width %d is outside 1..%d; use the K/V widths of "
                            "the model (768, 320, 640, 1280 for SD 1.x)",
                            c->widths[i], SDT_HN_MAX_WIDTH);
        for (int j = 0; j < i; j++)
            if (c->widths[j] == c->widths[i])
                return sdt_fail(error, SDT_ERR_VALIDATION, "modules: width %d is listed twice; list each width once",
                                c->widths[i]);
    }
    return true;
}

static bool hn_check_structure(const sdt_hn_config *c, sdt_error *error)
{
    if (c->entry_count < 2 || c->entry_count > SDT_HN_MAX_ENTRIES)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "layer structure: %d entries given; give 2 to %d multipliers "
                        "starting and ending with 1, e.g. \"1, 2, 1\"",
                        c->entry_count, SDT_HN_MAX_ENTRIES);
    for (int i = 0; i < c->entry_count; i++)
        if (!isfinite(c->layer_structure[i]) || c->layer_structure[i] <= 0)
            return sdt_fail(error, SDT_ERR_VALIDATION,
                            "layer structure: entry %d (%g) is not a positive number; every "
                            "multiplier must be > 0, e.g. \"1, 2, 1\"",
                            i + 1, c->layer_structure[i]);
    if (c->layer_structure[0] != 1.0)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "layer structure: it starts with %g; the first multiplier must be "
                        "1 (the "
                        "module maps the K/V input back to its own width), e.g. \"1, 2, 1\"",
                        c->layer_structure[0]);
    if (c->layer_structure[c->entry_count - 1] != 1.0)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "layer structure: it ends with %g; the last multiplier must be 1 "
                        "(the module's output is added to its input), e.g. \"1, 2, 1\"",
                        c->layer_structure[c->entry_count - 1]);
    for (int w = 0; w < c->width_count; w++)
        for (int i = 1; i + 1 < c->entry_count; i++) {
            int size = sdt_hn_layer_size(c->widths[w], c->layer_structure[i]);
            if (size < 1 || size > SDT_HN_MAX_HIDDEN)
                return sdt_fail(error, SDT_ERR_VALIDATION,
                                "layer structure: entry %d (%g) makes a layer of int(%d * "
                                "%g) = %d units for width %d; choose a multiplier giving 1 to %d units",
                                i + 1, c->layer_structure[i], c->widths[w], c->layer_structure[i], size, c->widths[w],
                                SDT_HN_MAX_HIDDEN);
        }
    return true;
}

static bool hn_check_dropout(const sdt_hn_config *c, bool creating, sdt_error *error)
{
    if (!c->use_dropout) return true; /* the structure is ignored (A1111 sets it to zeros) */
    for (int i = 0; i < c->entry_count; i++) {
        double p = c->dropout_structure[i];
        if (!(p == 0.0 || (p > 0.0 && p < 1.0)))
            return sdt_fail(error, SDT_ERR_VALIDATION,
                            "dropout structure: entry %d (%g) is not a probability; each "
                            "entry must be 0 or between 0 and 1 (exclusive), e.g. \"0, 0.05, 0.15\"",
                            i + 1, p);
    }
    if (creating && c->dropout_structure[0] != 0.0)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "dropout structure: the first entry is %g but no layer comes "
                        "before it; set it to 0 (entry i+1 is the dropout after layer i), e.g. \"0, 0.05, 0.15\"",
                        c->dropout_structure[0]);
    return true;
}

bool sdt_hn_config_validate(const sdt_hn_config *c, bool creating, sdt_error *error)
{
    if (!c) return sdt_fail(error, SDT_ERR_VALIDATION, "no hypernetwork description given; pass one");
    if (memchr(c->name, '\0', sizeof(c->name)) == NULL)
        return sdt_fail(error, SDT_ERR_VALIDATION, "name: it is not terminated; pass a name of at most %d bytes",
                        SDT_HN_NAME_MAX);
    if (!sdt_file_name_check("hypernetwork", c->name, SDT_HN_NAME_MAX, error)) return false;
    if (!hn_check_widths(c, error) || !hn_check_structure(c, error)) return false;
    if (memchr(c->activation, '\0', sizeof(c->activation)) == NULL)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "activation: the name is not terminated; pass a name such as "
                        "\"relu\"");
    if (!sdt_hn_activation_lookup(c->activation, NULL, error)) return false;
    if ((int)c->init < 0 || c->init >= SDT_HN_INIT_COUNT)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "weight initialization: value %d is unknown; use Normal, "
                        "XavierUniform, XavierNormal, KaimingUniform or KaimingNormal",
                        (int)c->init);
    return hn_check_dropout(c, creating, error);
}

/* ---- layer plan ---- */

int sdt_hn_config_plan(const sdt_hn_config *c, int width, sdt_hn_layer_plan *plan)
{
    sdt_activation act = SDT_ACT_IDENTITY;
    sdt_hn_activation_lookup(c->activation, &act, NULL);
    int layers = c->entry_count - 1, position = 0;
    for (int i = 0; i < layers; i++) {
        sdt_hn_layer_plan *l = &plan[i];
        l->in_size = sdt_hn_layer_size(width, c->layer_structure[i]);
        l->out_size = sdt_hn_layer_size(width, c->layer_structure[i + 1]);
        l->linear_position = position++;
        bool activated = act != SDT_ACT_IDENTITY && (i < layers - 1 || c->activate_output);
        l->activation_position = activated ? position++ : -1;
        l->norm_position = c->layer_norm ? position++ : -1;
        l->dropout_p = sdt_hn_config_dropout(c, i);
        l->dropout_position = l->dropout_p > 0 ? position++ : -1;
    }
    return layers;
}

int64_t sdt_hn_module_param_count(const sdt_hn_config *c, int width)
{
    sdt_hn_layer_plan plan[SDT_HN_MAX_ENTRIES];
    int layers = sdt_hn_config_plan(c, width, plan);
    int64_t n = 0;
    for (int i = 0; i < layers; i++) {
        n += (int64_t)plan[i].out_size * plan[i].in_size + plan[i].out_size;
        if (plan[i].norm_position >= 0) n += 2 * (int64_t)plan[i].out_size;
    }
    return n;
}

int64_t sdt_hn_config_param_count(const sdt_hn_config *c)
{
    int64_t n = 0;
    for (int w = 0; w < c->width_count; w++) n += 2 * sdt_hn_module_param_count(c, c->widths[w]);
    return n;
}
