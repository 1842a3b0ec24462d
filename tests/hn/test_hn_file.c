/* test_hn_file - hypernetwork .safetensors files: create + save + load bit-exact with
 * every key, deterministic bytes, overwrite protection, the init rules (A1111's
 * parameters, seeded), A1111's defaults for missing keys and old linear1/linear2
 * names, and a sentence for every broken file. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hn/hn_file.h"
#include "kernel_test.h"
#include "safetensors.h"
#include "torch_file.h"
#include "torch_save.h"

static char dir[256];

static void path_in(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", dir, name);
}

static float *weights_of(const sdt_hn *hn)
{
    float *w = kt_alloc((size_t)sdt_hn_param_numel(hn) * sizeof(float));
    sdt_error err;
    sdt_error_clear(&err);
    CHECK(sdt_hn_download(hn, w, &err), "download: %s", err.message);
    return w;
}

static unsigned char *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = kt_alloc(*size);
    size_t got = fread(buf, 1, *size, f);
    fclose(f);
    if (got != *size) {
        free(buf);
        return NULL;
    }
    return buf;
}

static sdt_hn_config full_config(void)
{
    sdt_hn_config c = sdt_hn_config_default();
    snprintf(c.name, sizeof(c.name), "round trip");
    c.width_count = 2;
    c.widths[0] = 16, c.widths[1] = 8; /* not ascending: the order must survive */
    c.entry_count = 4;
    c.layer_structure[0] = 1, c.layer_structure[1] = 1.5, c.layer_structure[2] = 0.75, c.layer_structure[3] = 1;
    snprintf(c.activation, sizeof(c.activation), "swish");
    c.init = SDT_HN_INIT_XAVIER_NORMAL;
    c.layer_norm = true;
    c.use_dropout = true;
    c.dropout_structure[0] = 0, c.dropout_structure[1] = 0.05, c.dropout_structure[2] = 0.15,
    c.dropout_structure[3] = 0;
    c.activate_output = true;
    return c;
}

