/* test_embedding_torch.c - embeddings in PyTorch files. Written by the project's torch writer in A1111's
 * layout (.pt), as diffusers' learned_embeds.bin ({"<token>": [dim]}), as kohya's SDXL pair, in F16, and read
 * back identical to their safetensors twins; the refusals A1111 also makes (several terms, several tensors,
 * no embedding at all) each with a sentence. With Debian's python3-torch, files torch.save wrote (zip and
 * legacy layouts, A1111's oldest ParameterDict form) load with the values torch sees. */
#include <cjson/cJSON.h>
#include <string.h>

#include "ti/embedding_file.h"
#include "data_test_util.h"
#include "sdt_test.h"
#include "torch_python.h"
#include "torch_save.h"

static char *tmp_dir;

static void random_embedding(sdt_test_rng *rng, sdt_embedding *e, int n, int dim)
{
    sdt_error error = {0};
    CHECK(sdt_embedding_init(e, "my-style", n, dim, &error), "init: %s", error.message);
    sdt_test_fill_normal(rng, e->vectors, (int64_t)n * dim, 0.02);
    e->step = 499;
    sdt_embedding_set_string(&e->checkpoint_hash, "a1b2c3d4e5");
    sdt_embedding_set_string(&e->checkpoint_name, "v1-5-pruned-emaonly");
}

static char *save_pt(const char *name, sdt_pv *root)
{
    char *path = g_build_filename(tmp_dir, name, NULL);
    sdt_error error = {0};
    CHECK(sdt_torch_save(path, root, NULL, &error), "%s: %s", name, error.message);
    return path;
}

/* A1111's dict, as textual_inversion.py's save() writes it. */
static sdt_pv *a1111_dict(sdt_pv_arena *a, const sdt_embedding *e, sdt_pv *vec)
{
    sdt_pv *root = sdt_pv_new_dict(a, false), *stt = sdt_pv_new_dict(a, false), *stp = sdt_pv_new_dict(a, false);
    sdt_pv_dict_set(a, stt, "*", sdt_pv_new_int(a, 265));
    sdt_pv_dict_set(a, stp, "*", vec);
    sdt_pv_dict_set(a, root, "string_to_token", stt);
    sdt_pv_dict_set(a, root, "string_to_param", stp);
    sdt_pv_dict_set(a, root, "name", sdt_pv_new_str(a, "my-style-499"));
    sdt_pv_dict_set(a, root, "step", sdt_pv_new_int(a, e->step));
    sdt_pv_dict_set(a, root, "sd_checkpoint", sdt_pv_new_str(a, e->checkpoint_hash));
    sdt_pv_dict_set(a, root, "sd_checkpoint_name", sdt_pv_new_str(a, e->checkpoint_name));
    return root;
}

