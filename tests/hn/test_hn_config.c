/* test_hn_config - the Create hypernetwork checks (one sentence per bad value, naming
 * the field and the fix), the text parsers, activation and init names, A1111's layer
 * plan (Sequential positions), sizes, parameter counts and the legacy dropout rebuild. */
#include <string.h>

#include "hn/hn_config.h"
#include "sdt_test.h"

typedef void (*mutate_fn)(sdt_hn_config *c);

static void name_empty(sdt_hn_config *c)
{
    c->name[0] = '\0';
}
static void name_slash(sdt_hn_config *c)
{
    snprintf(c->name, sizeof(c->name), "a/b");
}
static void name_dot(sdt_hn_config *c)
{
    snprintf(c->name, sizeof(c->name), ".hidden");
}
static void name_colon(sdt_hn_config *c)
{
    snprintf(c->name, sizeof(c->name), "x:y");
}
static void widths_none(sdt_hn_config *c)
{
    c->width_count = 0;
}
static void widths_zero(sdt_hn_config *c)
{
    c->widths[1] = 0;
}
static void widths_dup(sdt_hn_config *c)
{
    c->widths[2] = c->widths[0];
}
static void widths_huge(sdt_hn_config *c)
{
    c->widths[0] = SDT_HN_MAX_WIDTH + 1;
}
static void structure_short(sdt_hn_config *c)
{
    c->entry_count = 1;
}
static void structure_start(sdt_hn_config *c)
{
    c->layer_structure[0] = 2;
}
static void structure_end(sdt_hn_config *c)
{
    c->layer_structure[2] = 0.5;
}
static void structure_negative(sdt_hn_config *c)
{
    c->layer_structure[1] = -1;
}
static void structure_nan(sdt_hn_config *c)
{
    c->layer_structure[1] = NAN;
}
static void structure_tiny(sdt_hn_config *c)
{
    c->layer_structure[1] = 0.001;
} /* int(320 * 0.001) = 0 */
static void structure_huge(sdt_hn_config *c)
{
    c->layer_structure[1] = 1000;
}
static void activation_unknown(sdt_hn_config *c)
{
    snprintf(c->activation, sizeof(c->activation), "Swish");
}
static void activation_prelu(sdt_hn_config *c)
{
    snprintf(c->activation, sizeof(c->activation), "prelu");
}
static void activation_softmax(sdt_hn_config *c)
{
    snprintf(c->activation, sizeof(c->activation), "softmax");
}
static void activation_glu(sdt_hn_config *c)
{
    snprintf(c->activation, sizeof(c->activation), "glu");
}
static void init_unknown(sdt_hn_config *c)
{
    c->init = SDT_HN_INIT_COUNT;
}
static void dropout_one(sdt_hn_config *c)
{
    c->use_dropout = true, c->dropout_structure[1] = 1.0;
}
static void dropout_negative(sdt_hn_config *c)
{
    c->use_dropout = true, c->dropout_structure[1] = -0.1;
}
static void dropout_first(sdt_hn_config *c)
{
    c->use_dropout = true, c->dropout_structure[0] = 0.1;
}

typedef struct bad_case {
    const char *what;
    mutate_fn mutate;
    const char *field; /* the sentence starts with or contains this */
    const char *fix;   /* and says this */
} bad_case;

