/* test_sd_model.c - config detection, whole-model loading and the checkpoint generator.
 *
 * Detection reads a generated checkpoint back to the config it was written
 * from; the parameter enumeration of the published configs is checked against
 * the published parameter counts; the generator is deterministic per seed,
 * writes F16 that rounds the F32 values, and a checkpoint missing a part is a
 * clear error. SDXL: a whole tiny SDXL checkpoint in both layouts detects as SDXL (two
 * encoders, bigG's projection, VAE scale 0.13025) and gives the same tensors and the same
 * encoder outputs; the refiner is refused with a sentence.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include "checkpoint_gen.h"
#include "diffusers_names.h"
#include "model_test_util.h"
#include "safetensors.h"
#include "sd_config_detect.h"
#include "sd_model.h"

typedef struct counter {
    int64_t params;
    int64_t tensors;
    const char *prefix;
} counter;

static bool count_param(void *user, const sdt_param_info *p)
{
    counter *c = user;
    if (c->prefix && strncmp(p->key, c->prefix, strlen(c->prefix)) != 0) return true;
    int64_t n = 1;
    for (int i = 0; i < p->ndim; i++) n *= p->shape[i];
    c->params += n;
    c->tensors++;
    return true;
}

static void test_published_counts(void)
{
    /* transformers' CLIPTextModel (openai/clip-vit-large-patch14) has 123,060,480 parameters;
     * diffusers' AutoencoderKL of SD 1.x/2.x has 83,653,863. */
    clip_config c1 = clip_config_sd1();
    counter cc = {0, 0, NULL};
    CHECK(clip_params(&c1, count_param, &cc), "enumerating SD1 CLIP");
    CHECK(cc.params == 123060480, "SD1 CLIP has %lld parameters, expected 123060480", (long long)cc.params);
    CHECK(cc.tensors == 196, "SD1 CLIP has %lld tensors, expected 196", (long long)cc.tensors);
    vae_config v = vae_config_sd();
    counter vc = {0, 0, NULL};
    CHECK(vae_params(&v, count_param, &vc), "enumerating the SD VAE");
    CHECK(vc.params == 83653863, "the SD VAE has %lld parameters, expected 83653863", (long long)vc.params);
    CHECK(vc.tensors == 248, "the SD VAE has %lld tensors, expected 248", (long long)vc.tensors);
    /* OpenCLIP ViT-H text tower as SD 2.x stores it: 24 layers + text_projection + logit_scale. */
    clip_config c2 = clip_config_sd2();
    counter oc = {0, 0, NULL};
    CHECK(clip_params(&c2, count_param, &oc), "enumerating SD2 CLIP");
    int64_t per_layer =
        4 * 1024 + (3 * 1024 * 1024 + 3 * 1024) + (1024 * 1024 + 1024) + (4096 * 1024 + 4096) + (1024 * 4096 + 1024);
    int64_t expect = 49408LL * 1024 + 77 * 1024 + 24 * per_layer + 2 * 1024 + 1024 * 1024 + 1;
    CHECK(oc.params == expect, "SD2 CLIP has %lld parameters, expected %lld", (long long)oc.params, (long long)expect);
    /* SDXL: CLIP ViT-L under conditioner.embedders.0 (123.1 M, as SD 1.x's) and OpenCLIP ViT-bigG/14 under
     * conditioner.embedders.1 with text_projection and logit_scale (694,659,841: OpenCLIP's text tower). */
    sd_config xl = sd_config_preset(SD_FAMILY_SDXL);
    counter l = {0, 0, "conditioner.embedders.0.transformer.text_model."}, g = {0, 0, "conditioner.embedders.1.model."};
    CHECK(clip_params(&xl.clip, count_param, &l) && clip_params(&xl.clip2, count_param, &g),
          "enumerating SDXL's encoders");
    CHECK(l.params == 123060480 && l.tensors == 196,
          "SDXL CLIP-L has %lld parameters in %lld tensors, expected 123060480 "
          "in 196",
          (long long)l.params, (long long)l.tensors);
    CHECK(g.params == 694659841, "SDXL bigG has %lld parameters, expected 694659841", (long long)g.params);
}

