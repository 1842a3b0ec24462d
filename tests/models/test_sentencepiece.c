/* test_sentencepiece.c - T5's SentencePiece unigram tokenizer on a small hand-built vocabulary, written here
 * both as spiece.model (a protobuf ModelProto, by a small writer below) and as tokenizer.json: hand-checked
 * Viterbi segmentations (the best total score, not the longest piece), unknown characters fused into one
 * <unk>, byte fallback, the normalisation (whitespace, fullwidth ASCII, the ▁ prefix), the end token, pads
 * and truncation, both files giving the same ids, loading from a checkpoint folder's tokenizer_2/, and a
 * sentence naming the file for every malformed one (truncated, garbage, empty, wrong model type, missing
 * end token, duplicate piece, bad JSON). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sdt_test.h"
#include "sentencepiece.h"

#include <glib.h>

#define SP "\xE2\x96\x81"

typedef struct piece {
    const char *text;
    float score;
    int type;
} piece;

static const piece VOCAB[] = {
    {"<pad>", 0, 3},      {"</s>", 0, 3},         {"<unk>", 0, 2},       {SP, -2.0f, 1},          {SP "a", -1.5f, 1},
    {SP "cat", -3.0f, 1}, {SP "ca", -2.0f, 1},    {"t", -2.5f, 1},       {"c", -3.0f, 1},         {"a", -2.8f, 1},
    {SP "the", -1.0f, 1}, {"s", -2.0f, 1},        {SP "cats", -7.0f, 1}, {SP "dog", -3.0f, 1},    {SP "do", -2.0f, 1},
    {"g", -3.5f, 1},      {"\xC3\xA9", -3.0f, 1}, {SP "caf", -4.0f, 1},  {SP "yellow", -4.0f, 1}, {SP "star", -4.0f, 1},
    {"!", -2.0f, 1},
};
enum { NV = sizeof VOCAB / sizeof VOCAB[0] };

/* ---------------------------------------------------------------- a protobuf writer */

