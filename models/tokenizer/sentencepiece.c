/* sentencepiece.c - T5's SentencePiece unigram tokenizer; see sentencepiece.h. */
#include "sentencepiece.h"

#include <cjson/cJSON.h>
#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "c_json.h"
#include "file_read.h"

#define SPM_SPACE "\xE2\x96\x81" /* U+2581, SentencePiece's visible space */
#define SPM_UNK_PENALTY 10.0f    /* SentencePiece's kUnkPenalty: the unknown piece scores min - 10 */

struct sdt_spm {
    int32_t n;
    char **text;
    float *score;
    uint8_t *type;
    GHashTable *ids;     /* piece text (points into text[]) -> id + 1 */
    int max_piece_bytes; /* of the pieces text can match */
    float min_score, max_score;
    int32_t unk, eos, pad;
    bool byte_fallback;
    int32_t byte_id[256]; /* byte_fallback: the <0xHH> pieces */
    bool add_dummy_prefix, remove_extra_whitespaces;
    /* the normalizer's precompiled character map (NFKC and NMT's rules for T5): a Darts-clone double
     * array of the source strings and a blob of NUL-terminated replacements; NULL when the model has none */
    uint32_t *trie;
    size_t trie_units;
    char *replacements;
    size_t replacements_size;
    GPtrArray *added; /* added tokens' texts (owned); added token i has id n + i */
};

static sdt_spm *spm_new(void)
{
    sdt_spm *t = calloc(1, sizeof(*t));
    if (!t) return NULL;
    t->unk = t->eos = t->pad = -1;
    t->add_dummy_prefix = t->remove_extra_whitespaces = true;
    return t;
}

void sdt_spm_free(sdt_spm *t)
{
    if (!t) return;
    for (int32_t i = 0; i < t->n; i++) free(t->text[i]);
    free(t->text), free(t->score), free(t->type);
    if (t->ids) g_hash_table_destroy(t->ids);
    free(t->trie), free(t->replacements);
    if (t->added) g_ptr_array_free(t->added, TRUE);
    free(t);
}

static bool spm_push(sdt_spm *t, int32_t *cap, const char *text, size_t len, float score, int type)
{
    if (t->n == *cap) {
        int32_t c = *cap ? 2 * *cap : 1024;
        char **tx = realloc(t->text, sizeof(char *) * (size_t)c);
        if (tx) t->text = tx;
        float *sc = realloc(t->score, sizeof(float) * (size_t)c);
        if (sc) t->score = sc;
        uint8_t *ty = realloc(t->type, (size_t)c);
        if (ty) t->type = ty;
        if (!tx || !sc || !ty) return false;
        *cap = c;
    }
    char *s = malloc(len + 1);
    if (!s) return false;
    memcpy(s, text, len);
    s[len] = 0;
    t->text[t->n] = s, t->score[t->n] = score, t->type[t->n] = (uint8_t)type;
    t->n++;
    return true;
}

static int utf8_len(unsigned char c)
{
    return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
}

