/* test_ldm_yaml.c - the YAML subset reader of LDM configs (models/checkpoints/ldm_yaml.h):
 *  - Stability's v2-inference-v.yaml (as A1111 ships it) reads: quoted "v", numbers in every
 *    form those files use (1.0e-4, 1.e-6, 0.18215, 10000000000000), booleans True/false, flow
 *    sequences "[ 1, 2, 4, 4 ]" and "[]", a block sequence at its key's indentation, comments;
 *  - quoted strings (escapes, '' in single quotes, '#' inside quotes), sequences of mappings,
 *    "{}", a leading "---", CRLF line ends, a byte-order mark;
 *  - each refusal (tabs, duplicate keys, depth and size bounds, anchors, aliases, tags, block
 *    scalars, flow mappings, unclosed quotes and brackets, a second document, NUL, bad UTF-8,
 *    misindentation) is BAD_FORMAT naming the file and the line;
 *  - the path A1111 looks at beside a checkpoint (os.path.splitext's rule);
 *  - applied to the published configurations (models/checkpoints/checkpoint_yaml.h): v2-inference-v.yaml on
 *    SD 2.x says v and keeps its 64-wide heads, v1-inference.yaml on SD 1.x says eps and keeps 8
 *    heads, v2's on SD 1.x is refused at context_dim; num_heads / num_head_channels set a tiny
 *    UNet's head split, one that does not divide a level is refused and leaves the config as it was. */
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_yaml.h"
#include "ldm_yaml.h"
#include "sdt_test.h"

static const char *const v2_inference_v =
    "model:\n"
    "  base_learning_rate: 1.0e-4\n"
    "  target: ldm.models.diffusion.ddpm.LatentDiffusion\n"
    "  params:\n"
    "    parameterization: \"v\"\n"
    "    linear_start: 0.00085\n"
    "    timesteps: 1000\n"
    "    first_stage_key: \"jpg\"\n"
    "    cond_stage_trainable: false\n"
    "    monitor: val/loss_simple_ema\n"
    "    scale_factor: 0.18215\n"
    "    use_ema: False # we set this to false because this is an inference only config\n"
    "\n"
    "    unet_config:\n"
    "      target: ldm.modules.diffusionmodules.openaimodel.UNetModel\n"
    "      params:\n"
    "        use_checkpoint: True\n"
    "        image_size: 32 # unused\n"
    "        in_channels: 4\n"
    "        attention_resolutions: [ 4, 2, 1 ]\n"
    "        channel_mult: [ 1, 2, 4, 4 ]\n"
    "        num_head_channels: 64 # need to fix for flash-attn\n"
    "        context_dim: 1024\n"
    "\n"
    "    first_stage_config:\n"
    "      params:\n"
    "        ddconfig:\n"
    "          #attn_type: \"vanilla-xformers\"\n"
    "          double_z: true\n"
    "          ch_mult:\n"
    "          - 1\n"
    "          - 2\n"
    "          - 4\n"
    "          attn_resolutions: []\n"
    "          dropout: 0.0\n"
    "    scheduler_config: # 10000 warmup steps\n"
    "      params:\n"
    "        cycle_lengths: [ 10000000000000 ]\n"
    "        f_start: [ 1.e-6 ]\n";

static bool parse(const char *text, size_t size, sdt_yaml_doc *doc, sdt_error *err)
{
    memset(err, 0, sizeof *err);
    return sdt_yaml_parse(text, size, "cfg/model.yaml", doc, err);
}

