/* test_ckpt_convert.c - sdt_ckpt_convert (sdt-make-checkpoint --from) between the two layouts, for the
 * OpenCLIP-layout text encoders whose names and packing differ between them.
 *
 * SDXL: the generator's tiny-sdxl diffusers folder converted to the LDM layout equals, tensor by tensor
 * (keys, dtypes, shapes, bytes), the generator's LDM file of the same seed: bigG as
 * conditioner.embedders.1.model.* with q/k/v packed into in_proj and text_projection [in, out], as SDXL's
 * single files store it. The one justified difference: logit_scale, which no folder holds (transformers'
 * CLIPTextModelWithProjection has none) and no model uses, is left out, as diffusers'
 * convert_diffusers_to_original_sdxl.py leaves it out. The reverse (LDM file to folder) equals the
 * generator's folder file by file, and sdtrain computes bigG's context and pooled output from the converted
 * file exactly as from the folder.
 *
 * SD 2.x (a tiny OpenCLIP-layout encoder, as --openclip makes): the LDM file converts to a folder with the
 * last, unused layer cut (diffusers' SD 2.x layout) and back to cond_stage_model.model.* with that layer as
 * zeros (an identity resblock), text_projection and logit_scale left out; every other tensor is the original's,
 * and the encoder's output (penultimate layer) is the same from the file, the folder and the round trip, and
 * from the round trip with the last layer run too.
 *
 * A folder whose bigG misses a tensor or holds one with no place in the single file is refused by name.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include "checkpoint_gen.h"
#include "model_test_util.h"
#include "safetensors.h"
#include "sd_config_detect.h"
#include "sd_model.h"

static bool same_entry(const sdt_st_entry *a, const sdt_st_entry *b)
{
    if (!a || !b || a->dtype != b->dtype || a->ndim != b->ndim || a->nbytes != b->nbytes) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return memcmp(a->data, b->data, a->nbytes) == 0;
}

static bool all_zero(const sdt_st_entry *e)
{
    const uint8_t *p = e->data;
    for (uint64_t i = 0; i < e->nbytes; i++)
        if (p[i]) return false;
    return true;
}

/* What a converted file may differ in from the file it is compared with. */
typedef enum { KEY_SAME, KEY_ABSENT, KEY_ZEROS } key_rule;
typedef key_rule (*rule_fn)(const char *key);

/* Compares two safetensors files key by key under rule (applied to want's keys); got must hold nothing else.
 * Returns the number of mismatches (the first few printed). */
static int compare_files(const char *want_path, const char *got_path, rule_fn rule)
{
    sdt_error error = {0};
    sdt_safetensors *want = sdt_st_open(want_path, &error), *got = want ? sdt_st_open(got_path, &error) : NULL;
    CHECK(want && got, "opening %s / %s: %s", want_path, got_path, error.message);
    if (!want || !got) {
        if (want) sdt_st_close(want);
        return 1;
    }
    int bad = 0;
    size_t expected = 0;
    for (size_t i = 0; i < sdt_st_count(want); i++) {
        const sdt_st_entry *w = sdt_st_at(want, i), *g = sdt_st_find(got, w->name);
        key_rule r = rule ? rule(w->name) : KEY_SAME;
        bool ok = r == KEY_ABSENT  ? g == NULL
                  : r == KEY_ZEROS ? g && g->dtype == w->dtype && g->nbytes == w->nbytes && all_zero(g)
                                   : same_entry(w, g);
        expected += r != KEY_ABSENT;
        if (!ok && bad++ < 5)
            fprintf(stderr, "  %s: %s\n", w->name,
                    r == KEY_ABSENT  ? "should be left out"
                    : !g             ? "missing"
                    : r == KEY_ZEROS ? "not zeros"
                                     : "differs");
    }
    if (sdt_st_count(got) != expected) {
        bad++;
        fprintf(stderr, "  %s holds %zu tensors, expected %zu\n", got_path, sdt_st_count(got), expected);
        for (size_t i = 0, shown = 0; i < sdt_st_count(got) && shown < 5; i++)
            if (!sdt_st_find(want, sdt_st_at(got, i)->name))
                fprintf(stderr, "    unexpected %s\n", sdt_st_at(got, i)->name), shown++;
    }
    sdt_st_close(want);
    sdt_st_close(got);
    return bad;
}

