/* test_tokenizer_clip.c - the CLIP ViT-L/14 tokenizer (SD 1.x and 2.x): the copy built into
 * the library (models/tokenizer/clip/), and the reference files when present, give known
 * token ids.
 *
 * Reference files: $SDT_CLIP_TOKENIZER_DIR, else shared/data/clip-vit-l-14-tokenizer beside
 * (or above) the checkout; without them only the built-in copy is checked.
 * Expected ids: the first two were checked with transformers' CLIPTokenizer
 * (shared/data/.../README.md); the others were computed with OpenAI's
 * simple_tokenizer algorithm (tests/parity/clip_simple_tokenizer.py).
 * SDXL's two encoders read one prompt padded two ways: CLIP-L with the end token, bigG with 0
 * after the first end token (A1111, diffusers' tokenizer_2); both pool at that end token. */
#include "tokenizer.h"
#include "clip_text.h"
#include "clip_tokenizer_builtin.h"

#include <stdlib.h>
#include <string.h>

#include "io_test_util.h"
#include "sdt_test.h"

static char *find_tokenizer_dir(void)
{
    const char *env = getenv("SDT_CLIP_TOKENIZER_DIR");
    const char *up[] = {"..", "../..", "."};
    for (size_t i = 0; i < G_N_ELEMENTS(up); i++) {
        char *d = env && *env
                      ? g_strdup(env)
                      : g_build_filename(SDT_SOURCE_DIR, up[i], "shared", "data", "clip-vit-l-14-tokenizer", NULL);
        char *v = g_build_filename(d, "vocab.json", NULL);
        bool ok = g_file_test(v, G_FILE_TEST_EXISTS);
        g_free(v);
        if (ok) return d;
        g_free(d);
    }
    return NULL;
}

static void expect(sdt_tokenizer *t, const char *text, const int32_t *want, size_t n_want)
{
    int32_t ids[SDT_CLIP_CONTEXT];
    sdt_encode_report rep;
    sdt_error error = {0};
    sdt_encode_options o = sdt_encode_defaults();
    CHECK(sdt_tokenizer_encode(t, text, &o, ids, &rep, &error), "encode: %s", error.message);
    bool same = (size_t)rep.end_index + 1 == n_want && memcmp(ids, want, n_want * sizeof(int32_t)) == 0;
    GString *g = g_string_new(NULL);
    for (int i = 0; i <= rep.end_index; i++) g_string_append_printf(g, " %d", ids[i]);
    CHECK(same, "\"%s\" -> [%s ]", text, g->str);
    g_string_free(g, TRUE);
}
#define EXPECT(t, text, ...)                                                                                           \
    do {                                                                                                               \
        const int32_t w_[] = {__VA_ARGS__};                                                                            \
        expect(t, text, w_, sizeof(w_) / sizeof(w_[0]));                                                               \
    } while (0)

