/* test_embedding_file.c - embedding files: round trips in every format, A1111 cards, names, overwrite, atomic saves, fuzz. */
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_test_util.h"
#include "ti/embedding_file.h"
#include "ti/card_pixels.h"
#include "data/image_io.h"
#include "safetensors.h"
#include "sdt_test.h"
#include "torch_python.h"

static char *tmp_dir;

static char *tmp_path(const char *name)
{
    return g_build_filename(tmp_dir, name, NULL);
}

static void random_embedding(sdt_test_rng *rng, sdt_embedding *e, const char *name, int n, int dim)
{
    sdt_error error = {0};
    CHECK(sdt_embedding_init(e, name, n, dim, &error), "init: %s", error.message);
    sdt_test_fill_normal(rng, e->vectors, (int64_t)n * dim, 0.02);
    e->step = (int64_t)(sdt_test_next(rng) % 100000);
    sdt_embedding_set_string(&e->checkpoint_hash, "a1b2c3d4e5");
    sdt_embedding_set_string(&e->checkpoint_name, "v1-5-pruned-emaonly");
    sdt_embedding_set_string(&e->init_text, "a \"quoted\" caf\xc3\xa9 \xf0\x9f\x8e\xa8 text");
}

static bool str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

static void check_same(const sdt_embedding *a, const sdt_embedding *b, bool with_init_text, const char *what)
{
    CHECK(a->n_vectors == b->n_vectors && a->dim == b->dim && a->clip_l_dim == b->clip_l_dim,
          "%s: shape %dx%d/%d vs %dx%d/%d", what, a->n_vectors, a->dim, a->clip_l_dim, b->n_vectors, b->dim,
          b->clip_l_dim);
    if (a->n_vectors == b->n_vectors && a->dim == b->dim)
        CHECK(!memcmp(a->vectors, b->vectors, (size_t)a->n_vectors * a->dim * sizeof(float)),
              "%s: vectors are bitwise equal", what);
    CHECK(str_eq(a->name, b->name), "%s: name %s vs %s", what, a->name, b->name);
    CHECK(a->step == b->step, "%s: step %lld vs %lld", what, (long long)a->step, (long long)b->step);
    CHECK(str_eq(a->checkpoint_hash, b->checkpoint_hash) && str_eq(a->checkpoint_name, b->checkpoint_name),
          "%s: checkpoint", what);
    if (with_init_text) CHECK(str_eq(a->init_text, b->init_text), "%s: init text", what);
}

/* The PNG at path without its tEXt chunks (as an image host strips metadata); *removed counts them. */
static GByteArray *strip_text_chunks(const char *path, int *removed)
{
    gchar *data = NULL;
    gsize size = 0;
    CHECK(g_file_get_contents(path, &data, &size, NULL), "read %s", path);
    GByteArray *stripped = g_byte_array_new();
    g_byte_array_append(stripped, (const guint8 *)data, 8);
    *removed = 0;
    for (size_t pos = 8; data && pos + 12 <= size;) {
        const uint8_t *b = (const uint8_t *)data + pos;
        uint32_t n = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
        if (memcmp(b + 4, "tEXt", 4))
            g_byte_array_append(stripped, b, n + 12);
        else
            ++*removed;
        pos += (size_t)n + 12;
    }
    g_free(data);
    return stripped;
}

/* What the pixels alone give: the vectors, and for SD 1.x/2.x also the name, step and checkpoint
 * (an SDXL card's sit in a text chunk; without it the name is the file's stem). */
static void check_pixel_same(const sdt_embedding *want, const sdt_embedding *back, const char *path, const char *what)
{
    if (!want->clip_l_dim) {
        check_same(want, back, false, what);
        return;
    }
    sdt_embedding vectors_only = *want;
    char *stem = sdt_path_stem(path);
    vectors_only.name = stem;
    vectors_only.step = 0;
    vectors_only.checkpoint_hash = vectors_only.checkpoint_name = NULL;
    check_same(&vectors_only, back, false, what);
    free(stem);
}

