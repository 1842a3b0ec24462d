/* test_create_tables.c - creating SD3.5 and Flux.1 embeddings (issue 30) on tiny checkpoints: SAI's SD3.5
 * all-in-one file (the encoders inside, or T5 from the spec's file) and a BFL Flux transformer with separate
 * CLIP-L and T5 files (T5 in BF16). Each table's vector i is the token embedding row of token floor(i n / N) of
 * the init text through that encoder's own tokenizer (the built-in CLIP BPE; T5's SentencePiece from
 * t5_tokenizer/ beside the model); the file holds clip_l / clip_g / t5xxl. A missing encoder names the option
 * and the spec's field; encoders that do not meet the transformer (a T5 of another width, a CLIP-L not Flux's pooled
 * input, a file as wide as the released CLIP-G, SD3's CLIPs swapped or one for both) are refused naming the file and
 * the field, no file written; no T5 tokenizer is a sentence; an empty init text gives zeros; encoder files for a UNet
 * checkpoint are refused. */
#include <glib/gstdio.h>
#include <string.h>

#include "checkpoint_gen.h"
#include "clip_tokenizer_builtin.h"
#include "flux_gen.h"
#include "mmdit_gen.h"
#include "sentencepiece.h"
#include "ti/embedding_file.h"
#include "ti/ti_embedding_ops.h"
#include "transformer_pack.h"
#include "data_test_util.h"
#include "sdt_test.h"
#include "t5_test_vocab.h"

#define CLIP_VOCAB 49408 /* the built-in tokenizer's, so it fits */
#define T5_VOCAB 96

/* T5's vocabulary as transformers' tokenizer.json: "a cat" is ids 4 and 6. */
static const char *const T5_JSON = SDT_TEST_T5_TOKENIZER_JSON;

static char *tmp_dir;

static char *tmp_path(const char *name)
{
    return g_build_filename(tmp_dir, name, NULL);
}

/* An encoder file as people have them, holding just its token embedding (all create reads) in dtype. */
typedef struct token_table {
    char *path;
    int rows, width;
    float *values; /* as stored (BF16-rounded when dtype is BF16) */
} token_table;

static void make_table(sdt_test_rng *rng, const char *file, const char *key, int rows, int width, sdt_st_dtype dtype,
                       token_table *t)
{
    t->path = tmp_path(file);
    t->rows = rows;
    t->width = width;
    size_t n = (size_t)rows * (size_t)width;
    t->values = g_new(float, n);
    sdt_test_fill_normal(rng, t->values, (int64_t)n, 0.02);
    uint16_t *half = NULL;
    if (dtype == SDT_ST_BF16) {
        half = g_new(uint16_t, n);
        for (size_t i = 0; i < n; i++) t->values[i] = sdt_bf16_to_f32(half[i] = sdt_f32_to_bf16(t->values[i]));
    }
    int64_t shape[2] = {rows, width};
    sdt_st_write_item item = {key, dtype, 2, shape, half ? (const void *)half : (const void *)t->values};
    sdt_error error = {0};
    CHECK(sdt_st_write(t->path, &item, 1, NULL, 0, &error), "%s: %s", file, error.message);
    g_free(half);
}

static void free_table(token_table *t)
{
    g_free(t->path);
    g_free(t->values);
}

static sdt_weights *open_or_fail(const char *path)
{
    sdt_error error = {0};
    sdt_weights *w = sdt_weights_open(path, &error);
    CHECK(w, "%s: %s", path, error.message);
    return w;
}