/* Known ids, a placeholder, and the 77-token window's report. */
static void check_known_ids(sdt_tokenizer *t, const char *which)
{
    sdt_error error = {0};
    printf("checking the %s tokenizer\n", which);
    {
        CHECK(sdt_tokenizer_vocab_size(t) == 49408 && sdt_tokenizer_bos(t) == 49406 && sdt_tokenizer_eos(t) == 49407,
              "vocab %d, start %d, end %d", sdt_tokenizer_vocab_size(t), sdt_tokenizer_bos(t), sdt_tokenizer_eos(t));
        EXPECT(t, "a photo of a cat", 49406, 320, 1125, 539, 320, 2368, 49407);
        EXPECT(t, "An astronaut riding a horse, 4k, trending on ArtStation!!", 49406, 550, 18376, 6765, 320, 4558, 267,
               275, 330, 267, 6087, 525, 1486, 2631, 748, 49407);
        EXPECT(t, "Don't stop\xe2\x80\x94it's 8K!!", 49406, 847, 713, 1691, 2005, 585, 568, 279, 330, 748, 49407);
        EXPECT(t,
               "caf\xc3\xa9 na\xc3\xafve Stra\xc3\x9f"
               "e",
               49406, 15304, 1097, 35689, 563, 1894, 127, 253, 324, 49407);
        EXPECT(t, "(masterpiece:1.2), 1girl &amp; 2 cats \xf0\x9f\x90\xb1", 49406, 263, 12066, 281, 272, 269, 273, 2361,
               272, 1611, 261, 273, 3989, 22979, 49407);
        EXPECT(t, "The QUICK   brown\tfox", 49406, 518, 3712, 2866, 3240, 49407);
        /* A placeholder takes the next id and is never split. */
        int32_t toy;
        CHECK(sdt_tokenizer_add_token(t, "<cat-toy>", -1, &toy, &error) && toy == 49408, "placeholder id %d", toy);
        EXPECT(t, "a photo of <cat-toy>", 49406, 320, 1125, 539, 49408, 49407);
        /* 80 words: 75 fit, 5 are reported cut. */
        GString *s = g_string_new(NULL);
        for (int i = 0; i < 80; i++) g_string_append(s, i == 78 ? "<cat-toy> " : "cat ");
        int32_t ids[SDT_CLIP_CONTEXT];
        sdt_encode_report rep;
        sdt_encode_options o = sdt_encode_defaults();
        o.watch_id = toy;
        sdt_tokenizer_encode(t, s->str, &o, ids, &rep, &error);
        CHECK(rep.n_text_tokens == 80 && rep.n_cut == 5 && rep.watch_cut && !rep.watch_kept && ids[76] == 49407 &&
                  ids[75] == 2368,
              "long prompt: %d tokens, %d cut, placeholder cut %d", rep.n_text_tokens, rep.n_cut, rep.watch_cut);
        g_string_free(s, TRUE);
    }
}

/* The first largest id: where OpenCLIP's pooling (text.argmax(dim=-1)) reads. */
static int argmax_position(const int32_t *ids, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (ids[i] > ids[best]) best = i;
    return best;
}