/* The card with its text chunks removed still loads from its pixels. */
static void check_pixel_copy(const char *path, const sdt_embedding *want, const char *what)
{
    int removed;
    GByteArray *stripped = strip_text_chunks(path, &removed);
    CHECK(removed == (want->clip_l_dim ? 2 : 1), "%s: %d tEXt chunks (A1111's, and sdtrain's info for SDXL)", what,
          removed);
    sdt_embedding back;
    sdt_error error = {0};
    bool ok = sdt_embedding_png_card_decode(stripped->data, stripped->len, path, &back, &error);
    CHECK(ok, "%s: loads from the pixels alone: %s", what, error.message);
    if (ok) {
        check_pixel_same(want, &back, path, what);
        CHECK(back.from_card_pixels && !back.load_note, "%s: the pixel copy is reported, with no damage note", what);
        sdt_embedding_free(&back);
    }
    /* a damaged text chunk (bad JSON, valid CRC) falls back to the pixel copy */
    GByteArray *broken = g_byte_array_new();
    g_byte_array_append(broken, stripped->data, stripped->len - 12); /* without IEND */
    const char bad_text[] = SDT_PNG_CARD_KEYWORD "\0e3t7ZGFtYWdlZA==";
    png_chunk(broken, "tEXt", bad_text, sizeof(bad_text) - 1);
    png_end(broken);
    ok = sdt_embedding_png_card_decode(broken->data, broken->len, path, &back, &error);
    CHECK(ok, "%s: damaged text chunk, pixels used: %s", what, error.message);
    if (ok) {
        check_pixel_same(want, &back, path, what);
        CHECK(back.from_card_pixels && back.load_note && strstr(back.load_note, "damaged") &&
                  strstr(back.load_note, "copy hidden in the pixels was used"),
              "%s: the note says the text chunk is damaged and which copy was used: %s", what,
              back.load_note ? back.load_note : "(none)");
        sdt_embedding_free(&back);
    }
    g_byte_array_unref(broken);
    /* an ordinary picture has no hidden data */
    GByteArray *plain = png_solid(16, 16, 90, 90, 90);
    png_end(plain);
    CHECK(!sdt_embedding_png_card_decode(plain->data, plain->len, "p.png", &back, &error) &&
              strstr(error.message, "no embedding hidden"),
          "plain picture: %s", error.message);
    g_byte_array_unref(plain);
    g_byte_array_unref(stripped);
}

static void test_keystream(void)
{
    /* A1111's reference list (image_embedding.py test code) starts 253, 242, 127, 44. */
    uint8_t k[4];
    sdt_card_keystream(k, 4);
    CHECK(k[0] == 253 && k[1] == 242 && k[2] == 127 && k[3] == 44, "keystream %u %u %u %u", k[0], k[1], k[2], k[3]);
}

static void test_pixels_with_black_border(sdt_test_rng *rng)
{
    /* The hidden copy is found after black borders are added around the card (crop_black). */
    const char *json = "{\"string_to_param\": {\"*\": {\"TORCHTENSOR\": [[0.25, -1.5, 3.0]]}}, \"name\": \"b\"}";
    float style[3] = {0.25f, -1.5f, 3.0f};
    enum { W = 20, H = 16 };
    uint8_t pic[W * H * 3];
    for (size_t i = 0; i < sizeof(pic); i++) pic[i] = (uint8_t)(sdt_test_next(rng) & 0xff);
    uint8_t *card = NULL;
    int cw = 0;
    sdt_error error = {0};
    CHECK(sdt_card_pixels_compose(json, style, 3, pic, W, H, &card, &cw, &error), "compose: %s", error.message);
    if (!card) return;
    int top = 3, left = 5, BW = cw + left + 2, BH = H + top + 4;
    uint8_t *big = calloc((size_t)BW * BH * 3, 1);
    for (int y = 0; y < H; y++)
        memcpy(big + ((size_t)(y + top) * BW + left) * 3, card + (size_t)y * cw * 3, (size_t)cw * 3);
    size_t len = 0;
    char *got = sdt_card_pixels_extract(big, BW, BH, &len, &error);
    CHECK(got && len == strlen(json) && !strcmp(got, json), "extracted after cropping: %s", got ? got : error.message);
    free(got);
    memset(big, 0, (size_t)BW * BH * 3);
    CHECK(!sdt_card_pixels_extract(big, BW, BH, &len, &error) && error.message[0], "all black: nothing");
    free(big);
    free(card);
}

