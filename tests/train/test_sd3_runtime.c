/* test_sd3_runtime.c - an SD3.5 model ready to compute (issue 30): sd_runtime with the component files.
 *  - a tiny SD3.5 all-in-one file (sd3_gen, SAI's layout) detects as the tiny SD3 family (MMDiT, CLIP-L and
 *    CLIP-G in SD3's slots with their projections, T5 96 wide, the 16-channel VAE with SD3's scale and shift)
 *    and binds every part;
 *  - the same file without T5 is refused by one sentence naming --t5xxl and t5xxl_path, and binds with the
 *    lone T5 file given as t5xxl_path: the bound T5 is the file's (the same tensors as the all-in-one's T5);
 *    a lone CLIP-L and VAE override the checkpoint's parts the same way;
 *  - a component file beside an SD 1.x checkpoint is refused naming the field; a file that is not the part is
 *    refused naming the field;
 *  - the NaN fallback's dtype switch rebinds every part (the part files' copies too) in the new dtype;
 *  - parking lets go of one encoder (T5) or all of them, and the rest stays bound;
 *  - the latent cache scales the 16-channel VAE's latents as SD3's pipeline does, scaling (z - shift): the same
 *    image cached with SD3's shift is the unshifted cache minus scaling x shift, for "once", "deterministic" and
 *    "random" (whose draws are the same). */
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_gen.h"
#include "sd3_gen.h"
#include "sdt_test.h"
#include "train/latent_cache.h"
#include "train/sd_runtime.h"
#include "train/work_arena.h"

static sdt_backend *be;
static char *dir;

static char *path_of(const char *name)
{
    return g_strdup_printf("%s/%s", dir, name);
}

static char *make_sd3(const char *name, bool with_t5, uint64_t seed)
{
    sd_config cfg = sd_config_preset(SD_FAMILY_TINY_SD3);
    bool in[SD_PART_COUNT] = {true, true, true, with_t5, true};
    char *path = path_of(name);
    sdt_error err = {0};
    CHECK(sd3_generate(path, &cfg, in, SDT_F32, seed, true, &err), "generate %s: %s", name, err.message);
    return path;
}

static char *make_part(const char *name, sd_part part, uint64_t seed)
{
    sd_config cfg = sd_config_preset(SD_FAMILY_TINY_SD3);
    char *path = path_of(name);
    sdt_error err = {0};
    CHECK(sd3_generate_part(path, &cfg, part, SDT_F32, seed, true, &err), "generate %s: %s", name, err.message);
    return path;
}

static bool same_tensor(const sdt_tensor *a, const sdt_tensor *b)
{
    return a->data && b->data && a->dtype == b->dtype && sdt_tensor_numel(a) == sdt_tensor_numel(b) &&
           memcmp(a->data, b->data, sdt_tensor_nbytes(a)) == 0;
}

static bool open_parts(sd_runtime *rt, const char *path, const char *t5, const char *clip_l, const char *vae,
                       sdt_error *err)
{
    const char *const parts[SD_PART_COUNT] = {NULL, clip_l, NULL, t5, vae};
    return sd_runtime_read_parts(rt, path, parts, be, false, err) &&
           sd_runtime_place(rt, SDT_F32, SD_PREDICTION_AUTO, err);
}

static void check_all_in_one(const char *all)
{
    sd_runtime rt;
    sdt_error err = {0};
    bool ok = open_parts(&rt, all, NULL, NULL, NULL, &err);
    CHECK(ok, "the all-in-one file binds: %s", err.message);
    if (!ok) return;
    const sd_config *c = &rt.cfg;
    sd_config want = sd_config_preset(SD_FAMILY_TINY_SD3);
    CHECK(c->family == SD_FAMILY_TINY_SD3 && sd_config_is_transformer(c), "family %s", sd_family_name(c->family));
    CHECK(c->mmdit.layers == want.mmdit.layers && c->mmdit.context_dim == 96 && c->mmdit.pooled_dim == 80 &&
              c->mmdit.in_channels == 16 && c->mmdit.qk_norm,
          "MMDiT: %d layers, context %d, pooled %d, %d channels", c->mmdit.layers, c->mmdit.context_dim,
          c->mmdit.pooled_dim, c->mmdit.in_channels);
    CHECK(c->clip.slot == CLIP_SLOT_SD3_L && c->clip.width == 32 && c->clip.projection_dim == 32 && !c->clip.pad_zero &&
              c->clip.act == SDT_ACT_QUICK_GELU && c->clip.default_skip == 2 && c->clip.context_without_final_norm,
          "CLIP-L in SD3's slot: width %d, projection %d", c->clip.width, c->clip.projection_dim);
    CHECK(c->clip2.slot == CLIP_SLOT_SD3_G && c->clip2.width == 48 && c->clip2.projection_dim == 48 &&
              c->clip2.pad_zero && c->clip2.act == SDT_ACT_GELU,
          "CLIP-G in SD3's slot: width %d, projection %d", c->clip2.width, c->clip2.projection_dim);
    CHECK(c->t5.d_model == 96 && c->t5.layers == want.t5.layers && !strcmp(c->t5.prefix, SD_SD3_T5_PREFIX),
          "T5: %d wide, %d layers, prefix %s", c->t5.d_model, c->t5.layers, c->t5.prefix);
    CHECK(c->vae.z_channels == 16 && !c->vae.has_quant_conv && c->vae.scaling == 1.5305f && c->vae.shift == 0.0609f,
          "the 16-channel VAE with SD3's scaling %g and shift %g", c->vae.scaling, c->vae.shift);
    CHECK(rt.bound && rt.model.mmdit && !rt.model.unet && rt.model.t5.tok_emb.data && rt.model.clip2.proj.data &&
              rt.model.vae.be,
          "every part bound");
    sd_runtime_close(&rt);
}

