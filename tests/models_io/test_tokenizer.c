/* test_tokenizer.c - CLIP BPE on a small vocabulary the test builds itself:
 * merge ranks, word ends, normalisation, the pre-tokenizer, added tokens,
 * truncation reporting, padding, decode round trips and bad tokenizer files. */
#include "tokenizer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "io_test_util.h"
#include "sdt_test.h"

/* Vocabulary layout: byte b's stand-in is id b, with "</w>" id 256 + b; merges
 * results from 512 on; then <|startoftext|>, <|endoftext|>. */
static const char *merges_list[] = {"h e</w>", "t h", "th e</w>", "c a", "ca t</w>", "a t</w>", "d o", "do g</w>"};
enum { N_MERGES = sizeof(merges_list) / sizeof(merges_list[0]) };
static char byte_stand_in[256][8];
static int32_t BOS, EOS;

/* bytes_to_unicode, written out independently of the library. */
static void make_byte_map(void)
{
    int shifted = 0;
    for (int b = 0; b < 256; b++) {
        bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        unsigned cp = keep ? (unsigned)b : 256u + (unsigned)shifted++;
        g_unichar_to_utf8(cp, byte_stand_in[b]);
    }
}

static char *merged_text(const char *merge)
{
    char *s = g_strdup(merge);
    char *sp = strchr(s, ' ');
    memmove(sp, sp + 1, strlen(sp));
    return s;
}

static void write_small_tokenizer(const char *dir)
{
    cJSON *vocab = cJSON_CreateObject();
    for (int b = 0; b < 256; b++) {
        char with_end[16];
        snprintf(with_end, sizeof(with_end), "%s</w>", byte_stand_in[b]);
        cJSON_AddNumberToObject(vocab, byte_stand_in[b], b);
        cJSON_AddNumberToObject(vocab, with_end, 256 + b);
    }
    for (int m = 0; m < N_MERGES; m++) {
        char *t = merged_text(merges_list[m]);
        cJSON_AddNumberToObject(vocab, t, 512 + m);
        g_free(t);
    }
    BOS = 512 + N_MERGES;
    EOS = BOS + 1;
    cJSON_AddNumberToObject(vocab, "<|startoftext|>", BOS);
    cJSON_AddNumberToObject(vocab, "<|endoftext|>", EOS);
    char *vtext = cJSON_Print(vocab);
    cJSON_Delete(vocab);
    GString *v = g_string_new(vtext);
    cJSON_free(vtext);
    GString *m = g_string_new("#version: 0.2\n");
    for (int i = 0; i < N_MERGES; i++) g_string_append_printf(m, "%s\n", merges_list[i]);
    char *vp = g_build_filename(dir, "vocab.json", NULL), *mp = g_build_filename(dir, "merges.txt", NULL);
    io_write_bytes(vp, v->str, v->len);
    io_write_bytes(mp, m->str, m->len);
    g_free(vp);
    g_free(mp);
    g_string_free(v, TRUE);
    g_string_free(m, TRUE);
}

static int32_t merged_id(const char *merge)
{
    for (int i = 0; i < N_MERGES; i++)
        if (strcmp(merges_list[i], merge) == 0) return 512 + i;
    return -1;
}
#define B(c) ((int32_t)(unsigned char)(c))         /* byte symbol */
#define W(c) ((int32_t)(256 + (unsigned char)(c))) /* byte symbol at a word end */

static void expect_ids(sdt_tokenizer *t, const char *text, const int32_t *want, size_t n_want)
{
    int32_t *got;
    size_t n;
    sdt_tokenizer_tokenize(t, text, &got, &n);
    bool same = n == n_want && (n == 0 || memcmp(got, want, n * sizeof(int32_t)) == 0);
    GString *g = g_string_new(NULL), *w = g_string_new(NULL);
    for (size_t i = 0; i < n; i++) g_string_append_printf(g, " %d", got[i]);
    for (size_t i = 0; i < n_want; i++) g_string_append_printf(w, " %d", want[i]);
    CHECK(same, "\"%s\": got [%s ], want [%s ]", text, g->str, w->str);
    g_string_free(g, TRUE);
    g_string_free(w, TRUE);
    free(got);
}
#define EXPECT(t, text, ...)                                                                                           \
    do {                                                                                                               \
        const int32_t want_[] = {__VA_ARGS__};                                                                         \
        expect_ids(t, text, want_, sizeof(want_) / sizeof(want_[0]));                                                  \
    } while (0)