/* model/<file>: the tiny transformer packed as people have it, with the encoders given inside. */
static char *make_model(const char *dir, const char *file, bool flux, const token_table *l, const token_table *g,
                        const token_table *t5)
{
    sdt_error error = {0};
    char *diffusers = tmp_path(flux ? "flux-diffusers.safetensors" : "mmdit-diffusers.safetensors");
    if (flux) {
        flux_config cfg = flux_config_tiny();
        CHECK(flux_generate(diffusers, &cfg, SDT_F32, 7, false, &error), "flux: %s", error.message);
    } else {
        mmdit_config cfg = mmdit_config_tiny();
        CHECK(mmdit_generate(diffusers, &cfg, SDT_F32, 7, false, &error), "mmdit: %s", error.message);
    }
    sdt_weights *wt = open_or_fail(diffusers);
    sdt_weights *parts_w[3] = {NULL, NULL, NULL};
    sdt_pack_part parts[3];
    int n_parts = 0;
    const token_table *tables[3] = {l, g, t5};
    const char *prefixes[3] = {SDT_TK_CLIP_L_PREFIX, SDT_TK_CLIP_G_PREFIX, SDT_TK_T5XXL_PREFIX};
    for (int k = 0; k < 3; k++) {
        if (!tables[k]) continue;
        parts_w[k] = open_or_fail(tables[k]->path);
        parts[n_parts++] = (sdt_pack_part){parts_w[k], "", prefixes[k]};
    }
    char *folder = g_build_filename(tmp_dir, dir, NULL);
    g_mkdir_with_parents(folder, 0755);
    char *path = g_build_filename(folder, file, NULL);
    CHECK(wt && sdt_pack_write(path, flux ? SDT_TK_BFL_FLUX : SDT_TK_SAI_SD3, wt, "", "", parts, n_parts,
                               SDT_PACK_AS_IS, &error),
          "%s: %s", path, error.message);
    for (int k = 0; k < 3; k++) sdt_weights_close(parts_w[k]);
    sdt_weights_close(wt);
    /* T5's vocabulary where people keep ComfyUI's: t5_tokenizer/ beside the model */
    char *tok_dir = g_build_filename(folder, "t5_tokenizer", NULL);
    g_mkdir_with_parents(tok_dir, 0755);
    char *tok = g_build_filename(tok_dir, "tokenizer.json", NULL);
    CHECK(g_file_set_contents(tok, T5_JSON, -1, NULL), "writing %s", tok);
    g_free(tok);
    g_free(tok_dir);
    g_free(folder);
    g_free(diffusers);
    return path;
}

static sdt_embedding_spec spec_for(const char *name, const char *model, const char *init_text)
{
    return (sdt_embedding_spec){.struct_size = sizeof(sdt_embedding_spec),
                                .vectors_per_token = 3,
                                .name = name,
                                .init_text = init_text,
                                .model_path = model,
                                .output_dir = tmp_dir};
}

static bool create(const sdt_embedding_spec *spec, sdt_embedding *e, sdt_error *error)
{
    char path[4096] = "";
    if (!ti_create_embedding(spec, NULL, path, sizeof path, error)) return false;
    sdt_embedding_format f;
    bool ok = sdt_embedding_load(path, e, &f, error);
    CHECK(!ok || f == SDT_EMBEDDING_FORMAT_SAFETENSORS, "%s: not a safetensors file", path);
    return ok;
}