static void test_detect_and_load(sdt_test_rng *rng, sdt_backend *be)
{
    char path[512];
    sdt_error error = {0};
    mt_temp_path(path, sizeof(path), "sd");
    sdt_weights *w = mt_make_weights(path, SD_FAMILY_TINY, sdt_test_next(rng), false, false);
    sd_config cfg;
    CHECK(sd_config_detect(w, &cfg, &error), "detect: %s", error.message);
    CHECK(cfg.family == SD_FAMILY_TINY, "detected family %s, expected tiny", sd_family_name(cfg.family));
    sd_model m;
    CHECK(sd_model_load(&m, w, be, &error), "load: %s", error.message);
    sd_model_free(&m);
    sdt_weights_close(w);
    unlink(path);

    /* Every key the generator enumerates is one the loaders accept, and nothing is missing:
     * the file holds exactly the enumerated tensors. */
    counter all = {0, 0, NULL};
    sd_config tiny = sd_config_preset(SD_FAMILY_TINY);
    CHECK(sd_params(&tiny, count_param, &all, &error), "enumerate: %s", error.message);
    w = mt_make_weights(path, SD_FAMILY_TINY, 7, false, false);
    CHECK((int64_t)sdt_weights_count(w) == all.tensors, "the file holds %zu tensors, the enumeration %lld",
          sdt_weights_count(w), (long long)all.tensors);
    sdt_weights_close(w);
    unlink(path);

    /* A text-only checkpoint: the missing VAE is named. */
    w = mt_make_weights(path, SD_FAMILY_TINY, 3, true, false);
    error.message[0] = 0;
    CHECK(!sd_config_detect(w, &cfg, &error) && strstr(error.message, "VAE") && strstr(error.message, path),
          "a checkpoint without a VAE was not reported by name and file (%s)", error.message);
    sdt_weights_close(w);
    unlink(path);
}

/* An OpenCLIP-layout text encoder of tiny size: the generator's keys load, and detection sees the layout. */
static void test_openclip_roundtrip(sdt_test_rng *rng)
{
    char path[512];
    sdt_error error = {0};
    mt_temp_path(path, sizeof(path), "oc");
    sdt_ckpt_spec spec;
    memset(&spec, 0, sizeof(spec));
    spec.config = sd_config_preset(SD_FAMILY_TINY);
    spec.config.clip.layout = CLIP_LAYOUT_OPENCLIP;
    spec.config.clip.act = SDT_ACT_GELU;
    spec.config.clip.default_skip = 2;
    spec.dtype = SDT_F32;
    spec.seed = sdt_test_next(rng);
    spec.text_only = true;
    CHECK(sdt_ckpt_generate(path, &spec, &error), "generate: %s", error.message);
    sdt_weights *w = sdt_weights_open(path, &error);
    CHECK(w != NULL, "open: %s", error.message);
    if (w) {
        clip_config c;
        clip_text_model m;
        CHECK(clip_config_detect(w, &c, &error) && c.layout == CLIP_LAYOUT_OPENCLIP &&
                  c.layers == spec.config.clip.layers && c.default_skip == 2,
              "OpenCLIP detection: %s", error.message);
        CHECK(clip_text_load(&m, &c, w, &error), "OpenCLIP load: %s", error.message);
        sdt_weights_close(w);
    }
    unlink(path);
}

static bool tensors_equal(const sdt_weights *a, const sdt_weights *b, const char *key)
{
    const sdt_tensor *x = sdt_weights_get(a, key), *y = sdt_weights_get(b, key);
    return x && y && sdt_tensor_nbytes(x) == sdt_tensor_nbytes(y) && !memcmp(x->data, y->data, sdt_tensor_nbytes(x));
}