static const bad_case bad_cases[] = {
    {"empty name", name_empty, "hypernetwork name", "give it a name"},
    {"slash in name", name_slash, "hypernetwork name", "use only letters"},
    {"leading dot", name_dot, "hypernetwork name", "start it with a letter"},
    {"colon in name", name_colon, "hypernetwork name", "use only letters"},
    {"no widths", widths_none, "modules:", "choose 1 to"},
    {"zero width", widths_zero, "modules:", "use the K/V widths"},
    {"duplicate width", widths_dup, "modules:", "list each width once"},
    {"huge width", widths_huge, "modules:", "use the K/V widths"},
    {"one entry", structure_short, "layer structure:", "starting and ending with 1"},
    {"starts with 2", structure_start, "layer structure:", "the first multiplier must be 1"},
    {"ends with 0.5", structure_end, "layer structure:", "the last multiplier must be 1"},
    {"negative multiplier", structure_negative, "layer structure:", "must be > 0"},
    {"NaN multiplier", structure_nan, "layer structure:", "must be > 0"},
    {"zero-unit layer", structure_tiny, "layer structure:", "choose a multiplier giving 1 to"},
    {"giant layer", structure_huge, "layer structure:", "choose a multiplier giving 1 to"},
    {"unknown activation", activation_unknown, "activation:", "use one of"},
    {"prelu", activation_prelu, "activation:", "use \"leakyrelu\""},
    {"softmax", activation_softmax, "activation:", "instead of acting on each value"},
    {"glu", activation_glu, "activation:", "does not fit"},
    {"unknown init", init_unknown, "weight initialization:", "use Normal"},
    {"dropout 1", dropout_one, "dropout structure:", "between 0 and 1"},
    {"dropout -0.1", dropout_negative, "dropout structure:", "between 0 and 1"},
    {"dropout first entry", dropout_first, "dropout structure:", "set it to 0"},
};

static sdt_hn_config good(void)
{
    sdt_hn_config c = sdt_hn_config_default();
    snprintf(c.name, sizeof(c.name), "my-style 2.v1_x");
    return c;
}

static void check_validation(void)
{
    sdt_error err;
    sdt_error_clear(&err);
    sdt_hn_config c = good();
    CHECK(sdt_hn_config_validate(&c, true, &err), "the default config with a name must pass: %s", err.message);
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        const bad_case *b = &bad_cases[i];
        c = good();
        b->mutate(&c);
        sdt_error_clear(&err);
        bool ok = sdt_hn_config_validate(&c, true, &err);
        CHECK(!ok && err.code == SDT_ERR_VALIDATION, "%s: must be refused as VALIDATION (got %s)", b->what,
              sdt_error_code_name(err.code));
        CHECK(strstr(err.message, b->field) != NULL,
              "%s: the sentence must name the field \"%s\": "
              "%s",
              b->what, b->field, err.message);
        CHECK(strstr(err.message, b->fix) != NULL,
              "%s: the sentence must give the fix \"%s\": "
              "%s",
              b->what, b->fix, err.message);
    }
    /* a file may carry a non-zero first dropout entry (A1111 ignores it); only Create refuses it */
    c = good();
    dropout_first(&c);
    CHECK(sdt_hn_config_validate(&c, false, &err), "a file's first dropout entry is not an error: %s", err.message);
    /* without use_dropout, the structure is not looked at (A1111 replaces it by zeros) */
    c = good();
    c.dropout_structure[1] = 7;
    CHECK(sdt_hn_config_validate(&c, true, &err), "an unused dropout structure must pass: %s", err.message);
    CHECK(sdt_hn_config_dropout(&c, 0) == 0.0, "an unused dropout structure must count as zeros");
    /* the recommended "0, 0.05, 0.15" puts dropout after the output Linear too, as A1111 does */
    c = good();
    c.use_dropout = true;
    c.dropout_structure[0] = 0, c.dropout_structure[1] = 0.05, c.dropout_structure[2] = 0.15;
    CHECK(sdt_hn_config_validate(&c, true, &err), "A1111's recommended dropout must pass: %s", err.message);
}