static void check_without_t5(const char *all, const char *no_t5, const char *t5)
{
    sd_runtime rt;
    sdt_error err = {0};
    CHECK(!sd_runtime_read(&rt, no_t5, be, false, &err) && err.code == SDT_ERR_VALIDATION &&
              strstr(err.message, "--t5xxl FILE") && strstr(err.message, "t5xxl_path") &&
              !strstr(err.message, "clip_l_path") && strstr(err.message, no_t5),
          "no T5: \"%s\"", err.message);
    sd_runtime whole;
    bool ok = open_parts(&rt, no_t5, t5, NULL, NULL, &err);
    CHECK(ok, "the file without T5 binds with t5xxl_path: %s", err.message);
    bool whole_ok = open_parts(&whole, all, NULL, NULL, NULL, &err);
    CHECK(whole_ok, "all-in-one: %s", err.message);
    if (ok && whole_ok) {
        CHECK(rt.part_file[SD_PART_T5XXL] && rt.part_dev[SD_PART_T5XXL], "T5 from its own file");
        CHECK(same_tensor(&rt.model.t5.tok_emb, &whole.model.t5.tok_emb) &&
                  same_tensor(&rt.model.t5.layer[1].wo_w, &whole.model.t5.layer[1].wo_w),
              "the lone T5 file's tensors are the all-in-one's T5");
        CHECK(same_tensor(&rt.model.clip.tok_emb, &whole.model.clip.tok_emb), "CLIP-L from the checkpoint");
        /* the dtype switch rebinds the part file's copy too */
        ok = sd_runtime_set_dtype(&rt, SDT_BF16, &err);
        CHECK(ok && rt.model.t5.tok_emb.dtype == SDT_BF16 && rt.model.mmdit->ctx_in.w.dtype == SDT_BF16 &&
                  rt.model.clip2.tok_emb.dtype == SDT_BF16,
              "bf16 rebinding: %s", ok ? "dtypes" : err.message);
        ok = ok && sd_runtime_set_dtype(&rt, SDT_F32, &err);
        CHECK(ok && same_tensor(&rt.model.t5.tok_emb, &whole.model.t5.tok_emb), "back to f32: %s",
              ok ? "T5's table differs" : err.message);
        /* T5 parked alone (its output cached), CLIP still bound; then every encoder */
        const char *t5_key = SD_SD3_T5_PREFIX "encoder.block.0.layer.0.SelfAttention.q.weight";
        size_t t5_bytes = sd_runtime_part_park(&rt, SD_PART_T5XXL);
        const sdt_tensor *q = sdt_weights_get(rt.part_dev[SD_PART_T5XXL], t5_key);
        CHECK(t5_bytes > 0 && q && !q->data && rt.model.clip.tok_emb.data, "T5 parked (%zu bytes), CLIP bound",
              t5_bytes);
        size_t text_bytes = sd_runtime_text_park(&rt);
        const sdt_tensor *l = sdt_weights_get(rt.dev, "text_encoders.clip_l.transformer.text_projection.weight");
        CHECK(text_bytes > 0 && l && !l->data && rt.model.mmdit->ctx_in.w.data,
              "CLIP parked (%zu bytes, T5's not counted twice), the transformer bound", text_bytes);
    }
    if (ok) sd_runtime_close(&rt);
    if (whole_ok) sd_runtime_close(&whole);
}

static void check_overrides(const char *all, uint64_t seed)
{
    /* another seed's CLIP-L and VAE replace the checkpoint's */
    char *clip_l = make_part("other_clip_l.safetensors", SD_PART_CLIP_L, seed + 7);
    char *vae = make_part("other_ae.safetensors", SD_PART_VAE, seed + 7);
    sd_runtime rt, whole;
    sdt_error err = {0};
    bool ok = open_parts(&rt, all, NULL, clip_l, vae, &err);
    CHECK(ok, "clip_l_path and vae_path: %s", err.message);
    bool whole_ok = open_parts(&whole, all, NULL, NULL, NULL, &err);
    if (ok && whole_ok) {
        CHECK(!same_tensor(&rt.model.clip.tok_emb, &whole.model.clip.tok_emb) &&
                  same_tensor(&rt.model.clip2.tok_emb, &whole.model.clip2.tok_emb),
              "CLIP-L from clip_l_path, CLIP-G from the checkpoint");
        CHECK(!same_tensor(&rt.model.vae.enc_in_w, &whole.model.vae.enc_in_w), "the VAE from vae_path");
    }
    if (ok) sd_runtime_close(&rt);
    if (whole_ok) sd_runtime_close(&whole);
    /* a file that is not the part */
    CHECK(!sd_runtime_read_parts(&rt, all, (const char *const[SD_PART_COUNT]){NULL, NULL, NULL, vae, NULL}, be, false,
                                 &err) &&
              strstr(err.message, "t5xxl_path"),
          "a VAE given as T5: \"%s\"", err.message);
    g_free(clip_l);
    g_free(vae);
}

