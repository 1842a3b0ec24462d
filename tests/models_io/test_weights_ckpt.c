/* test_weights_ckpt.c - a tiny SD checkpoint written as .ckpt by the project's torch writer loads exactly like
 * its safetensors twin: same canonical keys, shapes, dtypes and bytes, same detected configuration. Covered:
 * with and without the "state_dict" wrapper, EMA copies ("model_ema.*") left out as A1111 does, old text
 * encoder names renamed as A1111 does, bookkeeping values (global_step, a nested dict) ignored, a file named
 * .bin or without extension found by its content, a damaged .ckpt refused with its sentence. */
#include <stdlib.h>
#include <string.h>

#include "checkpoint_gen.h"
#include "io_test_util.h"
#include "safetensors.h"
#include "sd_config_detect.h"
#include "sd_model.h"
#include "sdt_test.h"
#include "torch_save.h"
#include "weights.h"

typedef struct ckpt_options {
    bool wrapped;   /* {"state_dict": ..., "global_step": ...} rather than the bare state dict */
    bool ema;       /* add model_ema.* copies holding other values */
    bool old_names; /* "cond_stage_model.transformer.final_layer_norm." without "text_model." */
} ckpt_options;

/* The twin of a safetensors checkpoint as a torch.save file. */
static bool write_ckpt(const sdt_safetensors *st, const char *path, const ckpt_options *o, sdt_error *error)
{
    sdt_pv_arena *a = sdt_pv_arena_new();
    sdt_pv *sd = sdt_pv_new_dict(a, true);
    float noise[4] = {9, 9, 9, 9};
    for (size_t i = 0; i < sdt_st_count(st); i++) {
        const sdt_st_entry *e = sdt_st_at(st, i);
        char *name = g_strdup(e->name);
        const char *full = "cond_stage_model.transformer.text_model.final_layer_norm.";
        if (o->old_names && g_str_has_prefix(name, full)) {
            g_free(name);
            name = g_strconcat("cond_stage_model.transformer.final_layer_norm.", e->name + strlen(full), NULL);
        }
        sdt_pv_dict_set(a, sd, name, sdt_pv_new_tensor(a, e->dtype, e->ndim, e->shape, e->data));
        g_free(name);
        if (o->ema && g_str_has_prefix(e->name, "model.diffusion_model.") && i % 3 == 0) {
            char *ema = g_strconcat("model_ema.", e->name + strlen("model."), NULL);
            sdt_pv_dict_set(a, sd, ema, sdt_pv_new_tensor(a, SDT_ST_F32, 1, (int64_t[]){4}, noise));
            g_free(ema);
        }
    }
    sdt_pv *root = sd;
    if (o->wrapped) {
        root = sdt_pv_new_dict(a, false);
        sdt_pv_dict_set(a, root, "epoch", sdt_pv_new_int(a, 3));
        sdt_pv_dict_set(a, root, "global_step", sdt_pv_new_int(a, 470000));
        sdt_pv_dict_set(a, root, "state_dict", sd);
        sdt_pv_dict_set(a, sd, "state_dict", sdt_pv_new_dict(a, false)); /* A1111 drops a nested one */
    }
    bool ok = sdt_torch_save(path, root, "v1-5-pruned", error);
    sdt_pv_arena_free(a);
    return ok;
}

static void compare(const sdt_weights *want, const sdt_weights *have, const char *label)
{
    CHECK(sdt_weights_count(want) == sdt_weights_count(have), "%s: %zu keys, want %zu", label, sdt_weights_count(have),
          sdt_weights_count(want));
    int differing = 0;
    for (size_t i = 0; i < sdt_weights_count(want); i++) {
        const char *key = sdt_weights_key(want, i);
        const sdt_tensor *a = sdt_weights_get(want, key), *b = sdt_weights_get(have, key);
        if (!b || a->dtype != b->dtype || !sdt_tensor_same_shape(a, b) ||
            memcmp(a->data, b->data, sdt_tensor_nbytes(a)) != 0) {
            if (differing++ < 3) CHECK(false, "%s: key '%s' missing or different", label, key);
        }
    }
    CHECK(differing == 0, "%s: %d keys differ", label, differing);
    for (size_t i = 0; i < sdt_weights_count(have); i++)
        CHECK(!g_str_has_prefix(sdt_weights_key(have, i), "model_ema."), "%s: EMA key %s kept", label,
              sdt_weights_key(have, i));
    sd_config c1, c2;
    sdt_error error = {0};
    CHECK(sd_config_detect(want, &c1, &error) && sd_config_detect(have, &c2, &error) &&
              memcmp(&c1, &c2, sizeof c1) == 0,
          "%s: detected configurations differ: %s", label, error.message);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("test_weights_ckpt");
    char *dir = io_make_tmpdir();
    char *st_path = g_build_filename(dir, "tiny.safetensors", NULL);
    sdt_error error = {0};
    sdt_ckpt_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.config = sd_config_preset(SD_FAMILY_TINY);
    spec.dtype = SDT_F16;
    spec.seed = sdt_test_next(&rng);
    spec.perturb_all = true;
    CHECK(sdt_ckpt_generate(st_path, &spec, &error), "generate: %s", error.message);
    sdt_safetensors *st = sdt_st_open(st_path, &error);
    sdt_weights *want = sdt_weights_open(st_path, &error);
    CHECK(st && want, "open twin: %s", error.message);
    const ckpt_options variants[] = {{true, true, false}, {false, false, false}, {true, false, true}};
    const char *names[] = {"wrapped-ema.ckpt", "bare.ckpt", "old-names"};
    for (size_t v = 0; st && want && v < G_N_ELEMENTS(variants); v++) {
        char *path = g_build_filename(dir, names[v], NULL);
        CHECK(write_ckpt(st, path, &variants[v], &error), "%s: write: %s", names[v], error.message);
        sdt_weights *have = sdt_weights_open(path, &error);
        CHECK(have, "%s: open: %s", names[v], error.message);
        if (have) {
            compare(want, have, names[v]);
            char h1[11];
            CHECK(sdt_weights_short_hash(have, h1, &error) && strlen(h1) == 10, "%s: hash: %s", names[v],
                  error.message);
            sdt_weights_close(have);
        }
        g_free(path);
    }
    /* A damaged .ckpt: truncated in the middle of its storages. */
    char *good = g_build_filename(dir, "bare.ckpt", NULL), *bad = g_build_filename(dir, "damaged.bin", NULL);
    gchar *bytes = NULL;
    gsize size = 0;
    CHECK(g_file_get_contents(good, &bytes, &size, NULL), "read back");
    CHECK(io_write_bytes(bad, bytes, size / 2), "write damaged");
    sdt_weights *w = sdt_weights_open(bad, &error);
    CHECK(!w && io_contains(error.message, bad) && io_contains(error.message, "truncated or damaged"),
          "damaged ckpt: '%s'", error.message);
    printf("  damaged.bin -> %s\n", error.message);
    sdt_weights_close(w);
    g_free(bytes);
    g_free(good);
    g_free(bad);
    sdt_weights_close(want);
    sdt_st_close(st);
    io_rm_tree(dir);
    g_free(dir);
    g_free(st_path);
    return sdt_test_finish("test_weights_ckpt");
}