/* Table k's vector i must be the encoder's token row ids[floor(i n / N)] (n = the text's tokens, at most N). */
static void expect_rows(const sdt_embedding *e, int k, const token_table *t, const int32_t *ids, size_t n,
                        const char *what)
{
    CHECK(e->encoder_dims[k] == t->width, "%s: the %s table is %d wide, want %d", what, sdt_embedding_encoder_key(k),
          e->encoder_dims[k], t->width);
    if (e->encoder_dims[k] != t->width) return;
    if (n > (size_t)e->n_vectors) n = (size_t)e->n_vectors;
    const float *table = sdt_embedding_table(e, k);
    for (int i = 0; i < e->n_vectors; i++) {
        int32_t id = ids[(size_t)i * n / (size_t)e->n_vectors];
        CHECK(
            !memcmp(table + (size_t)i * t->width, t->values + (size_t)id * t->width, (size_t)t->width * sizeof(float)),
            "%s: %s vector %d is not token %d's row", what, sdt_embedding_encoder_key(k), i, (int)id);
    }
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("test_create_tables");
    tmp_dir = g_dir_make_tmp("sdt-create-tables-XXXXXX", NULL);
    if (!tmp_dir) return 1;
    sdt_error error = {0};

    /* the init text's ids, as each tokenizer gives them */
    const char *text = "a cat";
    sdt_tokenizer *clip_tok = sdt_tokenizer_load_builtin_clip(&error);
    CHECK(clip_tok, "built-in CLIP tokenizer: %s", error.message);
    int32_t *clip_ids = NULL, *t5_ids = NULL;
    size_t n_clip = 0, n_t5 = 0;
    if (clip_tok) sdt_tokenizer_tokenize(clip_tok, text, &clip_ids, &n_clip);
    sdt_tokenizer_free(clip_tok);
    sdt_spm *spm = sdt_spm_load_json_memory(T5_JSON, strlen(T5_JSON), "tokenizer.json", &error);
    CHECK(spm && sdt_spm_tokenize(spm, text, &t5_ids, &n_t5, &error) && n_t5 == 2 && t5_ids[0] == 4 && t5_ids[1] == 6,
          "T5 ids of \"%s\": %s", text, error.message);
    sdt_spm_free(spm);
    CHECK(n_clip == 2, "CLIP gives %zu tokens for \"%s\"", n_clip, text);

    token_table l, g, t5, t5_bf16, l_flux;
    make_table(&rng, "clip_l.safetensors", "text_model.embeddings.token_embedding.weight", CLIP_VOCAB, 4, SDT_ST_F32,
               &l);
    make_table(&rng, "clip_g.safetensors", "text_model.embeddings.token_embedding.weight", CLIP_VOCAB, 6, SDT_ST_F32,
               &g);
    /* T5 as wide as the tiny transformers' context (24), Flux's CLIP-L as its pooled input (12) */
    make_table(&rng, "t5.safetensors", "shared.weight", T5_VOCAB, 24, SDT_ST_F32, &t5);
    make_table(&rng, "t5xxl_bf16.safetensors", "shared.weight", T5_VOCAB, 24, SDT_ST_BF16, &t5_bf16);
    make_table(&rng, "flux_clip_l.safetensors", "text_model.embeddings.token_embedding.weight", CLIP_VOCAB, 12,
               SDT_ST_F32, &l_flux);
    /* files of the wrong encoder: a T5 of another width, and (rows enough for an empty init text) a table as wide
     * as the released CLIP-G */
    token_table t5_narrow, released_g;
    make_table(&rng, "t5_narrow.safetensors", "shared.weight", T5_VOCAB, 10, SDT_ST_F32, &t5_narrow);
    make_table(&rng, "clip_g_1280.safetensors", "text_model.embeddings.token_embedding.weight", 4, 1280, SDT_ST_F32,
               &released_g);

    { /* SAI's all-in-one SD3.5 file with every encoder inside */
        char *model = make_model("sd35", "sd35.safetensors", false, &l, &g, &t5);
        sdt_embedding_spec spec = spec_for("sd35-concept", model, text);
        sdt_embedding e;
        CHECK(create(&spec, &e, &error), "SD3.5 all-in-one: %s", error.message);
        if (error.code == SDT_ERR_OK) {
            CHECK(e.n_vectors == 3 && e.dim == 4 + 6 + 24 && !strcmp(sdt_embedding_family(&e), "sd3") && e.init_text &&
                      !strcmp(e.init_text, text),
                  "SD3.5: %d x %d, family %s", e.n_vectors, e.dim, sdt_embedding_family(&e));
            expect_rows(&e, 0, &l, clip_ids, n_clip, "SD3.5");
            expect_rows(&e, 1, &g, clip_ids, n_clip, "SD3.5");
            expect_rows(&e, 2, &t5, t5_ids, n_t5, "SD3.5");
            sdt_embedding_free(&e);
        }
        /* an empty init text: zeros */
        sdt_embedding_spec zero = spec_for("sd35-zero", model, "");
        CHECK(create(&zero, &e, &error), "SD3.5 zeros: %s", error.message);
        if (error.code == SDT_ERR_OK) {
            bool zeros = e.dim == 34;
            for (int i = 0; zeros && i < e.n_vectors * e.dim; i++) zeros = e.vectors[i] == 0.0f;
            CHECK(zeros, "an empty init text did not give zero tables");
            sdt_embedding_free(&e);
        }
        g_free(model);
    }
    { /* SD3.5 without T5 inside: the spec's file; without it, the sentence names the option and the field */
        char *model = make_model("sd35-no-t5", "sd35_no_t5.safetensors", false, &l, &g, NULL);
        sdt_embedding_spec spec = spec_for("no-t5", model, text);
        sdt_embedding e;
        CHECK(!create(&spec, &e, &error) && error.code == SDT_ERR_NOT_FOUND && strstr(error.message, "--t5xxl FILE") &&
                  strstr(error.message, "t5xxl_path") && !strstr(error.message, "VAE"),
              "a missing T5: %s", error.message);
        printf("  %s\n", error.message);
        spec.t5xxl_path = t5_bf16.path;
        error = (sdt_error){0};
        CHECK(create(&spec, &e, &error), "SD3.5 + --t5xxl: %s", error.message);
        if (error.code == SDT_ERR_OK) {
            expect_rows(&e, 0, &l, clip_ids, n_clip, "SD3.5 + --t5xxl");
            expect_rows(&e, 2, &t5_bf16, t5_ids, n_t5, "SD3.5 + --t5xxl (BF16)");
            sdt_embedding_free(&e);
        }
        /* CLIP-L and CLIP-G swapped, or one given for both: the widths add up either way, so the order is checked */
        spec = spec_for("swapped", model, text);
        spec.t5xxl_path = t5_bf16.path;
        spec.clip_l_path = g.path;
        spec.clip_g_path = l.path;
        error = (sdt_error){0};
        CHECK(!create(&spec, &e, &error) && error.code == SDT_ERR_VALIDATION && strstr(error.message, "swapped") &&
                  strstr(error.message, "spec.clip_l_path") && strstr(error.message, "spec.clip_g_path"),
              "swapped CLIPs: %s", error.message);
        printf("  %s\n", error.message);
        spec.clip_g_path = g.path;
        error = (sdt_error){0};
        CHECK(!create(&spec, &e, &error) && error.code == SDT_ERR_VALIDATION && strstr(error.message, "for both"),
              "CLIP-G given for both: %s", error.message);
        g_free(model);
    }
    { /* Flux: BFL's transformer-only file, CLIP-L and T5 from their own files */
        char *model = make_model("flux", "flux1-tiny.safetensors", true, NULL, NULL, NULL);
        sdt_embedding_spec spec = spec_for("flux-concept", model, text);
        sdt_embedding e;
        CHECK(!create(&spec, &e, &error) && strstr(error.message, "--clip-l FILE") &&
                  strstr(error.message, "--t5xxl FILE") && !strstr(error.message, "--clip-g"),
              "Flux without encoders: %s", error.message);
        printf("  %s\n", error.message);
        spec.clip_l_path = l_flux.path;
        spec.t5xxl_path = t5_bf16.path;
        error = (sdt_error){0};
        CHECK(create(&spec, &e, &error), "Flux: %s", error.message);
        if (error.code == SDT_ERR_OK) {
            CHECK(e.dim == 12 + 24 && e.encoder_dims[1] == 0 && !strcmp(sdt_embedding_family(&e), "flux"),
                  "Flux: width %d, family %s", e.dim, sdt_embedding_family(&e));
            expect_rows(&e, 0, &l_flux, clip_ids, n_clip, "Flux");
            expect_rows(&e, 2, &t5_bf16, t5_ids, n_t5, "Flux");
            sdt_embedding_free(&e);
        }
        /* a file that is not the encoder the option takes */
        spec.clip_l_path = t5.path;
        spec.name = "wrong";
        error = (sdt_error){0};
        CHECK(!create(&spec, &e, &error) && strstr(error.message, "--clip-l FILE"), "a T5 file as --clip-l: %s",
              error.message);
        /* encoders that do not meet the transformer: refused before a file is written */
        spec.name = "mismatch";
        spec.clip_l_path = l.path; /* 4 wide: SD3's tiny CLIP-L, not this Flux's pooled input of 12 */
        error = (sdt_error){0};
        CHECK(!create(&spec, &e, &error) && error.code == SDT_ERR_VALIDATION && strstr(error.message, l.path) &&
                  strstr(error.message, "pooled") && strstr(error.message, "spec.clip_l_path"),
              "a CLIP-L of another width for Flux: %s", error.message);
        printf("  %s\n", error.message);
        spec.clip_l_path = l_flux.path;
        spec.t5xxl_path = t5_narrow.path;
        error = (sdt_error){0};
        CHECK(!create(&spec, &e, &error) && error.code == SDT_ERR_VALIDATION && strstr(error.message, t5_narrow.path) &&
                  strstr(error.message, "context 24") && strstr(error.message, "spec.t5xxl_path"),
              "a T5 of another width: %s", error.message);
        printf("  %s\n", error.message);
        spec.t5xxl_path = t5_bf16.path;
        spec.clip_l_path = released_g.path;
        spec.init_text = "";
        error = (sdt_error){0};
        CHECK(!create(&spec, &e, &error) && error.code == SDT_ERR_VALIDATION &&
                  strstr(error.message, released_g.path) && strstr(error.message, "1280 wide, the width of CLIP-G"),
              "CLIP-G's file as CLIP-L: %s", error.message);
        printf("  %s\n", error.message);
        char *mismatch = tmp_path("mismatch.safetensors");
        CHECK(!g_file_test(mismatch, G_FILE_TEST_EXISTS), "a refused create wrote %s", mismatch);
        g_free(mismatch);
        spec.init_text = text;
        spec.name = "wrong";
        /* no T5 tokenizer anywhere */
        char *tok = g_build_filename(tmp_dir, "flux", "t5_tokenizer", "tokenizer.json", NULL);
        char *tok_dir = g_path_get_dirname(tok);
        CHECK(remove(tok) == 0 && g_rmdir(tok_dir) == 0, "removing %s", tok);
        g_free(tok_dir);
        spec.clip_l_path = l_flux.path;
        error = (sdt_error){0};
        CHECK(!create(&spec, &e, &error) && error.code == SDT_ERR_NOT_FOUND && strstr(error.message, "t5_tokenizer") &&
                  strstr(error.message, "empty init text"),
              "no T5 tokenizer: %s", error.message);
        printf("  %s\n", error.message);
        g_free(tok);
        g_free(model);
    }
    { /* encoder files for an SD 1.x checkpoint */
        char *model = tmp_path("sd15.safetensors");
        sdt_ckpt_spec ckpt;
        memset(&ckpt, 0, sizeof ckpt);
        ckpt.config = sd_config_preset(SD_FAMILY_TINY);
        ckpt.dtype = SDT_F32;
        ckpt.text_only = true;
        CHECK(sdt_ckpt_generate(model, &ckpt, &error), "tiny SD: %s", error.message);
        sdt_embedding_spec spec = spec_for("sd15-concept", model, "");
        spec.t5xxl_path = t5.path;
        sdt_embedding e;
        error = (sdt_error){0};
        CHECK(!create(&spec, &e, &error) && error.code == SDT_ERR_VALIDATION &&
                  strstr(error.message, "spec.t5xxl_path"),
              "encoder files for SD 1.x: %s", error.message);
        g_free(model);
    }

    free(clip_ids);
    free(t5_ids);
    free_table(&l);
    free_table(&g);
    free_table(&t5);
    free_table(&t5_bf16);
    free_table(&l_flux);
    free_table(&t5_narrow);
    free_table(&released_g);
    test_rmtree(tmp_dir);
    g_free(tmp_dir);
    return sdt_test_finish("test_create_tables");
}
