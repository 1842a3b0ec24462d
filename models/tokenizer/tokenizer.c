/* tokenizer.c - CLIP byte-level BPE; see tokenizer.h. */
#include "tokenizer.h"

#include "clip_bpe_rules.h"

#include <cjson/cJSON.h>
#include <glib.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_read.h"
#include "c_json.h"
#include "py_lower.h"

#define START_TOKEN CLIP_START_TOKEN
#define END_TOKEN CLIP_END_TOKEN
#define WORD_END CLIP_WORD_END
#define MAX_VOCAB_ID (1 << 22) /* far above any BPE vocabulary; bounds the id table (32 MiB) */
#define CACHE_LIMIT 100000     /* words; the cache is emptied when it grows past this */

typedef struct merge_rec {
    guint64 pair; /* first symbol << 32 | second symbol; the hash key */
    int rank;
    int result; /* symbol of the merged pair */
} merge_rec;

struct sdt_tokenizer {
    GHashTable *vocab;  /* token text (owned) -> id + 1 */
    GPtrArray *id_text; /* id -> text (borrowed), NULL where no token has the id */
    int32_t vocab_size, size, bos, eos;
    GHashTable *symbols;  /* symbol text (owned) -> symbol + 1 */
    GPtrArray *sym_text;  /* symbol -> text (borrowed) */
    GArray *sym_vocab_id; /* symbol -> vocab id, or -1 */
    GHashTable *merges;   /* &merge_rec.pair -> merge_rec */
    merge_rec *merge_recs;
    char byte_sym[256][4]; /* bytes_to_unicode: byte -> UTF-8 of its printable stand-in */
    int16_t sym_byte[512]; /* inverse, by code point (all stand-ins are below U+0200) */
    GRegex *pattern;
    GHashTable *cache; /* byte-encoded word (owned) -> GArray of int32 ids */
    GMutex cache_lock;
    GPtrArray *added_text; /* lowercased placeholder texts (owned) */
    GArray *added_id;      /* int32, parallel */
};

#define FAIL_NULL(...)                                                                                                 \
    do {                                                                                                               \
        sdt_fail(error, SDT_ERR_BAD_FORMAT, __VA_ARGS__);                                                              \
        return NULL;                                                                                                   \
    } while (0)

/* ---- symbols and bytes ---------------------------------------------------------- */

static int intern(sdt_tokenizer *t, const char *s, size_t len)
{
    char *key = g_strndup(s, len);
    gpointer v = g_hash_table_lookup(t->symbols, key);
    if (v) {
        g_free(key);
        return GPOINTER_TO_INT(v) - 1;
    }
    int sym = (int)t->sym_text->len;
    g_ptr_array_add(t->sym_text, key);
    g_hash_table_insert(t->symbols, key, GINT_TO_POINTER(sym + 1));
    int32_t none = -1;
    g_array_append_val(t->sym_vocab_id, none);
    return sym;
}

/* bytes_to_unicode and its inverse (all stand-ins are below U+0200). */
static void init_byte_map(sdt_tokenizer *t)
{
    for (int i = 0; i < 512; i++) t->sym_byte[i] = -1;
    clip_byte_symbols(t->byte_sym);
    for (int b = 0; b < 256; b++) t->sym_byte[clip_byte_code_point((unsigned char)b)] = (int16_t)b;
}

/* ---- loading ------------------------------------------------------------------------ */

static sdt_tokenizer *tokenizer_new(void)
{
    sdt_tokenizer *t = g_new0(sdt_tokenizer, 1);
    t->vocab = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    t->id_text = g_ptr_array_new();
    t->symbols = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    t->sym_text = g_ptr_array_new();
    t->sym_vocab_id = g_array_new(FALSE, FALSE, sizeof(int32_t));
    t->merges = g_hash_table_new(g_int64_hash, g_int64_equal);
    t->cache = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_array_unref);
    g_mutex_init(&t->cache_lock);
    t->added_text = g_ptr_array_new_with_free_func(g_free);
    t->added_id = g_array_new(FALSE, FALSE, sizeof(int32_t));
    t->pattern = g_regex_new(clip_pretoken_pattern, G_REGEX_CASELESS | G_REGEX_OPTIMIZE, 0, NULL);
    init_byte_map(t);
    return t;
}

