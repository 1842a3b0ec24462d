/* test_embedding_tables.c - SD3.5 / Flux.1 embeddings (one table per text encoder) in files (issue 30).
 * Written as ComfyUI loads them (keys clip_l, clip_g, t5xxl), read back identical; OneTrainer's and diffusers'
 * spelling t5 and torch.save dicts of the same keys read as the same tables; tables that disagree in vector count,
 * carry another encoder's released width or both T5 spellings refused with sentences; inspect's JSON names the
 * family and each table; no PNG card is written for them. */
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "ti/embedding_file.h"
#include "data_test_util.h"
#include "sdt_test.h"
#include "torch_save.h"

static char *tmp_dir;

static char *tmp_path(const char *name)
{
    return g_build_filename(tmp_dir, name, NULL);
}

static void random_tables(sdt_test_rng *rng, sdt_embedding *e, int n, int l, int g, int t5)
{
    sdt_error error = {0};
    const int dims[3] = {l, g, t5};
    CHECK(sdt_embedding_init_tables(e, "my-concept", n, dims, &error), "init: %s", error.message);
    sdt_test_fill_normal(rng, e->vectors, (int64_t)n * e->dim, 0.02);
    e->step = 120;
    sdt_embedding_set_string(&e->init_text, "a cat");
}

static bool same_tables(const sdt_embedding *a, const sdt_embedding *b)
{
    return a->n_vectors == b->n_vectors && a->dim == b->dim &&
           !memcmp(a->encoder_dims, b->encoder_dims, sizeof a->encoder_dims) && a->clip_l_dim == 0 &&
           b->clip_l_dim == 0 && !memcmp(a->vectors, b->vectors, (size_t)a->n_vectors * (size_t)a->dim * sizeof(float));
}

static void expect_refusal(const char *path, const char *needle)
{
    sdt_embedding e;
    sdt_error error = {0};
    CHECK(!sdt_embedding_load(path, &e, NULL, &error) && error.code == SDT_ERR_BAD_FORMAT,
          "%s accepted or not BAD_FORMAT", path);
    CHECK(strstr(error.message, path) && strstr(error.message, needle), "%s: sentence '%s' lacks '%s'", path,
          error.message, needle);
    printf("  %s\n", error.message);
}

/* Written with the keys ComfyUI reads, each [n, width] F32; read back bit-identical with the family. */
static void test_round_trip(sdt_test_rng *rng)
{
    static const struct {
        const char *file, *family;
        int l, g, t5;
    } cases[] = {{"sd35-tiny.safetensors", "sd3", 5, 7, 9},
                 {"flux-tiny.safetensors", "flux", 5, 0, 9},
                 {"sd35-full.safetensors", "sd3", 768, 1280, 4096},
                 {"flux-full.safetensors", "flux", 768, 0, 4096}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        sdt_embedding e, back;
        random_tables(rng, &e, 3, cases[c].l, cases[c].g, cases[c].t5);
        char *path = tmp_path(cases[c].file);
        sdt_error error = {0};
        CHECK(sdt_embedding_save_safetensors(&e, path, false, &error), "%s: %s", path, error.message);
        sdt_safetensors *st = sdt_st_open(path, &error);
        CHECK(st, "%s: %s", path, error.message);
        const int dims[3] = {cases[c].l, cases[c].g, cases[c].t5};
        for (int k = 0; st && k < SDT_EMBEDDING_ENCODERS; k++) {
            const sdt_st_entry *t = sdt_st_find(st, sdt_embedding_encoder_key(k));
            if (!dims[k]) {
                CHECK(!t, "%s: a %s tensor for a family without it", path, sdt_embedding_encoder_key(k));
                continue;
            }
            CHECK(t && t->dtype == SDT_ST_F32 && t->ndim == 2 && t->shape[0] == 3 && t->shape[1] == dims[k] &&
                      !memcmp(t->data, sdt_embedding_table(&e, k), (size_t)3 * (size_t)dims[k] * sizeof(float)),
                  "%s: tensor %s is not the table [3, %d]", path, sdt_embedding_encoder_key(k), dims[k]);
        }
        CHECK(st && sdt_st_count(st) == (size_t)(1 + (dims[1] > 0) + 1) && !sdt_st_find(st, "emb_params"),
              "%s: other tensors than the tables", path);
        CHECK(st && sdt_st_metadata_get(st, "step") && !strcmp(sdt_st_metadata_get(st, "step"), "120"),
              "%s: step metadata", path);
        sdt_st_close(st);
        sdt_embedding_format f;
        CHECK(sdt_embedding_load(path, &back, &f, &error), "%s back: %s", path, error.message);
        CHECK(f == SDT_EMBEDDING_FORMAT_SAFETENSORS && same_tables(&e, &back), "%s: tables differ after a round trip",
              path);
        CHECK(back.name && !strcmp(back.name, "my-concept") && back.step == 120 && back.init_text &&
                  !strcmp(back.init_text, "a cat"),
              "%s: name, step or init text lost", path);
        CHECK(!strcmp(sdt_embedding_family(&back), cases[c].family), "%s: family %s", path,
              sdt_embedding_family(&back));
        /* an existing file is not replaced unless asked */
        CHECK(!sdt_embedding_save_safetensors(&e, path, false, &error) && error.code == SDT_ERR_ALREADY_EXISTS,
              "%s replaced without overwrite", path);
        sdt_embedding_free(&back);
        sdt_embedding_free(&e);
        g_free(path);
    }
}