/* What the loaders share: the lookup table, the special ids, byte pieces, score range. */
static bool spm_finish(sdt_spm *t, const char *name, sdt_error *error)
{
    if (t->n == 0)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: the tokenizer holds no pieces; it is empty or not a "
                        "SentencePiece unigram model (T5's spiece.model or tokenizer.json)",
                        name);
    t->ids = g_hash_table_new(g_str_hash, g_str_equal);
    if (!t->ids) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
    t->min_score = INFINITY, t->max_score = -INFINITY;
    for (int32_t i = 0; i < 256; i++) t->byte_id[i] = -1;
    int32_t first_unknown = -1;
    for (int32_t i = 0; i < t->n; i++) {
        char *s = t->text[i];
        if (!s[0]) return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: piece %d has no text; the file is damaged", name, i);
        if (!g_utf8_validate(s, -1, NULL))
            return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: piece %d is not valid UTF-8; the file is damaged", name, i);
        if (!isfinite(t->score[i]))
            return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: piece %d (\"%s\") has a score that is not a finite number",
                            name, i, s);
        if (t->type[i] < SDT_SPM_NORMAL || t->type[i] > SDT_SPM_BYTE)
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "%s: piece %d (\"%s\") has type %d, not one of SentencePiece's "
                            "(1 normal to 6 byte)",
                            name, i, s, t->type[i]);
        if (g_hash_table_contains(t->ids, s))
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "%s: piece \"%s\" occurs twice (ids %d and %d); the file is damaged", name, s,
                            GPOINTER_TO_INT(g_hash_table_lookup(t->ids, s)) - 1, i);
        g_hash_table_insert(t->ids, s, GINT_TO_POINTER(i + 1));
        if (t->type[i] == SDT_SPM_UNKNOWN && first_unknown < 0) first_unknown = i;
        unsigned byte;
        char tail;
        if (t->type[i] == SDT_SPM_BYTE && sscanf(s, "<0x%2X>%c", &byte, &tail) == 1 && strlen(s) == 6)
            t->byte_id[byte] = i;
        if (t->type[i] == SDT_SPM_NORMAL || t->type[i] == SDT_SPM_USER_DEFINED) {
            int len = (int)strlen(s);
            if (len > t->max_piece_bytes) t->max_piece_bytes = len;
            if (t->type[i] == SDT_SPM_NORMAL) {
                t->min_score = fminf(t->min_score, t->score[i]);
                t->max_score = fmaxf(t->max_score, t->score[i]);
            }
        }
    }
    if (t->max_piece_bytes == 0)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: the tokenizer has no normal pieces, so no text can be segmented", name);
    if (t->unk < 0) t->unk = first_unknown;
    if (t->eos < 0 && g_hash_table_contains(t->ids, "</s>"))
        t->eos = GPOINTER_TO_INT(g_hash_table_lookup(t->ids, "</s>")) - 1;
    if (t->pad < 0 && g_hash_table_contains(t->ids, "<pad>"))
        t->pad = GPOINTER_TO_INT(g_hash_table_lookup(t->ids, "<pad>")) - 1;
    const struct {
        int32_t id;
        const char *what;
    } special[] = {{t->unk, "unknown piece (<unk>)"}, {t->eos, "end piece (</s>)"}, {t->pad, "pad piece (<pad>)"}};
    for (int i = 0; i < 3; i++)
        if (special[i].id < 0 || special[i].id >= t->n)
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "%s: the %s is %s; T5's tokenizer needs <pad> 0, </s> 1 and <unk> 2", name, special[i].what,
                            special[i].id < 0 ? "missing" : "an id past the last piece");
    if (t->byte_fallback)
        for (int b = 0; b < 256; b++)
            if (t->byte_id[b] < 0)
                return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                                "%s: byte_fallback is on but the byte piece <0x%02X> is missing", name, b);
    return true;
}

/* ---------------------------------------------------------------- the precompiled character map */

/* SentencePiece's precompiled_charsmap: a little-endian uint32 trie size in bytes, the Darts-clone double
 * array (uint32 units), then the replacement strings. */
static bool set_charsmap(sdt_spm *t, const uint8_t *blob, size_t size, const char *name, sdt_error *error)
{
    if (size == 0) return true; /* none */
    uint32_t trie_bytes =
        size >= 4 ? (uint32_t)blob[0] | (uint32_t)blob[1] << 8 | (uint32_t)blob[2] << 16 | (uint32_t)blob[3] << 24 : 0;
    if (size < 8 || trie_bytes == 0 || trie_bytes % 4 || trie_bytes > size - 4)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: the normalizer's precompiled character map (%zu bytes, trie of "
                        "%u) is malformed; the file is damaged",
                        name, size, trie_bytes);
    free(t->trie), free(t->replacements);
    t->trie_units = trie_bytes / 4;
    t->replacements_size = size - 4 - trie_bytes;
    t->trie = malloc(trie_bytes);
    t->replacements = malloc(t->replacements_size + 1);
    if (!t->trie || !t->replacements) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
    for (size_t i = 0; i < t->trie_units; i++) {
        const uint8_t *u = blob + 4 + 4 * i;
        t->trie[i] = (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
    }
    memcpy(t->replacements, blob + 4 + trie_bytes, t->replacements_size);
    t->replacements[t->replacements_size] = 0; /* a last string left open ends here */
    return true;
}

/* The longest prefix of s[0..len) the map replaces: its length (0: none) and *out the replacement.
 * Darts-clone's commonPrefixSearch, every index bounds-checked (a damaged map matches nothing). */