static void check_round_trip(sdt_backend *be)
{
    sdt_error err;
    sdt_error_clear(&err);
    char path[512], path2[512];
    path_in(path, sizeof(path), "round trip.safetensors");
    path_in(path2, sizeof(path2), "again.safetensors");
    sdt_hn_config c = full_config();
    sdt_hn *hn = sdt_hn_create_file(&c, path, false, be, 42, &err);
    CHECK(hn != NULL, "create: %s", err.message);
    if (!hn) return;
    sdt_hn_info *info = sdt_hn_get_info(hn);
    info->step = 1234;
    snprintf(info->sd_checkpoint, sizeof(info->sd_checkpoint), "a1b2c3d4e5");
    snprintf(info->sd_checkpoint_name, sizeof(info->sd_checkpoint_name), "v1-5-pruned");
    CHECK(sdt_hn_save_safetensors(hn, path, &err), "save: %s", err.message);
    sdt_hn *back = sdt_hn_load_safetensors(path, be, &err);
    CHECK(back != NULL, "load: %s", err.message);
    if (back) {
        const sdt_hn_config *b = sdt_hn_get_config(back);
        CHECK(strcmp(b->name, c.name) == 0 && b->width_count == 2 && b->widths[0] == 16 && b->widths[1] == 8,
              "name and width order must survive");
        CHECK(b->entry_count == 4 && memcmp(b->layer_structure, c.layer_structure, 4 * sizeof(double)) == 0,
              "layer structure must survive exactly");
        CHECK(memcmp(b->dropout_structure, c.dropout_structure, 4 * sizeof(double)) == 0 && b->use_dropout,
              "dropout structure must survive exactly");
        CHECK(strcmp(b->activation, "swish") == 0 && b->init == SDT_HN_INIT_XAVIER_NORMAL && b->layer_norm &&
                  b->activate_output,
              "activation, init, layer norm and activate_output must survive");
        const sdt_hn_info *bi = sdt_hn_get_info(back);
        CHECK(bi->step == 1234 && !strcmp(bi->sd_checkpoint, "a1b2c3d4e5") &&
                  !strcmp(bi->sd_checkpoint_name, "v1-5-pruned"),
              "step and checkpoint must survive");
        float *w1 = weights_of(hn), *w2 = weights_of(back);
        CHECK(memcmp(w1, w2, (size_t)sdt_hn_param_numel(hn) * sizeof(float)) == 0, "weights must read back bit-exact");
        free(w1), free(w2);
        CHECK(sdt_hn_save_safetensors(back, path2, &err), "save again: %s", err.message);
        size_t n1 = 0, n2 = 0;
        unsigned char *f1 = read_all(path, &n1), *f2 = read_all(path2, &n2);
        CHECK(f1 && f2 && n1 == n2 && memcmp(f1, f2, n1) == 0, "load + save must give the same bytes");
        free(f1), free(f2);
        sdt_hn_free(back);
    }
    /* the file holds A1111's keys as metadata and A1111's state-dict names */
    sdt_safetensors *st = sdt_st_open(path, &err);
    CHECK(st != NULL, "open: %s", err.message);
    if (st) {
        const char *keys[] = {"name",
                              "step",
                              "layer_structure",
                              "activation_func",
                              "weight_initialization",
                              "is_layer_norm",
                              "use_dropout",
                              "dropout_structure",
                              "activate_output",
                              "last_layer_dropout",
                              "sd_checkpoint",
                              "sd_checkpoint_name"};
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
            CHECK(sdt_st_metadata_get(st, keys[i]) != NULL, "metadata key %s missing", keys[i]);
        CHECK(!strcmp(sdt_st_metadata_get(st, "layer_structure"), "[1.0, 1.5, 0.75, 1.0]"),
              "layer_structure is written as A1111's list: %s", sdt_st_metadata_get(st, "layer_structure"));
        CHECK(!strcmp(sdt_st_metadata_get(st, "last_layer_dropout"), "true"), "last_layer_dropout = entry -2 != 0");
        /* swish + norm + dropout: Linear 0, Hardswish 1, LayerNorm 2, Dropout 3, Linear 4, ... */
        CHECK(sdt_st_find(st, "16.0.linear.0.weight") && sdt_st_find(st, "16.1.linear.2.bias") &&
                  sdt_st_find(st, "8.1.linear.4.weight"),
              "tensor names must be A1111's state-dict paths");
        sdt_st_close(st);
    }
    /* overwrite protection */
    sdt_hn *again = sdt_hn_create_file(&c, path, false, be, 1, &err);
    CHECK(!again && err.code == SDT_ERR_ALREADY_EXISTS && strstr(err.message, "already exists") &&
              strstr(err.message, "overwrite"),
          "an existing file must be refused: %s", err.message);
    again = sdt_hn_create_file(&c, path, true, be, 1, &err);
    CHECK(again != NULL, "overwrite on must replace the file: %s", err.message);
    sdt_hn_free(again);
    char pt[512];
    path_in(pt, sizeof(pt), "x.ckpt");
    again = sdt_hn_create_file(&c, pt, false, be, 1, &err);
    CHECK(!again && err.code == SDT_ERR_UNSUPPORTED && strstr(err.message, ".pt"),
          "an unknown extension must get a sentence: %s", err.message);
    sdt_hn_config bad = c;
    bad.layer_structure[0] = 2;
    path_in(pt, sizeof(pt), "bad.safetensors");
    again = sdt_hn_create_file(&bad, pt, false, be, 1, &err);
    CHECK(!again && access(pt, F_OK) != 0, "a bad config must not create a file");
    sdt_hn_free(hn);
}

