/* test_flow_preview.c - an SD3.5 preview (train/flow_preview.h) on a tiny random SD3.5 model on the CPU (its CLIP
 * tables as large as the built-in CLIP tokenizer's vocabulary, T5 with a hand-built one):
 *  - the image has the asked size, is not one flat value, and the same request gives the same bytes;
 *  - another seed, guidance on or off, and other embedding rows each give another image (the prompt's slots
 *    reach the transformer through every encoder);
 *  - zero steps are refused with a sentence;
 *  - generate (compose/generate.h) on the SD3.5 file gives the preview's bytes for the same prompt, T5's tokenizer
 *    found beside the model; without it, one sentence naming the folder; a hypernetwork chain is refused. */
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clip_tokenizer_builtin.h"
#include "sd3_gen.h"
#include "compose/generate.h"
#include "sdtrain.h"
#include "sdt_test.h"
#include "t5_test_vocab.h"
#include "train/flow_preview.h"

#define S 32

static const char *const JSON = SDT_TEST_T5_TOKENIZER_JSON;

typedef struct fixture {
    sd_runtime rt;
    work_arena wa;
    sdt_tokenizer *tok;
    sdt_spm *spm;
    sdt_slot_rules rules;
    sdt_t5_slot_rules r5;
    sdt_tensor rows;
    float *values;
} fixture;

static uint8_t *render(fixture *f, const sdt_flow_preview_request *req, const char *what)
{
    uint8_t *rgb = NULL;
    sdt_error err = {0};
    bool ok = sdt_flow_preview_render(&f->rt, &f->wa, f->tok, &f->rules, f->spm, &f->r5, &f->rows, req, &rgb, &err);
    CHECK(ok && rgb, "%s: %s", what, err.message);
    return rgb;
}

static bool same(const uint8_t *a, const uint8_t *b)
{
    return a && b && memcmp(a, b, S * S * 3) == 0;
}