static void check_sdxl_padding(sdt_tokenizer *t)
{
    sdt_error error = {0};
    clip_config l = clip_config_sdxl_l(), g = clip_config_sdxl_g();
    int32_t eos = sdt_tokenizer_eos(t);
    CHECK(clip_pad_id(&l, eos) == eos && clip_pad_id(&g, eos) == 0, "SDXL padding: CLIP-L %d, bigG %d",
          clip_pad_id(&l, eos), clip_pad_id(&g, eos));
    CHECK(clip_pad_id(&(clip_config){.pad_zero = false}, eos) == eos,
          "a config without pad_zero pads with the end token");
    clip_config sd1 = clip_config_sd1(), sd2 = clip_config_sd2();
    CHECK(!sd1.pad_zero && sd2.pad_zero, "SD 1.x pads with the end token, SD 2.x (OpenCLIP ViT-H) with 0");

    int32_t ids_l[SDT_CLIP_CONTEXT], ids_g[SDT_CLIP_CONTEXT], repadded[SDT_CLIP_CONTEXT];
    sdt_encode_options o = sdt_encode_defaults();
    sdt_encode_report rep;
    o.pad_id = clip_pad_id(&l, eos);
    CHECK(sdt_tokenizer_encode(t, "a photo of a cat, wearing a red hat", &o, ids_l, &rep, &error), "%s", error.message);
    o.pad_id = clip_pad_id(&g, eos);
    CHECK(sdt_tokenizer_encode(t, "a photo of a cat, wearing a red hat", &o, ids_g, NULL, &error), "%s", error.message);
    int end = rep.end_index;
    bool same_text = true, l_pads_end = true, g_pads_zero = true;
    for (int i = 0; i <= end; i++) same_text &= ids_l[i] == ids_g[i];
    for (int i = end + 1; i < SDT_CLIP_CONTEXT; i++) l_pads_end &= ids_l[i] == eos, g_pads_zero &= ids_g[i] == 0;
    CHECK(same_text && ids_l[end] == eos, "both encoders read the same tokens up to the end token");
    CHECK(l_pads_end && g_pads_zero, "CLIP-L pads with the end token, bigG with 0 (after position %d)", end);
    memcpy(repadded, ids_l, sizeof repadded);
    sdt_tokens_pad_after_end(repadded, SDT_CLIP_CONTEXT, eos, clip_pad_id(&g, eos));
    CHECK(!memcmp(repadded, ids_g, sizeof repadded), "CLIP-L's chunk repadded for bigG differs from bigG's encoding");
    CHECK(argmax_position(ids_g, SDT_CLIP_CONTEXT) == end && argmax_position(ids_l, SDT_CLIP_CONTEXT) == end,
          "the pooled position (first largest id) is the end token %d in both paddings (bigG %d, CLIP-L %d)", end,
          argmax_position(ids_g, SDT_CLIP_CONTEXT), argmax_position(ids_l, SDT_CLIP_CONTEXT));
    /* A full chunk has nothing to pad; a chunk without an end token is left alone. */
    GString *longer = g_string_new(NULL);
    for (int i = 0; i < 90; i++) g_string_append(longer, "cat ");
    o.pad_id = clip_pad_id(&l, eos);
    CHECK(sdt_tokenizer_encode(t, longer->str, &o, ids_l, &rep, &error), "%s", error.message);
    memcpy(repadded, ids_l, sizeof repadded);
    sdt_tokens_pad_after_end(repadded, SDT_CLIP_CONTEXT, eos, 0);
    CHECK(rep.end_index == SDT_CLIP_CONTEXT - 1 && !memcmp(repadded, ids_l, sizeof repadded),
          "a full chunk changed when repadded");
    for (int i = 0; i < SDT_CLIP_CONTEXT; i++) repadded[i] = 7;
    sdt_tokens_pad_after_end(repadded, SDT_CLIP_CONTEXT, eos, 0);
    CHECK(repadded[0] == 7 && repadded[SDT_CLIP_CONTEXT - 1] == 7, "ids without an end token changed when repadded");
    g_string_free(longer, TRUE);
}

int main(void)
{
    sdt_error error = {0};
    sdt_tokenizer *builtin = sdt_tokenizer_load_builtin_clip(&error);
    CHECK(builtin != NULL, "built-in tokenizer: %s", error.message);
    if (builtin) check_known_ids(builtin, "built-in");
    if (builtin) check_sdxl_padding(builtin);
    const char *license = sdt_clip_tokenizer_license();
    CHECK(strstr(license, "MIT License") && strstr(license, "OpenAI"), "the built-in licence notice is missing");
    char *dir = find_tokenizer_dir();
    if (!dir) printf("test_tokenizer_clip: no reference tokenizer files (set SDT_CLIP_TOKENIZER_DIR); built-in only\n");
    if (dir) {
        sdt_tokenizer *t = sdt_tokenizer_load_dir(dir, &error);
        CHECK(t != NULL, "loading %s: %s", dir, error.message);
        if (t) check_known_ids(t, dir);
        /* The built-in copy is the same vocabulary: every id spells the same token. */
        for (int32_t id = 0; t && builtin && id < sdt_tokenizer_vocab_size(t); id++) {
            const char *a = sdt_tokenizer_token_text(t, id), *b = sdt_tokenizer_token_text(builtin, id);
            if (!a || !b || strcmp(a, b) != 0) {
                CHECK(false, "id %d: reference '%s', built-in '%s'", id, a ? a : "(none)", b ? b : "(none)");
                break;
            }
        }
        sdt_tokenizer_free(t);
    }
    sdt_tokenizer_free(builtin);
    g_free(dir);
    return sdt_test_finish("test_tokenizer_clip");
}