/* OneTrainer and diffusers write T5's rows under "t5"; torch.save dicts of either spelling. */
static void test_other_spellings(sdt_test_rng *rng)
{
    sdt_embedding e;
    random_tables(rng, &e, 2, 5, 7, 9);
    sdt_error error = {0};
    int64_t sl[2] = {2, 5}, sg[2] = {2, 7}, st5[2] = {2, 9};
    char *ot = tmp_path("onetrainer.safetensors");
    sdt_st_write_item items[5] = {{"clip_g", SDT_ST_F32, 2, sg, sdt_embedding_table(&e, 1)},
                                  {"clip_l", SDT_ST_F32, 2, sl, sdt_embedding_table(&e, 0)},
                                  {"t5", SDT_ST_F32, 2, st5, sdt_embedding_table(&e, 2)},
                                  {"t5_out", SDT_ST_F32, 2, st5, sdt_embedding_table(&e, 2)},
                                  {"clip_l_out", SDT_ST_F32, 2, sl, sdt_embedding_table(&e, 0)}};
    CHECK(sdt_st_write(ot, items, 5, NULL, 0, &error), "%s", error.message);
    sdt_embedding back;
    CHECK(sdt_embedding_load(ot, &back, NULL, &error), "%s: %s", ot, error.message);
    CHECK(same_tables(&e, &back), "OneTrainer's t5 spelling: tables differ");
    CHECK(back.name && !strcmp(back.name, "onetrainer"), "the file stem names a file without a name");
    CHECK(back.load_note && strstr(back.load_note, "_out"), "OneTrainer's output tables left out without a note");
    sdt_embedding_free(&back);

    /* BF16 tables (OneTrainer saves in the training dtype) become F32 */
    uint16_t l16[10], t16[18];
    sdt_embedding rounded;
    const int flux_dims[3] = {5, 0, 9};
    CHECK(sdt_embedding_init_tables(&rounded, "x", 2, flux_dims, &error), "init");
    for (int i = 0; i < 10; i++) rounded.vectors[i] = sdt_bf16_to_f32(l16[i] = sdt_f32_to_bf16(e.vectors[i]));
    for (int i = 0; i < 18; i++)
        rounded.vectors[10 + i] = sdt_bf16_to_f32(t16[i] = sdt_f32_to_bf16(sdt_embedding_table(&e, 2)[i]));
    char *bf = tmp_path("flux-bf16.safetensors");
    sdt_st_write_item bf_items[2] = {{"clip_l", SDT_ST_BF16, 2, sl, l16}, {"t5", SDT_ST_BF16, 2, st5, t16}};
    CHECK(sdt_st_write(bf, bf_items, 2, NULL, 0, &error), "%s", error.message);
    CHECK(sdt_embedding_load(bf, &back, NULL, &error), "%s: %s", bf, error.message);
    CHECK(same_tables(&rounded, &back) && !strcmp(sdt_embedding_family(&back), "flux"), "BF16 Flux tables differ");
    sdt_embedding_free(&back);

    /* torch.save dicts: {clip_l, clip_g, t5xxl} and {clip_l, t5} */
    sdt_pv_arena *a = sdt_pv_arena_new();
    sdt_pv *sd3 = sdt_pv_new_dict(a, false);
    sdt_pv_dict_set(a, sd3, "clip_l", sdt_pv_new_tensor(a, SDT_ST_F32, 2, sl, sdt_embedding_table(&e, 0)));
    sdt_pv_dict_set(a, sd3, "clip_g", sdt_pv_new_tensor(a, SDT_ST_F32, 2, sg, sdt_embedding_table(&e, 1)));
    sdt_pv_dict_set(a, sd3, "t5xxl", sdt_pv_new_tensor(a, SDT_ST_F32, 2, st5, sdt_embedding_table(&e, 2)));
    char *pt = tmp_path("sd35.pt");
    CHECK(sdt_torch_save(pt, sd3, NULL, &error), "%s", error.message);
    sdt_embedding_format f;
    CHECK(sdt_embedding_load(pt, &back, &f, &error), "%s: %s", pt, error.message);
    CHECK(f == SDT_EMBEDDING_FORMAT_TORCH_CONCEPT && same_tables(&e, &back), "torch SD3.5 dict: tables differ");
    sdt_embedding_free(&back);
    sdt_pv *flux = sdt_pv_new_dict(a, false);
    sdt_pv_dict_set(a, flux, "clip_l", sdt_pv_new_tensor(a, SDT_ST_BF16, 2, sl, l16));
    sdt_pv_dict_set(a, flux, "t5", sdt_pv_new_tensor(a, SDT_ST_BF16, 2, st5, t16));
    char *bin = tmp_path("flux.bin");
    CHECK(sdt_torch_save(bin, flux, NULL, &error), "%s", error.message);
    CHECK(sdt_embedding_load(bin, &back, &f, &error), "%s: %s", bin, error.message);
    CHECK(same_tables(&rounded, &back), "torch Flux dict with t5: tables differ");
    sdt_embedding_free(&back);

    /* refusals, in both file kinds */
    int64_t s3[2] = {3, 9};
    float rows[3 * 4096] = {0};
    char *count = tmp_path("count.safetensors");
    sdt_st_write_item count_items[2] = {{"clip_l", SDT_ST_F32, 2, sl, rows}, {"t5xxl", SDT_ST_F32, 2, s3, rows}};
    CHECK(sdt_st_write(count, count_items, 2, NULL, 0, &error), "%s", error.message);
    expect_refusal(count, "has 3 vectors but clip_l has 2");
    int64_t wide[2] = {2, 4096};
    char *swapped = tmp_path("swapped.safetensors");
    sdt_st_write_item swapped_items[2] = {{"clip_l", SDT_ST_F32, 2, wide, rows}, {"t5xxl", SDT_ST_F32, 2, wide, rows}};
    CHECK(sdt_st_write(swapped, swapped_items, 2, NULL, 0, &error), "%s", error.message);
    expect_refusal(swapped, "the clip_l table is 4096 wide, the width of t5xxl's rows");
    int64_t narrow[2] = {2, 768};
    char *t5_narrow = tmp_path("t5-narrow.safetensors");
    sdt_st_write_item narrow_items[2] = {{"clip_l", SDT_ST_F32, 2, narrow, rows}, {"t5", SDT_ST_F32, 2, narrow, rows}};
    CHECK(sdt_st_write(t5_narrow, narrow_items, 2, NULL, 0, &error), "%s", error.message);
    expect_refusal(t5_narrow, "the t5 table is 768 wide, the width of clip_l's rows");
    char *both = tmp_path("both.safetensors");
    sdt_st_write_item both_items[3] = {
        {"clip_l", SDT_ST_F32, 2, sl, rows}, {"t5", SDT_ST_F32, 2, st5, rows}, {"t5xxl", SDT_ST_F32, 2, st5, rows}};
    CHECK(sdt_st_write(both, both_items, 3, NULL, 0, &error), "%s", error.message);
    expect_refusal(both, "both a t5xxl and a t5 table");
    sdt_pv *bad = sdt_pv_new_dict(a, false);
    sdt_pv_dict_set(a, bad, "clip_l", sdt_pv_new_tensor(a, SDT_ST_F32, 2, sl, rows));
    sdt_pv_dict_set(a, bad, "t5xxl", sdt_pv_new_tensor(a, SDT_ST_F32, 2, s3, rows));
    char *bad_pt = tmp_path("count.pt");
    CHECK(sdt_torch_save(bad_pt, bad, NULL, &error), "%s", error.message);
    expect_refusal(bad_pt, "has 3 vectors but clip_l has 2");
    sdt_pv *not_tensor = sdt_pv_new_dict(a, false);
    sdt_pv_dict_set(a, not_tensor, "clip_l", sdt_pv_new_tensor(a, SDT_ST_F32, 2, sl, rows));
    sdt_pv_dict_set(a, not_tensor, "t5", sdt_pv_new_str(a, "rows"));
    char *nt_pt = tmp_path("not-tensor.pt");
    CHECK(sdt_torch_save(nt_pt, not_tensor, NULL, &error), "%s", error.message);
    expect_refusal(nt_pt, "\"t5\" is a str, not a tensor");

    sdt_pv_arena_free(a);
    g_free(ot);
    g_free(bf);
    g_free(pt);
    g_free(bin);
    g_free(count);
    g_free(swapped);
    g_free(t5_narrow);
    g_free(both);
    g_free(bad_pt);
    g_free(nt_pt);
    sdt_embedding_free(&rounded);
    sdt_embedding_free(&e);
}