typedef struct buf {
    unsigned char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void put_varint(buf *b, uint64_t v)
{
    do {
        unsigned char c = (unsigned char)(v & 0x7F);
        v >>= 7;
        if (v) c |= 0x80;
        put(b, &c, 1);
    } while (v);
}
static void put_key(buf *b, unsigned field, int wire)
{
    put_varint(b, (uint64_t)field << 3 | (unsigned)wire);
}
static void put_bytes(buf *b, unsigned field, const void *d, size_t n)
{
    put_key(b, field, 2);
    put_varint(b, n);
    put(b, d, n);
}
static void put_float(buf *b, unsigned field, float f)
{
    put_key(b, field, 5);
    put(b, &f, 4);
}
static void put_int(buf *b, unsigned field, int64_t v)
{
    put_key(b, field, 0);
    put_varint(b, (uint64_t)v);
}

/* ---------------------------------------------------------------- a precompiled character map */

typedef struct cm_key {
    const char *src, *dst;
} cm_key;

enum { CM_UNITS = 8192 };

/* Places the children of trie node P (whose path is the first depth bytes of keys[0..n)) as Darts-clone
 * does: a base P ^ off that no other node has, children at base ^ label, the value unit at base. */
static void cm_place(uint32_t *units, bool *used, bool *used_base, size_t P, const cm_key *keys, int n, size_t depth,
                     const uint32_t *values)
{
    unsigned char labels[256];
    int nl = 0, leaf = -1;
    for (int i = 0; i < n; i++) {
        if (strlen(keys[i].src) == depth) {
            leaf = i;
            continue;
        }
        unsigned char c = (unsigned char)keys[i].src[depth];
        bool seen = false;
        for (int k = 0; k < nl; k++) seen = seen || labels[k] == c;
        if (!seen) labels[nl++] = c;
    }
    uint32_t off = 1;
    for (;; off++) {
        size_t base = P ^ off;
        bool ok = base < CM_UNITS && !used_base[base] && (leaf < 0 || !used[base]);
        for (int k = 0; ok && k < nl; k++) ok = (base ^ labels[k]) < CM_UNITS && !used[base ^ labels[k]];
        if (ok) break;
    }
    const size_t base = P ^ off;
    used_base[base] = true;
    units[P] |= off << 10;
    if (leaf >= 0) {
        units[P] |= 1u << 8;
        used[base] = true;
        units[base] = (1u << 31) | values[leaf];
    }
    for (int k = 0; k < nl; k++) used[base ^ labels[k]] = true, units[base ^ labels[k]] = labels[k];
    for (int k = 0; k < nl; k++) {
        cm_key sub[8] = {{0}};
        uint32_t subv[8] = {0};
        int m = 0;
        for (int i = 0; i < n; i++)
            if (strlen(keys[i].src) > depth && (unsigned char)keys[i].src[depth] == labels[k])
                sub[m] = keys[i], subv[m++] = values[i];
        cm_place(units, used, used_base, base ^ labels[k], sub, m, depth + 1, subv);
    }
}

/* precompiled_charsmap bytes: trie size, the double array, the NUL-terminated replacements. */
static buf charsmap(const cm_key *keys, int n)
{
    static uint32_t units[CM_UNITS];
    static bool used[CM_UNITS], used_base[CM_UNITS];
    memset(units, 0, sizeof units), memset(used, 0, sizeof used), memset(used_base, 0, sizeof used_base);
    used[0] = true;
    buf reps = {0};
    uint32_t values[8];
    for (int i = 0; i < n; i++) values[i] = (uint32_t)reps.n, put(&reps, keys[i].dst, strlen(keys[i].dst) + 1);
    cm_place(units, used, used_base, 0, keys, n, 0, values);
    size_t last = 0;
    for (size_t i = 0; i < CM_UNITS; i++)
        if (used[i] || units[i]) last = i;
    uint32_t trie_bytes = (uint32_t)(last + 1) * 4;
    buf b = {0};
    put(&b, &trie_bytes, 4);
    put(&b, units, trie_bytes);
    put(&b, reps.p, reps.n);
    free(reps.p);
    return b;
}

/* ﬁ -> fi, ① -> 1, e + combining acute -> é (longer than its prefix "e", which maps to nothing) */
static const cm_key NFKC_KEYS[] = {{"\xEF\xAC\x81", "fi"}, {"\xE2\x91\xA0", "1"}, {"e\xCC\x81", "\xC3\xA9"}};

/* ModelProto: the pieces (+ 256 byte pieces when bytes), trainer spec (unigram, ids, byte_fallback),
 * normalizer spec (with the character map when cm is given). */
static buf model_proto_map(const piece *v, int n, bool bytes, bool with_ids, const buf *cm);
static buf model_proto(const piece *v, int n, bool bytes, bool with_ids)
{
    return model_proto_map(v, n, bytes, with_ids, NULL);
}
static buf model_proto_map(const piece *v, int n, bool bytes, bool with_ids, const buf *cm)
{
    buf m = {0};
    for (int i = 0; i < n + (bytes ? 256 : 0); i++) {
        buf p = {0};
        char byte_text[8];
        const char *text = i < n ? v[i].text : byte_text;
        if (i >= n) snprintf(byte_text, sizeof byte_text, "<0x%02X>", i - n);
        put_bytes(&p, 1, text, strlen(text));
        put_float(&p, 2, i < n ? v[i].score : 0.0f);
        if ((i < n ? v[i].type : 6) != 1) put_int(&p, 3, i < n ? v[i].type : 6);
        put_bytes(&m, 1, p.p, p.n);
        free(p.p);
    }
    buf t = {0};
    put_int(&t, 3, 1); /* unigram */
    if (bytes) put_int(&t, 35, 1);
    if (with_ids) put_int(&t, 40, 2), put_int(&t, 41, -1), put_int(&t, 42, 1), put_int(&t, 43, 0);
    put_bytes(&m, 2, t.p, t.n);
    buf z = {0};
    put_bytes(&z, 1, "nmt_nfkc", 8);
    if (cm) put_bytes(&z, 2, cm->p, cm->n);
    put_int(&z, 3, 1), put_int(&z, 4, 1), put_int(&z, 5, 1);
    put_bytes(&m, 3, z.p, z.n);
    free(t.p), free(z.p);
    return m;
}

/* tokenizer.json as transformers writes T5's (the parts read), with the character map when cm is given. */
static char *tokenizer_json(const buf *cm)
{
    buf j = {0};
    const char *head =
        "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":0,\"content\":\"<pad>\",\"special\":true},"
        "{\"id\":1,\"content\":\"</s>\",\"special\":true},{\"id\":2,\"content\":\"<unk>\",\"special\":true}],"
        "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"";
    put(&j, head, strlen(head));
    if (cm) {
        char *b64 = g_base64_encode(cm->p, cm->n);
        put(&j, b64, strlen(b64));
        g_free(b64);
    }
    const char *mid = "\"},{\"type\":\"Replace\"}]},\"model\":{\"type\":\"Unigram\",\"unk_id\":2,\"vocab\":[";
    put(&j, mid, strlen(mid));
    for (int i = 0; i < NV; i++) {
        char e[96];
        snprintf(e, sizeof e, "%s[\"%s\",%.9g]", i ? "," : "", VOCAB[i].text, (double)VOCAB[i].score);
        put(&j, e, strlen(e));
    }
    put(&j, "],\"byte_fallback\":false}}", 26);
    return (char *)j.p;
}

static void write_file(const char *path, const void *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(d, 1, n, f) == n && fclose(f) == 0, "writing %s", path);
}