static size_t charsmap_match(const sdt_spm *t, const char *s, size_t len, const char **out)
{
    if (!t->trie) return 0;
    size_t best = 0;
    uint32_t unit = t->trie[0];
    size_t pos = (unit >> 10) << ((unit & (1U << 9)) >> 6);
    for (size_t i = 0; i < len; i++) {
        const unsigned char c = (unsigned char)s[i];
        pos ^= c;
        if (pos >= t->trie_units) break;
        unit = t->trie[pos];
        if ((unit & ((1U << 31) | 0xFF)) != c) break;
        pos ^= (unit >> 10) << ((unit & (1U << 9)) >> 6); /* a base: only the units it leads to must exist */
        if (((unit >> 8) & 1) && pos < t->trie_units) {
            const size_t value = t->trie[pos] & ((1U << 31) - 1);
            if (value < t->replacements_size) best = i + 1, *out = t->replacements + value;
        }
    }
    return best;
}

/* ---------------------------------------------------------------- spiece.model (protobuf) */

typedef struct pb_reader {
    const uint8_t *p, *begin, *end;
} pb_reader;

static bool pb_varint(pb_reader *r, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) return false;
        uint8_t b = *r->p++;
        *v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) return true;
    }
    return false; /* more than 10 bytes */
}

typedef struct pb_field {
    uint32_t number;
    int wire;
    uint64_t varint;  /* wire 0 */
    uint32_t fixed32; /* wire 5 */
    pb_reader sub;    /* wire 2 */
} pb_field;

/* The next field; false + a sentence at a malformed one. */
static bool pb_next(pb_reader *r, pb_field *f, const char *name, const char *where, sdt_error *error)
{
    memset(f, 0, sizeof(*f));
    size_t at = (size_t)(r->p - r->begin);
    uint64_t key;
    if (!pb_varint(r, &key) || (key >> 3) == 0 || (key >> 3) > 0x1FFFFFFF)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: not a SentencePiece model: a bad protobuf field key at byte %zu "
                        "of %s (the file is truncated, damaged or not spiece.model)",
                        name, at, where);
    f->number = (uint32_t)(key >> 3);
    f->wire = (int)(key & 7);
    switch (f->wire) {
        case 0:
            if (pb_varint(r, &f->varint)) return true;
            break;
        case 1:
            if (r->end - r->p >= 8) {
                r->p += 8;
                return true;
            }
            break;
        case 2: {
            uint64_t len;
            if (pb_varint(r, &len) && len <= (uint64_t)(r->end - r->p)) {
                f->sub = (pb_reader){r->p, r->begin, r->p + len};
                r->p += len;
                return true;
            }
            break;
        }
        case 5:
            if (r->end - r->p >= 4) {
                f->fixed32 =
                    (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 | (uint32_t)r->p[3] << 24;
                r->p += 4;
                return true;
            }
            break;
        default:
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "%s: not a SentencePiece model: protobuf wire type %d at byte %zu of "
                            "%s is not one a model uses (the file is damaged or not spiece.model)",
                            name, f->wire, at, where);
    }
    return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                    "%s: not a SentencePiece model: field %u at byte %zu of %s runs past the "
                    "end (the file is truncated or not spiece.model)",
                    name, f->number, at, where);
}

static bool pb_wire(const pb_field *f, int want, const char *name, const char *what, sdt_error *error)
{
    if (f->wire == want) return true;
    return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                    "%s: not a SentencePiece model: %s has protobuf wire type %d, not %d "
                    "(the file is damaged or not spiece.model)",
                    name, what, f->wire, want);
}

static bool parse_piece(sdt_spm *t, int32_t *cap, pb_reader r, const char *name, sdt_error *error)
{
    const uint8_t *text = NULL;
    size_t len = 0;
    float score = 0;
    int type = SDT_SPM_NORMAL;
    char where[48];
    snprintf(where, sizeof where, "piece %d", t->n);
    pb_field f;
    while (r.p < r.end) {
        if (!pb_next(&r, &f, name, where, error)) return false;
        if (f.number == 1) {
            if (!pb_wire(&f, 2, name, "a piece's text", error)) return false;
            text = f.sub.p, len = (size_t)(f.sub.end - f.sub.p);
        } else if (f.number == 2) {
            if (!pb_wire(&f, 5, name, "a piece's score", error)) return false;
            memcpy(&score, &f.fixed32, sizeof score);
        } else if (f.number == 3) {
            if (!pb_wire(&f, 0, name, "a piece's type", error)) return false;
            type = f.varint > 255 ? 255 : (int)f.varint;
        }
    }
    if (!text || !len)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: piece %d has no text; the file is damaged or not spiece.model",
                        name, t->n);
    if (!spm_push(t, cap, (const char *)text, len, score, type))
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory reading the pieces", name);
    return true;
}