static void test_generator_determinism(sdt_test_rng *rng)
{
    char p1[512], p2[512], p3[512];
    sdt_error error = {0};
    uint64_t seed = sdt_test_next(rng);
    mt_temp_path(p1, sizeof(p1), "g1");
    mt_temp_path(p2, sizeof(p2), "g2");
    mt_temp_path(p3, sizeof(p3), "g3");
    sdt_weights *a = mt_make_weights(p1, SD_FAMILY_TINY, seed, true, false);
    sdt_weights *b = mt_make_weights(p2, SD_FAMILY_TINY, seed, false, false); /* more tensors, same seed */
    sdt_weights *c = mt_make_weights(p3, SD_FAMILY_TINY, seed + 1, true, false);
    const char *key = "cond_stage_model.transformer.text_model.encoder.layers.1.mlp.fc1.weight";
    CHECK(tensors_equal(a, b, key), "the same seed gave different values for %s in a larger file", key);
    CHECK(!tensors_equal(a, c, key), "different seeds gave the same values for %s", key);
    sdt_weights_close(b);
    unlink(p2);

    /* F16: each value is the F32 value rounded. */
    sdt_ckpt_spec spec = mt_ckpt_spec(SD_FAMILY_TINY, seed);
    spec.dtype = SDT_F16;
    spec.text_only = true;
    CHECK(sdt_ckpt_generate(p2, &spec, &error), "F16 generate: %s", error.message);
    b = sdt_weights_open(p2, &error);
    CHECK(b != NULL, "F16 open: %s", error.message);
    if (b) {
        const sdt_tensor *x = sdt_weights_get(a, key), *h = sdt_weights_get(b, key);
        CHECK(h && h->dtype == SDT_F16, "the F16 checkpoint's tensor is not F16");
        if (h && x && h->dtype == SDT_F16) {
            int64_t n = sdt_tensor_numel(x), bad = 0;
            const float *xf = x->data;
            const uint16_t *hf = h->data;
            for (int64_t i = 0; i < n; i++) bad += hf[i] != sdt_f32_to_f16(xf[i]);
            CHECK(bad == 0, "%lld F16 values are not the rounded F32 values", (long long)bad);
        }
        sdt_weights_close(b);
    }
    sdt_weights_close(a);
    sdt_weights_close(c);
    unlink(p1), unlink(p2), unlink(p3);
}

/* One seed of a family written as an LDM file (ldm, opened into *a) and as a diffusers folder (dir, opened
 * into *b, NULL when it failed). */
static void write_both_layouts(sdt_test_rng *rng, sd_family family, char *ldm, size_t ldm_size, char *dir,
                               size_t dir_size, sdt_weights **a, sdt_weights **b)
{
    sdt_error error = {0};
    mt_temp_path(ldm, ldm_size, sd_family_name(family));
    snprintf(dir, dir_size, "%s.d", ldm);
    uint64_t seed = sdt_test_next(rng);
    *a = mt_make_weights(ldm, family, seed, false, false);
    sdt_ckpt_spec spec = mt_ckpt_spec(family, seed);
    spec.layout = SDT_CKPT_DIFFUSERS;
    CHECK(sdt_ckpt_generate(dir, &spec, &error), "%s diffusers generate: %s", sd_family_name(family), error.message);
    *b = sdt_weights_open(dir, &error);
    CHECK(*b != NULL, "opening the %s diffusers folder: %s", sd_family_name(family), error.message);
}

/* The same seed written as one LDM file and as a diffusers folder: reading the folder
 * back through weights.c's diffusers->LDM map gives every canonical key with the same
 * shape and bytes (so both layouts load the same model). */