static void set_id_text(sdt_tokenizer *t, int32_t id, const char *text)
{
    if ((guint)id >= t->id_text->len) g_ptr_array_set_size(t->id_text, id + 1);
    if (!g_ptr_array_index(t->id_text, id)) g_ptr_array_index(t->id_text, id) = (gpointer)text;
}

static bool parse_vocab(sdt_tokenizer *t, const char *text, size_t len, const char *name, sdt_error *error)
{
    const char *end = NULL;
    cJSON *root = sdt_json_parse_prefix(text, len, &end);
    if (!root || !cJSON_IsObject(root)) {
        size_t at = root ? 0 : (cJSON_GetErrorPtr() ? (size_t)(cJSON_GetErrorPtr() - text) : 0);
        cJSON_Delete(root);
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: not a JSON object of token -> id (%s near byte %zu); give CLIP's vocab.json or "
                 "re-download it",
                 name, root ? "wrong JSON type" : "invalid JSON", at > len ? len : at);
        return false;
    }
    const cJSON *e;
    int32_t max_id = -1;
    cJSON_ArrayForEach(e, root)
    {
        double d = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!cJSON_IsNumber(e) || !(d >= 0) || d != floor(d) || d >= MAX_VOCAB_ID) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: token '%.60s' has an id that is not an integer in 0..%d; the file is damaged, "
                     "re-download it",
                     name, e->string, MAX_VOCAB_ID - 1);
            cJSON_Delete(root);
            return false;
        }
        int32_t id = (int32_t)d;
        if (!g_utf8_validate(e->string, -1, NULL)) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: the token with id %d is not valid UTF-8; the file is damaged, re-download it", name, id);
            cJSON_Delete(root);
            return false;
        }
        if (g_hash_table_contains(t->vocab, e->string)) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: token '%.60s' appears twice; the file is damaged, re-download it",
                     name, e->string);
            cJSON_Delete(root);
            return false;
        }
        char *key = g_strdup(e->string);
        g_hash_table_insert(t->vocab, key, GINT_TO_POINTER(id + 1));
        set_id_text(t, id, key);
        if (id > max_id) max_id = id;
    }
    cJSON_Delete(root);
    t->vocab_size = t->size = max_id + 1;
    int32_t ids[2];
    const char *special[2] = {START_TOKEN, END_TOKEN};
    for (int i = 0; i < 2; i++) {
        gpointer v = g_hash_table_lookup(t->vocab, special[i]);
        if (!v) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: has no '%s' entry; this is not a CLIP vocabulary (give the tokenizer's "
                     "vocab.json)",
                     name, special[i]);
            return false;
        }
        ids[i] = GPOINTER_TO_INT(v) - 1;
    }
    t->bos = ids[0];
    t->eos = ids[1];
    return true;
}

static bool add_merge(sdt_tokenizer *t, const char *line, size_t len, int rank)
{
    const char *space = memchr(line, ' ', len);
    if (!space || space == line || space == line + len - 1 || memchr(space + 1, ' ', len - (size_t)(space - line) - 1))
        return false;
    int a = intern(t, line, (size_t)(space - line));
    int b = intern(t, space + 1, len - (size_t)(space - line) - 1);
    char *joined = g_strconcat(g_ptr_array_index(t->sym_text, a), g_ptr_array_index(t->sym_text, b), NULL);
    int result = intern(t, joined, strlen(joined));
    g_free(joined);
    merge_rec *m = &t->merge_recs[rank];
    m->pair = ((guint64)(guint32)a << 32) | (guint32)b;
    m->rank = rank;
    m->result = result;
    /* Like dict(zip(merges, range(n))): a repeated pair keeps its last rank. */
    g_hash_table_replace(t->merges, &m->pair, m);
    return true;
}