static void check_parsing(void)
{
    sdt_error err;
    sdt_error_clear(&err);
    double v[SDT_HN_MAX_ENTRIES];
    int n = 0;
    CHECK(sdt_hn_parse_numbers("layer structure", " 1, 2.5 ,1e0", v, SDT_HN_MAX_ENTRIES, &n, &err) && n == 3 &&
              v[0] == 1 && v[1] == 2.5 && v[2] == 1,
          "\" 1, 2.5 ,1e0\" must parse to 1, 2.5, 1: %s", err.message);
    const char *bad[] = {"", "1,,1", "1, 2,", "1, two, 1", "1 2 1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sdt_error_clear(&err);
        CHECK(!sdt_hn_parse_numbers("layer structure", bad[i], v, SDT_HN_MAX_ENTRIES, &n, &err) &&
                  strstr(err.message, "layer "
                                      "structure:") &&
                  (strstr(err.message, "e.g.") || strstr(err.message, "such as")),
              "\"%s\" must be refused with a sentence naming the field and an example: %s", bad[i], err.message);
    }
    CHECK(!sdt_hn_parse_numbers("dropout structure", "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0", v, SDT_HN_MAX_ENTRIES, &n,
                                &err) &&
              strstr(err.message, "at most"),
          "17 entries must be refused: %s", err.message);
    sdt_hn_config c = good();
    CHECK(sdt_hn_parse_layer_structure("1, 2, 2, 1", &c, &err) && c.entry_count == 4 && c.layer_structure[2] == 2,
          "layer structure text must set the structure: %s", err.message);
    CHECK(sdt_hn_parse_dropout_structure("0, 0.1, 0.2, 0", &c, &err) && c.dropout_structure[2] == 0.2,
          "a dropout structure of the same length must be taken: %s", err.message);
    CHECK(!sdt_hn_parse_dropout_structure("0, 0.1, 0.2", &c, &err) && err.code == SDT_ERR_VALIDATION &&
              strstr(err.message, "dropout structure:") && strstr(err.message, "one per layer-structure entry"),
          "a shorter dropout structure must be refused: %s", err.message);
    CHECK(!sdt_hn_parse_dropout_structure("0, 0.1, 0.2, 0, 0", &c, &err) && strstr(err.message, "has 5 entries"),
          "a longer dropout structure must be refused: %s", err.message);
    int w[SDT_HN_MAX_WIDTHS];
    CHECK(sdt_hn_parse_widths("768, 320,640 ,1280", w, SDT_HN_MAX_WIDTHS, &n, &err) && n == 4 && w[0] == 768 &&
              w[3] == 1280,
          "widths must parse: %s", err.message);
    CHECK(!sdt_hn_parse_widths("768, 1.5", w, SDT_HN_MAX_WIDTHS, &n, &err) && strstr(err.message, "modules:"),
          "a fractional width must be refused: %s", err.message);
}

static void check_names(void)
{
    sdt_error err;
    sdt_error_clear(&err);
    sdt_activation act;
    CHECK(sdt_hn_activation_lookup("swish", &act, &err) && act == SDT_ACT_HARDSWISH,
          "A1111's swish is torch.nn.Hardswish");
    CHECK(sdt_hn_activation_lookup("silu", &act, &err) && act == SDT_ACT_SILU, "silu is SiLU");
    CHECK(sdt_hn_activation_lookup("linear", &act, &err) && act == SDT_ACT_IDENTITY, "linear adds nothing");
    CHECK(sdt_hn_activation_lookup("celu", &act, &err) && act == SDT_ACT_ELU, "celu(alpha 1) is elu");
    for (int i = 0; sdt_hn_activation_name_at(i); i++)
        CHECK(sdt_hn_activation_lookup(sdt_hn_activation_name_at(i), NULL, &err),
              "listed activation %s must be accepted", sdt_hn_activation_name_at(i));
    for (int i = 0; i < SDT_HN_INIT_COUNT; i++) {
        sdt_hn_init init;
        CHECK(sdt_hn_init_parse(sdt_hn_init_name((sdt_hn_init)i), &init, &err) && init == (sdt_hn_init)i,
              "init name %s must read back", sdt_hn_init_name((sdt_hn_init)i));
    }
    sdt_hn_init init;
    CHECK(!sdt_hn_init_parse("normal", &init, &err) && strstr(err.message, "weight initialization:"),
          "init names are A1111's spelling: %s", err.message);
}