static void check_loads(const char *path, const sdt_embedding *want, sdt_embedding_format want_format, bool fields)
{
    sdt_embedding e;
    sdt_embedding_format f;
    sdt_error error = {0};
    bool ok = sdt_embedding_load(path, &e, &f, &error);
    CHECK(ok, "%s: %s", path, error.message);
    if (!ok) return;
    CHECK(f == want_format, "%s: format %s", path, sdt_embedding_format_name(f));
    CHECK(e.n_vectors == want->n_vectors && e.dim == want->dim && e.clip_l_dim == want->clip_l_dim &&
              memcmp(e.vectors, want->vectors, (size_t)e.n_vectors * (size_t)e.dim * sizeof(float)) == 0,
          "%s: vectors differ from the twin", path);
    char *stem = sdt_path_stem(path);
    CHECK(e.name && strcmp(e.name, stem) == 0, "%s: name '%s', want the file stem as A1111 uses", path, e.name);
    free(stem);
    if (fields)
        CHECK(e.step == want->step && e.checkpoint_hash && strcmp(e.checkpoint_hash, want->checkpoint_hash) == 0 &&
                  e.checkpoint_name && strcmp(e.checkpoint_name, want->checkpoint_name) == 0,
              "%s: step or checkpoint fields lost", path);
    sdt_embedding_free(&e);
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

static void test_written(sdt_test_rng *rng)
{
    sdt_embedding e;
    random_embedding(rng, &e, 3, 8);
    sdt_error error = {0};
    char *twin = g_build_filename(tmp_dir, "my-style.safetensors", NULL);
    CHECK(sdt_embedding_save_safetensors(&e, twin, false, &error), "twin: %s", error.message);
    sdt_embedding back;
    CHECK(sdt_embedding_load(twin, &back, NULL, &error), "twin back: %s", error.message);
    sdt_pv_arena *a = sdt_pv_arena_new();
    const int64_t shape[2] = {e.n_vectors, e.dim};

    /* A1111 .pt: the vector a Parameter that requires grad, as A1111 saves it. */
    sdt_pv *vec = sdt_pv_new_tensor(a, SDT_ST_F32, 2, shape, e.vectors);
    vec->u.t.parameter = vec->u.t.requires_grad = true;
    char *pt = save_pt("my-style.pt", a1111_dict(a, &e, vec));
    check_loads(pt, &back, SDT_EMBEDDING_FORMAT_A1111_PT, true);

    /* diffusers learned_embeds.bin: one token, a 1-D vector. */
    sdt_embedding one;
    CHECK(sdt_embedding_init(&one, "x", 1, 8, &error), "init");
    memcpy(one.vectors, e.vectors, 8 * sizeof(float));
    sdt_pv *bin_root = sdt_pv_new_dict(a, false);
    sdt_pv_dict_set(a, bin_root, "<cat-toy>", sdt_pv_new_tensor(a, SDT_ST_F32, 1, (int64_t[]){8}, e.vectors));
    char *bin = save_pt("learned_embeds.bin", bin_root);
    check_loads(bin, &one, SDT_EMBEDDING_FORMAT_TORCH_CONCEPT, false);

    /* F16 storage: the same values as the twin after rounding, converted to F32 on load. */
    uint16_t half[24];
    sdt_embedding rounded;
    CHECK(sdt_embedding_init(&rounded, "x", 3, 8, &error), "init");
    for (int i = 0; i < 24; i++) rounded.vectors[i] = sdt_f16_to_f32(half[i] = sdt_f32_to_f16(e.vectors[i]));
    sdt_pv *f16_root = sdt_pv_new_dict(a, false);
    sdt_pv_dict_set(a, f16_root, "emb_params", sdt_pv_new_tensor(a, SDT_ST_F16, 2, shape, half));
    char *f16 = save_pt("half.pt", f16_root);
    check_loads(f16, &rounded, SDT_EMBEDDING_FORMAT_TORCH_CONCEPT, false);

    /* SDXL: kohya's clip_l + clip_g, against a safetensors twin of the same pair. */
    sdt_embedding xl;
    random_embedding(rng, &xl, 2, 12);
    xl.clip_l_dim = 5;
    char *xl_twin = g_build_filename(tmp_dir, "xl.safetensors", NULL);
    CHECK(sdt_embedding_save_safetensors(&xl, xl_twin, false, &error), "xl twin: %s", error.message);
    sdt_embedding xl_back;
    CHECK(sdt_embedding_load(xl_twin, &xl_back, NULL, &error), "xl twin back: %s", error.message);
    float l[10], g[14];
    for (int r = 0; r < 2; r++) {
        memcpy(l + r * 5, xl.vectors + r * 12, 5 * sizeof(float));
        memcpy(g + r * 7, xl.vectors + r * 12 + 5, 7 * sizeof(float));
    }
    sdt_pv *xl_root = sdt_pv_new_dict(a, false);
    sdt_pv_dict_set(a, xl_root, "clip_g", sdt_pv_new_tensor(a, SDT_ST_F32, 2, (int64_t[]){2, 7}, g));
    sdt_pv_dict_set(a, xl_root, "clip_l", sdt_pv_new_tensor(a, SDT_ST_F32, 2, (int64_t[]){2, 5}, l));
    char *xl_pt = save_pt("xl.pt", xl_root);
    check_loads(xl_pt, &xl_back, SDT_EMBEDDING_FORMAT_TORCH_CONCEPT, false);

    /* Refusals. */
    sdt_pv *two_terms = a1111_dict(a, &e, vec);
    sdt_pv_dict_set(a, sdt_pv_dict_get(two_terms, "string_to_param"), "other", vec);
    char *p1 = save_pt("two-terms.pt", two_terms);
    expect_refusal(p1, "holds 2 terms");
    sdt_pv *two_tensors = sdt_pv_new_dict(a, false);
    sdt_pv_dict_set(a, two_tensors, "a", vec);
    sdt_pv_dict_set(a, two_tensors, "b", vec);
    char *p2 = save_pt("two-tensors.bin", two_tensors);
    expect_refusal(p2, "holds 2 tensors");
    sdt_pv *list = sdt_pv_new(a, SDT_PV_LIST);
    sdt_pv_append(list, vec);
    char *p3 = save_pt("list.pt", list);
    expect_refusal(p3, "holds a list, not a dict");
    sdt_pv *no_emb = sdt_pv_new_dict(a, false);
    sdt_pv_dict_set(a, no_emb, "name", sdt_pv_new_str(a, "x"));
    char *p4 = save_pt("no-embedding.pt", no_emb);
    expect_refusal(p4, "not an embedding file");

    sdt_pv *ckpt = sdt_pv_new_dict(a, false);
    sdt_pv_dict_set(a, ckpt, "state_dict", two_tensors);
    char *p5 = save_pt("model.ckpt", ckpt);
    expect_refusal(p5, "model checkpoint (a state_dict of 2 entries)");
    sdt_pv *hn = sdt_pv_new_dict(a, false);
    sdt_pv_dict_add(hn, sdt_pv_new_int(a, 768), sdt_pv_new(a, SDT_PV_TUPLE));
    sdt_pv_dict_set(a, hn, "layer_structure", sdt_pv_new(a, SDT_PV_LIST));
    char *p6 = save_pt("hn.pt", hn);
    expect_refusal(p6, "A1111 hypernetwork");
    g_free(p5), g_free(p6);
    g_free(pt), g_free(bin), g_free(f16), g_free(xl_pt), g_free(p1), g_free(p2), g_free(p3), g_free(p4);
    g_free(twin);
    g_free(xl_twin);
    sdt_pv_arena_free(a);
    sdt_embedding_free(&e);
    sdt_embedding_free(&back);
    sdt_embedding_free(&one);
    sdt_embedding_free(&rounded);
    sdt_embedding_free(&xl);
    sdt_embedding_free(&xl_back);
}

/* torch.save's own files: the vectors as torch's description (torch_files.py) lists them. */
static void test_torch_written(void)
{
    if (!tp_torch_available()) {
        printf("  %s has no torch (apt-get install python3-torch): torch.save files not checked\n", TP_PYTHON);
        return;
    }
    int status;
    char *args[] = {tmp_dir, NULL};
    g_free(tp_run(SDT_SOURCE_DIR, "make", args, &status));
    CHECK(status == 0, "torch_files.py make failed");
    const struct {
        const char *file;
        const char *path_to_tensor[3]; /* keys from the top of the description's dict */
        sdt_embedding_format format;
    } cases[] = {
        {"a1111.pt", {"string_to_param", "*", NULL}, SDT_EMBEDDING_FORMAT_A1111_PT},
        {"a1111_old.pt", {"string_to_param", "*", NULL}, SDT_EMBEDDING_FORMAT_A1111_PT},
        {"learned_embeds.bin", {"<cat-toy>", NULL, NULL}, SDT_EMBEDDING_FORMAT_TORCH_CONCEPT},
        {"paramdict.pt", {NULL, NULL, NULL}, SDT_EMBEDDING_FORMAT_A1111_PT},
    };
    for (size_t i = 0; status == 0 && i < G_N_ELEMENTS(cases); i++) {
        char *path = g_build_filename(tmp_dir, cases[i].file, NULL), *json_path = g_strconcat(path, ".json", NULL);
        char *json = NULL;
        sdt_error error = {0};
        CHECK(g_file_get_contents(json_path, &json, NULL, NULL), "%s", json_path);
        cJSON *root = cJSON_Parse(json ? json : ""), *d = root;
        for (int k = 0; k < 3 && cases[i].path_to_tensor[k]; k++) {
            cJSON *pair, *next = NULL;
            cJSON_ArrayForEach(pair, cJSON_GetObjectItem(d, "dict"))
            {
                if (!strcmp(cJSON_GetArrayItem(pair, 0)->valuestring, cases[i].path_to_tensor[k]))
                    next = cJSON_GetArrayItem(pair, 1);
            }
            d = next;
        }
        cJSON *values = cJSON_GetObjectItem(d, "values");
        sdt_embedding e;
        sdt_embedding_format f;
        bool ok = sdt_embedding_load(path, &e, &f, &error);
        CHECK(ok && f == cases[i].format, "%s: %s", cases[i].file, error.message);
        if (ok) {
            CHECK(values && cJSON_GetArraySize(values) == e.n_vectors * e.dim, "%s: size", cases[i].file);
            for (int k = 0; values && k < cJSON_GetArraySize(values) && k < e.n_vectors * e.dim; k++)
                CHECK(e.vectors[k] == (float)cJSON_GetArrayItem(values, k)->valuedouble, "%s[%d]", cases[i].file, k);
            sdt_embedding_free(&e);
        }
        cJSON_Delete(root);
        g_free(json);
        g_free(json_path);
        g_free(path);
    }
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("test_embedding_torch");
    tmp_dir = g_dir_make_tmp("sdt-emb-torch-XXXXXX", NULL);
    if (!tmp_dir) return 1;
    test_written(&rng);
    test_torch_written();
    test_rmtree(tmp_dir);
    g_free(tmp_dir);
    return sdt_test_finish("test_embedding_torch");
}