/* Sample mean and standard deviation of n floats. */
static void stats(const float *v, int64_t n, double *mean, double *std, double *max_abs)
{
    double s = 0, ss = 0, m = 0;
    for (int64_t i = 0; i < n; i++) s += v[i], ss += (double)v[i] * v[i], m = fmax(m, fabs(v[i]));
    *mean = s / n;
    *std = sqrt(ss / n - *mean * *mean);
    *max_abs = m;
}

static void check_init(sdt_backend *be)
{
    sdt_error err;
    sdt_error_clear(&err);
    for (int init = 0; init < SDT_HN_INIT_COUNT; init++) {
        sdt_hn_config c = sdt_hn_config_default();
        snprintf(c.name, sizeof(c.name), "init");
        c.width_count = 1, c.widths[0] = 320;
        c.layer_norm = true;
        c.init = (sdt_hn_init)init;
        sdt_hn *hn = sdt_hn_create(&c, be, 7, &err);
        CHECK(hn != NULL, "%s: %s", sdt_hn_init_name(c.init), err.message);
        if (!hn) continue;
        for (int i = 0; i < sdt_hn_param_count(hn); i++) {
            const sdt_hn_param *p = sdt_hn_param_at(hn, i);
            int64_t n = sdt_tensor_numel(&p->value);
            double mean, std, max_abs;
            stats(p->value.data, n, &mean, &std, &max_abs);
            if (p->is_bias) {
                CHECK(max_abs == 0, "%s: bias %s must be 0", sdt_hn_init_name(c.init), p->name);
                continue;
            }
            double fan_in = p->is_norm ? 0 : (double)p->value.shape[1], fan_out = (double)p->value.shape[0];
            double want_std = 0.01, bound = 0; /* Normal, and every LayerNorm weight (A1111) */
            if (!p->is_norm) switch (c.init) {
                    case SDT_HN_INIT_XAVIER_UNIFORM:
                        bound = sqrt(6.0 / (fan_in + fan_out));
                        break;
                    case SDT_HN_INIT_XAVIER_NORMAL:
                        want_std = sqrt(2.0 / (fan_in + fan_out));
                        break;
                    case SDT_HN_INIT_KAIMING_UNIFORM:
                        bound = sqrt(6.0 / fan_in);
                        break;
                    case SDT_HN_INIT_KAIMING_NORMAL:
                        want_std = sqrt(2.0 / fan_in);
                        break;
                    default:
                        break;
                }
            if (bound > 0) {
                want_std = bound / sqrt(3.0);
                CHECK(max_abs <= bound && max_abs > 0.99 * bound, "%s: %s max |w| %.4g vs bound %.4g",
                      sdt_hn_init_name(c.init), p->name, max_abs, bound);
            }
            /* n >= 320: the sample std is within a few percent of the target */
            CHECK(fabs(std / want_std - 1) < 0.15 && fabs(mean) < 0.2 * want_std,
                  "%s: %s std %.4g (want %.4g), mean "
                  "%.3g",
                  sdt_hn_init_name(c.init), p->name, std, want_std, mean);
        }
        sdt_hn *same = sdt_hn_create(&c, be, 7, &err), *other = sdt_hn_create(&c, be, 8, &err);
        float *a = weights_of(hn), *b = same ? weights_of(same) : NULL, *o = other ? weights_of(other) : NULL;
        size_t bytes = (size_t)sdt_hn_param_numel(hn) * sizeof(float);
        CHECK(b && memcmp(a, b, bytes) == 0, "%s: the same seed must give the same weights", sdt_hn_init_name(c.init));
        CHECK(o && memcmp(a, o, bytes) != 0, "%s: another seed must give other weights", sdt_hn_init_name(c.init));
        free(a), free(b), free(o);
        sdt_hn_free(same), sdt_hn_free(other), sdt_hn_free(hn);
    }
}

/* Writes a file by hand: module tensors for width 8 with the given state-dict keys and
 * shapes (K and V alike), plus metadata. */