/* Every diffusers part file of two folders equal. */
static int compare_folders(const char *want, const char *got)
{
    static const char *const files[] = {"unet/diffusion_pytorch_model.safetensors", "text_encoder/model.safetensors",
                                        "text_encoder_2/model.safetensors", "vae/diffusion_pytorch_model.safetensors"};
    int bad = 0;
    for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
        char *a = g_build_filename(want, files[i], NULL), *b = g_build_filename(got, files[i], NULL);
        bool has_a = g_file_test(a, G_FILE_TEST_EXISTS), has_b = g_file_test(b, G_FILE_TEST_EXISTS);
        if (has_a != has_b)
            bad++, fprintf(stderr, "  %s: in one folder only\n", files[i]);
        else if (has_a)
            bad += compare_files(a, b, NULL);
        g_free(a), g_free(b);
    }
    return bad;
}

static bool load_model(sd_model *m, sdt_weights **w, const char *path, sdt_backend *be)
{
    sdt_error error = {0};
    *w = sdt_weights_open(path, &error);
    bool ok = *w && sd_model_load(m, *w, be, &error);
    CHECK(ok, "loading %s: %s", path, error.message);
    if (!ok && *w) sdt_weights_close(*w), *w = NULL;
    return ok;
}

static key_rule sdxl_rule(const char *key)
{
    return !strcmp(key, "conditioner.embedders.1.model.logit_scale") ? KEY_ABSENT : KEY_SAME;
}

static void test_sdxl(sdt_test_rng *rng, sdt_backend *be)
{
    char ldm[512], dir[600], conv[600], back[600];
    sdt_error error = {0};
    mt_temp_path(ldm, sizeof ldm, "conv-sdxl");
    snprintf(dir, sizeof dir, "%s.d", ldm);
    snprintf(conv, sizeof conv, "%s.from-folder.safetensors", ldm);
    snprintf(back, sizeof back, "%s.to-folder", ldm);
    sdt_ckpt_spec spec = mt_ckpt_spec(SD_FAMILY_TINY_SDXL, sdt_test_next(rng));
    CHECK(sdt_ckpt_generate(ldm, &spec, &error), "tiny-sdxl LDM: %s", error.message);
    spec.layout = SDT_CKPT_DIFFUSERS;
    CHECK(sdt_ckpt_generate(dir, &spec, &error), "tiny-sdxl diffusers: %s", error.message);

    /* folder -> LDM: the generator's LDM file, bigG in OpenCLIP's layout */
    CHECK(sdt_ckpt_convert(dir, conv, SDT_CKPT_LDM, -1, &error), "folder -> LDM: %s", error.message);
    int bad = compare_files(ldm, conv, sdxl_rule);
    CHECK(bad == 0, "the SDXL folder converted to the LDM layout differs from the LDM file in %d places", bad);

    /* LDM -> folder: the generator's folder */
    CHECK(sdt_ckpt_convert(ldm, back, SDT_CKPT_DIFFUSERS, -1, &error), "LDM -> folder: %s", error.message);
    bad = compare_folders(dir, back);
    CHECK(bad == 0, "the SDXL LDM file converted to a folder differs from the generated folder in %d places", bad);

    /* sdtrain reads the converted file as SDXL, bigG in OpenCLIP's layout, and computes what the folder gives */
    sd_model mf, mc;
    sdt_weights *wf = NULL, *wc = NULL;
    bool loaded_f = load_model(&mf, &wf, dir, be), loaded_c = load_model(&mc, &wc, conv, be);
    if (loaded_f && loaded_c) {
        CHECK(mc.cfg.family == SD_FAMILY_TINY_SDXL && mc.cfg.clip2.layout == CLIP_LAYOUT_OPENCLIP &&
                  mf.cfg.clip2.layout == CLIP_LAYOUT_HF,
              "the converted file is %s with bigG in layout %d", sd_family_name(mc.cfg.family), mc.cfg.clip2.layout);
        float ctx_f[77 * 48], ctx_c[77 * 48], pooled_f[48], pooled_c[48];
        if (mt_encoder_outputs(&mf.clip2, be, 0, ctx_f, pooled_f, &error) &&
            mt_encoder_outputs(&mc.clip2, be, 0, ctx_c, pooled_c, &error)) {
            double dc = mt_max_abs_diff(ctx_f, ctx_c, 77 * 48), dp = mt_max_abs_diff(pooled_f, pooled_c, 48);
            CHECK(dc == 0 && dp <= 1e-5,
                  "bigG from the converted file differs from the folder's: context %.3g, pooled %.3g", dc, dp);
        } else {
            CHECK(false, "bigG forward: %s", error.message);
        }
    }
    if (loaded_f) sd_model_free(&mf), sdt_weights_close(wf);
    if (loaded_c) sd_model_free(&mc), sdt_weights_close(wc);
    unlink(ldm), unlink(conv);
    mt_remove_folder(dir), mt_remove_folder(back);
}