static bool parse_trainer(sdt_spm *t, pb_reader r, const char *name, sdt_error *error)
{
    pb_field f;
    while (r.p < r.end) {
        if (!pb_next(&r, &f, name, "the trainer spec", error)) return false;
        if (f.wire != 0) continue;
        switch (f.number) {
            case 3: /* model_type: UNIGRAM = 1 */
                if (f.varint != 1)
                    return sdt_fail(error, SDT_ERR_UNSUPPORTED,
                                    "%s: a SentencePiece model of type %s, not unigram; T5's "
                                    "tokenizer is a unigram model",
                                    name,
                                    f.varint == 2   ? "BPE"
                                    : f.varint == 3 ? "WORD"
                                    : f.varint == 4 ? "CHAR"
                                                    : "unknown");
                break;
            case 35:
                t->byte_fallback = f.varint != 0;
                break;
            case 40:
                t->unk = (int32_t)(int64_t)f.varint;
                break;
            case 42:
                t->eos = (int32_t)(int64_t)f.varint;
                break;
            case 43:
                t->pad = (int32_t)(int64_t)f.varint;
                break;
            default:
                break;
        }
    }
    return true;
}

static bool parse_normalizer(sdt_spm *t, pb_reader r, const char *name, sdt_error *error)
{
    pb_field f;
    while (r.p < r.end) {
        if (!pb_next(&r, &f, name, "the normalizer spec", error)) return false;
        if (f.wire == 2 && f.number == 2 && !set_charsmap(t, f.sub.p, (size_t)(f.sub.end - f.sub.p), name, error))
            return false;
        if (f.wire == 0 && f.number == 3) t->add_dummy_prefix = f.varint != 0;
        if (f.wire == 0 && f.number == 4) t->remove_extra_whitespaces = f.varint != 0;
    }
    return true;
}

sdt_spm *sdt_spm_load_model_memory(const void *data, size_t size, const char *name, sdt_error *error)
{
    sdt_spm *t = spm_new();
    if (!t) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
        return NULL;
    }
    pb_reader r = {data, data, (const uint8_t *)data + size};
    int32_t cap = 0;
    pb_field f;
    bool ok = true, trainer = false, normalizer = false;
    while (ok && r.p < r.end) {
        ok = pb_next(&r, &f, name, "the model", error);
        if (!ok) break;
        if (f.number == 1)
            ok = pb_wire(&f, 2, name, "a piece", error) && parse_piece(t, &cap, f.sub, name, error);
        else if (f.number == 2)
            ok = (trainer = true) && pb_wire(&f, 2, name, "the trainer spec", error) &&
                 parse_trainer(t, f.sub, name, error);
        else if (f.number == 3)
            ok = (normalizer = true) && pb_wire(&f, 2, name, "the normalizer spec", error) &&
                 parse_normalizer(t, f.sub, name, error);
    }
    if (ok && t->n > 0 && (!trainer || !normalizer))
        /* SentencePiece writes the pieces, then the trainer and normalizer specs: a file cut between two
         * fields parses, so a missing spec is how a truncated file shows */
        ok = sdt_fail(error, SDT_ERR_BAD_FORMAT,
                      "%s: the model ends after %d pieces without its %s spec; the file is "
                      "truncated or not spiece.model",
                      name, t->n, trainer ? "normalizer" : "trainer");
    if (ok) ok = spm_finish(t, name, error);
    if (!ok) {
        sdt_spm_free(t);
        return NULL;
    }
    return t;
}

/* ---------------------------------------------------------------- tokenizer.json */

/* The "Precompiled" normalizer in n or its Sequence; NULL when none. */
static const cJSON *find_precompiled(const cJSON *n)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(n, "type");
    if (cJSON_IsString(type) && !strcmp(type->valuestring, "Precompiled")) return n;
    const cJSON *item;
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(n, "normalizers"))
    {
        const cJSON *found = find_precompiled(item);
        if (found) return found;
    }
    return NULL;
}