static void test_round_trips(sdt_test_rng *rng)
{
    sdt_error error = {0};
    sdt_embedding e, sdxl, back;
    random_embedding(rng, &e, "my style-2.v1", 1 + (int)(sdt_test_next(rng) % 8), 768);
    random_embedding(rng, &sdxl, "xl-thing", 2, 2048);
    sdxl.clip_l_dim = 768;

    char *st = tmp_path("e.safetensors"), *card = tmp_path("e.png"), *st_xl = tmp_path("xl.safetensors"),
         *card_xl = tmp_path("xl.png");
    CHECK(sdt_embedding_save_safetensors(&e, st, false, &error), "save st: %s", error.message);
    CHECK(sdt_embedding_load_safetensors(st, &back, &error), "load st: %s", error.message);
    check_same(&e, &back, true, "safetensors");
    sdt_embedding_free(&back);

    /* The file really holds emb_params [N, dim] F32 and the metadata strings. */
    sdt_safetensors *f = sdt_st_open(st, &error);
    const sdt_st_entry *t = f ? sdt_st_find(f, "emb_params") : NULL;
    CHECK(t && t->dtype == SDT_ST_F32 && t->ndim == 2 && t->shape[0] == e.n_vectors && t->shape[1] == 768,
          "emb_params [N, 768] F32");
    CHECK(f && sdt_st_metadata_get(f, "name") && !strcmp(sdt_st_metadata_get(f, "name"), e.name), "metadata name");
    CHECK(f && sdt_st_metadata_get(f, "sd_checkpoint") && sdt_st_metadata_get(f, "vectors_per_token"),
          "metadata checkpoint, vectors");
    if (f) sdt_st_close(f);

    CHECK(sdt_embedding_save_safetensors(&sdxl, st_xl, false, &error), "save xl: %s", error.message);
    f = sdt_st_open(st_xl, &error);
    CHECK(f && sdt_st_find(f, "clip_l") && sdt_st_find(f, "clip_g") && sdt_st_find(f, "clip_l")->shape[1] == 768 &&
              sdt_st_find(f, "clip_g")->shape[1] == 1280,
          "SDXL file has clip_l [N,768] and clip_g [N,1280]");
    if (f) sdt_st_close(f);
    CHECK(sdt_embedding_load_safetensors(st_xl, &back, &error), "load xl: %s", error.message);
    check_same(&sdxl, &back, true, "sdxl safetensors");
    sdt_embedding_free(&back);

    CHECK(sdt_embedding_save_png_card(&e, card, NULL, 0, 0, false, &error), "save card: %s", error.message);
    CHECK(sdt_embedding_load_png_card(card, &back, &error), "load card: %s", error.message);
    check_same(&e, &back, false, "png card");
    sdt_embedding_free(&back);
    sdt_image_header h;
    CHECK(sdt_image_probe(card, &h, &error) && h.width > 258 && h.height == 256,
          "the card is the 256x256 picture with the hidden blocks beside it (%dx%d)", h.width, h.height);
    check_pixel_copy(card, &e, "card");

    uint8_t picture[40 * 24 * 3];
    for (size_t i = 0; i < sizeof(picture); i++) picture[i] = (uint8_t)i;
    CHECK(sdt_embedding_save_png_card(&sdxl, card_xl, picture, 40, 24, false, &error), "save xl card: %s",
          error.message);
    sdt_embedding_format fmt;
    CHECK(sdt_embedding_load(card_xl, &back, &fmt, &error) && fmt == SDT_EMBEDDING_FORMAT_PNG_CARD,
          "load xl card by content: %s", error.message);
    check_same(&sdxl, &back, false, "sdxl png card");
    sdt_embedding_free(&back);
    CHECK(sdt_image_probe(card_xl, &h, &error) && h.width > 42 && h.height == 24, "caller's picture used");
    check_pixel_copy(card_xl, &sdxl, "sdxl card");

    CHECK(sdt_embedding_load(st, &back, &fmt, &error) && fmt == SDT_EMBEDDING_FORMAT_SAFETENSORS, "load st by content");
    sdt_embedding_free(&back);

    char *pt = tmp_path("old.pt");
    g_file_set_contents(pt, "PK\x03\x04 torch zip archive", -1, NULL);
    CHECK(!sdt_embedding_load(pt, &back, &fmt, &error) && strstr(error.message, pt) && strstr(error.message, "damaged"),
          "a damaged .pt refused clearly: %s", error.message); /* readable ones: test_embedding_torch.c */
    g_free(pt);

    /* inspect */
    char *json = sdt_embedding_inspect_file(st, &error);
    cJSON *j;
    j = json ? cJSON_Parse(json) : NULL;
    CHECK(j && cJSON_GetObjectItem(j, "vectors")->valueint == e.n_vectors &&
              cJSON_GetObjectItem(j, "dim")->valueint == 768 && cJSON_IsTrue(cJSON_GetObjectItem(j, "finite")) &&
              cJSON_GetArraySize(cJSON_GetObjectItem(j, "norms")) == e.n_vectors &&
              !strcmp(cJSON_GetObjectItem(j, "format")->valuestring, "safetensors"),
          "inspect JSON: %s", json ? json : error.message);
    cJSON_Delete(j);
    free(json);
    e.vectors[0] = NAN;
    json = sdt_embedding_describe_json(&e, SDT_EMBEDDING_FORMAT_SAFETENSORS, NULL);
    j = json ? cJSON_Parse(json) : NULL;
    CHECK(j && cJSON_IsFalse(cJSON_GetObjectItem(j, "finite")), "inspect reports non-finite values");
    cJSON_Delete(j);
    free(json);
    e.vectors[0] = 0;
    CHECK(sdt_embedding_inspect_file("/nonexistent/x.png", &error) == NULL && strstr(error.message, "x.png"),
          "inspect of a missing file: %s", error.message);

    sdt_embedding_free(&e);
    sdt_embedding_free(&sdxl);
    g_free(st);
    g_free(card);
    g_free(st_xl);
    g_free(card_xl);
}