typedef struct hand_tensor {
    const char *key;
    int64_t rows, cols;
} hand_tensor;

static bool write_hand(const char *path, const hand_tensor *t, int n, const sdt_st_kv *meta, int n_meta, float **values)
{
    sdt_st_write_item items[32];
    char names[32][64];
    int64_t shapes[32][2];
    int count = 0;
    size_t total = 0;
    for (int i = 0; i < n; i++) total += (size_t)(t[i].rows * (t[i].cols ? t[i].cols : 1));
    *values = kt_alloc(2 * total * sizeof(float));
    size_t at = 0;
    for (int kind = 0; kind < 2; kind++)
        for (int i = 0; i < n; i++, count++) {
            snprintf(names[count], sizeof(names[count]), "8.%d.%s", kind, t[i].key);
            shapes[count][0] = t[i].rows, shapes[count][1] = t[i].cols;
            int64_t numel = t[i].rows * (t[i].cols ? t[i].cols : 1);
            for (int64_t e = 0; e < numel; e++) (*values)[at + e] = (float)(at + e) * 0.001f - 0.3f;
            items[count] = (sdt_st_write_item){.name = names[count],
                                               .dtype = SDT_ST_F32,
                                               .ndim = t[i].cols ? 2 : 1,
                                               .shape = shapes[count],
                                               .data = *values + at};
            at += (size_t)numel;
        }
    sdt_error err;
    sdt_error_clear(&err);
    bool ok = sdt_st_write(path, items, (size_t)count, meta, (size_t)n_meta, &err);
    CHECK(ok, "writing %s: %s", path, err.message);
    return ok;
}