sdt_spm *sdt_spm_load_json_memory(const char *text, size_t size, const char *name, sdt_error *error)
{
    cJSON *root = sdt_json_parse(text, size);
    if (!root) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: not valid JSON; give transformers' tokenizer.json of a T5 tokenizer",
                 name);
        return NULL;
    }
    sdt_spm *t = spm_new();
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    bool ok = t != NULL;
    if (!ok) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
    if (ok && (!cJSON_IsObject(model) || !cJSON_IsString(type) || strcmp(type->valuestring, "Unigram") != 0))
        ok = sdt_fail(error, SDT_ERR_UNSUPPORTED,
                      "%s: \"model\" is %s%s%s, not a Unigram model; T5's tokenizer.json holds "
                      "a SentencePiece unigram vocabulary",
                      name, cJSON_IsString(type) ? "of type \"" : "missing its type",
                      cJSON_IsString(type) ? type->valuestring : "", cJSON_IsString(type) ? "\"" : "");
    if (ok && !cJSON_IsArray(vocab))
        ok = sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: model.vocab is not a list of [piece, score] pairs", name);
    int32_t cap = 0, i = 0;
    const cJSON *entry;
    if (ok) cJSON_ArrayForEach(entry, vocab)
        {
            const cJSON *piece = cJSON_GetArrayItem(entry, 0), *score = cJSON_GetArrayItem(entry, 1);
            if (!cJSON_IsArray(entry) || cJSON_GetArraySize(entry) != 2 || !cJSON_IsString(piece) ||
                !cJSON_IsNumber(score)) {
                ok = sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: model.vocab entry %d is not a [piece, score] pair", name,
                              i);
                break;
            }
            if (!spm_push(t, &cap, piece->valuestring, strlen(piece->valuestring), (float)score->valuedouble,
                          SDT_SPM_NORMAL)) {
                ok = sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory reading the vocabulary", name);
                break;
            }
            i++;
        }
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_id");
    if (ok && cJSON_IsNumber(unk)) {
        if (unk->valuedouble < 0 || unk->valuedouble >= t->n)
            ok = sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: model.unk_id %g is not an id of the %d pieces", name,
                          unk->valuedouble, t->n);
        else
            t->unk = (int32_t)unk->valuedouble, t->type[t->unk] = SDT_SPM_UNKNOWN;
    }
    if (t) t->byte_fallback = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback"));
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (ok) cJSON_ArrayForEach(entry, added)
        {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(entry, "id");
            const cJSON *content = cJSON_GetObjectItemCaseSensitive(entry, "content");
            const cJSON *special = cJSON_GetObjectItemCaseSensitive(entry, "special");
            /* special added tokens inside the vocabulary (<pad>, </s>) are control pieces; T5's <extra_id_N>
         * sentinels past it are not matched in text (sentencepiece.h) */
            if (cJSON_IsNumber(id) && cJSON_IsString(content) && cJSON_IsTrue(special) && id->valuedouble >= 0 &&
                id->valuedouble < t->n && !strcmp(t->text[(int32_t)id->valuedouble], content->valuestring) &&
                (int32_t)id->valuedouble != t->unk)
                t->type[(int32_t)id->valuedouble] = SDT_SPM_CONTROL;
        }
    const cJSON *pre = ok ? find_precompiled(cJSON_GetObjectItemCaseSensitive(root, "normalizer")) : NULL;
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(pre, "precompiled_charsmap");
    if (pre && cJSON_IsString(map) && map->valuestring[0]) {
        gsize n = 0;
        guchar *blob = g_base64_decode(map->valuestring, &n);
        ok = set_charsmap(t, blob, n, name, error);
        g_free(blob);
    }
    for (int32_t k = 0; ok && t->byte_fallback && k < t->n; k++)
        if (strlen(t->text[k]) == 6 && !strncmp(t->text[k], "<0x", 3) && t->text[k][5] == '>')
            t->type[k] = SDT_SPM_BYTE;
    cJSON_Delete(root);
    if (ok) ok = spm_finish(t, name, error);
    if (!ok) {
        sdt_spm_free(t);
        return NULL;
    }
    return t;
}