static void test_bpe(sdt_tokenizer *t)
{
    int32_t cat = merged_id("ca t</w>"), he = merged_id("h e</w>"), th = merged_id("t h"), at = merged_id("a t</w>");
    EXPECT(t, "cat", cat);                               /* c a (rank 3) before a t</w> (rank 5), then ca t</w> */
    EXPECT(t, "the", B('t'), he);                        /* h e</w> (rank 0) wins over t h (rank 1): no "the</w>" */
    EXPECT(t, "that", th, at);                           /* t h, then a t</w>; "th at</w>" is no merge */
    EXPECT(t, "cats", merged_id("c a"), B('t'), W('s')); /* t is not at the word end: ca t</w> does not apply */
    EXPECT(t, "cat cat", cat, cat);                      /* every word ends with </w> */
    EXPECT(t, "catcat", merged_id("c a"), B('t'), cat);  /* c a everywhere first, then ca t</w> at the end */
    EXPECT(t, "dog", merged_id("do g</w>"));
    EXPECT(t, "x", W('x'));                                  /* one symbol: just the word end */
    EXPECT(t, "CAT  \n\t Dog ", cat, merged_id("do g</w>")); /* lowercase, whitespace runs */
    EXPECT(t, "it's", B('i'), W('t'), B('\''), W('s'));      /* 's is its own piece */
    EXPECT(t, "123", W('1'), W('2'), W('3'));                /* digits one by one */
    EXPECT(t, "cat!!?", cat, B('!'), B('!'), W('?'));        /* a punctuation run is one piece */
    EXPECT(t, "&amp; &amp;lt;", W('&'), W('<'));             /* HTML unescaped twice */
    EXPECT(t, "\xc3\xa9", B(0xC3), W(0xA9));                 /* bytes of UTF-8, mapped */
    EXPECT(t, "a<|endoftext|>b", W('a'), EOS, W('b'));       /* special tokens in text */
    EXPECT(t, "\xff", B(0xEF), B(0xBF), W(0xBD));            /* invalid UTF-8 reads as U+FFFD */
    int32_t *ids;
    size_t n;
    sdt_tokenizer_tokenize(t, " \t\n", &ids, &n);
    CHECK(n == 0, "whitespace-only text gave %zu tokens", n);
    free(ids);
    CHECK(sdt_tokenizer_bos(t) == BOS && sdt_tokenizer_eos(t) == EOS, "start/end ids %d/%d", sdt_tokenizer_bos(t),
          sdt_tokenizer_eos(t));
    CHECK(sdt_tokenizer_vocab_size(t) == EOS + 1, "vocab size %d", sdt_tokenizer_vocab_size(t));
    CHECK(sdt_tokenizer_token_id(t, "cat</w>") == cat, "token_id(cat</w>) = %d", sdt_tokenizer_token_id(t, "cat</w>"));
    CHECK(sdt_tokenizer_token_text(t, cat) && strcmp(sdt_tokenizer_token_text(t, cat), "cat</w>") == 0, "token_text");
}