static void test_foreign_safetensors(sdt_test_rng *rng)
{
    sdt_error error = {0};
    /* diffusers style: one key named after the token, F16, 1-D */
    uint16_t half[768];
    float want[768];
    for (int i = 0; i < 768; i++) {
        int k = (int)(sdt_test_next(rng) % 129) - 64; /* k/64 is exact in f16 */
        want[i] = (float)k / 64.0f;
        float v = want[i];
        sdt_store_f32(&v, &half[i], SDT_F16, 1);
    }
    int64_t shape1[1] = {768};
    sdt_st_write_item item = {"<cat-toy>", SDT_ST_F16, 1, shape1, half};
    char *p = tmp_path("learned_embeds.safetensors");
    CHECK(sdt_st_write(p, &item, 1, NULL, 0, &error), "write: %s", error.message);
    sdt_embedding e;
    CHECK(sdt_embedding_load_safetensors(p, &e, &error), "single key F16 loads: %s", error.message);
    CHECK(e.n_vectors == 1 && e.dim == 768 && !memcmp(e.vectors, want, sizeof(want)), "1-D F16 -> [1, 768] exact");
    CHECK(e.name && !strcmp(e.name, "learned_embeds"), "name from the file stem: %s", e.name);
    sdt_embedding_free(&e);
    g_free(p);

    /* two unrelated keys: a clear refusal */
    float a[4] = {0}, b[4] = {0};
    int64_t shape2[2] = {1, 4};
    sdt_st_write_item two[2] = {{"x", SDT_ST_F32, 2, shape2, a}, {"y", SDT_ST_F32, 2, shape2, b}};
    p = tmp_path("model.safetensors");
    CHECK(sdt_st_write(p, two, 2, NULL, 0, &error), "write two");
    CHECK(!sdt_embedding_load_safetensors(p, &e, &error) && strstr(error.message, "emb_params") &&
              strstr(error.message, "2"),
          "several keys refused: %s", error.message);
    g_free(p);
}

/* An A1111 card built by hand: the JSON exactly as Python's json.dumps writes it. */
static GByteArray *a1111_card(const char *json, const char *chunk_type)
{
    gchar *b64 = g_base64_encode((const guchar *)json, strlen(json));
    GByteArray *png = png_solid(8, 8, 10, 20, 30);
    GByteArray *chunk = g_byte_array_new();
    g_byte_array_append(chunk, (const guint8 *)SDT_PNG_CARD_KEYWORD, sizeof(SDT_PNG_CARD_KEYWORD)); /* with NUL */
    if (!strcmp(chunk_type, "tEXt")) {
        g_byte_array_append(chunk, (const guint8 *)b64, (guint)strlen(b64));
    } else {
        if (!strcmp(chunk_type, "zTXt"))
            g_byte_array_append(chunk, (const guint8 *)"\0", 1);
        else
            g_byte_array_append(chunk, (const guint8 *)"\1\0en\0\0", 6); /* iTXt compressed, lang "en" */
        uLongf zlen = compressBound(strlen(b64));
        uint8_t *z = g_malloc(zlen);
        compress(z, &zlen, (const Bytef *)b64, strlen(b64));
        g_byte_array_append(chunk, z, (guint)zlen);
        g_free(z);
    }
    png_chunk(png, chunk_type, chunk->data, chunk->len); /* after IDAT, as PIL may place it */
    png_end(png);
    g_byte_array_unref(chunk);
    g_free(b64);
    return png;
}