/* ---------------------------------------------------------------- loading files */

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static sdt_spm *load_file(const char *path, sdt_error *error)
{
    char *data = NULL;
    size_t size = 0;
    if (!sdt_file_read_all(path, "T5 tokenizer file", SDT_FILE_LIMIT_LARGE_TEXT, &data, &size, error)) return NULL;
    /* told by content: spiece.model starts with a piece (byte 0x0A), which is never JSON's '{' (a protobuf key
     * of wire type 3, which no model uses) */
    size_t lead = strspn(data, " \t\r\n");
    bool json = lead < size && data[lead] == '{';
    sdt_spm *t =
        json ? sdt_spm_load_json_memory(data, size, path, error) : sdt_spm_load_model_memory(data, size, path, error);
    free(data);
    return t;
}

sdt_spm *sdt_spm_load(const char *path, sdt_error *error)
{
    if (!is_dir(path)) return load_file(path, error);
    static const char *const inside[] = {"spiece.model",
                                         "tokenizer.json",
                                         "tokenizer_3/spiece.model",
                                         "tokenizer_3/tokenizer.json",
                                         "tokenizer_2/spiece.model",
                                         "tokenizer_2/tokenizer.json"};
    for (size_t i = 0; i < sizeof inside / sizeof inside[0]; i++) {
        char *p = g_build_filename(path, inside[i], NULL);
        bool found = is_file(p);
        sdt_spm *t = found ? load_file(p, error) : NULL;
        g_free(p);
        if (found) return t;
    }
    sdt_fail(error, SDT_ERR_NOT_FOUND,
             "%s: no T5 tokenizer in this folder (looked for spiece.model and tokenizer.json, "
             "also under tokenizer_3/ and tokenizer_2/); give the folder of T5's spiece.model or tokenizer.json",
             path);
    return NULL;
}

int32_t sdt_spm_size(const sdt_spm *t)
{
    return t->n;
}
int32_t sdt_spm_size_with_added(const sdt_spm *t)
{
    return t->n + (t->added ? (int32_t)t->added->len : 0);
}
int32_t sdt_spm_eos(const sdt_spm *t)
{
    return t->eos;
}
int32_t sdt_spm_pad(const sdt_spm *t)
{
    return t->pad;
}
int32_t sdt_spm_unk(const sdt_spm *t)
{
    return t->unk;
}

int32_t sdt_spm_piece_id(const sdt_spm *t, const char *piece)
{
    int32_t id = GPOINTER_TO_INT(g_hash_table_lookup(t->ids, piece)) - 1;
    for (guint i = 0; id < 0 && t->added && i < t->added->len; i++)
        if (!strcmp(g_ptr_array_index(t->added, i), piece)) id = t->n + (int32_t)i;
    return id;
}

const char *sdt_spm_piece_text(const sdt_spm *t, int32_t id)
{
    if (id >= 0 && id < t->n) return t->text[id];
    if (t->added && id >= t->n && id < sdt_spm_size_with_added(t))
        return g_ptr_array_index(t->added, (guint)(id - t->n));
    return NULL;
}
float sdt_spm_piece_score(const sdt_spm *t, int32_t id)
{
    return id >= 0 && id < t->n ? t->score[id] : 0.0f;
}
sdt_spm_piece_type sdt_spm_piece_kind(const sdt_spm *t, int32_t id)
{
    return id >= 0 && id < t->n ? (sdt_spm_piece_type)t->type[id] : SDT_SPM_UNUSED;
}

/* ---------------------------------------------------------------- normalisation */

/* The character after the foldings of sentencepiece.h: ' ' for a space, 0 to drop it. */
static gunichar fold(gunichar c)
{
    if (c == '\t' || c == '\n' || c == '\r' || c == 0x00A0 || (c >= 0x2000 && c <= 0x200A) || c == 0x202F ||
        c == 0x205F || c == 0x3000)
        return ' ';
    if (c < 0x20 || c == 0x7F) return 0;
    if (c >= 0xFF01 && c <= 0xFF5E) return c - 0xFF01 + 0x21;
    return c;
}