static void test_diffusers_roundtrip(sdt_test_rng *rng)
{
    char ldm[512], dir[600];
    sdt_error error = {0};
    sdt_weights *a, *b;
    write_both_layouts(rng, SD_FAMILY_TINY, ldm, sizeof ldm, dir, sizeof dir, &a, &b);
    if (b) {
        CHECK(sdt_weights_count(a) == sdt_weights_count(b), "LDM file has %zu tensors, diffusers folder %zu",
              sdt_weights_count(a), sdt_weights_count(b));
        int64_t bad = 0;
        for (size_t i = 0; i < sdt_weights_count(a); i++) {
            const char *key = sdt_weights_key(a, i);
            const sdt_tensor *x = sdt_weights_get(a, key), *y = sdt_weights_get(b, key);
            bool same = y && sdt_tensor_same_shape(x, y) && tensors_equal(a, b, key);
            if (!same && bad++ < 5) fprintf(stderr, "  key %s differs or is missing in the diffusers folder\n", key);
        }
        CHECK(bad == 0, "%lld canonical keys differ between the two layouts", (long long)bad);
        sd_config ca, cb;
        CHECK(sd_config_detect(a, &ca, &error) && sd_config_detect(b, &cb, &error) && cb.family == SD_FAMILY_TINY &&
                  ca.family == cb.family,
              "both layouts should detect as tiny: %s", error.message);
        sdt_weights_close(b);
    }
    sdt_weights_close(a);
    unlink(ldm);
    mt_remove_folder(dir);
}

/* Copies a checkpoint with one float of one (f32) tensor replaced: its second element, or its last. */
static bool copy_with_poison(const char *src, const char *dst, const char *key, float value, bool last)
{
    sdt_error error = {0};
    sdt_safetensors *st = sdt_st_open(src, &error);
    const sdt_st_entry *e = st ? sdt_st_find(st, key) : NULL;
    FILE *f = fopen(src, "rb");
    bool ok = e && f;
    uint8_t *buf = NULL;
    long size = 0;
    if (ok) {
        fseek(f, 0, SEEK_END);
        size = ftell(f);
        fseek(f, 0, SEEK_SET);
        buf = mt_alloc((size_t)size);
        ok = fread(buf, 1, (size_t)size, f) == (size_t)size;
    }
    if (f) fclose(f);
    if (ok) {
        uint64_t header = 0;
        for (int i = 7; i >= 0; i--) header = (header << 8) | buf[i];
        memcpy(buf + 8 + header + e->offset + (last ? e->nbytes - 4 : 4), &value, 4);
        FILE *o = fopen(dst, "wb");
        ok = o && fwrite(buf, 1, (size_t)size, o) == (size_t)size;
        if (o) fclose(o);
    }
    free(buf);
    if (st) sdt_st_close(st);
    return ok;
}

/* Damaged or mismatched checkpoints: each a sentence naming the file and the key. */
static void test_bad_checkpoints(sdt_test_rng *rng, sdt_backend *be)
{
    char path[512], bad[512];
    sdt_error error = {0};
    mt_temp_path(path, sizeof(path), "good");
    mt_temp_path(bad, sizeof(bad), "nan");
    sdt_weights *w = mt_make_weights(path, SD_FAMILY_TINY, sdt_test_next(rng), false, false);
    const char *key = "first_stage_model.decoder.mid.attn_1.k.weight";
    for (int last = 0; last < 2;
         last++) { /* a NaN in the second element; an Inf in the last (the scan's final chunk) */
        CHECK(copy_with_poison(path, bad, key, last ? INFINITY : NAN, last), "could not write the poisoned copy");
        sdt_weights *wb = sdt_weights_open(bad, &error);
        CHECK(wb != NULL, "open poisoned: %s", error.message);
        if (!wb) continue;
        const sdt_tensor *t = sdt_weights_get(wb, key);
        char where[64];
        snprintf(where, sizeof where, "%s at element %lld;", last ? "Inf" : "NaN",
                 !t     ? -1LL
                 : last ? (long long)sdt_tensor_numel(t) - 1
                        : 1LL);
        sd_model m;
        error.message[0] = 0;
        bool loaded = sd_model_load(&m, wb, be, &error);
        printf("poisoned: %s\n", error.message);
        CHECK(!loaded && strstr(error.message, key) && strstr(error.message, where) && strstr(error.message, bad),
              "a %s weight was not reported with its key, element (%s) and file (%s)", last ? "Inf" : "NaN", where,
              error.message);
        sdt_weights_close(wb);
    }
    /* A config asking for more layers than stored: the first missing key is named. */
    clip_config c = clip_config_tiny();
    c.layers += 1;
    clip_text_model cm;
    error.message[0] = 0;
    CHECK(!clip_text_load(&cm, &c, w, &error) && strstr(error.message, "encoder.layers.3."),
          "a missing text-encoder layer was not named (%s)", error.message);
    /* A config of another width: a misshapen key is named. */
    vae_config v = vae_config_tiny();
    v.ch_mult[1] = 3;
    vae_model vm;
    error.message[0] = 0;
    CHECK(!vae_load(&vm, &v, w, be, &error) && strstr(error.message, "first_stage_model."),
          "a misshapen VAE key was not named (%s)", error.message);
    sdt_weights_close(w);
    unlink(path), unlink(bad);
}