int main(void)
{
    sdt_backend *be = sdt_backend_cpu_create(2);
    char *dir = g_dir_make_tmp("sdt-flowprev-XXXXXX", NULL);
    CHECK(be && dir, "backend and temp folder");
    if (!be || !dir) return sdt_test_finish("test_flow_preview");
    fixture f;
    memset(&f, 0, sizeof f);
    sdt_error err = {0};
    char *path = g_strdup_printf("%s/sd3.5_tiny.safetensors", dir);
    sd_config cfg = sd_config_preset(SD_FAMILY_TINY_SD3);
    cfg.clip.vocab = cfg.clip2.vocab = SDT_CLIP_BUILTIN_VOCAB; /* the built-in tokenizer's ids fit */
    const bool all[SD_PART_COUNT] = {true, true, true, true, true};
    f.tok = sdt_tokenizer_load_builtin_clip(&err);
    f.spm = sdt_spm_load_json_memory(JSON, strlen(JSON), "tiny.json", &err);
    int32_t id = -1, id5 = -1;
    bool ok = f.tok && f.spm && sd3_generate(path, &cfg, all, SDT_F32, 11, true, &err) &&
              sd_runtime_open(&f.rt, path, be, SDT_F32, SD_PREDICTION_AUTO, false, &err) &&
              sdt_tokenizer_add_token(f.tok, "sks", -1, &id, &err) && sdt_spm_add_token(f.spm, "sks", &id5, &err);
    CHECK(ok, "the model and tokenizers: %s", err.message);
    if (ok) {
        f.rules =
            (sdt_slot_rules){.placeholder_id = id, .n_vectors = 2, .slot_token = 0, .pad_id = sdt_tokenizer_eos(f.tok)};
        f.r5 = (sdt_t5_slot_rules){.placeholder_id = id5, .n_vectors = 2, .slot_token = 0};
        int width = f.rt.cfg.clip.width + f.rt.cfg.clip2.width + f.rt.cfg.t5.d_model;
        int64_t shape[2] = {2, width};
        f.values = malloc((size_t)2 * width * sizeof(float));
        for (int i = 0; i < 2 * width; i++) f.values[i] = (float)(0.3 * sin(0.7 * i));
        f.rows = sdt_tensor_make(f.values, SDT_F32, SDT_DEVICE_CPU, 2, shape);
        sdt_flow_preview_request req = {.prompt = "a sks cat",
                                        .negative = "",
                                        .width = S,
                                        .height = S,
                                        .steps = 3,
                                        .cfg_scale = 2.0f,
                                        .seed = 5,
                                        .t5_len = 8,
                                        .shift = sdt_flow_timesteps_sd3()};
        uint8_t *a = render(&f, &req, "a preview"), *b = render(&f, &req, "again");
        CHECK(same(a, b), "the same request, the same bytes");
        int distinct = 0;
        for (int i = 1; a && i < S * S * 3; i++) distinct += a[i] != a[0];
        CHECK(distinct > S * S, "an image, not one flat value (%d bytes differ from the first)", distinct);
        req.seed = 6;
        uint8_t *c = render(&f, &req, "another seed");
        CHECK(a && c && !same(a, c), "another seed, another image");
        req.seed = 5;
        req.cfg_scale = 1.0f;
        uint8_t *d = render(&f, &req, "no guidance");
        CHECK(a && d && !same(a, d), "guidance changes the image");
        req.cfg_scale = 2.0f;
        for (int i = 0; i < 2 * width; i++) f.values[i] *= -2.0f;
        uint8_t *e = render(&f, &req, "other rows");
        CHECK(a && e && !same(a, e), "the embedding's rows change the image");
        req.steps = 0;
        uint8_t *none = NULL;
        CHECK(!sdt_flow_preview_render(&f.rt, &f.wa, f.tok, &f.rules, f.spm, &f.r5, &f.rows, &req, &none, &err) &&
                  !none && err.message[0],
              "0 steps: \"%s\"", err.message);
        free(a), free(b), free(c), free(d), free(e);

        /* generate: T5's tokenizer beside the model */
        sdt_compose_generate_settings gs = {.model_path = path,
                                            .prompt = "a cat",
                                            .negative = "",
                                            .width = S,
                                            .height = S,
                                            .steps = 3,
                                            .clip_skip = 1,
                                            .cfg_scale = 2.0f,
                                            .seed = 5,
                                            .device = SDT_DEVICE_CHOICE_CPU,
                                            .cpu_threads = 2};
        uint8_t *gen = malloc(S * S * 3);
        CHECK(!sdt_compose_generate(&gs, gen, &err) && strstr(err.message, "no T5 tokenizer found") &&
                  strstr(err.message, dir),
              "generate without T5's tokenizer: \"%s\"", err.message);
        char *json = g_strdup_printf("%s/tokenizer.json", dir);
        CHECK(g_file_set_contents(json, JSON, -1, NULL), "write %s", json);
        bool made = sdt_compose_generate(&gs, gen, &err);
        CHECK(made, "generate on SD3.5: %s", err.message);
        sdt_spm_free(f.spm); /* the preview's own tokenizer without the placeholder, as generate's */
        f.spm = sdt_spm_load_json_memory(JSON, strlen(JSON), "tiny.json", &err);
        req = (sdt_flow_preview_request){.prompt = "a cat",
                                         .negative = "",
                                         .width = S,
                                         .height = S,
                                         .steps = 3,
                                         .cfg_scale = 2.0f,
                                         .seed = 5,
                                         .t5_len = 256,
                                         .shift = sdt_flow_timesteps_sd3()};
        f.r5.placeholder_id = -1;
        uint8_t *pre = render(&f, &req, "the same as a preview");
        CHECK(made && same(gen, pre), "generate gives the preview's bytes");
        const char *chain[1] = {"style.pt"};
        const float strengths[1] = {1.0f};
        gs.chain_count = 1, gs.chain_paths = chain, gs.chain_strengths = strengths;
        CHECK(!sdt_compose_generate(&gs, gen, &err) && strstr(err.message, "no host applies A1111 hypernetworks"),
              "a hypernetwork chain on SD3.5: \"%s\"", err.message);
        g_remove(json);
        g_free(json);
        free(gen), free(pre);
        free(f.values);
        work_arena_release(&f.wa);
        sd_runtime_close(&f.rt);
    }
    if (f.tok) sdt_tokenizer_free(f.tok);
    if (f.spm) sdt_spm_free(f.spm);
    g_remove(path);
    g_rmdir(dir);
    g_free(path);
    g_free(dir);
    be->destroy(be);
    return sdt_test_finish("test_flow_preview");
}