char *sdt_spm_normalize(const sdt_spm *t, const char *text)
{
    GString *out = g_string_new(NULL);
    bool pending_space = false;
    const size_t text_len = strlen(text);
    const char *mapped = NULL; /* the rest of a replacement from the character map being read */
    for (const char *p = text; *p || (mapped && *mapped);) {
        if (!(mapped && *mapped)) {
            const char *rep = NULL;
            size_t m = charsmap_match(t, p, text_len - (size_t)(p - text), &rep);
            if (m > 0) {
                p += m, mapped = rep;
                continue;
            }
            mapped = NULL;
        }
        const char *src = mapped && *mapped ? mapped : p;
        gunichar c = g_utf8_get_char_validated(src, -1);
        int len = utf8_len((unsigned char)*src);
        if (c == (gunichar)-1 || c == (gunichar)-2 || len == 0) c = 0xFFFD, len = 1; /* invalid UTF-8: one byte */
        if (src == mapped)
            mapped += len;
        else
            p += len;
        c = fold(c);
        if (c == 0) continue;
        if (c == ' ') {
            if (!t->remove_extra_whitespaces)
                g_string_append(out, SPM_SPACE);
            else
                pending_space = out->len > 0;
            continue;
        }
        if (pending_space) g_string_append(out, SPM_SPACE);
        pending_space = false;
        if (out->len == 0 && t->add_dummy_prefix) g_string_append(out, SPM_SPACE);
        g_string_append_unichar(out, c);
    }
    return g_string_free(out, FALSE);
}

/* ---------------------------------------------------------------- segmentation */

/* Viterbi over one word's characters [0, nch) (byte offsets offs[0..nch]); appends the ids. */
static void segment_word(const sdt_spm *t, const char *word, const int *offs, int nch, GArray *ids, double *best,
                         int *prev, int32_t *piece, char *key)
{
    best[0] = 0;
    for (int i = 1; i <= nch; i++) best[i] = -INFINITY;
    const double unk_score = (double)t->min_score - SPM_UNK_PENALTY;
    for (int i = 0; i < nch; i++) {
        bool single = false;
        for (int j = i + 1; j <= nch && offs[j] - offs[i] <= t->max_piece_bytes; j++) {
            int len = offs[j] - offs[i];
            memcpy(key, word + offs[i], (size_t)len);
            key[len] = 0;
            int32_t id = GPOINTER_TO_INT(g_hash_table_lookup(t->ids, key)) - 1;
            if (id < 0 || (t->type[id] != SDT_SPM_NORMAL && t->type[id] != SDT_SPM_USER_DEFINED)) continue;
            if (j == i + 1) single = true;
            /* user-defined pieces always win, as SentencePiece scores them */
            double s = t->type[id] == SDT_SPM_USER_DEFINED ? (double)(j - i) * t->max_score - 0.1 : t->score[id];
            if (best[i] + s > best[j]) best[j] = best[i] + s, prev[j] = i, piece[j] = id;
        }
        if (!single && best[i] + unk_score > best[i + 1])
            best[i + 1] = best[i] + unk_score, prev[i + 1] = i, piece[i + 1] = -1;
    }
    /* backtrack into a reversed run, then append */
    size_t start = ids->len;
    for (int j = nch; j > 0; j = prev[j]) {
        if (piece[j] >= 0) {
            g_array_append_val(ids, piece[j]);
        } else if (t->byte_fallback) { /* the character's bytes, last first (reversed below) */
            for (int b = offs[j] - 1; b >= offs[prev[j]]; b--)
                g_array_append_val(ids, t->byte_id[(unsigned char)word[b]]);
        } else if (ids->len == start || g_array_index(ids, int32_t, ids->len - 1) != t->unk) {
            g_array_append_val(ids, t->unk); /* consecutive unknowns fuse into one */
        }
    }
    for (size_t a = start, b = ids->len ? ids->len - 1 : 0; a < b; a++, b--) {
        int32_t x = g_array_index(ids, int32_t, a);
        g_array_index(ids, int32_t, a) = g_array_index(ids, int32_t, b);
        g_array_index(ids, int32_t, b) = x;
    }
}

