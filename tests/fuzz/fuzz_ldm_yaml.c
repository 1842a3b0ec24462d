/* fuzz_ldm_yaml.c - libFuzzer target: any bytes as A1111's <stem>.yaml beside a checkpoint
 * (models/checkpoints/ldm_yaml.h, models/checkpoints/checkpoint_yaml.h). The reader either builds a tree that keeps its
 * promises (nesting within SDT_YAML_MAX_DEPTH, every mapping value keyed and its keys distinct,
 * counts that match the children, UTF-8 text without NUL) or refuses with a BAD_FORMAT sentence
 * naming the file. The same bytes as a file applied to the tiny model's configuration either
 * change nothing but the prediction type (and say the yaml decided it) and the head split (one
 * the UNet can take), or are refused with a sentence that names the yaml. */
#include <glib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_yaml.h"
#include "fuzz_file.h"
#include "ldm_yaml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_tree(const sdt_yaml_node *n, int depth)
{
    if (depth > SDT_YAML_MAX_DEPTH + 1 || n->line < 1) abort();
    if (n->kind == SDT_YAML_SCALAR) {
        if (!n->text || !g_utf8_validate(n->text, -1, NULL) || n->first || n->count) abort();
        return;
    }
    if (n->text) abort();
    size_t count = 0;
    GHashTable *keys = g_hash_table_new(g_str_hash, g_str_equal);
    for (const sdt_yaml_node *c = n->first; c; c = c->next, count++) {
        if ((n->kind == SDT_YAML_MAPPING) != (c->key != NULL)) abort();
        if (c->key && (!g_utf8_validate(c->key, -1, NULL) || !g_hash_table_add(keys, c->key))) abort();
        if (c->key && c->key[0] && !strchr(c->key, '.') && sdt_yaml_get(n, c->key) != c) abort();
        check_tree(c, depth + 1);
    }
    g_hash_table_destroy(keys);
    if (count != n->count) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sdt_yaml_doc doc;
    sdt_error error = {0};
    if (sdt_yaml_parse((const char *)data, size, "fuzz.yaml", &doc, &error)) {
        if (error.code != SDT_ERR_OK || !doc.root) abort();
        check_tree(doc.root, 1);
        sdt_yaml_doc_free(&doc);
    } else if (error.code != SDT_ERR_BAD_FORMAT || strncmp(error.message, "fuzz.yaml: ", 11) != 0) {
        abort();
    }

    char *yaml = fuzz_write("model.yaml", data, size);
    sd_config before = sd_config_preset(SD_FAMILY_TINY), c;
    memcpy(&c, &before, sizeof c); /* byte for byte, so memcmp below sees only what apply wrote */
    sdt_error applied = {0};
    if (sdt_checkpoint_yaml_apply(yaml, &c, &applied)) {
        if (applied.code != SDT_ERR_OK || c.prediction_source != SD_PREDICTION_FROM_CHECKPOINT_YAML) abort();
        sdt_error check = {0};
        if (!sdt_unet_config_validate(&c.unet, &check)) abort(); /* a head split the UNet can take */
        c.unet.num_heads = before.unet.num_heads;
        c.unet.head_dim = before.unet.head_dim;
        c.unet.v_prediction = before.unet.v_prediction;
        c.prediction_source = before.prediction_source;
        if (memcmp(&c, &before, sizeof c) != 0) abort();
    } else if (applied.code == SDT_ERR_OK || !strstr(applied.message, yaml)) {
        abort();
    }
    g_free(yaml);
    return 0;
}
