/* test_make_tokenizer.c - sdt-make-tokenizer's files are a valid CLIP vocabulary:
 * vocab.json parses, ids are contiguous and ordered as CLIP's (byte symbols,
 * byte symbols with </w>, merges, start, end), merges.txt matches it, the
 * tokenizer (models/tokenizer/tokenizer.c) loads them, frequent training words become one
 * token, text round-trips, output is deterministic, bad arguments are refused.
 * The corpus is fresh random words (seed printed); the built-in corpus and the
 * build's demo tokenizer are checked too. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "clip_bpe_rules.h"
#include "clip_text.h"
#include "demo_test_util.h"
#include "io_test_util.h"
#include "sdt_test.h"
#include "tokenizer.h"

#define BASE 512

/* ---- a random corpus --------------------------------------------------------------- */

typedef struct corpus {
    char *words[64];
    int freq[64];
    int n;
    char *text;
} corpus;

static char *random_word(sdt_test_rng *r, const char *letters, int len)
{
    char *w = g_malloc(len + 1);
    for (int i = 0; i < len; i++) w[i] = letters[sdt_test_next(r) % strlen(letters)];
    w[len] = 0;
    return w;
}

/* Word 0 is by far the most frequent and uses letters no other word has, so no
 * other word's merges can get in the way of it becoming one token. */
static corpus make_corpus(sdt_test_rng *r)
{
    corpus c = {.n = 40};
    const char *exclusive = "qxzjkv";
    char top[7];
    char pool[7];
    snprintf(pool, sizeof pool, "%s", exclusive);
    for (int i = 0; i < 6; i++) { /* distinct letters: a random permutation */
        int j = i + (int)(sdt_test_next(r) % (uint64_t)(6 - i));
        char t = pool[i];
        pool[i] = pool[j];
        pool[j] = t;
        top[i] = pool[i];
    }
    top[6] = 0;
    c.words[0] = g_strdup(top);
    c.freq[0] = 300;
    for (int i = 1; i < c.n; i++) {
        c.words[i] = random_word(r, "abcdefghilmnoprstuwy", 3 + (int)(sdt_test_next(r) % 7));
        c.freq[i] = 1 + (int)(sdt_test_next(r) % 20);
    }
    GString *s = g_string_new(NULL);
    for (int round = 0; round < 300; round++)
        for (int i = 0; i < c.n; i++)
            if (c.freq[i] > round) g_string_append_printf(s, "%s%s", c.words[i], round % 7 == 3 ? ",\n" : " ");
    c.text = g_string_free(s, FALSE);
    return c;
}

static void free_corpus(corpus *c)
{
    for (int i = 0; i < c->n; i++) g_free(c->words[i]);
    g_free(c->text);
}

/* ---- file checks ------------------------------------------------------------------- */

/* id -> token of vocab.json (NULL where missing); NULL when it does not parse. */
static char **read_vocab(const char *path, int *n_out)
{
    char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL)) return NULL;
    cJSON *root = cJSON_Parse(text);
    g_free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return NULL;
    }
    int n = cJSON_GetArraySize(root);
    char **tokens = g_new0(char *, n + 1);
    bool ok = true;
    for (cJSON *e = root->child; e; e = e->next) {
        int id = cJSON_IsNumber(e) ? e->valueint : -1;
        CHECK(id >= 0 && id < n, "vocab id %d of '%s' is outside 0..%d", id, e->string, n - 1);
        if (id < 0 || id >= n)
            ok = false;
        else if (tokens[id]) {
            CHECK(false, "id %d is used twice ('%s' and '%s')", id, tokens[id], e->string);
            ok = false;
        } else
            tokens[id] = g_strdup(e->string);
    }
    cJSON_Delete(root);
    if (!ok) {
        g_strfreev(tokens);
        return NULL;
    }
    *n_out = n;
    return tokens;
}