static void test_a1111_cards(void)
{
    const char *json =
        "{\"string_to_token\": {\"*\": 265}, \"string_to_param\": {\"*\": {\"TORCHTENSOR\": "
        "[[0.10000000149011612, 1.0, 100.0, 9.999999747378752e-06, 1.0000000272564224e+16, -0.0, 0.5, 123456.0, "
        "0.0003000000142492354]]}}, \"name\": \"rick\", \"step\": 60, \"sd_checkpoint\": \"a9e8d7c6b5\", "
        "\"sd_checkpoint_name\": \"caf\\u00e9 \\ud83c\\udfa8\"}";
    const float values[9] = {0.1f, 1.0f, 100.0f, 1e-5f, 1e16f, -0.0f, 0.5f, 123456.0f, 3e-4f};
    const char *types[] = {"tEXt", "zTXt", "iTXt"};
    sdt_error error = {0};
    for (int i = 0; i < 3; i++) {
        GByteArray *png = a1111_card(json, types[i]);
        sdt_embedding e;
        bool ok = sdt_embedding_png_card_decode(png->data, png->len, "rick.png", &e, &error);
        CHECK(ok, "%s card decodes: %s", types[i], error.message);
        if (ok) {
            CHECK(e.n_vectors == 1 && e.dim == 9 && !memcmp(e.vectors, values, sizeof(values)), "%s: values exact",
                  types[i]);
            CHECK(!strcmp(e.name, "rick") && e.step == 60 && !strcmp(e.checkpoint_hash, "a9e8d7c6b5") &&
                      !strcmp(e.checkpoint_name, "caf\xc3\xa9 \xf0\x9f\x8e\xa8"),
                  "%s: metadata (name %s, step %lld, %s)", types[i], e.name, (long long)e.step, e.checkpoint_name);
            /* Our writer produces exactly A1111's JSON for the same data. */
            char *ours = sdt_embedding_a1111_json(&e);
            CHECK(ours && !strcmp(ours, json), "writer matches json.dumps:\n ours %s\n want %s", ours, json);
            free(ours);
            sdt_embedding_free(&e);
        }
        g_byte_array_unref(png);
    }
    /* A plain PNG, a damaged CRC, and several terms are explained. */
    GByteArray *plain = png_solid(4, 4, 0, 0, 0);
    png_end(plain);
    sdt_embedding e;
    CHECK(!sdt_embedding_png_card_decode(plain->data, plain->len, "plain.png", &e, &error) &&
              strstr(error.message, SDT_PNG_CARD_KEYWORD),
          "plain PNG: %s", error.message);
    plain->data[20] ^= 1;
    CHECK(!sdt_embedding_png_card_decode(plain->data, plain->len, "plain.png", &e, &error) &&
              strstr(error.message, "CRC"),
          "CRC: %s", error.message);
    g_byte_array_unref(plain);
    GByteArray *two = a1111_card("{\"string_to_param\": {\"*\": {\"TORCHTENSOR\": [1.0]}, \"+\": "
                                 "{\"TORCHTENSOR\": [2.0]}}}",
                                 "tEXt");
    CHECK(!sdt_embedding_png_card_decode(two->data, two->len, "two.png", &e, &error) &&
              strstr(error.message, "2 terms"),
          "two terms: %s", error.message);
    g_byte_array_unref(two);
    GByteArray *one_d = a1111_card("{\"string_to_param\": {\"*\": {\"TORCHTENSOR\": [1.5, 2.5]}}}", "tEXt");
    CHECK(sdt_embedding_png_card_decode(one_d->data, one_d->len, "dir/one-d.png", &e, &error) && e.n_vectors == 1 &&
              e.dim == 2 && e.vectors[1] == 2.5f && !strcmp(e.name, "one-d") && e.step == 0,
          "1-D tensor, name from the file: %s", error.message);
    sdt_embedding_free(&e);
    g_byte_array_unref(one_d);
    GByteArray *bad_json = a1111_card("{\"string_to_param\": {\"*\": {\"TORCHTENSOR\": [[1.0, \"x\"]]}}}", "tEXt");
    CHECK(!sdt_embedding_png_card_decode(bad_json->data, bad_json->len, "bad.png", &e, &error) &&
              strstr(error.message, "not a number"),
          "a damaged card without a pixel copy reports the text error: %s", error.message);
    g_byte_array_unref(bad_json);
    /* Corrupt base64 is reported as such, not as JSON it never got to be. */
    const char *bad_base64[] = {"e3t9@@@@", "e3t9e3t", "e3=9"};
    for (int i = 0; i < 3; i++) {
        GByteArray *card = png_solid(4, 4, 0, 0, 0);
        char chunk[64];
        int n = snprintf(chunk, sizeof chunk, "%s%c%s", SDT_PNG_CARD_KEYWORD, 0, bad_base64[i]);
        png_chunk(card, "tEXt", chunk, (size_t)n);
        png_end(card);
        CHECK(!sdt_embedding_png_card_decode(card->data, card->len, "b64.png", &e, &error) &&
                  strstr(error.message, "not valid base64") && !strstr(error.message, "JSON"),
              "'%s': %s", bad_base64[i], error.message);
        g_byte_array_unref(card);
    }
}

/* One card as A1111 1.10 and Forge load it (a1111_card_loader.py): no error, the tensors by key with
 * their shapes, each value the float32 vector's. want_name: the name the host gives it. */