static void check_stability_config(void)
{
    printf("-- v2-inference-v.yaml\n");
    sdt_yaml_doc doc;
    sdt_error err;
    bool ok = parse(v2_inference_v, strlen(v2_inference_v), &doc, &err);
    CHECK(ok, "v2-inference-v.yaml parses: %s", err.message);
    if (!ok) return;
    const sdt_yaml_node *p = sdt_yaml_get(doc.root, "model.params.parameterization");
    CHECK(p && p->kind == SDT_YAML_SCALAR && p->quoted && strcmp(p->text, "v") == 0 && p->line == 5,
          "parameterization is the quoted string v on line 5");
    double d = 0;
    long long i = 0;
    bool b = true;
    CHECK(sdt_yaml_as_double(sdt_yaml_get(doc.root, "model.base_learning_rate"), &d) && d == 1.0e-4, "1.0e-4: %g", d);
    CHECK(sdt_yaml_as_double(sdt_yaml_get(doc.root, "model.params.scale_factor"), &d) && d == 0.18215, "0.18215: %g",
          d);
    CHECK(sdt_yaml_as_int(sdt_yaml_get(doc.root, "model.params.unet_config.params.in_channels"), &i) && i == 4,
          "in_channels 4");
    CHECK(!sdt_yaml_as_int(sdt_yaml_get(doc.root, "model.params.scale_factor"), &i), "0.18215 is not an integer");
    CHECK(!sdt_yaml_as_int(sdt_yaml_get(doc.root, "model.params.first_stage_key"), &i),
          "a quoted string is not a number");
    CHECK(sdt_yaml_as_bool(sdt_yaml_get(doc.root, "model.params.use_ema"), &b) && !b, "False, its comment dropped");
    CHECK(sdt_yaml_as_bool(sdt_yaml_get(doc.root, "model.params.cond_stage_trainable"), &b) && !b, "false");
    CHECK(sdt_yaml_as_bool(sdt_yaml_get(doc.root, "model.params.unet_config.params.use_checkpoint"), &b) && b, "True");
    CHECK(strcmp(sdt_yaml_get(doc.root, "model.params.monitor")->text, "val/loss_simple_ema") == 0, "a plain string");
    const sdt_yaml_node *mult = sdt_yaml_get(doc.root, "model.params.unet_config.params.channel_mult");
    CHECK(mult && mult->kind == SDT_YAML_SEQUENCE && mult->count == 4 && sdt_yaml_as_int(mult->first->next->next, &i) &&
              i == 4,
          "channel_mult [ 1, 2, 4, 4 ]");
    const sdt_yaml_node *ch = sdt_yaml_get(doc.root, "model.params.first_stage_config.params.ddconfig.ch_mult");
    CHECK(ch && ch->kind == SDT_YAML_SEQUENCE && ch->count == 3 && strcmp(ch->first->next->text, "2") == 0,
          "ch_mult: a block sequence at its key's indentation, three items");
    const sdt_yaml_node *attn =
        sdt_yaml_get(doc.root, "model.params.first_stage_config.params.ddconfig.attn_resolutions");
    CHECK(attn && attn->kind == SDT_YAML_SEQUENCE && attn->count == 0, "attn_resolutions: []");
    CHECK(sdt_yaml_get(doc.root, "model.params.first_stage_config.params.ddconfig.attn_type") == NULL,
          "a commented-out key is not there");
    CHECK(sdt_yaml_get(doc.root, "model.params.first_stage_config.params.ddconfig.dropout") != NULL,
          "the key after the block sequence belongs to the same mapping");
    const sdt_yaml_node *cyc = sdt_yaml_get(doc.root, "model.params.scheduler_config.params.cycle_lengths");
    CHECK(cyc && cyc->count == 1 && sdt_yaml_as_int(cyc->first, &i) && i == 10000000000000LL, "cycle_lengths");
    const sdt_yaml_node *fs = sdt_yaml_get(doc.root, "model.params.scheduler_config.params.f_start");
    CHECK(fs && fs->count == 1 && sdt_yaml_as_double(fs->first, &d) && d == 1e-6, "1.e-6");
    CHECK(sdt_yaml_get(doc.root, "model.params.nothing") == NULL && sdt_yaml_get(doc.root, "model.target.x") == NULL,
          "absent keys and paths through scalars are NULL");
    sdt_yaml_doc_free(&doc);
}