/* CLIP's order: byte symbols by ascending code point, again with </w>, merges, start, end. */
static void check_vocab_order(char **tokens, int n)
{
    gunichar prev = 0;
    for (int i = 0; i < 256; i++) {
        gunichar c = g_utf8_get_char(tokens[i]);
        CHECK(g_utf8_strlen(tokens[i], -1) == 1 && (i == 0 || c > prev), "id %d '%s' is not the next byte symbol", i,
              tokens[i]);
        char *with_end = g_strconcat(tokens[i], CLIP_WORD_END, NULL);
        CHECK(!strcmp(tokens[256 + i], with_end), "id %d is '%s', expected '%s'", 256 + i, tokens[256 + i], with_end);
        g_free(with_end);
        prev = c;
    }
    CHECK(!strcmp(tokens[n - 2], CLIP_START_TOKEN) && !strcmp(tokens[n - 1], CLIP_END_TOKEN),
          "the last two ids are '%s' and '%s', not the start and end tokens", tokens[n - 2], tokens[n - 1]);
}

/* merges.txt: the version line, then merge i spells vocabulary entry 512 + i. */
static void check_merges(const char *path, char **tokens, int n)
{
    char *text = NULL;
    CHECK(g_file_get_contents(path, &text, NULL, NULL), "cannot read %s", path);
    if (!text) return;
    char **lines = g_strsplit(text, "\n", -1);
    CHECK(!strcmp(lines[0], "#version: 0.2"), "merges.txt starts with '%s'", lines[0]);
    int merges = 0;
    for (int i = 1; lines[i] && lines[i][0]; i++, merges++) {
        char **parts = g_strsplit(lines[i], " ", -1);
        bool two = g_strv_length(parts) == 2;
        CHECK(two, "merges line %d '%s' is not two symbols", i + 1, lines[i]);
        if (two && BASE + merges < n - 2) {
            char *joined = g_strconcat(parts[0], parts[1], NULL);
            CHECK(!strcmp(joined, tokens[BASE + merges]), "merge %d spells '%s' but id %d is '%s'", merges, joined,
                  BASE + merges, tokens[BASE + merges]);
            g_free(joined);
        }
        g_strfreev(parts);
    }
    CHECK(merges == n - BASE - 2, "%d merges for a vocabulary of %d (expected %d)", merges, n, n - BASE - 2);
    g_strfreev(lines);
    g_free(text);
}

/* Reads and checks DIR/vocab.json + merges.txt; returns the loaded tokenizer. */
static sdt_tokenizer *check_files(const char *dir, int expected_size)
{
    char *vocab = g_build_filename(dir, "vocab.json", NULL), *merges = g_build_filename(dir, "merges.txt", NULL);
    int n = 0;
    char **tokens = read_vocab(vocab, &n);
    CHECK(tokens != NULL, "%s does not parse as a JSON object of unique ids", vocab);
    sdt_tokenizer *t = NULL;
    if (tokens) {
        CHECK(n == expected_size, "%d entries, expected %d", n, expected_size);
        bool complete = true;
        for (int i = 0; i < n; i++) complete = complete && tokens[i];
        CHECK(complete, "ids are not contiguous from 0 to %d", n - 1);
        if (complete && n >= BASE + 2) {
            check_vocab_order(tokens, n);
            check_merges(merges, tokens, n);
        }
        g_strfreev(tokens);
        sdt_error error = {0};
        t = sdt_tokenizer_load(vocab, merges, &error);
        CHECK(t != NULL, "the tokenizer refuses the files: %s", error.message);
        if (t)
            CHECK(sdt_tokenizer_vocab_size(t) == n && sdt_tokenizer_bos(t) == n - 2 && sdt_tokenizer_eos(t) == n - 1,
                  "tokenizer sees %d ids, start %d, end %d", sdt_tokenizer_vocab_size(t), sdt_tokenizer_bos(t),
                  sdt_tokenizer_eos(t));
    }
    g_free(vocab);
    g_free(merges);
    return t;
}

/* ---- behaviour --------------------------------------------------------------------- */

static void check_single_token(sdt_tokenizer *t, const char *word)
{
    int32_t *ids = NULL;
    size_t n = 0;
    sdt_tokenizer_tokenize(t, word, &ids, &n);
    char *spelled = g_strconcat(word, CLIP_WORD_END, NULL);
    CHECK(n == 1 && !g_strcmp0(sdt_tokenizer_token_text(t, ids[0]), spelled), "'%s' is %zu tokens, expected one", word,
          n);
    g_free(spelled);
    free(ids);
}