static bool parse_merges(sdt_tokenizer *t, const char *text, size_t len, const char *name, sdt_error *error)
{
    size_t n_lines = 1;
    for (size_t i = 0; i < len; i++) n_lines += text[i] == '\n';
    t->merge_recs = g_new0(merge_rec, n_lines);
    int rank = 0;
    size_t line_no = 0;
    for (size_t pos = 0; pos < len;) {
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t line_len = nl ? (size_t)(nl - line) : len - pos;
        pos += line_len + 1;
        line_no++;
        if (line_len && line[line_len - 1] == '\r') line_len--;
        if (line_no == 1 && line_len && line[0] == '#') continue; /* "#version: 0.2" */
        if (line_len == 0) continue;
        bool ok = !memchr(line, 0, line_len) && g_utf8_validate(line, (gssize)line_len, NULL) &&
                  add_merge(t, line, line_len, rank);
        if (!ok) {
            char *shown = g_utf8_make_valid(line, (gssize)(line_len > 60 ? 60 : line_len));
            for (char *c = shown; *c; c++)
                if ((unsigned char)*c < 0x20) *c = '?';
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: line %zu is not two symbols separated by one space (found \"%s\"); the file "
                     "is damaged, re-download the tokenizer's merges.txt",
                     name, line_no, shown);
            g_free(shown);
            return false;
        }
        rank++;
    }
    return true;
}

/* Each symbol's vocab id, looked up once instead of per word. */
static void index_symbols(sdt_tokenizer *t)
{
    for (guint s = 0; s < t->sym_text->len; s++) {
        gpointer v = g_hash_table_lookup(t->vocab, g_ptr_array_index(t->sym_text, s));
        g_array_index(t->sym_vocab_id, int32_t, s) = v ? GPOINTER_TO_INT(v) - 1 : -1;
    }
}

sdt_tokenizer *sdt_tokenizer_load_memory(const char *vocab, size_t vocab_len, const char *merges, size_t merges_len,
                                         const char *vocab_name, const char *merges_name, sdt_error *error)
{
    sdt_tokenizer *t = tokenizer_new();
    if (!t->pattern) {
        sdt_tokenizer_free(t);
        FAIL_NULL("tokenizer: GLib's regex engine rejected CLIP's pattern; GLib needs Unicode property support");
    }
    if (!parse_vocab(t, vocab, vocab_len, vocab_name ? vocab_name : "vocab.json", error) ||
        !parse_merges(t, merges, merges_len, merges_name ? merges_name : "merges.txt", error)) {
        sdt_tokenizer_free(t);
        return NULL;
    }
    index_symbols(t);
    return t;
}

sdt_tokenizer *sdt_tokenizer_load(const char *vocab_path, const char *merges_path, sdt_error *error)
{
    char *vocab = NULL, *merges = NULL;
    size_t vlen = 0, mlen = 0;
    if (!sdt_file_read_all(vocab_path, "tokenizer file", SDT_FILE_LIMIT_LARGE_TEXT, &vocab, &vlen, error) ||
        !sdt_file_read_all(merges_path, "tokenizer file", SDT_FILE_LIMIT_LARGE_TEXT, &merges, &mlen, error)) {
        sdt_error_append(error, "; check the tokenizer path");
        free(vocab);
        return NULL;
    }
    sdt_tokenizer *t = sdt_tokenizer_load_memory(vocab, vlen, merges, mlen, vocab_path, merges_path, error);
    free(vocab);
    free(merges);
    return t;
}

sdt_tokenizer *sdt_tokenizer_load_dir(const char *dir, sdt_error *error)
{
    if (g_file_test(dir, G_FILE_TEST_IS_REGULAR)) { /* a vocab.json given directly: merges.txt beside it */
        char *folder = g_path_get_dirname(dir);
        char *m = g_build_filename(folder, "merges.txt", NULL);
        sdt_tokenizer *t = sdt_tokenizer_load(dir, m, error);
        g_free(m);
        g_free(folder);
        return t;
    }
    const char *subs[] = {"tokenizer", ""};
    for (int i = 0; i < 2; i++) {
        char *v = g_build_filename(dir, subs[i], "vocab.json", NULL);
        char *m = g_build_filename(dir, subs[i], "merges.txt", NULL);
        sdt_tokenizer *t = NULL;
        bool found = g_file_test(v, G_FILE_TEST_EXISTS);
        if (found) t = sdt_tokenizer_load(v, m, error);
        g_free(v);
        g_free(m);
        if (found) return t;
    }
    sdt_fail(error, SDT_ERR_NOT_FOUND,
             "%s: has neither tokenizer/vocab.json nor vocab.json; give the model folder or a folder with CLIP's "
             "vocab.json and merges.txt",
             dir);
    return NULL;
}