/* Pairs from diffusers' convert_diffusers_to_original_stable_diffusion.py for SD 1.5. */
/* bigG's tensors as the two layouts hold them: OpenCLIP's packed in_proj and [in, out] projection in the
 * LDM file, transformers' q/k/v and Linear [out, in] in text_encoder_2. */
static bool same_tensor(const sdt_tensor *x, const sdt_tensor *y)
{
    return sdt_tensor_same_shape(x, y) && !memcmp(x->data, y->data, sdt_tensor_nbytes(x));
}

static int bigg_differences(const clip_text_model *oc, const clip_text_model *hf)
{
    int bad = !same_tensor(&oc->tok_emb, &hf->tok_emb) + !same_tensor(&oc->pos_emb, &hf->pos_emb) +
              !same_tensor(&oc->lnf_w, &hf->lnf_w) + !same_tensor(&oc->lnf_b, &hf->lnf_b);
    for (int l = 0; l < oc->cfg.layers; l++) {
        const sdt_tensor *a = &oc->layer[l].ln1_w, *b = &hf->layer[l].ln1_w;
        for (size_t k = 0; k < sizeof(clip_layer_weights) / sizeof(sdt_tensor); k++) bad += !same_tensor(a + k, b + k);
    }
    int64_t C = oc->cfg.width, P = oc->cfg.projection_dim;
    const float *p_oc = oc->proj.data, *p_hf = hf->proj.data;
    for (int64_t i = 0; i < C; i++)
        for (int64_t j = 0; j < P; j++) bad += p_oc[i * P + j] != p_hf[j * C + i];
    return bad;
}