/* One stretch of text without added tokens: normalised (its own ▁ prefix) and segmented word by word. */
static bool tokenize_segment(const sdt_spm *t, const char *text, GArray *ids, sdt_error *error)
{
    char *norm = sdt_spm_normalize(t, text);
    size_t len = strlen(norm);
    int *offs = malloc(sizeof(int) * (len + 2)), *prev = malloc(sizeof(int) * (len + 2));
    double *best = malloc(sizeof(double) * (len + 2));
    int32_t *piece = malloc(sizeof(int32_t) * (len + 2));
    char *key = malloc((size_t)t->max_piece_bytes + 1);
    if (!offs || !prev || !best || !piece || !key) {
        free(offs), free(prev), free(best), free(piece), free(key), g_free(norm);
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "t5 tokenizer: out of memory segmenting a %zu-byte prompt", len);
    }
    const size_t space_len = strlen(SPM_SPACE);
    /* words start at each ▁ (SentencePiece never trains a piece across one) */
    for (size_t w = 0; w < len;) {
        size_t e = w + (strncmp(norm + w, SPM_SPACE, space_len) == 0 ? space_len : 0);
        while (e < len && strncmp(norm + e, SPM_SPACE, space_len) != 0) e += (size_t)utf8_len((unsigned char)norm[e]);
        int nch = 0;
        for (size_t p = w; p < e; p += (size_t)utf8_len((unsigned char)norm[p])) offs[nch++] = (int)(p - w);
        offs[nch] = (int)(e - w);
        segment_word(t, norm + w, offs, nch, ids, best, prev, piece, key);
        w = e;
    }
    free(offs), free(prev), free(best), free(piece), free(key), g_free(norm);
    return true;
}

bool sdt_spm_add_token(sdt_spm *t, const char *text, int32_t *id_out, sdt_error *error)
{
    if (!text || !text[0] || !g_utf8_validate(text, -1, NULL) || strpbrk(text, " \t\n\r"))
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "t5 tokenizer: an added token must be non-empty UTF-8 without "
                        "whitespace (\"%s\" is not)",
                        text ? text : "(null)");
    if (!t->added && !(t->added = g_ptr_array_new_with_free_func(g_free)))
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "t5 tokenizer: out of memory");
    for (guint i = 0; i < t->added->len; i++)
        if (!strcmp(g_ptr_array_index(t->added, i), text)) {
            if (id_out) *id_out = t->n + (int32_t)i;
            return true;
        }
    g_ptr_array_add(t->added, g_strdup(text));
    if (id_out) *id_out = t->n + (int32_t)t->added->len - 1;
    return true;
}

/* The earliest added token in s (the longest where two start together): its index, *at its start; -1 if none. */
static int next_added(const sdt_spm *t, const char *s, const char **at)
{
    int best = -1;
    size_t best_len = 0;
    *at = NULL;
    for (guint i = 0; t->added && i < t->added->len; i++) {
        const char *tok = g_ptr_array_index(t->added, i), *p = strstr(s, tok);
        size_t len = strlen(tok);
        if (p && (!*at || p < *at || (p == *at && len > best_len))) *at = p, best = (int)i, best_len = len;
    }
    return best;
}

bool sdt_spm_tokenize(const sdt_spm *t, const char *text, int32_t **ids_out, size_t *n_out, sdt_error *error)
{
    GArray *ids = g_array_new(FALSE, FALSE, sizeof(int32_t));
    const char *s = text ? text : "";
    bool ok = true;
    /* added tokens are split out first, as transformers does; the text between them is tokenized apart */
    while (ok) {
        const char *at;
        int k = next_added(t, s, &at);
        if (k < 0) {
            ok = tokenize_segment(t, s, ids, error);
            break;
        }
        char *before = g_strndup(s, (size_t)(at - s));
        ok = tokenize_segment(t, before, ids, error);
        g_free(before);
        int32_t id = t->n + k;
        g_array_append_val(ids, id);
        s = at + strlen(g_ptr_array_index(t->added, (guint)k));
    }
    if (!ok) {
        g_array_free(ids, TRUE);
        return false;
    }
    *n_out = ids->len;
    *ids_out = (int32_t *)g_array_free(ids, FALSE);
    return true;
}

bool sdt_spm_encode(const sdt_spm *t, const char *text, int length, int32_t *ids, sdt_spm_report *rep, sdt_error *error)
{
    if (length < 1)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "t5 tokenizer: sequence length %d leaves no room for the end "
                        "token; T5 uses 256 or 512",
                        length);
    int32_t *tok = NULL;
    size_t n = 0;
    if (!sdt_spm_tokenize(t, text, &tok, &n, error)) return false;
    int keep = n < (size_t)(length - 1) ? (int)n : length - 1;
    if (keep > 0) memcpy(ids, tok, sizeof(int32_t) * (size_t)keep); /* an empty text gives tok NULL */
    ids[keep] = t->eos;
    for (int i = keep + 1; i < length; i++) ids[i] = t->pad;
    if (rep) rep->n_text_tokens = (int)n, rep->n_cut = (int)n - keep, rep->end_index = keep;
    g_free(tok);
    return true;
}