void sdt_tokenizer_free(sdt_tokenizer *t)
{
    if (!t) return;
    g_hash_table_destroy(t->vocab);
    g_ptr_array_free(t->id_text, TRUE);
    g_hash_table_destroy(t->symbols);
    g_ptr_array_free(t->sym_text, TRUE);
    g_array_free(t->sym_vocab_id, TRUE);
    g_hash_table_destroy(t->merges);
    g_free(t->merge_recs);
    if (t->pattern) g_regex_unref(t->pattern);
    g_hash_table_destroy(t->cache);
    g_mutex_clear(&t->cache_lock);
    g_ptr_array_free(t->added_text, TRUE);
    g_array_free(t->added_id, TRUE);
    g_free(t);
}

/* ---- queries ------------------------------------------------------------------------- */

int32_t sdt_tokenizer_vocab_size(const sdt_tokenizer *t)
{
    return t->vocab_size;
}
int32_t sdt_tokenizer_size(const sdt_tokenizer *t)
{
    return t->size;
}
int32_t sdt_tokenizer_bos(const sdt_tokenizer *t)
{
    return t->bos;
}
int32_t sdt_tokenizer_eos(const sdt_tokenizer *t)
{
    return t->eos;
}

static bool is_added_id(const sdt_tokenizer *t, int32_t id)
{
    for (guint i = 0; i < t->added_id->len; i++)
        if (g_array_index(t->added_id, int32_t, i) == id) return true;
    return false;
}

static int find_added(const sdt_tokenizer *t, const char *lowered)
{
    for (guint i = 0; i < t->added_text->len; i++)
        if (strcmp(g_ptr_array_index(t->added_text, i), lowered) == 0) return (int)i;
    return -1;
}

int32_t sdt_tokenizer_token_id(const sdt_tokenizer *t, const char *token)
{
    char *low = sdt_py_lower(token);
    int a = find_added(t, low);
    g_free(low);
    if (a >= 0) return g_array_index(t->added_id, int32_t, a);
    gpointer v = g_hash_table_lookup(t->vocab, token);
    return v ? GPOINTER_TO_INT(v) - 1 : -1;
}

const char *sdt_tokenizer_token_text(const sdt_tokenizer *t, int32_t id)
{
    for (guint i = 0; i < t->added_id->len; i++)
        if (g_array_index(t->added_id, int32_t, i) == id) return g_ptr_array_index(t->added_text, i);
    return id >= 0 && (guint)id < t->id_text->len ? g_ptr_array_index(t->id_text, id) : NULL;
}

/* ---- normalisation ------------------------------------------------------------------- */