static void check_forms(void)
{
    printf("-- quoted strings, sequences of mappings, {}, ---, CRLF, BOM\n");
    const char *text = "\xEF\xBB\xBF---\r\n"
                       "a: \"x # not a comment \\\"q\\\" \\u00e9\\t\" # a comment\r\n"
                       "b: 'it''s: fine'\r\n"
                       "c: a#b\r\n"
                       "'quoted key': ~\r\n"
                       "d: {}\r\n"
                       "e:\r\n"
                       "  - name: one\r\n"
                       "    n: 1\r\n"
                       "  - - 2\r\n"
                       "    - '3'\r\n"
                       "  -\r\n"
                       "  - [ \"a, b\", c ]\r\n"
                       "f: -12\r\n"
                       "g:\r\n";
    sdt_yaml_doc doc;
    sdt_error err;
    bool ok = parse(text, strlen(text), &doc, &err);
    CHECK(ok, "the forms parse: %s", err.message);
    if (!ok) return;
    CHECK(strcmp(sdt_yaml_get(doc.root, "a")->text, "x # not a comment \"q\" \xc3\xa9\t") == 0,
          "double-quoted escapes: [%s]", sdt_yaml_get(doc.root, "a")->text);
    CHECK(strcmp(sdt_yaml_get(doc.root, "b")->text, "it's: fine") == 0, "'' in single quotes");
    CHECK(strcmp(sdt_yaml_get(doc.root, "c")->text, "a#b") == 0, "'#' without a space before it is text");
    CHECK(sdt_yaml_is_null(sdt_yaml_get(doc.root, "quoted key")), "a quoted key, ~ is null");
    const sdt_yaml_node *d = sdt_yaml_get(doc.root, "d");
    CHECK(d && d->kind == SDT_YAML_MAPPING && d->count == 0, "{} is an empty mapping");
    const sdt_yaml_node *e = sdt_yaml_get(doc.root, "e");
    CHECK(e && e->kind == SDT_YAML_SEQUENCE && e->count == 4, "e has four items");
    if (e && e->count == 4) {
        const sdt_yaml_node *m = e->first, *s = m->next, *empty = s->next, *flow = empty->next;
        CHECK(m->kind == SDT_YAML_MAPPING && m->count == 2 && strcmp(sdt_yaml_get(m, "n")->text, "1") == 0,
              "- name: one / n: 1 is one mapping");
        CHECK(s->kind == SDT_YAML_SEQUENCE && s->count == 2 && s->first->next->quoted, "- - 2 / - '3' is a sequence");
        CHECK(sdt_yaml_is_null(empty), "a lone '-' is null");
        CHECK(flow->kind == SDT_YAML_SEQUENCE && flow->count == 2 && strcmp(flow->first->text, "a, b") == 0,
              "a quoted flow item keeps its comma");
    }
    long long i = 0;
    CHECK(sdt_yaml_as_int(sdt_yaml_get(doc.root, "f"), &i) && i == -12, "-12");
    CHECK(sdt_yaml_is_null(sdt_yaml_get(doc.root, "g")), "a key with nothing below is null");
    sdt_yaml_doc_free(&doc);

    CHECK(parse("", 0, &doc, &err) && doc.root->kind == SDT_YAML_MAPPING && doc.root->count == 0,
          "empty text: empty mapping");
    sdt_yaml_doc_free(&doc);
}

/* text is refused naming the file, the line and a word of the fix. */
static void refused(const char *what, const char *text, size_t size, int line, const char *hint)
{
    sdt_yaml_doc doc;
    sdt_error err;
    bool ok = parse(text, size, &doc, &err);
    char at[32];
    snprintf(at, sizeof at, "line %d:", line);
    CHECK(!ok && err.code == SDT_ERR_BAD_FORMAT && strstr(err.message, "cfg/model.yaml") &&
              (line == 0 || strstr(err.message, at)) && strstr(err.message, hint),
          "%s: refused at line %d with '%s': %s", what, line, hint, ok ? "(taken)" : err.message);
    if (ok)
        sdt_yaml_doc_free(&doc);
    else
        printf("   %s: %s\n", what, err.message);
}