static void check_old_files(sdt_backend *be)
{
    sdt_error err;
    sdt_error_clear(&err);
    char path[512];
    /* the oldest A1111 files: no metadata, linear1/linear2 */
    path_in(path, sizeof(path), "old style.safetensors");
    hand_tensor old[] = {
        {"linear1.weight", 16, 8}, {"linear1.bias", 16, 0}, {"linear2.weight", 8, 16}, {"linear2.bias", 8, 0}};
    float *values = NULL;
    if (write_hand(path, old, 4, NULL, 0, &values)) {
        sdt_hn *hn = sdt_hn_load_safetensors(path, be, &err);
        CHECK(hn != NULL, "an old file must load: %s", err.message);
        if (hn) {
            const sdt_hn_config *c = sdt_hn_get_config(hn);
            CHECK(c->entry_count == 3 && c->layer_structure[1] == 2 && !strcmp(c->activation, "linear") &&
                      c->activate_output && !c->layer_norm && !c->use_dropout && c->init == SDT_HN_INIT_NORMAL,
                  "missing keys take A1111's defaults ([1, 2, 1], no activation, activate_output true)");
            CHECK(!strcmp(c->name, "old style") && sdt_hn_get_info(hn)->step == 0, "name from the file name, step 0");
            const sdt_hn_param *w = sdt_hn_param_find(hn, "8.1.linear.1.weight");
            CHECK(w && ((const float *)w->value.data)[0] == values[16 * 8 + 16 + 16 * 8 + 8 + 16 * 8 + 16],
                  "linear2 of V is linear.1");
            sdt_hn_free(hn);
        }
    }
    free(values);
    /* broken files, each with its sentence */
    hand_tensor good[] = {
        {"linear.0.weight", 16, 8}, {"linear.0.bias", 16, 0}, {"linear.1.weight", 8, 16}, {"linear.1.bias", 8, 0}};
    hand_tensor missing[] = {{"linear.0.weight", 16, 8}, {"linear.0.bias", 16, 0}, {"linear.1.weight", 8, 16}};
    hand_tensor extra[] = {{"linear.0.weight", 16, 8},
                           {"linear.0.bias", 16, 0},
                           {"linear.1.weight", 8, 16},
                           {"linear.1.bias", 8, 0},
                           {"linear.5.weight", 8, 8}};
    hand_tensor wrong_shape[] = {
        {"linear.0.weight", 24, 8}, {"linear.0.bias", 24, 0}, {"linear.1.weight", 8, 24}, {"linear.1.bias", 8, 0}};
    sdt_st_kv relu[] = {{"activation_func", "relu"}};
    sdt_st_kv bad_bool[] = {{"is_layer_norm", "maybe"}};
    sdt_st_kv prelu[] = {{"activation_func", "prelu"}};
    sdt_st_kv bad_structure[] = {{"layer_structure", "[1, 2, 2]"}};
    sdt_st_kv short_dropout[] = {{"layer_structure", "[1, 2, 1]"}, {"dropout_structure", "[0, 0.1]"}};
    struct {
        const char *what;
        const hand_tensor *t;
        int n;
        const sdt_st_kv *meta;
        int n_meta;
        const char *expect;
    } broken[] = {
        {"missing tensor", missing, 3, NULL, 0, "is missing"},
        {"extra tensor", extra, 5, NULL, 0, "does not belong"},
        {"wrong shape", wrong_shape, 4, NULL, 0, "has shape [24"},
        {"relu metadata on linear tensors", good, 4, relu, 1, "does not belong"},
        {"bad bool", good, 4, bad_bool, 1, "is_layer_norm is \"maybe\""},
        {"prelu", good, 4, prelu, 1, "activation: \"prelu\""},
        {"bad structure", good, 4, bad_structure, 1, "the last multiplier must be 1"},
        {"short dropout structure", good, 4, short_dropout, 2, "dropout_structure has 2 entries"},
    };
    for (size_t i = 0; i < sizeof(broken) / sizeof(broken[0]); i++) {
        path_in(path, sizeof(path), "broken.safetensors");
        if (!write_hand(path, broken[i].t, broken[i].n, broken[i].meta, broken[i].n_meta, &values)) continue;
        sdt_error_clear(&err);
        sdt_hn *hn = sdt_hn_load_safetensors(path, be, &err);
        CHECK(!hn && err.code == SDT_ERR_BAD_FORMAT, "%s: must be refused as BAD_FORMAT (got %s)", broken[i].what,
              sdt_error_code_name(err.code));
        CHECK(strstr(err.message, broken[i].expect) && strstr(err.message, path),
              "%s: sentence must name the file "
              "and say \"%s\": %s",
              broken[i].what, broken[i].expect, err.message);
        sdt_hn_free(hn);
        free(values);
    }
    path_in(path, sizeof(path), "absent.safetensors");
    CHECK(!sdt_hn_load_safetensors(path, be, &err) && err.code == SDT_ERR_NOT_FOUND &&
              strstr(err.message, "absent.safetensors"),
          "a missing file must be a sentence naming it: %s", err.message);
}

