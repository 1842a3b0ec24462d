/* bpe_trainer.c - see bpe_trainer.h. */
#include "bpe_trainer.h"

#include <cjson/cJSON.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "clip_bpe_rules.h"
#include "c_json.h"
#include "py_lower.h"

typedef struct bpe_word {
    char *text; /* byte-encoded word (owned) */
    int64_t count;
    int *sym; /* current segmentation, symbol ids */
    int n;
} bpe_word;

typedef struct bpe_pair {
    int a, b;
    int64_t count;
} bpe_pair;

struct bpe_trainer {
    char byte_sym[256][4];
    GHashTable *word_counts; /* byte-encoded word (owned) -> int64 count (owned) */
    GPtrArray *sym_text;     /* symbol id == vocabulary id -> text (owned) */
    GHashTable *sym_ids;     /* text (borrowed) -> id + 1 */
    GArray *merges;          /* bpe_pair, in rank order */
    GRegex *pattern;
};

static int intern_symbol(bpe_trainer *t, char *owned_text)
{
    int id = (int)t->sym_text->len;
    g_ptr_array_add(t->sym_text, owned_text);
    g_hash_table_insert(t->sym_ids, owned_text, GINT_TO_POINTER(id + 1));
    return id;
}

static int symbol_id(const bpe_trainer *t, const char *text)
{
    return GPOINTER_TO_INT(g_hash_table_lookup(t->sym_ids, text)) - 1;
}

/* The 512 base symbols take ids 0..511 in CLIP's order, so a symbol's id is its vocabulary id. */
static void intern_base_symbols(bpe_trainer *t)
{
    unsigned char byte_at[512];
    bool used[512] = {false};
    for (unsigned b = 0; b < 256; b++) {
        unsigned cp = clip_byte_code_point((unsigned char)b);
        byte_at[cp] = (unsigned char)b;
        used[cp] = true;
    }
    for (int with_end = 0; with_end < 2; with_end++)
        for (unsigned cp = 0; cp < 512; cp++)
            if (used[cp]) intern_symbol(t, g_strconcat(t->byte_sym[byte_at[cp]], with_end ? CLIP_WORD_END : "", NULL));
}

bpe_trainer *bpe_trainer_new(void)
{
    bpe_trainer *t = g_new0(bpe_trainer, 1);
    clip_byte_symbols(t->byte_sym);
    t->word_counts = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    t->sym_text = g_ptr_array_new_with_free_func(g_free);
    t->sym_ids = g_hash_table_new(g_str_hash, g_str_equal);
    t->merges = g_array_new(FALSE, FALSE, sizeof(bpe_pair));
    t->pattern = g_regex_new(clip_pretoken_pattern, G_REGEX_CASELESS | G_REGEX_OPTIMIZE, 0, NULL);
    intern_base_symbols(t);
    return t;
}

void bpe_trainer_free(bpe_trainer *t)
{
    if (!t) return;
    g_hash_table_destroy(t->word_counts);
    g_hash_table_destroy(t->sym_ids);
    g_ptr_array_free(t->sym_text, TRUE);
    g_array_free(t->merges, TRUE);
    if (t->pattern) g_regex_unref(t->pattern);
    g_free(t);
}

static void count_word(bpe_trainer *t, const char *piece, size_t len)
{
    if ((len == strlen(CLIP_START_TOKEN) && !strncmp(piece, CLIP_START_TOKEN, len)) ||
        (len == strlen(CLIP_END_TOKEN) && !strncmp(piece, CLIP_END_TOKEN, len)))
        return; /* the special tokens are never split, so they teach no merges */
    GString *enc = g_string_sized_new(len * 2);
    for (size_t i = 0; i < len; i++) g_string_append(enc, t->byte_sym[(unsigned char)piece[i]]);
    int64_t *count = g_hash_table_lookup(t->word_counts, enc->str);
    if (count) {
        (*count)++;
        g_string_free(enc, TRUE);
    } else {
        count = g_new(int64_t, 1);
        *count = 1;
        g_hash_table_insert(t->word_counts, g_string_free(enc, FALSE), count);
    }
}