/* ---------------------------------------------------------------- checks */

static void expect_ids(const sdt_spm *t, const char *text, const int32_t *want, size_t nwant, const char *what)
{
    int32_t *ids = NULL;
    size_t n = 0;
    sdt_error err = {0};
    CHECK(sdt_spm_tokenize(t, text, &ids, &n, &err), "%s: %s", what, err.message);
    bool same = n == nwant && (n == 0 || memcmp(ids, want, n * sizeof(int32_t)) == 0);
    if (!same) {
        printf("%s: \"%s\" ->", what, text);
        for (size_t i = 0; i < n; i++) printf(" %d", ids[i]);
        printf(" (want");
        for (size_t i = 0; i < nwant; i++) printf(" %d", want[i]);
        printf(")\n");
    }
    CHECK(same, "%s: \"%s\" segments differently from the hand-checked ids", what, text);
    free(ids);
}
#define EXPECT(t, text, what, ...)                                                                                     \
    do {                                                                                                               \
        const int32_t want_[] = {__VA_ARGS__};                                                                         \
        expect_ids(t, text, want_, sizeof want_ / sizeof want_[0], what);                                              \
    } while (0)

static void check_segmentation(const sdt_spm *t, const char *what)
{
    CHECK(sdt_spm_size(t) == NV && sdt_spm_eos(t) == 1 && sdt_spm_pad(t) == 0 && sdt_spm_unk(t) == 2,
          "%s: size %d eos %d pad %d unk %d", what, sdt_spm_size(t), sdt_spm_eos(t), sdt_spm_pad(t), sdt_spm_unk(t));
    EXPECT(t, "the cat", what, 10, 5);
    /* ▁cats -7 loses to ▁cat + s (-5), which beats ▁ca + t + s (-6.5) */
    EXPECT(t, "cats", what, 5, 11);
    EXPECT(t, "dog", what, 13);
    /* whitespace collapsed and trimmed; ▁caf + é (-7) beats ▁ca + <unk> + é */
    EXPECT(t, "  caf\xC3\xA9 \t\n dog!  ", what, 17, 16, 13, 20);
    /* x, y, z have no piece: one fused <unk> after ▁ */
    EXPECT(t, "xyz cat", what, 3, 2, 5);
    /* fullwidth ASCII folds: ｃａｔ */
    EXPECT(t, "\xEF\xBD\x83\xEF\xBD\x81\xEF\xBD\x94", what, 5);
    /* control pieces never come from text: "</s>" is characters */
    EXPECT(t, "a", what, 4);
    int32_t *ids = NULL;
    size_t n = 5;
    sdt_error err = {0};
    CHECK(sdt_spm_tokenize(t, "   ", &ids, &n, &err) && n == 0, "%s: blank text gives no tokens", what);
    free(ids);
    char *norm = sdt_spm_normalize(t, " a  b\tc ");
    CHECK(!strcmp(norm, SP "a" SP "b" SP "c"), "%s: normalised \"%s\"", what, norm);
    free(norm);

    int32_t seq[8];
    sdt_spm_report rep;
    CHECK(sdt_spm_encode(t, "the cat", 8, seq, &rep, &err), "%s: encode: %s", what, err.message);
    const int32_t want8[8] = {10, 5, 1, 0, 0, 0, 0, 0};
    CHECK(!memcmp(seq, want8, sizeof want8) && rep.end_index == 2 && rep.n_cut == 0, "%s: encode to 8", what);
    CHECK(sdt_spm_encode(t, "the cat cats dog", 4, seq, &rep, &err), "%s: encode: %s", what, err.message);
    const int32_t want4[4] = {10, 5, 5, 1};
    CHECK(!memcmp(seq, want4, sizeof want4) && rep.n_text_tokens == 5 && rep.n_cut == 2 && rep.end_index == 3,
          "%s: truncation keeps the end token last (cut %d of %d)", what, rep.n_cut, rep.n_text_tokens);
    CHECK(sdt_spm_encode(t, "", 3, seq, &rep, &err) && seq[0] == 1 && seq[1] == 0 && seq[2] == 0, "%s: empty prompt",
          what);
    CHECK(!sdt_spm_encode(t, "a", 0, seq, &rep, &err) && strstr(err.message, "length 0"), "%s: length 0: \"%s\"", what,
          err.message);
}