static void test_sdxl_checkpoints(sdt_test_rng *rng, sdt_backend *be)
{
    char ldm[512], dir[600];
    sdt_error error = {0};
    sdt_weights *a, *b;
    write_both_layouts(rng, SD_FAMILY_TINY_SDXL, ldm, sizeof ldm, dir, sizeof dir, &a, &b);
    sd_model ma, mb;
    bool loaded_a = sd_model_load(&ma, a, be, &error);
    CHECK(loaded_a, "loading the SDXL single file: %s", error.message);
    bool loaded_b = b && sd_model_load(&mb, b, be, &error);
    CHECK(loaded_b, "loading the SDXL diffusers folder: %s", error.message);
    if (loaded_a && loaded_b) {
        const sd_config *ca = &ma.cfg, *cb = &mb.cfg;
        CHECK(ca->family == SD_FAMILY_TINY_SDXL && cb->family == SD_FAMILY_TINY_SDXL,
              "families %s and %s, want tiny-sdxl", sd_family_name(ca->family), sd_family_name(cb->family));
        CHECK(ca->clip.width == 32 && ca->clip2.width == 48 && ca->clip2.projection_dim == 48 &&
                  ca->clip.slot == CLIP_SLOT_SDXL_L && ca->clip2.slot == CLIP_SLOT_SDXL_G &&
                  ca->clip2.layout == CLIP_LAYOUT_OPENCLIP && cb->clip2.layout == CLIP_LAYOUT_HF &&
                  cb->clip2.act == SDT_ACT_GELU && cb->clip2.layers == ca->clip2.layers && cb->clip2.pad_zero,
              "SDXL encoders: widths %d + %d, projection %d, layouts %d/%d", ca->clip.width, ca->clip2.width,
              ca->clip2.projection_dim, ca->clip2.layout, cb->clip2.layout);
        CHECK(ca->vae.scaling == SD_SDXL_VAE_SCALING && cb->vae.scaling == SD_SDXL_VAE_SCALING,
              "SDXL's VAE scale is 0.13025 (got %g and %g)", ca->vae.scaling, cb->vae.scaling);
        /* Every tensor of the single file outside bigG is in the folder under the same key and bytes. */
        int64_t bad = 0, checked = 0;
        for (size_t i = 0; i < sdt_weights_count(a); i++) {
            const char *key = sdt_weights_key(a, i);
            if (g_str_has_prefix(key, "conditioner.embedders.1.")) continue;
            checked++;
            if (!tensors_equal(a, b, key) && bad++ < 5) fprintf(stderr, "  %s differs or is missing\n", key);
        }
        CHECK(bad == 0 && checked > 100, "%lld of %lld canonical keys differ between the SDXL layouts", (long long)bad,
              (long long)checked);
        int diff = bigg_differences(&ma.clip2, &mb.clip2);
        CHECK(diff == 0,
              "bigG's tensors differ in %d places between the layouts (in_proj split, projection transposed)", diff);
        float ctx_a[77 * 48], ctx_b[77 * 48], pooled_a[48], pooled_b[48];
        if (mt_encoder_outputs(&ma.clip2, be, 0, ctx_a, pooled_a, &error) &&
            mt_encoder_outputs(&mb.clip2, be, 0, ctx_b, pooled_b, &error)) {
            double dc = mt_max_abs_diff(ctx_a, ctx_b, 77 * 48), dp = mt_max_abs_diff(pooled_a, pooled_b, 48);
            CHECK(dc == 0 && dp <= 1e-5, "bigG's outputs differ between the layouts: context %.3g, pooled %.3g", dc,
                  dp);
        } else {
            CHECK(false, "bigG forward: %s", error.message);
        }
    }
    if (loaded_a) sd_model_free(&ma);
    if (loaded_b) sd_model_free(&mb);
    if (b) sdt_weights_close(b);
    sdt_weights_close(a);
    unlink(ldm);
    mt_remove_folder(dir);

    /* SDXL's refiner (bigG alone as conditioner.embedders.0) is named and refused. */
    char refiner[512];
    mt_temp_path(refiner, sizeof(refiner), "refiner");
    float row[8] = {0};
    int64_t shape[2] = {2, 4};
    sdt_st_write_item item = {.name = "conditioner.embedders.0.model.token_embedding.weight",
                              .dtype = sdt_st_dtype_of(SDT_F32),
                              .ndim = 2,
                              .shape = shape,
                              .data = row};
    sdt_weights *r = sdt_st_write(refiner, &item, 1, NULL, 0, &error) ? sdt_weights_open(refiner, &error) : NULL;
    sd_config cr;
    error.message[0] = 0;
    CHECK(r && !sd_config_detect(r, &cr, &error) && error.code == SDT_ERR_UNSUPPORTED &&
              strstr(error.message, "refiner"),
          "the SDXL refiner was not refused with a sentence (%s)", error.message);
    if (r) sdt_weights_close(r);
    unlink(refiner);
    sd_family f;
    CHECK(sd_family_parse("sdxl", &f) && f == SD_FAMILY_SDXL && !strcmp(sd_family_title(f), "SDXL") &&
              sd_family_parse("tiny-sdxl", &f) && f == SD_FAMILY_TINY_SDXL,
          "SDXL family names");
}