static void check_host_loaded(const cJSON *line, const sdt_embedding *want, const char *want_name, const char *what)
{
    const cJSON *err = cJSON_GetObjectItem(line, "error");
    CHECK(!err, "%s: A1111/Forge's loader fails: %s", what, cJSON_IsString(err) ? err->valuestring : "");
    if (err) return;
    const cJSON *name = cJSON_GetObjectItem(line, "name"), *tensors = cJSON_GetObjectItem(line, "tensors");
    CHECK(cJSON_IsString(name) && !strcmp(name->valuestring, want_name), "%s: the host names it %s, expected %s", what,
          cJSON_IsString(name) ? name->valuestring : "?", want_name);
    CHECK(cJSON_GetObjectItem(line, "vectors")->valueint == want->n_vectors &&
              cJSON_GetObjectItem(line, "shape")->valueint == want->dim,
          "%s: %d vectors of %d values", what, cJSON_GetObjectItem(line, "vectors")->valueint,
          cJSON_GetObjectItem(line, "shape")->valueint);
    typedef struct {
        const char *key;
        int c0, c1;
    } columns;
    columns parts[2] = {{"vec", 0, want->dim}, {NULL, 0, 0}};
    if (want->clip_l_dim) { /* A1111's SDXL dict: exactly clip_l and clip_g */
        parts[0] = (columns){"clip_l", 0, want->clip_l_dim};
        parts[1] = (columns){"clip_g", want->clip_l_dim, want->dim};
    }
    CHECK(cJSON_GetArraySize(tensors) == (want->clip_l_dim ? 2 : 1), "%s: %d tensors", what,
          cJSON_GetArraySize(tensors));
    for (int k = 0; k < 2 && parts[k].key; k++) {
        const cJSON *t = cJSON_GetObjectItem(tensors, parts[k].key);
        const cJSON *shape = t ? cJSON_GetObjectItem(t, "shape") : NULL,
                    *values = t ? cJSON_GetObjectItem(t, "values") : NULL;
        int cols = parts[k].c1 - parts[k].c0;
        CHECK(shape && cJSON_GetArraySize(shape) == 2 && cJSON_GetArrayItem(shape, 0)->valueint == want->n_vectors &&
                  cJSON_GetArrayItem(shape, 1)->valueint == cols,
              "%s: %s is [%d, %d]", what, parts[k].key, want->n_vectors, cols);
        if (!values || cJSON_GetArraySize(values) != want->n_vectors * cols) continue;
        int bad = 0;
        const cJSON *v = values->child;
        for (int r = 0; r < want->n_vectors; r++)
            for (int c = parts[k].c0; c < parts[k].c1; c++, v = v->next)
                bad += (float)v->valuedouble != want->vectors[(size_t)r * want->dim + c];
        CHECK(bad == 0, "%s: %d values of %s differ from the embedding's", what, bad, parts[k].key);
    }
}

/* Cards loaded by A1111 1.10's and Forge's own logic: from the text chunk, and from the pixels once
 * the text chunks are gone. An SDXL card must be {clip_l, clip_g} alone (issue 29). */