static void check_round_trip(sdt_tokenizer *t, const char *text)
{
    int32_t *ids = NULL;
    size_t n = 0;
    sdt_tokenizer_tokenize(t, text, &ids, &n);
    bool known = true;
    for (size_t i = 0; i < n; i++) known = known && ids[i] != sdt_tokenizer_eos(t);
    CHECK(known, "'%s' has a token outside the vocabulary", text);
    char *back = sdt_tokenizer_decode(t, ids, n);
    CHECK(!strcmp(back, text), "'%s' decodes back as '%s'", text, back);
    free(back);
    free(ids);
}

static void check_random_corpus(sdt_test_rng *r, const char *tmp)
{
    corpus c = make_corpus(r);
    char *corpus_path = g_build_filename(tmp, "corpus.txt", NULL);
    char *out1 = g_build_filename(tmp, "tok1", NULL), *out2 = g_build_filename(tmp, "tok2", NULL);
    io_write_bytes(corpus_path, c.text, strlen(c.text));
    int size = 514 + 40;
    char size_text[16];
    snprintf(size_text, sizeof size_text, "%d", size);
    char *argv1[] = {SDT_MAKE_TOKENIZER, "--out", out1, "--vocab-size", size_text, "--corpus", corpus_path, NULL};
    char *argv2[] = {SDT_MAKE_TOKENIZER, "--corpus", corpus_path, "--vocab-size", size_text, "--out", out2, NULL};
    CHECK(demo_run(argv1, NULL) == 0 && demo_run(argv2, NULL) == 0, "sdt-make-tokenizer failed on a random corpus");
    sdt_tokenizer *t = check_files(out1, size);
    if (t) {
        check_single_token(t, c.words[0]);
        GString *sentence = g_string_new(NULL);
        for (int i = 0; i < c.n; i++) g_string_append_printf(sentence, "%s%s", i ? " " : "", c.words[i]);
        g_string_append(sentence, " café naïve ");
        char *unseen = random_word(r, "abcdefghijklmnopqrstuvwxyz", 12);
        g_string_append(sentence, unseen);
        check_round_trip(t, sentence->str);
        g_free(unseen);
        g_string_free(sentence, TRUE);
        sdt_tokenizer_free(t);
    }
    const char *files[] = {"vocab.json", "merges.txt"};
    for (int i = 0; i < 2; i++) {
        char *a = g_build_filename(out1, files[i], NULL), *b = g_build_filename(out2, files[i], NULL);
        CHECK(demo_same_file(a, b), "two runs on the same corpus wrote different %s", files[i]);
        g_free(a);
        g_free(b);
    }
    g_free(corpus_path);
    g_free(out1);
    g_free(out2);
    free_corpus(&c);
}

/* The built-in corpus at the tiny preset's size: the demo's tokenizer. */
static void check_builtin_corpus(const char *tmp)
{
    char *out = g_build_filename(tmp, "builtin", NULL);
    char *argv[] = {SDT_MAKE_TOKENIZER, "--out", out, "--for-config", "tiny", NULL};
    CHECK(demo_run(argv, NULL) == 0, "sdt-make-tokenizer failed on the built-in corpus");
    sdt_tokenizer *t = check_files(out, clip_config_tiny().vocab);
    if (t) {
        const char *frequent[] = {"a", "photo", "of", "the", "painting", "background", "orange", "ring"};
        for (size_t i = 0; i < G_N_ELEMENTS(frequent); i++) check_single_token(t, frequent[i]);
        check_round_trip(t, "a photo of an orange ring on a blue background in the top left");
        sdt_tokenizer_free(t);
    }
    g_free(out);
}

