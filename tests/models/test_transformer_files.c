/* SD3/SD3.5 and Flux.1 files as people have them (issue 30): fp8 storage decoded exactly (every bit-pattern
 * class), SAI's SD3 all-in-one and BFL's / ComfyUI's Flux layouts packed from diffusers-named tensors and read
 * back to every tensor bit for bit, the names and swaps checked against diffusers' converters independently of
 * the table, family/variant/parts detection with the missing-part sentence, a diffusers folder, ComfyUI's scaled
 * fp8 read as ComfyUI dequantizes it, bitsandbytes NF4 and broken splits refused with sentences. */
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "checkpoint_describe.h"
#include "checkpoint_gen.h"
#include "fp8.h"
#include "mmdit.h"
#include "mmdit_gen.h"
#include "model_test_util.h"
#include "safetensors.h"
#include "sd_config_detect.h"
#include "t5_encoder.h"
#include "t5_gen.h"
#include "transformer_detect.h"
#include "transformer_pack.h"

static bool same_bits(float a, float b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static void test_fp8(void)
{
    /* E4M3 (e4m3fn): zeros, the smallest subnormal, the largest subnormal, the smallest normal, one, the
     * largest finite, NaN; the same negated */
    struct {
        uint8_t b;
        float v;
    } e4[] = {{0x00, 0.0f},   {0x80, -0.0f},   {0x01, 0x1p-9f}, {0x07, 7 * 0x1p-9f}, {0x08, 0x1p-6f}, {0x38, 1.0f},
              {0x7E, 448.0f}, {0xFE, -448.0f}, {0x3C, 1.5f},    {0x81, -0x1p-9f},    {0x77, 240.0f},  {0x78, 256.0f}},
      e5[] = {{0x00, 0.0f},     {0x80, -0.0f},     {0x01, 0x1p-16f}, {0x03, 3 * 0x1p-16f},
              {0x04, 0x1p-14f}, {0x3C, 1.0f},      {0x7B, 57344.0f}, {0xFB, -57344.0f},
              {0x7C, INFINITY}, {0xFC, -INFINITY}, {0x3E, 1.5f},     {0x83, -3 * 0x1p-16f}};
    for (size_t i = 0; i < G_N_ELEMENTS(e4); i++)
        CHECK(same_bits(sdt_fp8_to_f32(e4[i].b, SDT_FP8_E4M3), e4[i].v), "e4m3 0x%02x: %g, want %g", e4[i].b,
              sdt_fp8_to_f32(e4[i].b, SDT_FP8_E4M3), e4[i].v);
    for (size_t i = 0; i < G_N_ELEMENTS(e5); i++)
        CHECK(same_bits(sdt_fp8_to_f32(e5[i].b, SDT_FP8_E5M2), e5[i].v), "e5m2 0x%02x: %g, want %g", e5[i].b,
              sdt_fp8_to_f32(e5[i].b, SDT_FP8_E5M2), e5[i].v);
    int nan4 = 0, nan5 = 0;
    for (int b = 0; b < 256; b++) {
        float v4 = sdt_fp8_to_f32((uint8_t)b, SDT_FP8_E4M3), v5 = sdt_fp8_to_f32((uint8_t)b, SDT_FP8_E5M2);
        nan4 += isnan(v4), nan5 += isnan(v5);
        /* e5m2 is the top byte of an IEEE half: an independent decoder */
        float half = sdt_f16_to_f32((uint16_t)(b << 8));
        CHECK(isnan(v5) ? isnan(half) : same_bits(v5, half), "e5m2 0x%02x: %g, the half 0x%02x00 is %g", b, v5, b,
              half);
        for (int k = 0; k < 2; k++) {
            sdt_fp8_kind kind = k ? SDT_FP8_E5M2 : SDT_FP8_E4M3;
            float v = k ? v5 : v4, back = sdt_bf16_to_f32(sdt_fp8_to_bf16((uint8_t)b, kind));
            CHECK(isnan(v) ? isnan(back) && (signbit(back) != 0) == (b >= 128) : same_bits(v, back),
                  "fp8 kind %d 0x%02x: bf16 gives %g for %g", k, b, back, v);
            if (!isnan(v))
                CHECK(sdt_fp8_from_f32(v, kind) == b, "fp8 kind %d: %g encodes to 0x%02x, not 0x%02x", k, v,
                      sdt_fp8_from_f32(v, kind), b);
            /* the finite positive values ascend with their patterns */
            if (b > 0 && b < 128 && !isnan(v) && !isinf(v)) {
                float prev = sdt_fp8_to_f32((uint8_t)(b - 1), kind);
                CHECK(v > prev, "fp8 kind %d: 0x%02x (%g) is not above 0x%02x (%g)", k, b, v, b - 1, prev);
            }
        }
    }
    CHECK(nan4 == 2 && nan5 == 6, "NaN patterns: e4m3 %d (want 2: 0x7f, 0xff), e5m2 %d (want 6)", nan4, nan5);
    uint8_t src[4] = {0x38, 0xB8, 0x7F, 0x01}, bad = 0;
    uint16_t out[4];
    sdt_fp8_to_bf16_n(src, out, 4, SDT_FP8_E4M3);
    for (int i = 0; i < 4; i++) bad |= out[i] != sdt_fp8_to_bf16(src[i], SDT_FP8_E4M3);
    CHECK(!bad && out[0] == 0x3F80 && out[1] == 0xBF80, "bulk e4m3 -> bf16: %04x %04x", out[0], out[1]);
    /* rounding as torch does: ties to even, e4m3 past 464 is NaN (no inf), e5m2 overflows to inf */
    CHECK(sdt_fp8_from_f32(464.0f, SDT_FP8_E4M3) == 0x7E && sdt_fp8_from_f32(465.0f, SDT_FP8_E4M3) == 0x7F &&
              sdt_fp8_from_f32(-1e9f, SDT_FP8_E4M3) == 0xFF && sdt_fp8_from_f32(0x1p-10f, SDT_FP8_E4M3) == 0x00 &&
              sdt_fp8_from_f32(3 * 0x1p-10f, SDT_FP8_E4M3) == 0x02 && sdt_fp8_from_f32(1e9f, SDT_FP8_E5M2) == 0x7C &&
              sdt_fp8_from_f32(1.0625f, SDT_FP8_E4M3) == 0x38 && sdt_fp8_from_f32(1.125f, SDT_FP8_E4M3) == 0x39 &&
              sdt_fp8_from_f32(1.1875f, SDT_FP8_E4M3) == 0x3A,
          "fp8 rounding");
}

/* Every tensor of a under pa is in b under pb with the same dtype, shape and bytes. */
static void compare_all(const sdt_weights *a, const char *pa, const sdt_weights *b, const char *pb, const char *what)
{
    size_t n = 0, plen = strlen(pa);
    for (size_t i = 0; i < sdt_weights_count(a); i++) {
        const char *key = sdt_weights_key(a, i);
        if (strncmp(key, pa, plen) != 0) continue;
        char *other = g_strconcat(pb, key + plen, NULL);
        const sdt_tensor *x = sdt_weights_get(a, key), *y = sdt_weights_get(b, other);
        bool same = y && x->dtype == y->dtype && x->ndim == y->ndim;
        for (int d = 0; same && d < x->ndim; d++) same = x->shape[d] == y->shape[d];
        size_t bytes = sdt_dtype_size(x->dtype);
        for (int d = 0; d < x->ndim; d++) bytes *= (size_t)x->shape[d];
        CHECK(same && memcmp(x->data, y->data, bytes) == 0, "%s: '%s' read back as '%s' differs or is missing", what,
              key, other);
        g_free(other);
        n++;
    }
    CHECK(n > 10, "%s: only %zu tensors compared", what, n);
    printf("%s: %zu tensors identical\n", what, n);
}

static void check_source(const sdt_weights *w, const char *key, const char *source)
{
    const char *got = sdt_weights_source(w, key);
    CHECK(got && strcmp(got, source) == 0, "'%s' should come from '%s', not '%s'", key, source, got ? got : "-");
}

/* Rows [r0, r0 + n) of a raw file's tensor equal rows [s0, s0 + n) of t (both [*, cols] in f32). */
static bool rows_equal(const sdt_st_entry *raw, int64_t r0, const sdt_tensor *t, int64_t s0, int64_t n)
{
    int64_t cols = raw->ndim > 1 ? raw->shape[1] : 1;
    return raw->dtype == SDT_ST_F32 && memcmp((const float *)raw->data + r0 * cols, (const float *)t->data + s0 * cols,
                                              sizeof(float) * n * cols) == 0;
}

static void test_sd3(const char *dir)
{
    sdt_error err = {0};
    mmdit_config cfg = mmdit_config_tiny();
    cfg.dual_layers = 1; /* an MMDiT-X block too: attn2 */
    t5_config t5 = t5_config_tiny();
    char *dpath = g_build_filename(dir, "transformer.safetensors", NULL);
    char *tpath = g_build_filename(dir, "t5.safetensors", NULL);
    char *spath = g_build_filename(dir, "sd35_tiny.safetensors", NULL);
    char *nopath = g_build_filename(dir, "sd35_tiny_no_t5.safetensors", NULL);
    CHECK(mmdit_generate(dpath, &cfg, SDT_F32, 7, true, &err), "mmdit_generate: %s", err.message);
    CHECK(t5_generate(tpath, &t5, SDT_F32, 8, true, &err), "t5_generate: %s", err.message);
    sdt_weights *wd = sdt_weights_open(dpath, &err), *wt = sdt_weights_open(tpath, &err);
    CHECK(wd && wt, "open the generated files: %s", err.message);
    if (!wd || !wt) return;
    sdt_pack_part t5_part = {wt, "", SDT_TK_T5XXL_PREFIX};
    CHECK(sdt_pack_write(spath, SDT_TK_SAI_SD3, wd, "", NULL, &t5_part, 1, SDT_PACK_AS_IS, &err) &&
              sdt_pack_write(nopath, SDT_TK_SAI_SD3, wd, "", NULL, NULL, 0, SDT_PACK_AS_IS, &err),
          "pack SAI: %s", err.message);
    sdt_weights *ws = sdt_weights_open(spath, &err);
    CHECK(ws, "open the SAI file: %s", err.message);
    if (!ws) return;
    compare_all(wd, "", ws, SDT_TK_TRANSFORMER_PREFIX, "SAI SD3 transformer");
    compare_all(wt, "", ws, SDT_TK_T5XXL_PREFIX, "SAI SD3 T5");
    /* the names as diffusers' convert_sd3_transformer_checkpoint_to_diffusers has them */
    check_source(ws, "model.diffusion_model.transformer_blocks.1.attn.to_k.weight",
                 "model.diffusion_model.joint_blocks.1.x_block.attn.qkv.weight");
    check_source(ws, "model.diffusion_model.transformer_blocks.0.attn.add_v_proj.bias",
                 "model.diffusion_model.joint_blocks.0.context_block.attn.qkv.bias");
    check_source(ws, "model.diffusion_model.transformer_blocks.0.attn2.to_q.weight",
                 "model.diffusion_model.joint_blocks.0.x_block.attn2.qkv.weight");
    check_source(ws, "model.diffusion_model.transformer_blocks.2.attn.norm_added_k.weight",
                 "model.diffusion_model.joint_blocks.2.context_block.attn.ln_k.weight");
    check_source(ws, "model.diffusion_model.pos_embed.proj.weight", "model.diffusion_model.x_embedder.proj.weight");
    check_source(ws, "model.diffusion_model.pos_embed.pos_embed", "model.diffusion_model.pos_embed");
    check_source(ws, "model.diffusion_model.time_text_embed.text_embedder.linear_2.bias",
                 "model.diffusion_model.y_embedder.mlp.2.bias");
    check_source(ws, "model.diffusion_model.transformer_blocks.1.ff_context.net.2.weight",
                 "model.diffusion_model.joint_blocks.1.context_block.mlp.fc2.weight");
    check_source(ws, "model.diffusion_model.norm_out.linear.weight",
                 "model.diffusion_model.final_layer.adaLN_modulation.1.weight");
    /* the raw file: q, k, v stacked in that order; shift before scale in the final and the last context adaLN */
    sdt_safetensors *raw = sdt_st_open(spath, &err);
    CHECK(raw, "%s", err.message);
    if (raw) {
        int64_t H = (int64_t)cfg.heads * cfg.head_dim;
        const sdt_st_entry *qkv = sdt_st_find(raw, "model.diffusion_model.joint_blocks.0.x_block.attn.qkv.weight");
        const sdt_st_entry *fin = sdt_st_find(raw, "model.diffusion_model.final_layer.adaLN_modulation.1.weight");
        const sdt_st_entry *last = sdt_st_find(raw, "model.diffusion_model.joint_blocks.2.context_block.adaLN_"
                                                    "modulation.1.weight");
        const sdt_st_entry *mid = sdt_st_find(raw, "model.diffusion_model.joint_blocks.1.context_block.adaLN_"
                                                   "modulation.1.weight");
        CHECK(qkv && qkv->shape[0] == 3 * H &&
                  rows_equal(qkv, H, sdt_weights_get(wd, "transformer_blocks.0.attn.to_k.weight"), 0, H),
              "SAI qkv rows H..2H must be diffusers' to_k");
        CHECK(fin && rows_equal(fin, 0, sdt_weights_get(wd, "norm_out.linear.weight"), H, H) &&
                  rows_equal(fin, H, sdt_weights_get(wd, "norm_out.linear.weight"), 0, H),
              "SAI's final adaLN is diffusers' norm_out.linear with the halves swapped");
        CHECK(last && last->shape[0] == 2 * H &&
                  rows_equal(last, 0, sdt_weights_get(wd, "transformer_blocks.2.norm1_context.linear.weight"), H, H),
              "the last block's context adaLN is swapped (context_pre_only)");
        CHECK(mid &&
                  rows_equal(mid, 0, sdt_weights_get(wd, "transformer_blocks.1.norm1_context.linear.weight"), 0, 6 * H),
              "a middle block's context adaLN is not swapped");
        CHECK(!sdt_st_find(raw, "model.diffusion_model.joint_blocks.2.context_block.attn.proj.weight"),
              "the last block has no context output projection");
        sdt_st_close(raw);
    }
    /* the model reads it */
    mmdit_config got;
    mmdit_model m;
    CHECK(mmdit_config_detect(ws, SDT_TK_TRANSFORMER_PREFIX, &got, &err) && got.layers == 3 && got.dual_layers == 1 &&
              got.qk_norm && mmdit_load(&m, &got, ws, &err),
          "the MMDiT loads from the SAI file: %s", err.message);
    t5_config tgot;
    CHECK(t5_config_detect(ws, SDT_TK_T5XXL_PREFIX, &tgot, &err) && tgot.layers == t5.layers,
          "T5 inside the SAI file: %s", err.message);
    /* detection and the sentences */
    sdt_tf_info in;
    CHECK(sdt_tf_detect(ws, &in) && in.family == SDT_TF_SD3 && in.blocks == 3 && in.dual_layers == 1 &&
              in.has[SDT_TF_T5XXL] && !in.has[SDT_TF_CLIP_L] && strstr(in.layout, "Stability"),
          "SAI SD3 detection: family %d blocks %d", in.family, in.blocks);
    char *missing = sdt_tf_missing_sentence(&in, spath);
    CHECK(missing && strstr(missing, "--clip-l FILE") && strstr(missing, "--clip-g FILE") &&
              strstr(missing, "--vae FILE") && !strstr(missing, "--t5xxl") && strstr(missing, "with T5-XXL"),
          "missing parts of an SD3 file with T5: \"%s\"", missing ? missing : "(none)");
    printf("missing: %s\n", missing ? missing : "-");
    g_free(missing);
    sdt_weights *wn = sdt_weights_open(nopath, &err);
    CHECK(wn && sdt_tf_detect(wn, &in) && !in.has[SDT_TF_T5XXL], "SAI without T5: %s", err.message);
    missing = wn ? sdt_tf_missing_sentence(&in, nopath) : NULL;
    CHECK(missing && strstr(missing, "--t5xxl FILE") && strstr(missing, ") only;"), "missing T5: \"%s\"",
          missing ? missing : "(none)");
    g_free(missing);
    if (wn) sdt_weights_close(wn);
    sd_config sc;
    CHECK(!sd_config_detect_weights(ws, &sc, &err) && err.code == SDT_ERR_VALIDATION && strstr(err.message, "SD3") &&
              strstr(err.message, "--clip-l FILE") && strstr(err.message, "clip_l_path, clip_g_path, vae_path"),
          "detection names the SD3 file's missing parts and their fields: \"%s\"", err.message);
    bool is_ckpt = false;
    char *json = sd_checkpoint_describe_json(spath, &is_ckpt, &err);
    CHECK(json && is_ckpt && strstr(json, "\"sd3\"") && strstr(json, "\"carries\":\t[\"t5xxl\"]") &&
              strstr(json, "--clip-g FILE"),
          "inspect of the SAI file: %s", json ? json : err.message);
    if (json) printf("%s\n", json);
    free(json);
    json = sd_checkpoint_describe_json(tpath, &is_ckpt, &err);
    CHECK(json && strstr(json, "\"t5xxl\"") && strstr(json, "--t5xxl FILE"), "inspect of a T5 file: %s",
          json ? json : err.message);
    free(json);

    /* T5 in fp8 (t5xxl_fp8_e4m3fn.safetensors): every value the fp8 rounding of the original, T5 loads */
    char *fpath = g_build_filename(dir, "t5xxl_fp8_e4m3fn.safetensors", NULL);
    sdt_pack_part plain = {wt, "", ""};
    CHECK(sdt_pack_write(fpath, SDT_TK_NONE, NULL, NULL, NULL, &plain, 1, SDT_PACK_F8_E4M3, &err), "pack fp8: %s",
          err.message);
    sdt_weights *wf = sdt_weights_open(fpath, &err);
    CHECK(wf, "open the fp8 T5: %s", err.message);
    size_t checked = 0, wrong = 0;
    for (size_t i = 0; wf && i < sdt_weights_count(wt); i++) {
        const sdt_tensor *a = sdt_weights_get(wt, sdt_weights_key(wt, i));
        const sdt_tensor *b = sdt_weights_get(wf, sdt_weights_key(wt, i));
        if (!b || b->dtype != SDT_BF16) {
            wrong++;
            continue;
        }
        size_t n = 1;
        for (int d = 0; d < a->ndim; d++) n *= (size_t)a->shape[d];
        for (size_t k = 0; k < n; k++) {
            float want = sdt_fp8_to_f32(sdt_fp8_from_f32(((const float *)a->data)[k], SDT_FP8_E4M3), SDT_FP8_E4M3);
            wrong += !same_bits(want, sdt_bf16_to_f32(((const uint16_t *)b->data)[k]));
            checked++;
        }
    }
    CHECK(wf && !wrong && checked > 1000, "fp8 T5: %zu of %zu values wrong", wrong, checked);
    t5_encoder enc;
    CHECK(wf && t5_config_detect(wf, "", &tgot, &err) && t5_encoder_load(&enc, &tgot, wf, &err),
          "T5 loads from its fp8 file: %s", err.message);
    CHECK(wf && sdt_tf_lone_part(wf) == SDT_TF_T5XXL, "an fp8 T5 file is a lone T5-XXL");
    if (wf) sdt_weights_close(wf);

    /* a diffusers folder: transformer/ + config.json, text_encoder_3/ */
    char *folder = g_build_filename(dir, "sd35-folder", NULL);
    char *tdir = g_build_filename(folder, "transformer", NULL), *t3 = g_build_filename(folder, "text_encoder_3", NULL);
    g_mkdir_with_parents(tdir, 0700);
    g_mkdir_with_parents(t3, 0700);
    char *cfgp = g_build_filename(tdir, "config.json", NULL),
         *tf = g_build_filename(tdir, "diffusion_pytorch_model.safetensors", NULL),
         *t3f = g_build_filename(t3, "model.safetensors", NULL);
    g_file_set_contents(cfgp, "{\"_class_name\": \"SD3Transformer2DModel\"}", -1, NULL);
    char *bytes = NULL;
    gsize len = 0;
    g_file_get_contents(dpath, &bytes, &len, NULL);
    g_file_set_contents(tf, bytes, (gssize)len, NULL);
    g_free(bytes);
    g_file_get_contents(tpath, &bytes, &len, NULL);
    g_file_set_contents(t3f, bytes, (gssize)len, NULL);
    g_free(bytes);
    sdt_weights *wfold = sdt_weights_open(folder, &err);
    CHECK(wfold && sdt_tf_detect(wfold, &in) && in.family == SDT_TF_SD3 && in.has[SDT_TF_T5XXL] &&
              !strcmp(in.layout, "diffusers folder"),
          "SD3 diffusers folder: %s", err.message);
    if (wfold) {
        compare_all(wd, "", wfold, SDT_TK_TRANSFORMER_PREFIX, "SD3 folder transformer");
        sdt_weights_close(wfold);
    }
    g_file_set_contents(cfgp, "{\"_class_name\": \"HunyuanDiT2DModel\"}", -1, NULL);
    wfold = sdt_weights_open(folder, &err);
    CHECK(!wfold && strstr(err.message, "HunyuanDiT2DModel") && strstr(err.message, "config.json"),
          "an unknown transformer class is named: \"%s\"", err.message);
    if (wfold) sdt_weights_close(wfold);
    g_unlink(cfgp), g_unlink(tf), g_unlink(t3f), g_rmdir(tdir), g_rmdir(t3), g_rmdir(folder);
    g_free(cfgp), g_free(tf), g_free(t3f), g_free(tdir), g_free(t3), g_free(folder);

    sdt_weights_close(ws);
    sdt_weights_close(wd);
    sdt_weights_close(wt);
    g_unlink(dpath), g_unlink(tpath), g_unlink(spath), g_unlink(nopath), g_unlink(fpath);
    g_free(dpath), g_free(tpath), g_free(spath), g_free(nopath), g_free(fpath);
}

/* A tiny Flux.1 transformer in diffusers' names (FluxTransformer2DModel): width 16, heads of 8, 2 double and 1
 * single block, MLP 4x. */
static bool write_flux_diffusers(const char *path, bool guidance, sdt_error *err)
{
    const int H = 16, D = 8, M = 64;
    GArray *items = g_array_new(FALSE, FALSE, sizeof(sdt_st_write_item));
    GPtrArray *own = g_ptr_array_new_with_free_func(g_free);
    uint64_t state = 12345;
#define ADD(name_, d0_, d1_)                                                                                           \
    do {                                                                                                               \
        int64_t *shape = g_new(int64_t, 2);                                                                            \
        shape[0] = (d0_), shape[1] = (d1_);                                                                            \
        int nd = (d1_) ? 2 : 1;                                                                                        \
        size_t n = (size_t)shape[0] * (size_t)(nd == 2 ? shape[1] : 1);                                                \
        float *v = g_new(float, n);                                                                                    \
        for (size_t k = 0; k < n; k++) {                                                                               \
            state = state * 6364136223846793005ull + 1442695040888963407ull;                                           \
            v[k] = (float)((state >> 40) & 0xFFFF) / 65536.0f - 0.5f;                                                  \
        }                                                                                                              \
        sdt_st_write_item it = {g_strdup(name_), SDT_ST_F32, nd, shape, v};                                            \
        g_ptr_array_add(own, (void *)it.name), g_ptr_array_add(own, shape), g_ptr_array_add(own, v);                   \
        g_array_append_val(items, it);                                                                                 \
    } while (0)
#define LIN(name_, o_, i_)                                                                                             \
    do {                                                                                                               \
        char *w_ = g_strdup_printf("%s.weight", name_), *b_ = g_strdup_printf("%s.bias", name_);                       \
        ADD(w_, o_, i_);                                                                                               \
        ADD(b_, o_, 0);                                                                                                \
        g_free(w_), g_free(b_);                                                                                        \
    } while (0)
    LIN("x_embedder", H, 8);
    LIN("context_embedder", H, 12);
    LIN("time_text_embed.timestep_embedder.linear_1", H, 256);
    LIN("time_text_embed.timestep_embedder.linear_2", H, H);
    LIN("time_text_embed.text_embedder.linear_1", H, 10);
    LIN("time_text_embed.text_embedder.linear_2", H, H);
    if (guidance) {
        LIN("time_text_embed.guidance_embedder.linear_1", H, 256);
        LIN("time_text_embed.guidance_embedder.linear_2", H, H);
    }
    LIN("norm_out.linear", 2 * H, H);
    LIN("proj_out", 8, H);
    char name[128];
    for (int b = 0; b < 2; b++) {
        static const char *const sq[] = {"attn.to_q",       "attn.to_k",       "attn.to_v",     "attn.add_q_proj",
                                         "attn.add_k_proj", "attn.add_v_proj", "attn.to_out.0", "attn.to_add_out"};
        static const char *const norms[] = {"attn.norm_q", "attn.norm_k", "attn.norm_added_q", "attn.norm_added_k"};
        {
            g_snprintf(name, sizeof name, "transformer_blocks.%d.norm1.linear", b);
            LIN(name, 6 * H, H);
        }
        {
            g_snprintf(name, sizeof name, "transformer_blocks.%d.norm1_context.linear", b);
            LIN(name, 6 * H, H);
        }
        for (int i = 0; i < 8; i++) {
            g_snprintf(name, sizeof name, "transformer_blocks.%d.%s", b, sq[i]);
            LIN(name, H, H);
        }
        for (int i = 0; i < 4; i++) {
            g_snprintf(name, sizeof name, "transformer_blocks.%d.%s.weight", b, norms[i]);
            ADD(name, D, 0);
        }
        {
            g_snprintf(name, sizeof name, "transformer_blocks.%d.ff.net.0.proj", b);
            LIN(name, M, H);
        }
        {
            g_snprintf(name, sizeof name, "transformer_blocks.%d.ff.net.2", b);
            LIN(name, H, M);
        }
        {
            g_snprintf(name, sizeof name, "transformer_blocks.%d.ff_context.net.0.proj", b);
            LIN(name, M, H);
        }
        {
            g_snprintf(name, sizeof name, "transformer_blocks.%d.ff_context.net.2", b);
            LIN(name, H, M);
        }
    }
    LIN("single_transformer_blocks.0.norm.linear", 3 * H, H);
    LIN("single_transformer_blocks.0.attn.to_q", H, H);
    LIN("single_transformer_blocks.0.attn.to_k", H, H);
    LIN("single_transformer_blocks.0.attn.to_v", H, H);
    LIN("single_transformer_blocks.0.proj_mlp", M, H);
    ADD("single_transformer_blocks.0.attn.norm_q.weight", D, 0);
    ADD("single_transformer_blocks.0.attn.norm_k.weight", D, 0);
    LIN("single_transformer_blocks.0.proj_out", H, H + M);
#undef LIN
#undef ADD
    bool ok = sdt_st_write(path, (const sdt_st_write_item *)(void *)items->data, items->len, NULL, 0, err);
    g_array_free(items, TRUE);
    g_ptr_array_free(own, TRUE);
    return ok;
}

static void test_flux(const char *dir)
{
    sdt_error err = {0};
    char *dpath = g_build_filename(dir, "flux-diffusers.safetensors", NULL);
    char *bpath = g_build_filename(dir, "flux1-dev.safetensors", NULL);
    char *cpath = g_build_filename(dir, "flux1-dev-comfy.safetensors", NULL);
    char *spath = g_build_filename(dir, "flux1-schnell.safetensors", NULL);
    CHECK(write_flux_diffusers(dpath, true, &err), "%s", err.message);
    sdt_weights *wd = sdt_weights_open(dpath, &err);
    CHECK(wd, "%s", err.message);
    if (!wd) return;
    CHECK(sdt_pack_write(bpath, SDT_TK_BFL_FLUX, wd, "", "", NULL, 0, SDT_PACK_AS_IS, &err) &&
              sdt_pack_write(cpath, SDT_TK_BFL_FLUX, wd, "", SDT_TK_TRANSFORMER_PREFIX, NULL, 0, SDT_PACK_AS_IS, &err),
          "pack BFL: %s", err.message);
    const char *paths[2] = {bpath, cpath}, *prefixes[2] = {"", SDT_TK_TRANSFORMER_PREFIX};
    for (int k = 0; k < 2; k++) {
        sdt_weights *wb = sdt_weights_open(paths[k], &err);
        CHECK(wb, "open %s: %s", paths[k], err.message);
        if (!wb) continue;
        compare_all(wd, "", wb, SDT_TK_TRANSFORMER_PREFIX, k ? "ComfyUI Flux" : "BFL Flux");
        char src[160];
        /* diffusers' convert_flux_transformer_checkpoint_to_diffusers */
        static const char *const pairs[][2] = {
            {"single_transformer_blocks.0.proj_mlp.weight", "single_blocks.0.linear1.weight"},
            {"single_transformer_blocks.0.attn.to_v.bias", "single_blocks.0.linear1.bias"},
            {"single_transformer_blocks.0.proj_out.weight", "single_blocks.0.linear2.weight"},
            {"single_transformer_blocks.0.norm.linear.bias", "single_blocks.0.modulation.lin.bias"},
            {"single_transformer_blocks.0.attn.norm_k.weight", "single_blocks.0.norm.key_norm.scale"},
            {"transformer_blocks.1.attn.norm_added_q.weight", "double_blocks.1.txt_attn.norm.query_norm.scale"},
            {"transformer_blocks.1.attn.add_k_proj.weight", "double_blocks.1.txt_attn.qkv.weight"},
            {"transformer_blocks.0.attn.to_add_out.weight", "double_blocks.0.txt_attn.proj.weight"},
            {"transformer_blocks.0.norm1_context.linear.weight", "double_blocks.0.txt_mod.lin.weight"},
            {"transformer_blocks.0.ff_context.net.0.proj.weight", "double_blocks.0.txt_mlp.0.weight"},
            {"time_text_embed.guidance_embedder.linear_2.bias", "guidance_in.out_layer.bias"},
            {"time_text_embed.text_embedder.linear_1.weight", "vector_in.in_layer.weight"},
            {"x_embedder.weight", "img_in.weight"},
            {"context_embedder.bias", "txt_in.bias"},
            {"norm_out.linear.weight", "final_layer.adaLN_modulation.1.weight"},
            {"proj_out.weight", "final_layer.linear.weight"},
        };
        for (size_t i = 0; i < G_N_ELEMENTS(pairs); i++) {
            char key[160];
            g_snprintf(key, sizeof key, "%s%s", SDT_TK_TRANSFORMER_PREFIX, pairs[i][0]);
            g_snprintf(src, sizeof src, "%s%s", prefixes[k], pairs[i][1]);
            check_source(wb, key, src);
        }
        sdt_tf_info in;
        CHECK(sdt_tf_detect(wb, &in) && in.family == SDT_TF_FLUX && in.guidance && in.blocks == 2 &&
                  in.single_blocks == 1 && strstr(in.variant, "Flux.1 dev") &&
                  strstr(in.layout, k ? "model.diffusion_model." : "BFL"),
              "Flux detection (%s): %s / %s", paths[k], in.variant, in.layout ? in.layout : "-");
        char *missing = sdt_tf_missing_sentence(&in, paths[k]);
        CHECK(missing && strstr(missing, "--t5xxl FILE") && strstr(missing, "--clip-l FILE") &&
                  strstr(missing, "--vae FILE (ae.safetensors)") && !strstr(missing, "--clip-g"),
              "Flux's missing parts: \"%s\"", missing ? missing : "(none)");
        if (!k) printf("missing: %s\n", missing);
        g_free(missing);
        sdt_weights_close(wb);
    }
    /* the raw file: linear1 = [q; k; v; mlp], final adaLN shift first */
    sdt_safetensors *raw = sdt_st_open(bpath, &err);
    if (raw) {
        const sdt_st_entry *l1 = sdt_st_find(raw, "single_blocks.0.linear1.weight");
        const sdt_st_entry *fin = sdt_st_find(raw, "final_layer.adaLN_modulation.1.weight");
        CHECK(l1 && l1->shape[0] == 3 * 16 + 64 &&
                  rows_equal(l1, 48, sdt_weights_get(wd, "single_transformer_blocks.0.proj_mlp.weight"), 0, 64) &&
                  rows_equal(l1, 16, sdt_weights_get(wd, "single_transformer_blocks.0.attn.to_k.weight"), 0, 16),
              "linear1 is q, k, v, then the MLP");
        CHECK(fin && rows_equal(fin, 0, sdt_weights_get(wd, "norm_out.linear.weight"), 16, 16),
              "Flux's final adaLN is swapped");
        sdt_st_close(raw);
    }
    /* ComfyUI's all-in-one Flux: T5 under text_encoders.t5xxl.transformer., the VAE under vae. */
    {
        char *t5 = g_build_filename(dir, "flux_t5.safetensors", NULL),
             *vae = g_build_filename(dir, "flux_vae.safetensors", NULL);
        char *aio = g_build_filename(dir, "flux1-dev-fp8-aio.safetensors", NULL);
        t5_config tc = t5_config_tiny();
        sdt_ckpt_spec spec = mt_ckpt_spec(SD_FAMILY_TINY, 9);
        spec.vae_only = true;
        CHECK(t5_generate(t5, &tc, SDT_F32, 4, true, &err) && sdt_ckpt_generate(vae, &spec, &err), "%s", err.message);
        sdt_weights *wt = sdt_weights_open(t5, &err), *wv = sdt_weights_open(vae, &err);
        sdt_pack_part parts[2] = {{wt, "", SDT_TK_T5XXL_PREFIX}, {wv, "first_stage_model.", "vae."}};
        CHECK(wt && wv &&
                  sdt_pack_write(aio, SDT_TK_BFL_FLUX, wd, "", SDT_TK_TRANSFORMER_PREFIX, parts, 2, SDT_PACK_F8_E4M3,
                                 &err),
              "pack a ComfyUI Flux checkpoint: %s", err.message);
        sdt_weights *wa = sdt_weights_open(aio, &err);
        sdt_tf_info in;
        CHECK(wa && sdt_tf_detect(wa, &in) && in.has[SDT_TF_T5XXL] && in.has[SDT_TF_VAE] && !in.has[SDT_TF_CLIP_L],
              "ComfyUI Flux all-in-one: %s", err.message);
        const sdt_tensor *conv = wa ? sdt_weights_get(wa, "first_stage_model.decoder.conv_out.weight") : NULL;
        CHECK(conv && conv->dtype == SDT_BF16, "the VAE under vae. is the canonical first_stage_model.");
        vae_config vc;
        CHECK(wa && vae_config_detect(wa, &vc, &err), "the VAE of a ComfyUI Flux file: %s", err.message);
        char *missing = wa ? sdt_tf_missing_sentence(&in, aio) : NULL;
        CHECK(missing && strstr(missing, "--clip-l FILE") && !strstr(missing, "--t5xxl") && !strstr(missing, "--vae"),
              "a ComfyUI Flux file lacks CLIP-L only: \"%s\"", missing ? missing : "(none)");
        g_free(missing);
        if (wa) sdt_weights_close(wa);
        if (wt) sdt_weights_close(wt);
        if (wv) sdt_weights_close(wv);
        g_unlink(t5), g_unlink(vae), g_unlink(aio);
        g_free(t5), g_free(vae), g_free(aio);
    }
    /* the norms spelled *_norm.weight (as ComfyUI names them once loaded) read the same */
    raw = sdt_st_open(bpath, &err);
    if (raw) {
        char *renamed = g_build_filename(dir, "flux-norm-weight.safetensors", NULL);
        size_t n = sdt_st_count(raw);
        sdt_st_write_item *items = g_new0(sdt_st_write_item, n);
        char **names = g_new0(char *, n);
        for (size_t i = 0; i < n; i++) {
            const sdt_st_entry *e = sdt_st_at(raw, i);
            size_t len = strlen(e->name);
            names[i] = g_str_has_suffix(e->name, "_norm.scale")
                           ? g_strdup_printf("%.*sweight", (int)(len - strlen("scale")), e->name)
                           : g_strdup(e->name);
            items[i] = (sdt_st_write_item){names[i], e->dtype, e->ndim, e->shape, e->data};
        }
        CHECK(sdt_st_write(renamed, items, n, NULL, 0, &err), "%s", err.message);
        sdt_weights *wr = sdt_weights_open(renamed, &err);
        CHECK(wr, "Flux with *_norm.weight: %s", err.message);
        if (wr) {
            compare_all(wd, "", wr, SDT_TK_TRANSFORMER_PREFIX, "Flux, norms spelled .weight");
            sdt_weights_close(wr);
        }
        for (size_t i = 0; i < n; i++) g_free(names[i]);
        g_free(names), g_free(items);
        g_unlink(renamed);
        g_free(renamed);
        sdt_st_close(raw);
    }
    /* schnell: no guidance_in */
    sdt_weights_close(wd);
    CHECK(write_flux_diffusers(dpath, false, &err), "%s", err.message);
    wd = sdt_weights_open(dpath, &err);
    CHECK(wd && sdt_pack_write(spath, SDT_TK_BFL_FLUX, wd, "", "", NULL, 0, SDT_PACK_AS_IS, &err), "schnell: %s",
          err.message);
    sdt_weights *wsch = sdt_weights_open(spath, &err);
    sdt_tf_info in;
    CHECK(wsch && sdt_tf_detect(wsch, &in) && !in.guidance && strstr(in.variant, "schnell"), "schnell detection");
    if (wsch) sdt_weights_close(wsch);
    if (wd) sdt_weights_close(wd);
    g_unlink(dpath), g_unlink(bpath), g_unlink(cpath), g_unlink(spath);
    g_free(dpath), g_free(bpath), g_free(cpath), g_free(spath);
}

/* Files that claim a layout but break it are refused with a sentence naming the file and the key. */
static void test_refusals(const char *dir)
{
    sdt_error err = {0};
    char *path = g_build_filename(dir, "bad.safetensors", NULL);
    float data[40] = {0};
    uint8_t f8[4] = {0};
    int64_t s_bad[2] = {4, 2}, s_one[1] = {1}, s_f8[1] = {4};
    sdt_st_write_item qkv[2] = {
        {"model.diffusion_model.joint_blocks.0.x_block.attn.qkv.weight", SDT_ST_F32, 2, s_bad, data},
        {"model.diffusion_model.pos_embed", SDT_ST_F32, 1, s_one, data}};
    CHECK(sdt_st_write(path, qkv, 2, NULL, 0, &err), "%s", err.message);
    sdt_weights *w = sdt_weights_open(path, &err);
    CHECK(!w && strstr(err.message, "attn.qkv.weight") && strstr(err.message, "multiple of 3"),
          "a qkv of 4 rows: \"%s\"", err.message);
    if (w) sdt_weights_close(w);
    sdt_st_write_item lin1[1] = {{"single_blocks.0.linear1.weight", SDT_ST_F32, 2, s_bad, data}};
    CHECK(sdt_st_write(path, lin1, 1, NULL, 0, &err), "%s", err.message);
    w = sdt_weights_open(path, &err);
    CHECK(!w && strstr(err.message, "linear1") && strstr(err.message, "img_in"), "linear1 without img_in: \"%s\"",
          err.message);
    if (w) sdt_weights_close(w);
    /* ComfyUI's scaled fp8: weight.to(bf16) * scale_weight.to(bf16) (comfy/ops.py convert_weight); the scale
     * tensors and the scaled_fp8 marker are no parameters */
    uint8_t w8[4] = {0x38, 0x40, 0x01, 0xB8}; /* 1, 2, 2^-9, -1 */
    float scale = 0.3f, ones[1] = {1.0f};
    int64_t s_four[1] = {4}, s_none[1] = {0};
    sdt_st_write_item scaled[4] = {{"model.diffusion_model.img_in.weight", SDT_ST_F8_E4M3, 1, s_four, w8},
                                   {"model.diffusion_model.img_in.scale_weight", SDT_ST_F32, 0, s_one, &scale},
                                   {"model.diffusion_model.img_in.scale_input", SDT_ST_F32, 0, s_one, ones},
                                   {"model.diffusion_model.scaled_fp8", SDT_ST_F8_E4M3, 1, s_none, f8}};
    CHECK(sdt_st_write(path, scaled, 4, NULL, 0, &err), "%s", err.message);
    w = sdt_weights_open(path, &err);
    CHECK(w, "scaled fp8: %s", err.message);
    if (w) {
        const sdt_tensor *t = sdt_weights_get(w, "model.diffusion_model.img_in.weight");
        float s16 = sdt_bf16_to_f32(sdt_f32_to_bf16(0.3f)); /* 0.30078125 */
        bool ok = t && t->dtype == SDT_BF16 && sdt_weights_count(w) == 1;
        for (int i = 0; ok && i < 4; i++)
            ok = ((const uint16_t *)t->data)[i] == sdt_f32_to_bf16(sdt_fp8_to_f32(w8[i], SDT_FP8_E4M3) * s16);
        CHECK(ok && ((const uint16_t *)t->data)[3] == sdt_f32_to_bf16(-0.30078125f),
              "scaled fp8 weights are bf16(fp8 * bf16(scale)), the scales no tensors (%zu tensors)",
              sdt_weights_count(w));
        sdt_weights_close(w);
    }
    scaled[0].dtype = SDT_ST_BF16, scaled[0].shape = s_bad, scaled[0].data = data; /* [4, 2] bf16 */
    CHECK(sdt_st_write(path, scaled, 2, NULL, 0, &err), "%s", err.message);
    w = sdt_weights_open(path, &err);
    CHECK(!w && err.code == SDT_ERR_UNSUPPORTED && strstr(err.message, "scale_weight"),
          "a scale beside a bf16 weight: \"%s\"", err.message);
    if (w) sdt_weights_close(w);
    sdt_st_write_item nf4[2] = {
        {"model.diffusion_model.double_blocks.0.img_attn.qkv.weight", SDT_ST_U8, 1, s_f8, f8},
        {"model.diffusion_model.double_blocks.0.img_attn.qkv.weight.quant_state.bitsandbytes__nf4", SDT_ST_U8, 1, s_f8,
         f8}};
    CHECK(sdt_st_write(path, nf4, 2, NULL, 0, &err), "%s", err.message);
    w = sdt_weights_open(path, &err);
    CHECK(!w && err.code == SDT_ERR_UNSUPPORTED && strstr(err.message, "bitsandbytes") && strstr(err.message, "NF4"),
          "bitsandbytes NF4: \"%s\"", err.message);
    if (w) sdt_weights_close(w);
    g_unlink(path);
    g_free(path);
}

/* The separate files people download, opened as the part an option names: their tensors under the canonical
 * prefix, read by the same loaders as an all-in-one file's; a file of another part refused by option. */
static void test_lone_parts(const char *dir)
{
    sdt_error err = {0};
    char *t5 = g_build_filename(dir, "t5xxl_fp16.safetensors", NULL),
         *t5f8 = g_build_filename(dir, "t5_fp8.safetensors", NULL);
    char *ldm = g_build_filename(dir, "tiny_vae_ldm.safetensors", NULL),
         *ae = g_build_filename(dir, "ae.safetensors", NULL);
    char *folder = g_build_filename(dir, "tiny_diffusers", NULL);
    t5_config tc = t5_config_tiny();
    CHECK(t5_generate(t5, &tc, SDT_F32, 3, true, &err), "%s", err.message);
    sdt_weights *plain = sdt_weights_open(t5, &err), *part = sdt_weights_open_part(t5, SDT_PART_T5XXL, &err);
    CHECK(plain && part, "T5 as --t5xxl: %s", err.message);
    if (plain && part) {
        compare_all(plain, "", part, SDT_TK_T5XXL_PREFIX, "--t5xxl t5xxl_fp16.safetensors");
        t5_config got;
        t5_encoder enc;
        CHECK(t5_config_detect(part, SDT_TK_T5XXL_PREFIX, &got, &err) && t5_encoder_load(&enc, &got, part, &err),
              "T5 loads from --t5xxl's file: %s", err.message);
    }
    sdt_pack_part all = {plain, "", ""};
    CHECK(plain && sdt_pack_write(t5f8, SDT_TK_NONE, NULL, NULL, NULL, &all, 1, SDT_PACK_F8_E5M2, &err), "%s",
          err.message);
    sdt_weights *f8 = sdt_weights_open_part(t5f8, SDT_PART_T5XXL, &err);
    const sdt_tensor *emb = f8 ? sdt_weights_get(f8, SDT_TK_T5XXL_PREFIX "shared.weight") : NULL;
    CHECK(emb && emb->dtype == SDT_BF16, "an F8_E5M2 T5 as --t5xxl: %s", err.message);
    if (f8) sdt_weights_close(f8);
    sdt_weights *wrong = sdt_weights_open_part(t5, SDT_PART_CLIP_L, &err);
    CHECK(!wrong && strstr(err.message, "--clip-l FILE") && strstr(err.message, "clip_l.safetensors"),
          "a T5 file as --clip-l: \"%s\"", err.message);
    printf("wrong part: %s\n", err.message);
    if (wrong) sdt_weights_close(wrong);
    if (plain) sdt_weights_close(plain);
    if (part) sdt_weights_close(part);

    /* the VAE: LDM names at the top (Flux's ae.safetensors) and a diffusers vae/ file */
    sdt_ckpt_spec spec = mt_ckpt_spec(SD_FAMILY_TINY, 5);
    spec.vae_only = true;
    CHECK(sdt_ckpt_generate(ldm, &spec, &err), "%s", err.message);
    spec.vae_only = false;
    spec.layout = SDT_CKPT_DIFFUSERS;
    CHECK(sdt_ckpt_generate(folder, &spec, &err), "%s", err.message);
    sdt_weights *lw = sdt_weights_open(ldm, &err);
    sdt_pack_part vae = {lw, "first_stage_model.", ""};
    CHECK(lw && sdt_pack_write(ae, SDT_TK_NONE, NULL, NULL, NULL, &vae, 1, SDT_PACK_AS_IS, &err), "%s", err.message);
    char *dvae = g_build_filename(folder, "vae", "diffusion_pytorch_model.safetensors", NULL);
    sdt_weights *aw = sdt_weights_open_part(ae, SDT_PART_VAE, &err),
                *dw = sdt_weights_open_part(dvae, SDT_PART_VAE, &err);
    CHECK(aw && dw, "VAE files as --vae: %s", err.message);
    if (lw && aw && dw) {
        compare_all(lw, "first_stage_model.", aw, "first_stage_model.", "--vae ae.safetensors (LDM names)");
        compare_all(lw, "first_stage_model.", dw, "first_stage_model.", "--vae vae/ (diffusers names)");
        vae_config vc;
        CHECK(vae_config_detect(aw, &vc, &err), "the VAE config from --vae's file: %s", err.message);
    }
    if (lw) sdt_weights_close(lw);
    if (aw) sdt_weights_close(aw);
    if (dw) sdt_weights_close(dw);
    g_unlink(t5), g_unlink(t5f8), g_unlink(ldm), g_unlink(ae);
    char *rm = g_strdup_printf("rm -rf '%s'", folder);
    CHECK(system(rm) == 0, "remove %s", folder);
    g_free(rm), g_free(dvae), g_free(t5), g_free(t5f8), g_free(ldm), g_free(ae), g_free(folder);
}

int main(void)
{
    char *dir = g_dir_make_tmp("sdt-tf-XXXXXX", NULL);
    if (!dir) return 1;
    test_fp8();
    test_sd3(dir);
    test_flux(dir);
    test_refusals(dir);
    test_lone_parts(dir);
    g_rmdir(dir);
    g_free(dir);
    return sdt_test_finish("transformer_files");
}