static void check_refusals(void)
{
    printf("-- what the reader refuses\n");
#define REFUSED(what, text, line, hint) refused(what, text, sizeof(text) - 1, line, hint)
    REFUSED("a tab indents", "model:\n\tparams: 1\n", 2, "tab");
    REFUSED("a duplicate key", "model:\n  a: 1\n  b: 2\n  a: 3\n", 4, "line 2");
    REFUSED("an anchor", "a: &x 1\n", 1, "anchor");
    REFUSED("an alias", "a: 1\nb: *x\n", 2, "alias");
    REFUSED("a tag", "a: !!python/object:os.system x\n", 1, "tag");
    REFUSED("a block scalar", "a: |\n  text\n", 1, "block scalar");
    REFUSED("a flow mapping", "a: {b: 1}\n", 1, "flow mapping");
    REFUSED("an unclosed double quote", "a: \"v\n", 1, "not closed");
    REFUSED("an unclosed single quote", "a:\n  b: 'v\n", 2, "not closed");
    REFUSED("a bad escape", "a: \"\\q\"\n", 1, "escape");
    REFUSED("a NUL escape", "a: \"\\x00\"\n", 1, "U+0000");
    REFUSED("a multi-line flow sequence", "a: [ 1,\n  2 ]\n", 1, "not closed");
    REFUSED("a nested flow sequence", "a: [ [1], 2 ]\n", 1, "inside another");
    REFUSED("junk after a flow sequence", "a: [ 1 ] x\n", 1, "follows the value");
    REFUSED("junk after a quoted value", "a: \"v\" x\n", 1, "follows the value");
    REFUSED("a second document", "a: 1\n---\nb: 2\n", 2, "document");
    REFUSED("a directive", "%YAML 1.2\na: 1\n", 1, "directive");
    REFUSED("a line that is no key", "model:\n  params\n", 2, "key: value");
    REFUSED("a deeper line after a value", "a: 1\n  b: 2\n", 2, "indented deeper");
    REFUSED("an item among keys", "a: 1\n- 2\n", 2, "among the keys");
    REFUSED("a second ': '", "a: b: c\n", 1, "quote the value");
    REFUSED("a NUL byte", "a: 1\nb: \0\n", 2, "NUL");
    REFUSED("bytes that are not UTF-8", "a: 1\n\nb: \xff\n", 3, "UTF-8");
    REFUSED("a line left of the first", "  a: 1\nb: 2\n", 2, "indented less");
    REFUSED("an item after a key on its line", "a: - 1\n", 1, "'- '");
#undef REFUSED

    /* nesting past the bound: key0: / key1: / ... each two spaces deeper */
    GString *deep = g_string_new(NULL);
    for (int d = 0; d <= SDT_YAML_MAX_DEPTH; d++) g_string_append_printf(deep, "%*sk%d:\n", 2 * d, "", d);
    g_string_append_printf(deep, "%*sleaf: 1\n", 2 * (SDT_YAML_MAX_DEPTH + 1), "");
    refused("nesting past the bound", deep->str, deep->len, SDT_YAML_MAX_DEPTH + 1, "levels deep");
    sdt_yaml_doc doc;
    sdt_error err;
    g_string_truncate(deep, 0);
    for (int d = 0; d < SDT_YAML_MAX_DEPTH - 1; d++) g_string_append_printf(deep, "%*sk%d:\n", 2 * d, "", d);
    g_string_append_printf(deep, "%*sleaf: 1\n", 2 * (SDT_YAML_MAX_DEPTH - 1), "");
    CHECK(parse(deep->str, deep->len, &doc, &err), "nesting at the bound (%d) is read: %s", SDT_YAML_MAX_DEPTH,
          err.message);
    sdt_yaml_doc_free(&doc);
    /* "- - - ... x" on one line nests too */
    g_string_truncate(deep, 0);
    for (int d = 0; d <= SDT_YAML_MAX_DEPTH; d++) g_string_append(deep, "- ");
    g_string_append(deep, "x\n");
    refused("one line of nested items", deep->str, deep->len, 1, "levels deep");
    g_string_free(deep, TRUE);

    size_t big = SDT_YAML_MAX_BYTES + 1;
    char *huge = malloc(big);
    memset(huge, '#', big);
    refused("a file over the size bound", huge, big, 0, "bytes");
    free(huge);
    GString *many = g_string_new("a: [");
    for (int k = 0; k < 100001; k++) g_string_append(many, "1,");
    g_string_append(many, "1]\n");
    refused("more values than the bound", many->str, many->len, 1, "values");
    g_string_free(many, TRUE);
}