static bool is_py_space(gunichar c)
{
    /* Python's str.isspace(), which CLIP's \s+ clean-up uses. */
    return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static bool is_word_char(gunichar c)
{
    if (g_unichar_isalpha(c)) return true;
    GUnicodeType ty = g_unichar_type(c);
    return ty == G_UNICODE_DECIMAL_NUMBER || ty == G_UNICODE_LETTER_NUMBER || ty == G_UNICODE_OTHER_NUMBER;
}

/* The common part of Python's html.unescape: a few named entities and numeric references. */
static char *html_unescape(const char *s)
{
    static const struct {
        const char *name;
        const char *text;
        bool needs_semicolon;
    } named[] = {{"amp", "&", false},   {"lt", "<", false},          {"gt", ">", false},
                 {"quot", "\"", false}, {"nbsp", "\xc2\xa0", false}, {"apos", "'", true}};
    GString *out = g_string_sized_new(strlen(s));
    while (*s) {
        if (*s != '&') {
            g_string_append_c(out, *s++);
            continue;
        }
        const char *p = s + 1;
        bool done = false;
        if (*p == '#') {
            bool hex = p[1] == 'x' || p[1] == 'X';
            const char *q = p + 1 + hex;
            guint64 v = 0;
            int digits = 0;
            while (digits < 12 && (hex ? g_ascii_isxdigit(*q) : g_ascii_isdigit(*q))) {
                v = v * (hex ? 16 : 10) + (guint64)(hex ? g_ascii_xdigit_value(*q) : g_ascii_digit_value(*q));
                q++, digits++;
            }
            if (digits) {
                gunichar c = (v == 0 || (v >= 0xD800 && v <= 0xDFFF) || v > 0x10FFFF) ? 0xFFFD : (gunichar)v;
                g_string_append_unichar(out, c);
                s = q + (*q == ';');
                done = true;
            }
        } else {
            for (size_t i = 0; i < G_N_ELEMENTS(named) && !done; i++) {
                size_t n = strlen(named[i].name);
                if (strncmp(p, named[i].name, n) != 0) continue;
                bool semi = p[n] == ';';
                if (!semi && named[i].needs_semicolon) continue;
                g_string_append(out, named[i].text);
                s = p + n + semi;
                done = true;
            }
        }
        if (!done) g_string_append_c(out, *s++);
    }
    return g_string_free(out, FALSE);
}

/* Whitespace runs to one space, trimmed. */
static char *whitespace_clean(const char *s)
{
    GString *out = g_string_sized_new(strlen(s));
    bool pending = false;
    for (const char *p = s; *p; p = g_utf8_next_char(p)) {
        gunichar c = g_utf8_get_char(p);
        if (is_py_space(c)) {
            pending = out->len > 0;
            continue;
        }
        if (pending) g_string_append_c(out, ' ');
        pending = false;
        g_string_append_len(out, p, g_utf8_next_char(p) - p);
    }
    return g_string_free(out, FALSE);
}

static char *normalize(const char *text)
{
    char *valid = g_utf8_make_valid(text, -1);
    char *once = html_unescape(valid);
    char *twice = html_unescape(once);
    char *clean = whitespace_clean(twice);
    char *lower = sdt_py_lower(clean);
    g_free(valid);
    g_free(once);
    g_free(twice);
    g_free(clean);
    return lower;
}

/* ---- BPE ----------------------------------------------------------------------------- */

static const merge_rec *lookup_merge(const sdt_tokenizer *t, int a, int b)
{
    guint64 key = ((guint64)(guint32)a << 32) | (guint32)b;
    return g_hash_table_lookup(t->merges, &key);
}

/* One pre-token (already byte-encoded) to ids, exactly as CLIP's bpe(): merge
 * the lowest-ranked adjacent pair everywhere, left to right, until none is ranked. */
static GArray *bpe_word(sdt_tokenizer *t, const char *word)
{
    GArray *ids = g_array_new(FALSE, FALSE, sizeof(int32_t));
    size_t nchars = (size_t)g_utf8_strlen(word, -1);
    int *sym = g_new(int, nchars ? nchars : 1);
    size_t n = 0;
    for (const char *p = word; *p; p = g_utf8_next_char(p)) {
        const char *next = g_utf8_next_char(p);
        if (*next) {
            sym[n++] = intern(t, p, (size_t)(next - p));
        } else { /* the last symbol carries the word end */
            char *last = g_strconcat(p, WORD_END, NULL);
            sym[n++] = intern(t, last, strlen(last));
            g_free(last);
        }
    }
    while (n > 1) {
        const merge_rec *best = NULL;
        for (size_t i = 0; i + 1 < n; i++) {
            const merge_rec *m = lookup_merge(t, sym[i], sym[i + 1]);
            if (m && (!best || m->rank < best->rank)) best = m;
        }
        if (!best) break;
        int first = (int)(best->pair >> 32), second = (int)(best->pair & 0xffffffffu);
        size_t out = 0;
        for (size_t i = 0; i < n;) {
            if (i + 1 < n && sym[i] == first && sym[i + 1] == second) {
                sym[out++] = best->result;
                i += 2;
            } else {
                sym[out++] = sym[i++];
            }
        }
        n = out;
    }
    for (size_t i = 0; i < n; i++) {
        /* Symbols interned after loading (new characters) have no vocab entry: unknown = end token, as HF does. */
        int32_t id = (guint)sym[i] < t->sym_vocab_id->len ? g_array_index(t->sym_vocab_id, int32_t, sym[i]) : -1;
        if (id < 0) {
            gpointer v = g_hash_table_lookup(t->vocab, g_ptr_array_index(t->sym_text, sym[i]));
            id = v ? GPOINTER_TO_INT(v) - 1 : t->eos;
        }
        g_array_append_val(ids, id);
    }
    g_free(sym);
    return ids;
}

static void encode_piece(sdt_tokenizer *t, const char *piece, size_t len, GArray *out)
{
    if (len == strlen(START_TOKEN) && strncmp(piece, START_TOKEN, len) == 0) {
        g_array_append_val(out, t->bos);
        return;
    }
    if (len == strlen(END_TOKEN) && strncmp(piece, END_TOKEN, len) == 0) {
        g_array_append_val(out, t->eos);
        return;
    }
    GString *enc = g_string_sized_new(len * 2);
    for (size_t i = 0; i < len; i++) g_string_append(enc, t->byte_sym[(unsigned char)piece[i]]);
    g_mutex_lock(&t->cache_lock); /* interning and the cache both change shared tables */
    GArray *ids = g_hash_table_lookup(t->cache, enc->str);
    if (!ids) {
        ids = bpe_word(t, enc->str);
        if (g_hash_table_size(t->cache) >= CACHE_LIMIT) g_hash_table_remove_all(t->cache);
        g_hash_table_insert(t->cache, g_strdup(enc->str), ids);
    }
    g_array_append_vals(out, ids->data, ids->len);
    g_mutex_unlock(&t->cache_lock);
    g_string_free(enc, TRUE);
}

/* CLIP's pre-tokenizer over a stretch of normalised text without placeholders. */
static void encode_plain(sdt_tokenizer *t, const char *s, size_t len, GArray *out)
{
    if (!len) return;
    GMatchInfo *mi = NULL;
    g_regex_match_full(t->pattern, s, (gssize)len, 0, 0, &mi, NULL);
    while (g_match_info_matches(mi)) {
        int a, b;
        if (g_match_info_fetch_pos(mi, 0, &a, &b) && b > a) encode_piece(t, s + a, (size_t)(b - a), out);
        g_match_info_next(mi, NULL);
    }
    g_match_info_free(mi);
}

/* The added token that starts at s as a whole word (longest wins), or -1. */
static int added_at(const sdt_tokenizer *t, const char *text, const char *s)
{
    int best = -1;
    size_t best_len = 0;
    for (guint i = 0; i < t->added_text->len; i++) {
        const char *tok = g_ptr_array_index(t->added_text, i);
        size_t n = strlen(tok);
        if (n <= best_len || strncmp(s, tok, n) != 0) continue;
        if (is_word_char(g_utf8_get_char(tok)) && s > text && is_word_char(g_utf8_get_char(g_utf8_prev_char(s))))
            continue;
        const char *last = g_utf8_prev_char(tok + n);
        if (is_word_char(g_utf8_get_char(last)) && s[n] && is_word_char(g_utf8_get_char(s + n))) continue;
        best = (int)i;
        best_len = n;
    }
    return best;
}

void sdt_tokenizer_tokenize(sdt_tokenizer *t, const char *text, int32_t **ids, size_t *n)
{
    char *norm = normalize(text ? text : "");
    GArray *out = g_array_new(FALSE, FALSE, sizeof(int32_t));
    const char *plain = norm;
    for (const char *p = norm; *p;) {
        int a = t->added_text->len ? added_at(t, norm, p) : -1;
        if (a < 0) {
            p = g_utf8_next_char(p);
            continue;
        }
        encode_plain(t, plain, (size_t)(p - plain), out);
        g_array_append_val(out, g_array_index(t->added_id, int32_t, a));
        p += strlen(g_ptr_array_index(t->added_text, a));
        plain = p;
    }
    encode_plain(t, plain, strlen(plain), out);
    g_free(norm);
    *n = out->len;
    *ids = malloc((out->len ? out->len : 1) * sizeof(int32_t));
    if (*ids && out->len)
        memcpy(*ids, out->data, out->len * sizeof(int32_t));
    else
        *n = 0;
    g_array_free(out, TRUE);
}

/* ---- added tokens, encoding, decoding ----------------------------------------------- */

bool sdt_tokenizer_add_token(sdt_tokenizer *t, const char *text, int32_t id, int32_t *id_out, sdt_error *error)
{
    if (!text || !g_utf8_validate(text, -1, NULL)) {
        sdt_fail(error, SDT_ERR_VALIDATION,
                 "added token: the text is missing or not UTF-8; give the placeholder as UTF-8 text");
        return false;
    }
    char *norm = normalize(text);
    if (!norm[0]) {
        sdt_fail(error, SDT_ERR_VALIDATION,
                 "added token '%.60s': empty after whitespace clean-up; choose a visible placeholder", text);
        g_free(norm);
        return false;
    }
    int existing = find_added(t, norm);
    if (existing >= 0) {
        if (id_out) *id_out = g_array_index(t->added_id, int32_t, existing);
        g_free(norm);
        return true;
    }
    if (id >= MAX_VOCAB_ID) {
        sdt_fail(error, SDT_ERR_VALIDATION,
                 "added token '%.60s': id %d is out of range; pass -1 to get the next free id", text, id);
        g_free(norm);
        return false;
    }
    if (id < 0) id = t->size;
    if (id >= t->size) t->size = id + 1;
    g_ptr_array_add(t->added_text, norm);
    g_array_append_val(t->added_id, id);
    if (id_out) *id_out = id;
    return true;
}

sdt_encode_options sdt_encode_defaults(void)
{
    sdt_encode_options o = {SDT_CLIP_CONTEXT, -1, -1};
    return o;
}

bool sdt_tokenizer_encode(sdt_tokenizer *t, const char *text, const sdt_encode_options *opt, int32_t *ids,
                          sdt_encode_report *rep, sdt_error *error)
{
    sdt_encode_options o = opt ? *opt : sdt_encode_defaults();
    if (o.length < 2) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "tokenizer: length %d leaves no room for the start and end tokens; use 77",
                 o.length);
        return false;
    }
    int32_t *toks;
    size_t n;
    sdt_tokenizer_tokenize(t, text, &toks, &n);
    size_t room = (size_t)o.length - 2, kept = n < room ? n : room;
    sdt_encode_report r = {(int)n, (int)(n - kept), false, false, (int)kept + 1};
    ids[0] = t->bos;
    for (size_t i = 0; i < n; i++) {
        if (i < kept) ids[1 + i] = toks[i];
        if (o.watch_id >= 0 && toks[i] == o.watch_id) *(i < kept ? &r.watch_kept : &r.watch_cut) = true;
    }
    ids[kept + 1] = t->eos;
    for (size_t i = kept + 2; i < (size_t)o.length; i++) ids[i] = o.pad_id >= 0 ? o.pad_id : t->eos;
    free(toks);
    if (rep) *rep = r;
    return true;
}