static void test_cards_in_a1111(sdt_test_rng *rng)
{
    if (!tp_torch_available()) {
        printf("  %s has no torch (apt-get install python3-torch): cards not loaded as A1111 does\n", TP_PYTHON);
        return;
    }
    sdt_error error = {0};
    sdt_embedding sd, xl;
    random_embedding(rng, &sd, "sd-card", 2, 768);
    random_embedding(rng, &xl, "xl-card", 2, 2048);
    xl.clip_l_dim = 768;
    uint8_t picture[16 * 12 * 3];
    for (size_t i = 0; i < sizeof(picture); i++) picture[i] = (uint8_t)(i * 7);
    char *sd_card = tmp_path("sd-card-7.png"), *xl_card = tmp_path("xl-card-7.png"),
         *xl_stripped = tmp_path("xl-stripped.png"), *old_xl = tmp_path("old-xl.png");
    CHECK(sdt_embedding_save_png_card(&sd, sd_card, picture, 16, 12, false, &error), "save: %s", error.message);
    CHECK(sdt_embedding_save_png_card(&xl, xl_card, picture, 16, 12, false, &error), "save xl: %s", error.message);
    int removed;
    GByteArray *stripped = strip_text_chunks(xl_card, &removed);
    CHECK(g_file_set_contents(xl_stripped, (const gchar *)stripped->data, stripped->len, NULL), "write stripped");
    g_byte_array_unref(stripped);
    /* The card sdtrain wrote before issue 29: the pair inside string_to_param, with a name beside it. */
    GByteArray *old =
        a1111_card("{\"string_to_token\": {\"*\": 265}, \"string_to_param\": {\"*\": {\"clip_l\": "
                   "{\"TORCHTENSOR\": [[0.5, 1.0]]}, \"clip_g\": {\"TORCHTENSOR\": [[2.0, 3.0, 4.0]]}}}, "
                   "\"name\": \"old-xl\", \"step\": 12, \"sd_checkpoint\": null, \"sd_checkpoint_name\": null}",
                   "tEXt");
    CHECK(g_file_set_contents(old_xl, (const gchar *)old->data, old->len, NULL), "write old card");
    g_byte_array_unref(old);

    char *args[] = {sd_card, xl_card, xl_stripped, old_xl, NULL};
    int status;
    char *out = tp_run_script(SDT_SOURCE_DIR, "tests/ti/a1111_card_loader.py", args, &status);
    CHECK(status == 0 && out, "a1111_card_loader.py failed");
    gchar **lines = out ? g_strsplit(out, "\n", -1) : NULL;
    cJSON *got[4] = {0};
    for (int i = 0; i < 4 && lines && lines[i]; i++) got[i] = cJSON_Parse(lines[i]);
    if (got[0] && got[1] && got[2] && got[3]) {
        check_host_loaded(got[0], &sd, "sd-card", "SD card");
        check_host_loaded(got[1], &xl, "xl-card-7", "SDXL card (text chunk)"); /* no name in the data: the stem */
        check_host_loaded(got[2], &xl, "xl-stripped", "SDXL card (pixels)");
        const cJSON *err = cJSON_GetObjectItem(got[3], "error");
        CHECK(
            cJSON_IsString(err) && strstr(err->valuestring, "detach"),
            "the emulated loader refuses the old SDXL card as the hosts do ('dict' object has no attribute 'detach')");
    } else {
        CHECK(false, "a1111_card_loader.py printed %s", out ? out : "nothing");
    }
    /* sdtrain still reads its old SDXL cards, and the new ones with their name and step. */
    sdt_embedding back;
    CHECK(sdt_embedding_load_png_card(old_xl, &back, &error) && back.clip_l_dim == 2 && back.dim == 5 &&
              back.vectors[4] == 4.0f && !strcmp(back.name, "old-xl") && back.step == 12,
          "an old SDXL card still loads: %s", error.message);
    sdt_embedding_free(&back);
    CHECK(sdt_embedding_load_png_card(xl_card, &back, &error), "load xl card: %s", error.message);
    if (back.vectors) {
        check_same(&xl, &back, false, "new SDXL card, name and step from sdtrain's chunk");
        sdt_embedding_free(&back);
    }
    for (int i = 0; i < 4; i++) cJSON_Delete(got[i]);
    g_strfreev(lines);
    g_free(out);
    sdt_embedding_free(&sd);
    sdt_embedding_free(&xl);
    g_free(sd_card);
    g_free(xl_card);
    g_free(xl_stripped);
    g_free(old_xl);
}

static void test_names_and_saves(sdt_test_rng *rng)
{
    sdt_error error = {0};
    const char *refused[] = {"", "../evil", "a/b", "a\\b", "tab\there", "nl\n", ".hidden", "col:on", "x\x7f"};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        error.message[0] = 0;
        CHECK(!sdt_embedding_name_check(refused[i], &error) && strlen(error.message) > 20, "name #%zu refused: %s", i,
              error.message);
    }
    const char *accepted[] = {"my-style", "My Style 2.v1", "caf\xc3\xa9_x", "123"};
    for (size_t i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++)
        CHECK(sdt_embedding_name_check(accepted[i], &error), "\"%s\" accepted: %s", accepted[i], error.message);
    char *s = sdt_embedding_name_sanitise("../ev:il/\x01name");
    CHECK(s && !strcmp(s, "evilname"), "A1111 sanitising: \"%s\"", s);
    free(s);
    sdt_embedding e;
    CHECK(!sdt_embedding_init(&e, "ok", 0, 768, &error) && !sdt_embedding_init(&e, "ok", 76, 768, &error),
          "vectors per token limited to 1..75");

    /* overwrite protection, NaN refusal: the old file stays */
    random_embedding(rng, &e, "keep", 2, 16);
    char *p = tmp_path("keep.safetensors"), *card = tmp_path("keep.png");
    CHECK(sdt_embedding_save_safetensors(&e, p, false, &error), "first save");
    CHECK(!sdt_embedding_save_safetensors(&e, p, false, &error) && strstr(error.message, "already exists"),
          "no overwrite: %s", error.message);
    float first = e.vectors[0];
    e.vectors[0] = first + 1;
    CHECK(sdt_embedding_save_safetensors(&e, p, true, &error), "overwrite allowed: %s", error.message);
    e.vectors[1] = NAN;
    CHECK(!sdt_embedding_save_safetensors(&e, p, true, &error) && strstr(error.message, "NaN"), "NaN refused: %s",
          error.message);
    CHECK(!sdt_embedding_save_png_card(&e, card, NULL, 0, 0, true, &error) && access(card, F_OK) != 0,
          "NaN card refused");
    sdt_embedding back;
    CHECK(sdt_embedding_load_safetensors(p, &back, &error) && back.vectors[0] == first + 1 && isfinite(back.vectors[1]),
          "the last good file is intact");
    sdt_embedding_free(&back);
    e.vectors[1] = 0;

    /* read-only folder: the save fails and the old file is untouched */
    char *ro = tmp_path("ro");
    g_mkdir(ro, 0755);
    char *in_ro = g_build_filename(ro, "e.safetensors", NULL), *card_ro = g_build_filename(ro, "e.png", NULL);
    CHECK(sdt_embedding_save_safetensors(&e, in_ro, false, &error), "save in folder");
    CHECK(sdt_embedding_save_png_card(&e, card_ro, NULL, 0, 0, false, &error), "card in folder");
    chmod(ro, 0555);
    if (access(ro, W_OK) == 0) {
        printf("embedding_file: running as root, chmod cannot make a folder read-only; read-only case skipped\n");
    } else {
        e.vectors[0] += 5;
        CHECK(!sdt_embedding_save_safetensors(&e, in_ro, true, &error) && strstr(error.message, "e.safetensors"),
              "read-only folder refused: %s", error.message);
        CHECK(!sdt_embedding_save_png_card(&e, card_ro, NULL, 0, 0, true, &error), "card refused");
        CHECK(sdt_embedding_load_safetensors(in_ro, &back, &error) && back.vectors[0] == e.vectors[0] - 5,
              "old file intact");
        sdt_embedding_free(&back);
        CHECK(sdt_embedding_load_png_card(card_ro, &back, &error), "old card intact");
        sdt_embedding_free(&back);
        GDir *d = g_dir_open(ro, 0, NULL);
        int files = 0;
        while (d && g_dir_read_name(d)) files++;
        if (d) g_dir_close(d);
        CHECK(files == 2, "no temp files left (%d entries)", files);
    }
    chmod(ro, 0755);
    sdt_embedding_free(&e);
    g_free(p);
    g_free(card);
    g_free(ro);
    g_free(in_ro);
    g_free(card_ro);
}