static void check_latent_shift(const char *all)
{
    sd_runtime rt;
    sdt_error err = {0};
    if (!open_parts(&rt, all, NULL, NULL, NULL, &err)) {
        CHECK(false, "open: %s", err.message);
        return;
    }
    enum { S = 16 };
    float pixels[3 * S * S];
    for (int i = 0; i < 3 * S * S; i++) pixels[i] = (float)sin(0.13 * i);
    work_arena wa = {0};
    const latent_method methods[3] = {LATENT_ONCE, LATENT_DETERMINISTIC, LATENT_RANDOM};
    float scaling = rt.cfg.vae.scaling, shift = rt.cfg.vae.shift;
    for (int m = 0; m < 3; m++) {
        latent_cache plain, shifted;
        bool ok = latent_cache_init(&plain, 1, methods[m], scaling, 9) &&
                  latent_cache_init(&shifted, 1, methods[m], scaling, 9);
        latent_cache_set_shift(&shifted, shift);
        ok = ok && latent_cache_encode(&plain, 0, &rt, &wa, pixels, S, S, NULL, 0, 0, &err) &&
             latent_cache_encode(&shifted, 0, &rt, &wa, pixels, S, S, NULL, 0, 0, &err);
        CHECK(ok, "encode: %s", err.message);
        if (ok) {
            int64_t n = latent_cache_numel(&plain, 0);
            float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
            latent_cache_get(&plain, 0, 3, false, a);
            latent_cache_get(&shifted, 0, 3, false, b);
            double worst = 0;
            for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)b[i] - ((double)a[i] - scaling * shift)));
            CHECK(plain.items[0].c == 16 && worst < 1e-5, "method %d: shifted = plain - scaling shift (off by %g)", m,
                  worst);
            free(a);
            free(b);
        }
        latent_cache_free(&plain);
        latent_cache_free(&shifted);
    }
    work_arena_release(&wa);
    sd_runtime_close(&rt);
}

static void check_unet_refuses_parts(const char *t5, uint64_t seed)
{
    sdt_ckpt_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.config = sd_config_preset(SD_FAMILY_TINY);
    spec.dtype = SDT_F32;
    spec.seed = seed;
    spec.layout = SDT_CKPT_LDM;
    char *sd1 = path_of("sd1.safetensors");
    sdt_error err = {0};
    CHECK(sdt_ckpt_generate(sd1, &spec, &err), "generate SD1: %s", err.message);
    sd_runtime rt;
    CHECK(!sd_runtime_read_parts(&rt, sd1, (const char *const[SD_PART_COUNT]){NULL, NULL, NULL, t5, NULL}, be, false,
                                 &err) &&
              err.code == SDT_ERR_VALIDATION && strstr(err.message, "t5xxl_path") && strstr(err.message, "SD"),
          "a T5 file beside an SD 1.x checkpoint: \"%s\"", err.message);
    CHECK(sd_runtime_read_parts(&rt, sd1, (const char *const[SD_PART_COUNT]){NULL, "", NULL, NULL, NULL}, be, false,
                                &err) &&
              !sd_config_is_transformer(&rt.cfg),
          "empty paths are no files: %s", err.message);
    sd_runtime_close(&rt);
    g_free(sd1);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("test_sd3_runtime");
    be = sdt_backend_cpu_create(2);
    dir = g_dir_make_tmp("sdt-sd3rt-XXXXXX", NULL);
    CHECK(be && dir, "backend and temp folder");
    if (!be || !dir) return sdt_test_finish("test_sd3_runtime");
    uint64_t seed = sdt_test_next(&rng);
    char *all = make_sd3("sd3.5_tiny.safetensors", true, seed);
    char *no_t5 = make_sd3("sd3.5_tiny_no_t5.safetensors", false, seed);
    char *t5 = make_part("t5xxl_tiny.safetensors", SD_PART_T5XXL, seed);
    check_all_in_one(all);
    check_without_t5(all, no_t5, t5);
    check_overrides(all, seed);
    check_latent_shift(all);
    check_unet_refuses_parts(t5, seed);
    g_free(all);
    g_free(no_t5);
    g_free(t5);
    char *rm = g_strdup_printf("rm -rf '%s'", dir);
    CHECK(system(rm) == 0, "remove %s", dir);
    g_free(rm);
    g_free(dir);
    be->destroy(be);
    return sdt_test_finish("test_sd3_runtime");
}