/* Rewrites a folder's text_encoder_2 file without the tensor `drop` (NULL: none) and with one extra tensor
 * `extra` (NULL: none). */
static bool edit_text2(const char *dir, const char *drop, const char *extra)
{
    sdt_error error = {0};
    char *file = g_build_filename(dir, "text_encoder_2", "model.safetensors", NULL);
    char *tmp = g_strconcat(file, ".orig", NULL);
    bool ok = g_rename(file, tmp) == 0;
    sdt_safetensors *st = ok ? sdt_st_open(tmp, &error) : NULL;
    size_t n = st ? sdt_st_count(st) : 0;
    sdt_st_write_item *items = mt_alloc((n + 1) * sizeof(*items));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const sdt_st_entry *e = sdt_st_at(st, i);
        if (drop && !strcmp(e->name, drop)) continue;
        items[k++] = (sdt_st_write_item){
            .name = e->name, .dtype = e->dtype, .ndim = e->ndim, .shape = e->shape, .data = e->data};
    }
    static const float four[4] = {1, 2, 3, 4};
    static const int64_t four_shape[1] = {4};
    if (extra)
        items[k++] = (sdt_st_write_item){
            .name = extra, .dtype = sdt_st_dtype_of(SDT_F32), .ndim = 1, .shape = four_shape, .data = four};
    ok = st && sdt_st_write(file, items, k, NULL, 0, &error);
    CHECK(ok, "rewriting %s: %s", file, error.message);
    if (st) sdt_st_close(st);
    g_remove(tmp);
    free(items), g_free(file), g_free(tmp);
    return ok;
}

/* A folder whose bigG misses a tensor, or holds one the single file has no place for, is refused with a
 * sentence naming the tensor, and nothing is written. */
static void test_sdxl_bad_folders(sdt_test_rng *rng)
{
    static const char *const cases[][3] = {
        {"text_model.encoder.layers.1.self_attn.v_proj.weight", NULL,
         "has no tensor 'text_model.encoder.layers.1.self_attn.v_proj.weight'"},
        {NULL, "text_model.extra.weight",
         "holds 'text_model.extra.weight', which the single file's OpenCLIP layout has no place for"},
    };
    sdt_ckpt_spec spec = mt_ckpt_spec(SD_FAMILY_TINY_SDXL, sdt_test_next(rng));
    spec.layout = SDT_CKPT_DIFFUSERS;
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        char dir[512], out[600];
        sdt_error error = {0};
        mt_temp_path(dir, sizeof dir, "conv-bad");
        snprintf(out, sizeof out, "%s.out.safetensors", dir);
        CHECK(sdt_ckpt_generate(dir, &spec, &error), "tiny-sdxl diffusers: %s", error.message);
        if (edit_text2(dir, cases[i][0], cases[i][1])) {
            error.message[0] = 0;
            bool converted = sdt_ckpt_convert(dir, out, SDT_CKPT_LDM, -1, &error);
            CHECK(!converted && error.code == SDT_ERR_BAD_FORMAT && strstr(error.message, "text_encoder_2/") &&
                      strstr(error.message, cases[i][2]) && !g_file_test(out, G_FILE_TEST_EXISTS),
                  "a damaged folder (case %zu) was not refused with its sentence: %s", i, error.message);
        }
        unlink(out);
        mt_remove_folder(dir);
    }
}

static int sd2_layers; /* the LDM file's resblocks */

static key_rule sd2_rule(const char *key)
{
    if (!strcmp(key, "cond_stage_model.model.logit_scale") || !strcmp(key, "cond_stage_model.model.text_projection"))
        return KEY_ABSENT;
    char last[96];
    snprintf(last, sizeof last, "cond_stage_model.model.transformer.resblocks.%d.", sd2_layers - 1);
    return g_str_has_prefix(key, last) ? KEY_ZEROS : KEY_SAME;
}