static void test_added_tokens(sdt_tokenizer *t)
{
    int32_t toy, sks, again, fixed;
    sdt_error error = {0};
    CHECK(sdt_tokenizer_add_token(t, "<Cat-Toy>", -1, &toy, &error), "add: %s", error.message);
    CHECK(toy == EOS + 1, "first added token got id %d, expected the next free id %d", toy, EOS + 1);
    CHECK(sdt_tokenizer_add_token(t, "sks", -1, &sks, &error) && sks == toy + 1, "second id %d", sks);
    CHECK(sdt_tokenizer_add_token(t, "<cat-toy>", -1, &again, &error) && again == toy, "re-adding gave %d", again);
    CHECK(sdt_tokenizer_add_token(t, "zq", 9000, &fixed, &error) && fixed == 9000, "explicit id %d", fixed);
    CHECK(sdt_tokenizer_size(t) == 9001, "size %d after explicit id 9000", sdt_tokenizer_size(t));
    CHECK(!sdt_tokenizer_add_token(t, "  \t", -1, NULL, &error), "blank placeholder accepted");
    int32_t cat = merged_id("ca t</w>");
    EXPECT(t, "a <cat-toy> cat", W('a'), toy, cat);
    EXPECT(t, "A <CAT-TOY>,cat", W('a'), toy, W(','), cat); /* case-insensitive; punctuation is a boundary */
    EXPECT(t, "<cat-toy><cat-toy>", toy, toy);
    EXPECT(t, "sks dog", sks, merged_id("do g</w>"));
    EXPECT(t, "sks.", sks, W('.'));
    EXPECT(t, "asks", B('a'), B('s'), B('k'), W('s')); /* not inside a longer word */
    EXPECT(t, "sksa", B('s'), B('k'), B('s'), W('a'));
    EXPECT(t, "sks2", B('s'), B('k'), W('s'), W('2')); /* a digit continues the word too */
    CHECK(sdt_tokenizer_token_id(t, "SKS") == sks, "token_id of an added token, other case");
    int32_t ids[] = {W('a'), toy, cat};
    char *text = sdt_tokenizer_decode(t, ids, 3);
    CHECK(text && strcmp(text, "a <cat-toy> cat") == 0, "decode with a placeholder: \"%s\"", text ? text : "(null)");
    free(text);
}

static void test_encode(sdt_tokenizer *t, sdt_test_rng *rng)
{
    int32_t toy = sdt_tokenizer_token_id(t, "<cat-toy>"), cat = merged_id("ca t</w>");
    int32_t ids[SDT_CLIP_CONTEXT];
    sdt_encode_report rep;
    sdt_error error = {0};
    sdt_encode_options o = sdt_encode_defaults();
    o.watch_id = toy;
    CHECK(sdt_tokenizer_encode(t, "cat <cat-toy>", &o, ids, &rep, &error), "encode: %s", error.message);
    CHECK(ids[0] == BOS && ids[1] == cat && ids[2] == toy && ids[3] == EOS, "short encode wrong");
    bool padded = true;
    for (int i = 4; i < SDT_CLIP_CONTEXT; i++) padded &= ids[i] == EOS;
    CHECK(padded, "SD 1.x padding is the end token");
    CHECK(rep.n_text_tokens == 2 && rep.n_cut == 0 && rep.watch_kept && !rep.watch_cut && rep.end_index == 3,
          "report for a short text: %d tokens, %d cut, kept %d, cut %d, end %d", rep.n_text_tokens, rep.n_cut,
          rep.watch_kept, rep.watch_cut, rep.end_index);
    o.pad_id = 0;
    sdt_tokenizer_encode(t, "cat", &o, ids, &rep, &error);
    CHECK(ids[2] == EOS && ids[3] == 0 && ids[76] == 0, "pad id 0 not used");

    /* A random number of words, the placeholder at a random position: the report says exactly what was cut. */
    for (int trial = 0; trial < 50; trial++) {
        int words = 1 + (int)(sdt_test_next(rng) % 120), at = (int)(sdt_test_next(rng) % (uint64_t)words);
        GString *s = g_string_new(NULL);
        for (int i = 0; i < words; i++) g_string_append(s, i == at ? "<cat-toy> " : "cat ");
        o = sdt_encode_defaults();
        o.watch_id = toy;
        sdt_tokenizer_encode(t, s->str, &o, ids, &rep, &error);
        int kept = words < 75 ? words : 75;
        CHECK(rep.n_text_tokens == words && rep.n_cut == words - kept, "%d words: report %d tokens, %d cut", words,
              rep.n_text_tokens, rep.n_cut);
        CHECK(rep.watch_cut == (at >= 75) && rep.watch_kept == (at < 75), "%d words, placeholder at %d: cut %d kept %d",
              words, at, rep.watch_cut, rep.watch_kept);
        CHECK(ids[0] == BOS && ids[kept + 1] == EOS && rep.end_index == kept + 1, "%d words: end token misplaced",
              words);
        if (at < 75) CHECK(ids[1 + at] == toy, "%d words: placeholder not at position %d", words, 1 + at);
        CHECK(ids[1] == (at == 0 ? toy : cat), "%d words: first token wrong", words);
        g_string_free(s, TRUE);
    }
    o.length = 1;
    CHECK(!sdt_tokenizer_encode(t, "cat", &o, ids, &rep, &error), "length 1 accepted");
}