static void expect_refusal(const char *path, const void *data, size_t n, const char *needle)
{
    write_file(path, data, n);
    sdt_error err = {0};
    sdt_spm *t = sdt_spm_load(path, &err);
    CHECK(!t && strstr(err.message, path) && (!needle || strstr(err.message, needle)),
          "%s must be refused with a sentence naming it%s%s: \"%s\"", path, needle ? " and saying " : "",
          needle ? needle : "", err.message);
    printf("refused: %s\n", err.message);
    sdt_spm_free(t);
    unlink(path);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char dir[512], model[600], json[600], sub[600], sub_model[700];
    snprintf(dir, sizeof dir, "%s/sdt-spm-%ld", tmp, (long)getpid());
    CHECK(mkdir(dir, 0777) == 0, "mkdir %s: %s", dir, strerror(errno));
    snprintf(model, sizeof model, "%s/spiece.model", dir);
    snprintf(json, sizeof json, "%s/tokenizer.json", dir);
    sdt_error err = {0};

    buf m = model_proto(VOCAB, NV, false, true);
    write_file(model, m.p, m.n);
    char *js = tokenizer_json(NULL);
    write_file(json, js, strlen(js));
    sdt_spm *tm = sdt_spm_load(model, &err);
    CHECK(tm != NULL, "spiece.model: %s", err.message);
    sdt_spm *tj = sdt_spm_load(json, &err);
    CHECK(tj != NULL, "tokenizer.json: %s", err.message);
    if (tm) check_segmentation(tm, "spiece.model");
    if (tj) check_segmentation(tj, "tokenizer.json");
    /* the folder (spiece.model first) and a checkpoint folder's tokenizer_2/ */
    sdt_spm *td = sdt_spm_load(dir, &err);
    CHECK(td && sdt_spm_size(td) == NV, "the folder: %s", err.message);
    sdt_spm_free(td);
    snprintf(sub, sizeof sub, "%s/flux", dir);
    snprintf(sub_model, sizeof sub_model, "%s/flux/tokenizer_2", dir);
    mkdir(sub, 0777), mkdir(sub_model, 0777);
    CHECK(!sdt_spm_load(sub, &err) && err.code == SDT_ERR_NOT_FOUND && strstr(err.message, "tokenizer_2/"),
          "a folder without a tokenizer: \"%s\"", err.message);
    char sub_file[800];
    snprintf(sub_file, sizeof sub_file, "%s/spiece.model", sub_model);
    write_file(sub_file, m.p, m.n);
    td = sdt_spm_load(sub, &err);
    CHECK(td && sdt_spm_size(td) == NV, "tokenizer_2/ of a checkpoint folder: %s", err.message);
    sdt_spm_free(td);
    unlink(sub_file), rmdir(sub_model), rmdir(sub);
    /* both files: the same ids for a longer text */
    if (tm && tj) {
        const char *text = "The yellow star, the cat's dog!  A caf\xC3\xA9 at\tthe \xE3\x81\x82 star";
        int32_t *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        CHECK(sdt_spm_tokenize(tm, text, &a, &na, &err) && sdt_spm_tokenize(tj, text, &b, &nb, &err) && na == nb &&
                  na > 0 && !memcmp(a, b, na * sizeof(int32_t)),
              "spiece.model and tokenizer.json must give the same ids");
        free(a), free(b);
    }
    /* added tokens (textual-inversion placeholders): split out of the raw text first, ids after the pieces */
    if (tm) {
        int32_t star = -1, star2 = -1, again = -1;
        CHECK(sdt_spm_add_token(tm, "<star>", &star, &err) && star == NV, "add <star>: %d %s", star, err.message);
        CHECK(sdt_spm_add_token(tm, "<star>-2", &star2, &err) && star2 == NV + 1, "add <star>-2: %d", star2);
        CHECK(sdt_spm_add_token(tm, "<star>", &again, &err) && again == NV, "adding <star> again gives its id");
        CHECK(!sdt_spm_add_token(tm, "two words", &again, &err) && strstr(err.message, "whitespace"),
              "an added token with a space is refused: \"%s\"", err.message);
        CHECK(sdt_spm_size_with_added(tm) == NV + 2 && sdt_spm_piece_id(tm, "<star>-2") == NV + 1 &&
                  !strcmp(sdt_spm_piece_text(tm, NV), "<star>"),
              "added tokens' ids and texts");
        EXPECT(tm, "the <star> cat", "added token", 10, NV, 5);
        EXPECT(tm, "the<star>cat", "added token", 10, NV, 5);  /* each stretch gets its own ▁ */
        EXPECT(tm, "<star>-2 dog", "added token", NV + 1, 13); /* the longest added token at a position */
        EXPECT(tm, "<star><star>", "added token", NV, NV);
    }
    /* without the trainer's ids the special pieces are found by name and type */
    buf m2 = model_proto(VOCAB, NV, false, false);
    sdt_spm *t2 = sdt_spm_load_model_memory(m2.p, m2.n, "no-ids.model", &err);
    CHECK(t2 && sdt_spm_eos(t2) == 1 && sdt_spm_pad(t2) == 0 && sdt_spm_unk(t2) == 2, "ids by name: %s", err.message);
    sdt_spm_free(t2);
    free(m2.p);
    /* byte fallback: an unknown character becomes its UTF-8 bytes */
    buf mb = model_proto(VOCAB, NV, true, true);
    sdt_spm *tb = sdt_spm_load_model_memory(mb.p, mb.n, "bytes.model", &err);
    CHECK(tb != NULL, "byte model: %s", err.message);
    if (tb) {
        EXPECT(tb, "x cat", "byte fallback", 3, NV + 'x', 5);
        EXPECT(tb, "\xC3\xBF", "byte fallback", 3, NV + 0xC3, NV + 0xBF); /* ÿ: two bytes */
    }
    sdt_spm_free(tb);
    free(mb.p);

    /* the precompiled character map (T5's NFKC): in spiece.model's normalizer spec and tokenizer.json's
     * Precompiled normalizer (base64) alike */
    buf cm = charsmap(NFKC_KEYS, 3);
    buf mc = model_proto_map(VOCAB, NV, false, true, &cm);
    char *jc = tokenizer_json(&cm);
    sdt_spm *cms[2] = {sdt_spm_load_model_memory(mc.p, mc.n, "nfkc.model", &err),
                       sdt_spm_load_json_memory(jc, strlen(jc), "nfkc.json", &err)};
    for (int k = 0; k < 2; k++) {
        const char *what = k ? "charsmap tokenizer.json" : "charsmap spiece.model";
        CHECK(cms[k] != NULL, "%s: %s", what, err.message);
        if (!cms[k]) continue;
        static const struct {
            const char *in, *out;
        } norms[] = {
            {"\xEF\xAC\x81", SP "fi"},
            {"a  \xE2\x91\xA0", SP "a" SP "1"},
            {"cafe\xCC\x81", SP "caf\xC3\xA9"},
            {"ex e", SP "ex" SP "e"},
            {"\xEF\xBD\x83"
             "at",
             SP "cat"}, /* the built-in foldings still apply */
        };
        for (size_t i = 0; i < sizeof norms / sizeof norms[0]; i++) {
            char *got = sdt_spm_normalize(cms[k], norms[i].in);
            CHECK(!strcmp(got, norms[i].out), "%s: \"%s\" normalised to \"%s\", want \"%s\"", what, norms[i].in, got,
                  norms[i].out);
            free(got);
        }
        EXPECT(cms[k], "cafe\xCC\x81", what, 17, 16); /* composed by the map: the ids of "café" */
    }
    if (tm) {
        char *plain = sdt_spm_normalize(tm, "cafe\xCC\x81");
        CHECK(strcmp(plain, SP "caf\xC3\xA9") != 0, "without a map the combining accent stays apart");
        free(plain);
    }
    sdt_spm_free(cms[0]), sdt_spm_free(cms[1]);
    free(mc.p), free(jc), free(cm.p);

    /* malformed files: each refused with a sentence naming it */
    char bad[700];
    snprintf(bad, sizeof bad, "%s/bad.model", dir);
    /* every proper prefix of the model is refused (a cut between two fields too), naming the file */
    int loaded = 0, unnamed = 0;
    for (size_t len = 0; len < m.n; len++) {
        sdt_spm *p = sdt_spm_load_model_memory(m.p, len, "prefix.model", &err);
        loaded += p != NULL;
        unnamed += !p && !strstr(err.message, "prefix.model");
        sdt_spm_free(p);
    }
    CHECK(loaded == 0 && unnamed == 0,
          "of %zu truncations of spiece.model %d loaded and %d were refused without the "
          "file's name",
          m.n, loaded, unnamed);
    /* random bytes: refused or read, never a crash (a valid-looking random model is allowed) */
    sdt_test_rng rng = sdt_test_rng_from_env("sentencepiece");
    for (int k = 0; k < 300; k++) {
        unsigned char junk[200];
        size_t len = (size_t)(sdt_test_next(&rng) % sizeof junk);
        for (size_t i = 0; i < len; i++) junk[i] = (unsigned char)sdt_test_next(&rng);
        if (k % 3 == 0 && len > 8) memcpy(junk, m.p, 8); /* a plausible start */
        sdt_spm *p = sdt_spm_load_model_memory(junk, len, "junk.model", &err);
        CHECK(p || strstr(err.message, "junk.model"), "junk %d refused without the file's name: \"%s\"", k,
              err.message);
        sdt_spm_free(p);
        sdt_spm *q = sdt_spm_load_json_memory((const char *)junk, len, "junk.json", &err);
        CHECK(!q && strstr(err.message, "junk.json"), "junk %d as JSON: \"%s\"", k, err.message);
        sdt_spm_free(q);
    }
    expect_refusal(bad, m.p, m.n / 2, NULL); /* truncated in the middle of a piece */
    expect_refusal(bad, m.p, 3, NULL);       /* truncated after a key */
    expect_refusal(bad, "hello world, not a model", 24, "not a SentencePiece model");
    static const unsigned char zeros[16] = {0};
    expect_refusal(bad, zeros, sizeof zeros, "bad protobuf field key");
    expect_refusal(bad, "", 0, "no pieces");
    piece no_eos[NV];
    memcpy(no_eos, VOCAB, sizeof no_eos);
    no_eos[1].text = "<eos>";
    buf mn = model_proto(no_eos, NV, false, false);
    expect_refusal(bad, mn.p, mn.n, "end piece (</s>) is missing");
    free(mn.p);
    piece dup[NV];
    memcpy(dup, VOCAB, sizeof dup);
    dup[7].text = "s";
    buf md = model_proto(dup, NV, false, true);
    expect_refusal(bad, md.p, md.n, "occurs twice");
    free(md.p);
    buf bpe = {0}, ts = {0};
    put_int(&ts, 3, 2);
    put_bytes(&bpe, 2, ts.p, ts.n);
    expect_refusal(bad, bpe.p, bpe.n, "BPE");
    buf short_map = {0};
    put(&short_map, "\x40\x00\x00\x00\x01\x02", 6);
    buf mm = model_proto_map(VOCAB, NV, false, true, &short_map);
    expect_refusal(bad, mm.p, mm.n, "precompiled character map");
    free(mm.p), free(short_map.p);
    free(bpe.p), free(ts.p);
    buf wide_ids = model_proto(VOCAB, NV, false, false), tr = {0};
    put_int(&tr, 42, 500); /* eos past the last piece */
    put_bytes(&wide_ids, 2, tr.p, tr.n);
    expect_refusal(bad, wide_ids.p, wide_ids.n, "past the last piece");
    free(wide_ids.p), free(tr.p);
    /* a tokenizer.json under another name is told by its content */
    snprintf(bad, sizeof bad, "%s/t5-vocab.txt", dir);
    write_file(bad, js, strlen(js));
    sdt_spm *renamed = sdt_spm_load(bad, &err);
    CHECK(renamed && sdt_spm_size(renamed) == NV, "a renamed tokenizer.json: %s", err.message);
    sdt_spm_free(renamed);
    unlink(bad);
    snprintf(bad, sizeof bad, "%s/bad.json", dir);
    expect_refusal(bad, "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\"", 40, "not valid JSON");
    expect_refusal(bad, "{\"model\":{\"type\":\"BPE\",\"vocab\":{}}}", 35, "not a Unigram model");
    expect_refusal(bad, "{\"model\":{\"type\":\"Unigram\",\"vocab\":[[\"a\",1],[\"b\"]]}}", 52, "entry 1");
    expect_refusal(bad, "{\"model\":{\"type\":\"Unigram\",\"unk_id\":9,\"vocab\":[[\"a\",1]]}}", 57, "unk_id 9");

    sdt_spm_free(tm), sdt_spm_free(tj);
    free(m.p), free(js);
    unlink(model), unlink(json), rmdir(dir);
    return sdt_test_finish("sentencepiece");
}