/* A1111's .pt: create, save, load bit-exact; the same bytes again; its keys in the pickle */
static void check_pt(sdt_backend *be)
{
    sdt_error err;
    sdt_error_clear(&err);
    char path[512], path2[512];
    path_in(path, sizeof(path), "a1111.pt");
    path_in(path2, sizeof(path2), "a1111 again.pt");
    sdt_hn_config c = full_config();
    sdt_hn *hn = sdt_hn_create_file(&c, path, false, be, 9, &err);
    CHECK(hn != NULL, "create .pt: %s", err.message);
    if (!hn) return;
    sdt_hn_get_info(hn)->step = 77;
    snprintf(sdt_hn_get_info(hn)->sd_checkpoint, SDT_HN_CHECKPOINT_MAX, "0123456789");
    CHECK(sdt_hn_save(hn, path, &err), "save .pt: %s", err.message);
    sdt_hn *back = sdt_hn_load(path, be, &err);
    CHECK(back != NULL, "load .pt: %s", err.message);
    if (back) {
        const sdt_hn_config *b = sdt_hn_get_config(back);
        CHECK(!strcmp(b->name, c.name) && b->width_count == 2 && b->widths[0] == 16 && b->widths[1] == 8 &&
                  b->entry_count == 4 && !memcmp(b->layer_structure, c.layer_structure, 4 * sizeof(double)) &&
                  !memcmp(b->dropout_structure, c.dropout_structure, 4 * sizeof(double)) &&
                  !strcmp(b->activation, "swish") && b->layer_norm && b->activate_output && b->use_dropout &&
                  b->init == c.init,
              ".pt: every key must survive");
        CHECK(sdt_hn_get_info(back)->step == 77 && !strcmp(sdt_hn_get_info(back)->sd_checkpoint, "0123456789") &&
                  !sdt_hn_get_info(back)->sd_checkpoint_name[0],
              ".pt: step, checkpoint and None must survive");
        float *w1 = weights_of(hn), *w2 = weights_of(back);
        CHECK(!memcmp(w1, w2, (size_t)sdt_hn_param_numel(hn) * sizeof(float)), ".pt: weights bit-exact");
        free(w1), free(w2);
        CHECK(sdt_hn_save(back, path2, &err), "save .pt again: %s", err.message);
        size_t n1 = 0, n2 = 0;
        unsigned char *f1 = read_all(path, &n1), *f2 = read_all(path2, &n2);
        CHECK(f1 && f2 && n1 == n2 && !memcmp(f1, f2, n1), ".pt: load + save must give the same bytes");
        free(f1), free(f2);
        sdt_hn_free(back);
    }
    /* the pickle holds A1111's dict: int keys to (K, V) OrderedDicts, then the named keys */
    sdt_torch_file *f = sdt_torch_open(path, &err);
    CHECK(f != NULL, "torch_open: %s", err.message);
    if (f) {
        const sdt_pv *root = sdt_torch_root(f);
        const sdt_pv *pair = sdt_pv_dict_get_int(root, 16);
        CHECK(sdt_pv_is(pair, SDT_PV_TUPLE) && sdt_pv_len(pair) == 2 && sdt_pv_is(sdt_pv_item(pair, 1), SDT_PV_DICT) &&
                  sdt_pv_item(pair, 1)->u.seq.ordered,
              ".pt: width 16 must map to a tuple of two OrderedDicts");
        CHECK(sdt_pv_is(sdt_pv_dict_get(sdt_pv_item(pair, 0), "linear.0.weight"), SDT_PV_TENSOR) &&
                  sdt_pv_is(sdt_pv_dict_get(sdt_pv_item(pair, 0), "linear.2.bias"), SDT_PV_TENSOR),
              ".pt: state dicts keyed by Sequential position");
        const char *keys[] = {"step",
                              "name",
                              "layer_structure",
                              "activation_func",
                              "is_layer_norm",
                              "weight_initialization",
                              "sd_checkpoint",
                              "sd_checkpoint_name",
                              "activate_output",
                              "use_dropout",
                              "dropout_structure",
                              "last_layer_dropout",
                              "optional_info"};
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
            CHECK(sdt_pv_dict_get(root, keys[i]) != NULL, ".pt: key %s missing", keys[i]);
        CHECK(sdt_pv_is(sdt_pv_dict_get(root, "sd_checkpoint_name"), SDT_PV_NONE), ".pt: an empty name is None");
        sdt_torch_close(f);
    }
    sdt_hn_free(hn);

    /* an A1111 file of the oldest kind: linear1/linear2, only the modules and a name */
    sdt_pv_arena *a = sdt_pv_arena_new();
    sdt_pv *root = sdt_pv_new_dict(a, false), *pair = sdt_pv_new(a, SDT_PV_TUPLE);
    float w1[16 * 8], b1[16], w2[8 * 16], b2[8];
    for (int i = 0; i < 128; i++) w1[i] = (float)i * 0.01f, w2[i] = -(float)i * 0.02f;
    for (int i = 0; i < 16; i++) b1[i] = (float)i;
    for (int i = 0; i < 8; i++) b2[i] = -(float)i;
    int64_t s1[2] = {16, 8}, s2[2] = {8, 16}, sb1[1] = {16}, sb2[1] = {8};
    for (int kind = 0; kind < 2; kind++) {
        sdt_pv *state = sdt_pv_new_dict(a, true);
        sdt_pv_dict_set(a, state, "linear1.weight", sdt_pv_new_tensor(a, SDT_ST_F32, 2, s1, w1));
        sdt_pv_dict_set(a, state, "linear1.bias", sdt_pv_new_tensor(a, SDT_ST_F32, 1, sb1, b1));
        sdt_pv_dict_set(a, state, "linear2.weight", sdt_pv_new_tensor(a, SDT_ST_F32, 2, s2, w2));
        sdt_pv_dict_set(a, state, "linear2.bias", sdt_pv_new_tensor(a, SDT_ST_F32, 1, sb2, b2));
        sdt_pv_append(pair, state);
    }
    sdt_pv_dict_add(root, sdt_pv_new_int(a, 8), pair);
    sdt_pv_dict_set(a, root, "name", sdt_pv_new_str(a, "oldest"));
    path_in(path, sizeof(path), "oldest.pt");
    CHECK(sdt_torch_save(path, root, NULL, &err), "writing the old file: %s", err.message);
    sdt_hn *old = sdt_hn_load(path, be, &err);
    CHECK(old != NULL, "an old A1111 .pt must load: %s", err.message);
    if (old) {
        const sdt_hn_config *oc = sdt_hn_get_config(old);
        CHECK(!strcmp(oc->name, "oldest") && oc->entry_count == 3 && !strcmp(oc->activation, "linear") &&
                  oc->activate_output && !oc->use_dropout,
              "old .pt: A1111's defaults");
        const sdt_hn_param *p = sdt_hn_param_find(old, "8.1.linear.1.weight");
        CHECK(p && ((const float *)p->value.data)[5] == w2[5], "old .pt: linear2 is linear.1");
        sdt_hn_free(old);
    }
    /* a torch file that is not a hypernetwork */
    sdt_pv *list = sdt_pv_new(a, SDT_PV_LIST);
    path_in(path, sizeof(path), "list.pt");
    CHECK(sdt_torch_save(path, list, NULL, &err), "writing a list: %s", err.message);
    CHECK(!sdt_hn_load(path, be, &err) && err.code == SDT_ERR_BAD_FORMAT && strstr(err.message, "not A1111's"),
          "a torch list must be refused: %s", err.message);
    sdt_pv *bad = sdt_pv_new_dict(a, false);
    sdt_pv_dict_add(bad, sdt_pv_new_int(a, 8), sdt_pv_new_str(a, "no"));
    path_in(path, sizeof(path), "bad pair.pt");
    CHECK(sdt_torch_save(path, bad, NULL, &err), "writing a bad pair: %s", err.message);
    CHECK(!sdt_hn_load(path, be, &err) && err.code == SDT_ERR_BAD_FORMAT && strstr(err.message, "pair of state dicts"),
          "a module that is not a pair must be refused: %s", err.message);
    sdt_pv_arena_free(a);
}

static void remove_dir(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[600];
    int leftovers = 0;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        leftovers += strstr(e->d_name, ".tmp") != NULL;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    CHECK(leftovers == 0, "saves must leave no temp files behind");
    rmdir(dir);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/sdt-hn-file-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "cannot make a temp folder\n");
        return 1;
    }
    sdt_backend *be = kt_backend();
    check_round_trip(be);
    check_init(be);
    check_old_files(be);
    check_pt(be);
    remove_dir();
    be->destroy(be);
    return sdt_test_finish("hn_file");
}