void bpe_trainer_add_text(bpe_trainer *t, const char *text)
{
    char *valid = g_utf8_make_valid(text, -1);
    char *lower = sdt_py_lower(valid); /* CLIP lowercases before splitting */
    GMatchInfo *mi = NULL;
    g_regex_match(t->pattern, lower, 0, &mi);
    while (g_match_info_matches(mi)) {
        int a, b;
        if (g_match_info_fetch_pos(mi, 0, &a, &b) && b > a) count_word(t, lower + a, (size_t)(b - a));
        g_match_info_next(mi, NULL);
    }
    g_match_info_free(mi);
    g_free(lower);
    g_free(valid);
}

size_t bpe_trainer_distinct_words(const bpe_trainer *t)
{
    return g_hash_table_size(t->word_counts);
}

/* ---- learning -------------------------------------------------------------------------- */

static int compare_words(const void *x, const void *y)
{
    return strcmp(((const bpe_word *)x)->text, ((const bpe_word *)y)->text);
}

/* Every distinct word split into byte symbols, the last one with "</w>", sorted by text. */
static bpe_word *split_words(const bpe_trainer *t, size_t *n_out)
{
    size_t n = g_hash_table_size(t->word_counts), i = 0;
    bpe_word *words = g_new0(bpe_word, n ? n : 1);
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, t->word_counts);
    while (g_hash_table_iter_next(&it, &key, &value)) {
        bpe_word *w = &words[i++];
        w->text = key;
        w->count = *(int64_t *)value;
        w->sym = g_new(int, g_utf8_strlen(w->text, -1));
        for (const char *p = w->text; *p; p = g_utf8_next_char(p)) {
            const char *next = g_utf8_next_char(p);
            char *s = *next ? g_strndup(p, (gsize)(next - p)) : g_strconcat(p, CLIP_WORD_END, NULL);
            w->sym[w->n++] = symbol_id(t, s);
            g_free(s);
        }
    }
    qsort(words, n, sizeof *words, compare_words);
    *n_out = n;
    return words;
}

static int compare_pair_keys(const void *x, const void *y)
{
    const bpe_pair *p = x, *q = y;
    if (p->a != q->a) return p->a < q->a ? -1 : 1;
    return p->b < q->b ? -1 : (p->b > q->b);
}

/* Every adjacent pair with its corpus count, one entry per distinct pair. */
static GArray *count_pairs(const bpe_word *words, size_t n_words)
{
    GArray *all = g_array_new(FALSE, FALSE, sizeof(bpe_pair));
    for (size_t i = 0; i < n_words; i++)
        for (int j = 0; j + 1 < words[i].n; j++) {
            bpe_pair p = {words[i].sym[j], words[i].sym[j + 1], words[i].count};
            g_array_append_val(all, p);
        }
    g_array_sort(all, compare_pair_keys);
    guint out = 0;
    for (guint i = 0; i < all->len; i++) {
        bpe_pair *p = &g_array_index(all, bpe_pair, i), *last = &g_array_index(all, bpe_pair, out ? out - 1 : 0);
        if (out && !compare_pair_keys(p, last))
            last->count += p->count;
        else
            g_array_index(all, bpe_pair, out++) = *p;
    }
    g_array_set_size(all, out);
    return all;
}

/* More frequent first; among equals the pair that sorts first by its symbols' text. */
static bool better_pair(const bpe_trainer *t, const bpe_pair *p, const bpe_pair *best)
{
    if (!best || p->count != best->count) return !best || p->count > best->count;
    int c = strcmp(g_ptr_array_index(t->sym_text, p->a), g_ptr_array_index(t->sym_text, best->a));
    if (!c) c = strcmp(g_ptr_array_index(t->sym_text, p->b), g_ptr_array_index(t->sym_text, best->b));
    return c < 0;
}

/* The best pair whose merged text is not a token yet; false when none is left. */
static bool choose_merge(const bpe_trainer *t, const GArray *pairs, bpe_pair *chosen, char **merged)
{
    const bpe_pair *best = NULL;
    char *best_text = NULL;
    for (guint i = 0; i < pairs->len; i++) {
        const bpe_pair *p = &g_array_index(pairs, bpe_pair, i);
        if (!better_pair(t, p, best)) continue;
        char *text = g_strconcat(g_ptr_array_index(t->sym_text, p->a), g_ptr_array_index(t->sym_text, p->b), NULL);
        if (symbol_id(t, text) >= 0) { /* another merge already spells it */
            g_free(text);
            continue;
        }
        g_free(best_text);
        best = p;
        best_text = text;
    }
    if (!best) return false;
    *chosen = *best;
    *merged = best_text;
    return true;
}