static void test_known_sd1_names(void)
{
    static const char *pairs[][2] = {
        {"first_stage_model.decoder.up.3.block.0.conv1.weight", "decoder.up_blocks.0.resnets.0.conv1.weight"},
        {"first_stage_model.decoder.up.1.upsample.conv.bias", "decoder.up_blocks.2.upsamplers.0.conv.bias"},
        {"first_stage_model.encoder.down.1.block.0.nin_shortcut.weight",
         "encoder.down_blocks.1.resnets.0.conv_shortcut.weight"},
        {"first_stage_model.encoder.down.2.downsample.conv.weight", "encoder.down_blocks.2.downsamplers.0.conv.weight"},
        {"first_stage_model.encoder.mid.attn_1.q.weight", "encoder.mid_block.attentions.0.to_q.weight"},
        {"first_stage_model.decoder.mid.attn_1.proj_out.bias", "decoder.mid_block.attentions.0.to_out.0.bias"},
        {"first_stage_model.decoder.mid.block_2.norm1.weight", "decoder.mid_block.resnets.1.norm1.weight"},
        {"first_stage_model.encoder.norm_out.bias", "encoder.conv_norm_out.bias"},
        {"first_stage_model.quant_conv.weight", "quant_conv.weight"},
        {"cond_stage_model.transformer.text_model.final_layer_norm.weight", "text_model.final_layer_norm.weight"},
        {"model.diffusion_model.time_embed.2.weight", "time_embedding.linear_2.weight"},
        {"model.diffusion_model.input_blocks.3.0.op.weight", "down_blocks.0.downsamplers.0.conv.weight"},
        {"model.diffusion_model.input_blocks.5.1.proj_in.weight", "down_blocks.1.attentions.1.proj_in.weight"},
        {"model.diffusion_model.input_blocks.4.0.skip_connection.bias", "down_blocks.1.resnets.0.conv_shortcut.bias"},
        {"model.diffusion_model.input_blocks.10.0.emb_layers.1.weight", "down_blocks.3.resnets.0.time_emb_proj.weight"},
        {"model.diffusion_model.middle_block.2.out_layers.3.weight", "mid_block.resnets.1.conv2.weight"},
        {"model.diffusion_model.middle_block.1.transformer_blocks.0.attn2.to_k.weight",
         "mid_block.attentions.0.transformer_blocks.0.attn2.to_k.weight"},
        {"model.diffusion_model.output_blocks.2.1.conv.weight", "up_blocks.0.upsamplers.0.conv.weight"},
        {"model.diffusion_model.output_blocks.5.2.conv.bias", "up_blocks.1.upsamplers.0.conv.bias"},
        {"model.diffusion_model.output_blocks.8.2.conv.weight", "up_blocks.2.upsamplers.0.conv.weight"},
        {"model.diffusion_model.output_blocks.11.1.norm.weight", "up_blocks.3.attentions.2.norm.weight"},
        {"model.diffusion_model.output_blocks.7.0.in_layers.2.weight", "up_blocks.2.resnets.1.conv1.weight"},
        {"model.diffusion_model.out.2.bias", "conv_out.bias"},
    };
    sd_config sd1 = sd_config_preset(SD_FAMILY_SD1);
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        sdt_diffusers_part part;
        sdt_diffusers_form lin;
        char *name = sdt_diffusers_name(pairs[i][0], &sd1, &part, &lin);
        CHECK(name && !strcmp(name, pairs[i][1]), "%s -> %s, expected %s", pairs[i][0], name ? name : "(none)",
              pairs[i][1]);
        free(name);
    }
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("models_test_sd_model");
    sdt_backend *be = mt_backend();
    test_published_counts();
    test_detect_and_load(&rng, be);
    test_openclip_roundtrip(&rng);
    test_generator_determinism(&rng);
    test_diffusers_roundtrip(&rng);
    test_sdxl_checkpoints(&rng, be);
    test_known_sd1_names();
    test_bad_checkpoints(&rng, be);
    be->destroy(be);
    return sdt_test_finish("models_test_sd_model");
}