/* Random lowercase words survive tokenize + decode unchanged (with whitespace normalised). */
static void test_round_trip(sdt_tokenizer *t, sdt_test_rng *rng)
{
    const char alphabet[] = "catheodgxyz";
    for (int trial = 0; trial < 200; trial++) {
        GString *s = g_string_new(NULL), *want = g_string_new(NULL);
        int words = 1 + (int)(sdt_test_next(rng) % 8);
        for (int w = 0; w < words; w++) {
            int len = 1 + (int)(sdt_test_next(rng) % 7);
            if (w) g_string_append(s, sdt_test_next(rng) % 2 ? " " : " \t "), g_string_append_c(want, ' ');
            for (int i = 0; i < len; i++) {
                char c = alphabet[sdt_test_next(rng) % (sizeof(alphabet) - 1)];
                g_string_append_c(s, sdt_test_next(rng) % 4 ? c : (char)(c - 32));
                g_string_append_c(want, c);
            }
        }
        int32_t *ids;
        size_t n;
        sdt_tokenizer_tokenize(t, s->str, &ids, &n);
        bool in_range = true;
        for (size_t i = 0; i < n; i++) in_range &= ids[i] >= 0 && ids[i] < BOS;
        char *back = sdt_tokenizer_decode(t, ids, n);
        CHECK(in_range && strcmp(back, want->str) == 0, "\"%s\" decoded to \"%s\"", s->str, back);
        free(back);
        free(ids);
        g_string_free(s, TRUE);
        g_string_free(want, TRUE);
    }
}

static void expect_load_error(const char *dir, const char *vocab, const char *merges, const char *must1,
                              const char *must2, const char *what)
{
    char *vp = g_build_filename(dir, "bad-vocab.json", NULL), *mp = g_build_filename(dir, "bad-merges.txt", NULL);
    io_write_bytes(vp, vocab, strlen(vocab));
    io_write_bytes(mp, merges, strlen(merges));
    sdt_error error = {0};
    sdt_tokenizer *t = sdt_tokenizer_load(vp, mp, &error);
    CHECK(t == NULL, "%s: accepted", what);
    sdt_tokenizer_free(t);
    const char *file = strstr(must1, "merges") ? mp : vp;
    CHECK(io_contains(error.message, file), "%s: error does not name %s: %s", what, file, error.message);
    if (must2) CHECK(io_contains(error.message, must2), "%s: error lacks '%s': %s", what, must2, error.message);
    printf("  %-22s -> %s\n", what, error.message);
    g_free(vp);
    g_free(mp);
}