/* Left to right, non-overlapping, as CLIP's bpe() applies one merge. */
static void apply_merge(bpe_word *w, int a, int b, int merged)
{
    int out = 0;
    for (int i = 0; i < w->n;) {
        if (i + 1 < w->n && w->sym[i] == a && w->sym[i + 1] == b) {
            w->sym[out++] = merged;
            i += 2;
        } else {
            w->sym[out++] = w->sym[i++];
        }
    }
    w->n = out;
}

bool bpe_trainer_learn(bpe_trainer *t, int32_t vocab_size, sdt_error *error)
{
    if (vocab_size < BPE_MIN_VOCAB) {
        sdt_fail(error, SDT_ERR_INTERNAL,
                 "bpe_trainer: a vocabulary size of %d is too small; CLIP's byte symbols and special "
                 "tokens alone take %d, so ask for at least that many",
                 (int)vocab_size, BPE_MIN_VOCAB);
        return false;
    }
    int target = vocab_size - BPE_MIN_VOCAB;
    size_t n_words = 0;
    bpe_word *words = split_words(t, &n_words);
    bool ok = true;
    while ((int)t->merges->len < target) {
        GArray *pairs = count_pairs(words, n_words);
        bpe_pair m;
        char *merged = NULL;
        bool found = choose_merge(t, pairs, &m, &merged);
        g_array_free(pairs, TRUE);
        if (!found) {
            sdt_fail(error, SDT_ERR_INTERNAL,
                     "bpe_trainer: the corpus (%zu distinct words) allows only %u merges but a "
                     "vocabulary of %d needs %d; give a larger corpus or a smaller vocabulary size",
                     n_words, t->merges->len, (int)vocab_size, target);
            ok = false;
            break;
        }
        int id = intern_symbol(t, merged);
        for (size_t i = 0; i < n_words; i++) apply_merge(&words[i], m.a, m.b, id);
        g_array_append_val(t->merges, m);
    }
    for (size_t i = 0; i < n_words; i++) g_free(words[i].sym);
    g_free(words);
    return ok;
}

/* ---- saving ---------------------------------------------------------------------------- */

static char *vocab_json(const bpe_trainer *t)
{
    cJSON *root = cJSON_CreateObject();
    int id = 0;
    for (; id < (int)t->sym_text->len; id++) cJSON_AddNumberToObject(root, g_ptr_array_index(t->sym_text, id), id);
    cJSON_AddNumberToObject(root, CLIP_START_TOKEN, id++);
    cJSON_AddNumberToObject(root, CLIP_END_TOKEN, id);
    char *text = sdt_json_print(root);
    cJSON_Delete(root);
    return text;
}

static GString *merges_txt(const bpe_trainer *t)
{
    GString *s = g_string_new("#version: 0.2\n");
    for (guint i = 0; i < t->merges->len; i++) {
        const bpe_pair *m = &g_array_index(t->merges, bpe_pair, i);
        g_string_append_printf(s, "%s %s\n", (const char *)g_ptr_array_index(t->sym_text, m->a),
                               (const char *)g_ptr_array_index(t->sym_text, m->b));
    }
    return s;
}

bool bpe_trainer_save(const bpe_trainer *t, const char *dir, sdt_error *error)
{
    if (g_mkdir_with_parents(dir, 0777) != 0) {
        sdt_fail(error, SDT_ERR_IO, "bpe_trainer: cannot create the folder %s; choose a writable output folder", dir);
        return false;
    }
    char *vocab_path = g_build_filename(dir, "vocab.json", NULL);
    char *merges_path = g_build_filename(dir, "merges.txt", NULL);
    char *vocab = vocab_json(t);
    GString *merges = merges_txt(t);
    bool ok = vocab && sdt_atomic_write(vocab_path, vocab, strlen(vocab), error) &&
              sdt_atomic_write(merges_path, merges->str, merges->len, error);
    if (!vocab) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "bpe_trainer: out of memory while writing %s", vocab_path);
    cJSON_free(vocab);
    g_string_free(merges, TRUE);
    g_free(vocab_path);
    g_free(merges_path);
    return ok;
}