/* inspect: the family, each table's width and norms, the vector norms across the tables. */
static void test_describe(sdt_test_rng *rng)
{
    sdt_embedding e;
    random_tables(rng, &e, 2, 5, 7, 9);
    char *path = tmp_path("described.safetensors");
    sdt_error error = {0};
    CHECK(sdt_embedding_save_safetensors(&e, path, false, &error), "%s", error.message);
    char *json = sdt_embedding_inspect_file(path, &error);
    CHECK(json, "inspect: %s", error.message);
    cJSON *o = json ? cJSON_Parse(json) : NULL;
    const cJSON *family = cJSON_GetObjectItemCaseSensitive(o, "family");
    const cJSON *title = cJSON_GetObjectItemCaseSensitive(o, "family_title");
    const cJSON *tables = cJSON_GetObjectItemCaseSensitive(o, "tables");
    CHECK(cJSON_IsString(family) && !strcmp(family->valuestring, "sd3") && cJSON_IsString(title) &&
              !strcmp(title->valuestring, "SD3.5"),
          "inspect names no SD3.5 family: %s", json ? json : "");
    CHECK(cJSON_GetArraySize(tables) == 3, "inspect lists %d tables", cJSON_GetArraySize(tables));
    const char *keys[3] = {"clip_l", "clip_g", "t5xxl"};
    const int dims[3] = {5, 7, 9};
    for (int k = 0; k < 3 && cJSON_GetArraySize(tables) == 3; k++) {
        const cJSON *t = cJSON_GetArrayItem(tables, k);
        const cJSON *enc = cJSON_GetObjectItemCaseSensitive(t, "encoder");
        const cJSON *dim = cJSON_GetObjectItemCaseSensitive(t, "dim");
        const cJSON *norms = cJSON_GetObjectItemCaseSensitive(t, "norms");
        double want = sdt_embedding_vector_norm(sdt_embedding_table(&e, k) + dims[k], dims[k]);
        CHECK(cJSON_IsString(enc) && !strcmp(enc->valuestring, keys[k]) && cJSON_IsNumber(dim) &&
                  dim->valueint == dims[k] && cJSON_GetArraySize(norms) == 2 &&
                  fabs(cJSON_GetArrayItem(norms, 1)->valuedouble - want) < 1e-9,
              "table %d described wrongly", k);
    }
    const cJSON *norms = cJSON_GetObjectItemCaseSensitive(o, "norms");
    double row1 = 0;
    for (int k = 0; k < 3; k++) {
        double n = sdt_embedding_vector_norm(sdt_embedding_table(&e, k) + dims[k], dims[k]);
        row1 += n * n;
    }
    CHECK(cJSON_GetArraySize(norms) == 2 && fabs(cJSON_GetArrayItem(norms, 1)->valuedouble - sqrt(row1)) < 1e-9,
          "a vector's norm does not span its tables");
    const cJSON *dim = cJSON_GetObjectItemCaseSensitive(o, "dim");
    CHECK(cJSON_IsNumber(dim) && dim->valueint == 21 && !cJSON_GetObjectItemCaseSensitive(o, "clip_l_dim"),
          "dim is not the widths' sum, or SDXL's split is claimed");
    cJSON_Delete(o);
    free(json);

    /* No PNG card: A1111 cannot load these. */
    char *card = tmp_path("described.png");
    CHECK(!sdt_embedding_save_png_card(&e, card, NULL, 0, 0, false, &error) && error.code == SDT_ERR_UNSUPPORTED &&
              strstr(error.message, "A1111") && strstr(error.message, "SD3.5"),
          "a card was written or the sentence lacks why: %s", error.message);
    CHECK(!g_file_test(card, G_FILE_TEST_EXISTS), "a refused card left a file");
    printf("  %s\n", error.message);
    g_free(card);
    g_free(path);
    sdt_embedding_free(&e);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("test_embedding_tables");
    tmp_dir = g_dir_make_tmp("sdt-emb-tables-XXXXXX", NULL);
    if (!tmp_dir) return 1;
    test_round_trip(&rng);
    test_other_spellings(&rng);
    test_describe(&rng);
    test_rmtree(tmp_dir);
    g_free(tmp_dir);
    return sdt_test_finish("test_embedding_tables");
}