static void test_fuzz_card_reader(sdt_test_rng *rng)
{
    sdt_error error = {0};
    sdt_embedding e;
    /* random bytes, with and without the PNG signature */
    for (int i = 0; i < 3000; i++) {
        uint8_t buf[256];
        size_t n = sdt_test_next(rng) % sizeof(buf);
        for (size_t k = 0; k < n; k++) buf[k] = (uint8_t)sdt_test_next(rng);
        if (i % 2 && n >= 8) memcpy(buf, "\x89PNG\r\n\x1a\n", 8);
        if (sdt_embedding_png_card_decode(buf, n, "r.png", &e, &error)) sdt_embedding_free(&e);
    }
    /* mutated JSON payloads in well-formed cards (reach the JSON reader) */
    const char *base = "{\"string_to_param\": {\"*\": {\"TORCHTENSOR\": [[1.0, 2.0], [3.0, 4.0]]}}, \"name\": \"n\", "
                       "\"step\": 3, \"sd_checkpoint\": null}";
    const char pool[] = "{}[],:\"0123456789.-eE TORCHTENSORclip_lg";
    for (int i = 0; i < 1500; i++) {
        char json[256];
        snprintf(json, sizeof(json), "%s", base);
        size_t n = strlen(json);
        int edits = 1 + (int)(sdt_test_next(rng) % 4);
        for (int k = 0; k < edits; k++) json[sdt_test_next(rng) % n] = pool[sdt_test_next(rng) % (sizeof(pool) - 1)];
        if (sdt_test_next(rng) % 4 == 0) json[sdt_test_next(rng) % n] = 0;
        GByteArray *card = a1111_card(json, i % 3 ? "tEXt" : "zTXt");
        if (sdt_embedding_png_card_decode(card->data, card->len, "m.png", &e, &error)) {
            CHECK(e.n_vectors >= 1 && e.dim >= 1 && e.vectors, "accepted card has vectors");
            sdt_embedding_free(&e);
        } else {
            CHECK(error.message[0], "refusal has a message");
        }
        /* truncations of a valid card */
        size_t cut = sdt_test_next(rng) % card->len;
        if (sdt_embedding_png_card_decode(card->data, cut, "t.png", &e, &error)) sdt_embedding_free(&e);
        g_byte_array_unref(card);
    }
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("embedding_file");
    tmp_dir = g_dir_make_tmp("sdt-emb-XXXXXX", NULL);
    test_keystream();
    test_pixels_with_black_border(&rng);
    test_round_trips(&rng);
    test_foreign_safetensors(&rng);
    test_a1111_cards();
    test_cards_in_a1111(&rng);
    test_names_and_saves(&rng);
    test_fuzz_card_reader(&rng);
    test_rmtree(tmp_dir);
    g_free(tmp_dir);
    return sdt_test_finish("embedding_file");
}