static void check_plan(void)
{
    sdt_hn_config c = good();
    sdt_hn_layer_plan plan[SDT_HN_MAX_ENTRIES];
    /* [1, 2, 1] relu: Linear 0, ReLU 1, Linear 2 (no activation after the last one) */
    snprintf(c.activation, sizeof(c.activation), "relu");
    int n = sdt_hn_config_plan(&c, 768, plan);
    CHECK(n == 2 && plan[0].linear_position == 0 && plan[0].activation_position == 1 && plan[1].linear_position == 2 &&
              plan[1].activation_position == -1 && plan[0].in_size == 768 && plan[0].out_size == 1536 &&
              plan[1].out_size == 768,
          "[1, 2, 1] relu must be linear.0, (relu), linear.2 with 768 -> 1536 -> 768");
    /* linear: no activation layers, so linear.0 and linear.1 */
    snprintf(c.activation, sizeof(c.activation), "linear");
    c.activate_output = true;
    n = sdt_hn_config_plan(&c, 320, plan);
    CHECK(n == 2 && plan[1].linear_position == 1 && plan[0].activation_position == -1, "linear: linear.0, linear.1");
    /* layer norm after every Linear, the last too; dropout after activation and norm */
    snprintf(c.activation, sizeof(c.activation), "swish");
    c.layer_norm = true, c.activate_output = false, c.use_dropout = true;
    c.dropout_structure[0] = 0, c.dropout_structure[1] = 0.3, c.dropout_structure[2] = 0;
    n = sdt_hn_config_plan(&c, 640, plan);
    CHECK(plan[0].linear_position == 0 && plan[0].activation_position == 1 && plan[0].norm_position == 2 &&
              plan[0].dropout_position == 3 && plan[1].linear_position == 4 && plan[1].activation_position == -1 &&
              plan[1].norm_position == 5 && plan[1].dropout_position == -1,
          "swish + norm + dropout: Linear 0, Hardswish 1, LayerNorm 2, Dropout 3, Linear 4, LayerNorm 5");
    CHECK(sdt_hn_config_last_layer_dropout(&c), "dropout before the last Linear is A1111's last_layer_dropout");
    /* sizes truncate as Python's int(): int(320 * 1.7) = 544 */
    CHECK(sdt_hn_layer_size(320, 1.7) == 544 && sdt_hn_layer_size(768, 0.3) == 230, "int(width * m) truncates");
    /* A1111's default hypernetwork: 21,932,160 parameters (2 x the per-width sums) */
    sdt_hn_config d = good();
    int64_t expect = 0;
    for (int w = 0; w < d.width_count; w++) {
        int64_t dim = d.widths[w];
        expect += 2 * ((dim * 2 * dim + 2 * dim) + (2 * dim * dim + dim));
    }
    CHECK(sdt_hn_config_param_count(&d) == expect, "default param count %lld, want %lld",
          (long long)sdt_hn_config_param_count(&d), (long long)expect);
}

static void check_legacy_dropout(void)
{
    double ds[6];
    sdt_hn_legacy_dropout(5, true, true, ds);
    CHECK(ds[0] == 0 && ds[1] == 0.3 && ds[2] == 0.3 && ds[3] == 0.3 && ds[4] == 0,
          "[1, 2, 2, 2, 1] with last layer dropout: [0, 0.3, 0.3, 0.3, 0]");
    sdt_hn_legacy_dropout(5, true, false, ds);
    CHECK(ds[2] == 0.3 && ds[3] == 0, "without last layer dropout the entry before the last is 0");
    sdt_hn_legacy_dropout(3, false, true, ds);
    CHECK(ds[0] == 0 && ds[1] == 0 && ds[2] == 0, "without dropout: zeros");
}

int main(void)
{
    check_validation();
    check_parsing();
    check_names();
    check_plan();
    check_legacy_dropout();
    return sdt_test_finish("hn_config");
}