static void test_bad_files(const char *dir)
{
    const char *ok_vocab = "{\"a</w>\": 0, \"<|startoftext|>\": 1, \"<|endoftext|>\": 2}";
    expect_load_error(dir, "not json at all", "#version\n", "vocab", "JSON", "vocab not JSON");
    expect_load_error(dir, "[1, 2]", "#version\n", "vocab", "JSON object", "vocab an array");
    expect_load_error(dir, "{\"a\": \"x\", \"<|startoftext|>\": 1, \"<|endoftext|>\": 2}", "", "vocab", "'a'",
                      "vocab id a string");
    expect_load_error(dir, "{\"big\": 1e12, \"<|startoftext|>\": 1, \"<|endoftext|>\": 2}", "", "vocab", "'big'",
                      "vocab id huge");
    expect_load_error(dir, "{\"a</w>\": 0}", "", "vocab", "<|startoftext|>", "no special tokens");
    expect_load_error(dir, "{\"a\": 0, \"a\": 1, \"<|startoftext|>\": 2, \"<|endoftext|>\": 3}", "", "vocab", "'a'",
                      "vocab duplicate token"); /* found by fuzz_tokenizer */
    expect_load_error(dir, "{\"c</w\xfb>\": 0, \"<|startoftext|>\": 2, \"<|endoftext|>\": 3}", "", "vocab", "UTF-8",
                      "vocab token not UTF-8"); /* found by fuzz_tokenizer */
    expect_load_error(dir, ok_vocab, "#version: 0.2\na b\nmalformed\n", "merges", "line 3", "merges one symbol");
    expect_load_error(dir, ok_vocab, "#version: 0.2\na b c\n", "merges", "line 2", "merges three symbols");
    expect_load_error(dir, ok_vocab, "#version: 0.2\na  b\n", "merges", "line 2", "merges double space");
    sdt_error error = {0};
    char *empty = g_build_filename(dir, "empty", NULL);
    g_mkdir(empty, 0700);
    CHECK(sdt_tokenizer_load_dir(empty, &error) == NULL && io_contains(error.message, empty) &&
              io_contains(error.message, "vocab.json"),
          "empty folder not explained: %s", error.message);
    char *missing = g_build_filename(dir, "nope.json", NULL);
    CHECK(sdt_tokenizer_load(missing, missing, &error) == NULL && io_contains(error.message, missing),
          "missing file: %s", error.message);
    g_free(missing);
    g_free(empty);
    /* Windows line ends and a missing version line are fine. */
    sdt_tokenizer *t = sdt_tokenizer_load_memory(ok_vocab, strlen(ok_vocab), "a b\r\nc d\r\n", 10, "v", "m", &error);
    CHECK(t != NULL, "CRLF merges without a version line rejected: %s", error.message);
    sdt_tokenizer_free(t);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("test_tokenizer");
    make_byte_map();
    char *dir = io_make_tmpdir();
    char *model = g_build_filename(dir, "model", NULL), *tokdir = g_build_filename(model, "tokenizer", NULL);
    g_mkdir_with_parents(tokdir, 0700);
    write_small_tokenizer(tokdir);
    sdt_error error = {0};
    sdt_tokenizer *t = sdt_tokenizer_load_dir(model, &error); /* a model folder: uses tokenizer/ */
    CHECK(t != NULL, "loading the small tokenizer: %s", error.message);
    if (t) {
        test_bpe(t);
        test_added_tokens(t);
        test_encode(t, &rng);
        test_round_trip(t, &rng);
        sdt_tokenizer_free(t);
    }
    sdt_tokenizer *t2 = sdt_tokenizer_load_dir(tokdir, &error); /* the tokenizer folder itself */
    CHECK(t2 != NULL, "loading from the tokenizer folder: %s", error.message);
    sdt_tokenizer_free(t2);
    char *vocab_file = g_build_filename(tokdir, "vocab.json", NULL);
    t2 = sdt_tokenizer_load_dir(vocab_file, &error); /* a vocab.json path: merges.txt beside it */
    CHECK(t2 != NULL, "loading from a vocab.json path: %s", error.message);
    sdt_tokenizer_free(t2);
    g_free(vocab_file);
    test_bad_files(dir);
    io_rm_tree(model);
    io_rm_tree(dir);
    g_free(tokdir);
    g_free(model);
    g_free(dir);
    return sdt_test_finish("test_tokenizer");
}