static void check_paths(void)
{
    printf("-- the .yaml A1111 looks at beside a checkpoint\n");
    const char *cases[][2] = {
        {"models/Stable-diffusion/foo.safetensors", "models/Stable-diffusion/foo.yaml"},
        {"/m/sd-v2-1.ckpt", "/m/sd-v2-1.yaml"},
        {"/m/foo.bar.ckpt", "/m/foo.bar.yaml"},
        {"/m.d/foo", "/m.d/foo.yaml"},
        {"/m/.hidden", "/m/.hidden.yaml"},
        {"/m/foo..ckpt", "/m/foo..yaml"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char *p = sdt_checkpoint_yaml_path(cases[k][0]);
        CHECK(strcmp(p, cases[k][1]) == 0, "%s -> %s, want %s", cases[k][0], p, cases[k][1]);
        g_free(p);
    }
}

/* Applies text (written to a temporary model.yaml) to cfg; the error, if any, in err. */
static bool apply_text(const char *text, sd_config *cfg, sdt_error *err)
{
    char *dir = g_dir_make_tmp("sdt-ldm-yaml-XXXXXX", NULL), *path = g_build_filename(dir, "model.yaml", NULL);
    memset(err, 0, sizeof *err);
    bool ok = g_file_set_contents(path, text, -1, NULL) && sdt_checkpoint_yaml_apply(path, cfg, err);
    g_remove(path);
    g_rmdir(dir);
    g_free(path);
    g_free(dir);
    return ok;
}

static void check_apply(void)
{
    printf("-- the published configs on the published models\n");
    sd_config sd2 = sd_config_preset(SD_FAMILY_SD2), sd1 = sd_config_preset(SD_FAMILY_SD1);
    sdt_error err;
    /* v2-inference-v.yaml's lines above; v1-inference.yaml's UNet lines below */
    CHECK(apply_text(v2_inference_v, &sd2, &err), "v2-inference-v.yaml on SD 2.x: %s", err.message);
    CHECK(sd2.unet.v_prediction && sd2.prediction_source == SD_PREDICTION_FROM_CHECKPOINT_YAML &&
              sd2.unet.head_dim == 64 && sd2.unet.num_heads == 0,
          "SD 2.x: v, heads 64 wide");
    const char *v1 = "model:\n  params:\n    scale_factor: 0.18215\n    unet_config:\n      params:\n"
                     "        in_channels: 4\n        out_channels: 4\n        model_channels: 320\n"
                     "        num_heads: 8\n        context_dim: 768\n";
    sd1.unet.v_prediction = true; /* the file's eps (by default) must clear it */
    CHECK(apply_text(v1, &sd1, &err), "v1-inference.yaml on SD 1.x: %s", err.message);
    CHECK(!sd1.unet.v_prediction && sd1.unet.num_heads == 8 && sd1.unet.head_dim == 0, "SD 1.x: eps, 8 heads");
    sd_config before = sd_config_preset(SD_FAMILY_SD1), c = before;
    CHECK(!apply_text(v2_inference_v, &c, &err) && err.code == SDT_ERR_BAD_FORMAT && strstr(err.message, "line 23") &&
              strstr(err.message, "context_dim is 1024") && strstr(err.message, "is 768"),
          "v2's yaml on SD 1.x is refused at context_dim: %s", err.message);
    CHECK(c.unet.v_prediction == before.unet.v_prediction && c.prediction_source == before.prediction_source,
          "a refused yaml changes nothing");

    printf("-- the head split from the yaml\n");
    const char *heads[] = {"num_heads: 4", "num_head_channels: 16", "num_head_channels: -1\n        num_heads: 8",
                           "num_heads: 5", "num_head_channels: 48", "num_heads: many"};
    const int want_heads[] = {4, 0, 8}, want_width[] = {0, 16, 0};
    for (int k = 0; k < 6; k++) {
        sd_config t = sd_config_preset(SD_FAMILY_TINY);
        char *text = g_strdup_printf("model:\n  params:\n    unet_config:\n      params:\n        %s\n", heads[k]);
        bool ok = apply_text(text, &t, &err);
        if (k < 3) {
            CHECK(ok && t.unet.num_heads == want_heads[k] && t.unet.head_dim == want_width[k],
                  "'%s': num_heads %d head_dim %d (%s)", heads[k], t.unet.num_heads, t.unet.head_dim, err.message);
        } else {
            sd_config tiny = sd_config_preset(SD_FAMILY_TINY);
            CHECK(!ok && err.code == SDT_ERR_BAD_FORMAT && strstr(err.message, "line 5") &&
                      strstr(err.message, k == 4 ? "num_head_channels" : "num_heads") &&
                      t.unet.num_heads == tiny.unet.num_heads && t.unet.head_dim == tiny.unet.head_dim,
                  "'%s' is refused, the split unchanged: %s", heads[k], err.message);
            printf("   %s\n", err.message);
        }
        g_free(text);
    }
}

int main(void)
{
    check_stability_config();
    check_forms();
    check_refusals();
    check_paths();
    check_apply();
    return sdt_test_finish("test_ldm_yaml");
}