void sdt_tokens_pad_after_end(int32_t *ids, int length, int32_t end_id, int32_t pad_id)
{
    int end = 0;
    while (end < length && ids[end] != end_id) end++;
    for (int i = end + 1; i < length; i++) ids[i] = pad_id;
}

/* Appends a vocab token's bytes: each stand-in character back to its byte, "</w>" as a space. */
static void append_token_bytes(const sdt_tokenizer *t, const char *s, GString *out)
{
    for (const char *p = s; *p;) {
        if (strncmp(p, WORD_END, 4) == 0) {
            g_string_append_c(out, ' ');
            p += 4;
            continue;
        }
        gunichar c = g_utf8_get_char(p);
        const char *next = g_utf8_next_char(p);
        if (c < 512 && t->sym_byte[c] >= 0)
            g_string_append_c(out, (char)t->sym_byte[c]);
        else
            g_string_append_len(out, p, next - p);
        p = next;
    }
}

char *sdt_tokenizer_decode(const sdt_tokenizer *t, const int32_t *ids, size_t n)
{
    GString *out = g_string_new(NULL);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] == t->bos || ids[i] == t->eos) continue;
        const char *s = sdt_tokenizer_token_text(t, ids[i]);
        if (!s) continue;
        if (is_added_id(t, ids[i])) {
            g_string_append(out, s);
            g_string_append_c(out, ' ');
        } else {
            append_token_bytes(t, s, out);
        }
    }
    while (out->len && out->str[out->len - 1] == ' ') g_string_truncate(out, out->len - 1);
    char *valid = g_utf8_make_valid(out->str, (gssize)out->len);
    g_string_free(out, TRUE);
    char *result = strdup(valid);
    g_free(valid);
    return result;
}