/* When the real CLIP files are beside the checkout: our first 512 entries are theirs. */
static void check_against_clip(const char *tmp)
{
    const char *up[] = {"..", "../.."};
    char *clip = NULL;
    for (size_t i = 0; i < G_N_ELEMENTS(up) && !clip; i++) {
        char *p =
            g_build_filename(SDT_SOURCE_DIR, up[i], "shared", "data", "clip-vit-l-14-tokenizer", "vocab.json", NULL);
        if (g_file_test(p, G_FILE_TEST_EXISTS))
            clip = p;
        else
            g_free(p);
    }
    if (!clip) {
        printf("note: CLIP's vocab.json is not beside the checkout; byte-symbol order checked by rule only\n");
        return;
    }
    char *ours = g_build_filename(tmp, "builtin", "vocab.json", NULL);
    int n_clip = 0, n_ours = 0;
    char **a = read_vocab(clip, &n_clip), **b = read_vocab(ours, &n_ours);
    CHECK(a && b && n_clip > BASE && n_ours > BASE, "cannot read %s or %s", clip, ours);
    for (int i = 0; a && b && i < BASE; i++)
        CHECK(!strcmp(a[i], b[i]), "id %d: CLIP has '%s', we have '%s'", i, a[i], b[i]);
    g_strfreev(a);
    g_strfreev(b);
    g_free(ours);
    g_free(clip);
}

static void expect_refused(const char *what, char **argv, int want_status, const char *want_text)
{
    char *err_text = NULL;
    int status = demo_run(argv, &err_text);
    CHECK(status == want_status, "%s: exit %d, expected %d", what, status, want_status);
    CHECK(!want_text || io_contains(err_text, want_text), "%s: stderr '%s' does not mention '%s'", what,
          err_text ? err_text : "", want_text);
    g_free(err_text);
}

static void check_bad_arguments(const char *tmp)
{
    char *out = g_build_filename(tmp, "bad", NULL);
    char *small = g_build_filename(tmp, "small.txt", NULL);
    char *missing = g_build_filename(tmp, "no-such-corpus.txt", NULL);
    char *under_file = g_build_filename(small, "out", NULL);
    io_write_bytes(small, "one two three", 13);
    char *a1[] = {SDT_MAKE_TOKENIZER, "--out", out, "--vocab-size", "100", NULL};
    expect_refused("vocabulary below 514", a1, 2, "--vocab-size");
    char *a2[] = {SDT_MAKE_TOKENIZER, "--vocab-size", "600", NULL};
    expect_refused("no --out", a2, 2, "--out");
    char *a3[] = {SDT_MAKE_TOKENIZER, "--out", out, "--corpus", missing, NULL};
    expect_refused("missing corpus", a3, 1, missing);
    char *a4[] = {SDT_MAKE_TOKENIZER, "--out", out, "--corpus", small, "--vocab-size", "1000", NULL};
    expect_refused("corpus too small", a4, 1, "larger corpus");
    char *a5[] = {SDT_MAKE_TOKENIZER, "--out", under_file, "--vocab-size", "516", "--corpus", small, NULL};
    expect_refused("output under a file", a5, 1, under_file);
    char *a6[] = {SDT_MAKE_TOKENIZER, "--out", out, "--for-config", "sd9", NULL};
    expect_refused("unknown config", a6, 2, "--for-config");
    g_free(out);
    g_free(small);
    g_free(missing);
    g_free(under_file);
}

/* The build's own demo tokenizer fits the tiny text encoder it is generated for. */
static void check_build_assets(void)
{
    char *model = g_build_filename(SDT_DEMO_DIR, "model", NULL);
    sdt_error error = {0};
    sdt_tokenizer *t = g_file_test(model, G_FILE_TEST_IS_DIR) ? sdt_tokenizer_load_dir(model, &error) : NULL;
    if (!t && !error.message[0]) printf("note: %s is not built yet (target sdt-demo-assets)\n", model);
    CHECK(t || !error.message[0], "the demo tokenizer does not load: %s", error.message);
    if (t) {
        CHECK(sdt_tokenizer_vocab_size(t) == clip_config_tiny().vocab, "demo tokenizer has %d ids, the tiny model %d",
              sdt_tokenizer_vocab_size(t), clip_config_tiny().vocab);
        sdt_tokenizer_free(t);
    }
    g_free(model);
}

int main(void)
{
    sdt_test_rng r = sdt_test_rng_from_env("demo_make_tokenizer");
    char *tmp = io_make_tmpdir();
    check_random_corpus(&r, tmp);
    check_builtin_corpus(tmp);
    check_against_clip(tmp);
    check_bad_arguments(tmp);
    check_build_assets();
    io_rm_tree(tmp);
    g_free(tmp);
    return sdt_test_finish("demo_make_tokenizer");
}