static void test_sd2(sdt_test_rng *rng, sdt_backend *be)
{
    char ldm[512], dir[600], conv[600];
    sdt_error error = {0};
    mt_temp_path(ldm, sizeof ldm, "conv-sd2");
    snprintf(dir, sizeof dir, "%s.d", ldm);
    snprintf(conv, sizeof conv, "%s.round-trip.safetensors", ldm);
    sdt_ckpt_spec spec = mt_ckpt_spec(SD_FAMILY_TINY, sdt_test_next(rng)); /* as sdt-make-checkpoint --openclip */
    spec.config.clip.layout = CLIP_LAYOUT_OPENCLIP;
    spec.config.clip.act = SDT_ACT_GELU;
    spec.config.clip.default_skip = 2;
    spec.config.unet.linear_proj = true;
    sd2_layers = spec.config.clip.layers;
    CHECK(sdt_ckpt_generate(ldm, &spec, &error), "SD 2.x-like LDM: %s", error.message);
    CHECK(sdt_ckpt_convert(ldm, dir, SDT_CKPT_DIFFUSERS, -1, &error), "SD 2.x LDM -> folder: %s", error.message);
    CHECK(sdt_ckpt_convert(dir, conv, SDT_CKPT_LDM, -1, &error), "SD 2.x folder -> LDM: %s", error.message);
    int bad = compare_files(ldm, conv, sd2_rule);
    CHECK(bad == 0, "the SD 2.x round trip (LDM -> folder -> LDM) differs from the LDM file in %d places", bad);

    sd_model ml, mf, mc;
    sdt_weights *wl = NULL, *wf = NULL, *wc = NULL;
    bool loaded_l = load_model(&ml, &wl, ldm, be), loaded_f = load_model(&mf, &wf, dir, be);
    bool loaded_c = load_model(&mc, &wc, conv, be);
    if (loaded_l && loaded_f && loaded_c) {
        CHECK(mf.cfg.clip.layout == CLIP_LAYOUT_HF && mf.cfg.clip.layers == sd2_layers - 1 &&
                  mc.cfg.clip.layout == CLIP_LAYOUT_OPENCLIP && mc.cfg.clip.layers == sd2_layers &&
                  mc.cfg.clip.default_skip == 2,
              "layouts: folder %d with %d layers, round trip %d with %d layers (skip %d)", mf.cfg.clip.layout,
              mf.cfg.clip.layers, mc.cfg.clip.layout, mc.cfg.clip.layers, mc.cfg.clip.default_skip);
        int w = ml.cfg.clip.width;
        float *cl = mt_alloc((size_t)77 * w * 4), *cf = mt_alloc((size_t)77 * w * 4),
              *cc = mt_alloc((size_t)77 * w * 4);
        float *c1 = mt_alloc((size_t)77 * w * 4);
        if (mt_encoder_outputs(&ml.clip, be, 0, cl, NULL, &error) &&
            mt_encoder_outputs(&mf.clip, be, 0, cf, NULL, &error) &&
            mt_encoder_outputs(&mc.clip, be, 0, cc, NULL, &error) &&
            mt_encoder_outputs(&mc.clip, be, 1, c1, NULL, &error)) {
            double df = mt_max_abs_diff(cl, cf, 77 * w), dc = mt_max_abs_diff(cl, cc, 77 * w);
            double d1 = mt_max_abs_diff(cc, c1, 77 * w);
            CHECK(df <= 1e-5 && dc <= 1e-5 && d1 == 0,
                  "SD 2.x encoder outputs differ: folder %.3g, round trip %.3g, round trip's last layer %.3g", df, dc,
                  d1);
        } else {
            CHECK(false, "SD 2.x encoder forward: %s", error.message);
        }
        free(cl), free(cf), free(cc), free(c1);
    }
    if (loaded_l) sd_model_free(&ml), sdt_weights_close(wl);
    if (loaded_f) sd_model_free(&mf), sdt_weights_close(wf);
    if (loaded_c) sd_model_free(&mc), sdt_weights_close(wc);
    unlink(ldm), unlink(conv);
    mt_remove_folder(dir);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("models_test_ckpt_convert");
    sdt_backend *be = mt_backend();
    test_sdxl(&rng, be);
    test_sdxl_bad_folders(&rng);
    test_sd2(&rng, be);
    be->destroy(be);
    return sdt_test_finish("models_test_ckpt_convert");
}
