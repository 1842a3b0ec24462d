/* text_cache.c - see text_cache.h. */
#include "train/text_cache.h"

#include <stdlib.h>
#include <string.h>

#include "sd_text_rules.h"

#define KEY_BYTES (SDT_PROMPT_TOKENS * sizeof(int32_t))

bool sdt_text_cache_add_prompt(sdt_text_cache *c, sdt_tokenizer *tok, const sdt_slot_rules *rules, const char *prompt)
{
    sdt_prompt_encoded *e = malloc(sizeof *e);
    if (!e) return false;
    sdt_prompt_encode(tok, rules, prompt ? prompt : "", e);
    c->end_id = sdt_tokenizer_eos(tok);
    bool ok = true;
    if (c->n + e->n_chunks > c->cap) {
        int cap = c->cap ? c->cap * 2 : 256;
        while (cap < c->n + e->n_chunks) cap *= 2;
        int32_t *keys = realloc(c->keys, (size_t)cap * KEY_BYTES);
        if (keys)
            c->keys = keys, c->cap = cap;
        else
            ok = false;
    }
    if (ok) {
        memcpy(c->keys + (size_t)c->n * SDT_PROMPT_TOKENS, e->ids, (size_t)e->n_chunks * KEY_BYTES);
        c->n += e->n_chunks;
        c->sealed = false;
    }
    free(e);
    return ok;
}

static int key_cmp(const void *a, const void *b)
{
    return memcmp(a, b, KEY_BYTES);
}

void sdt_text_cache_seal(sdt_text_cache *c)
{
    if (c->n > 1) qsort(c->keys, (size_t)c->n, KEY_BYTES, key_cmp);
    int kept = 0;
    for (int i = 0; i < c->n; i++) {
        const int32_t *k = c->keys + (size_t)i * SDT_PROMPT_TOKENS;
        if (kept && key_cmp(k, c->keys + (size_t)(kept - 1) * SDT_PROMPT_TOKENS) == 0) continue;
        if (kept != i) memmove(c->keys + (size_t)kept * SDT_PROMPT_TOKENS, k, KEY_BYTES);
        kept++;
    }
    c->n = kept;
    c->sealed = true;
}

int sdt_text_cache_pooled_width(const sd_runtime *rt)
{
    return sd_text_rules_of(&rt->cfg).pooled_width;
}

int sdt_text_cache_context_width(const sd_runtime *rt)
{
    return rt->cfg.clip.width + sd_text_rules_of(&rt->cfg).width_g;
}

size_t sdt_text_cache_bytes(const sd_runtime *rt, sdt_dtype dtype, int n)
{
    size_t per = ((size_t)SDT_PROMPT_TOKENS * (size_t)sdt_text_cache_context_width(rt) +
                  (size_t)sdt_text_cache_pooled_width(rt)) *
                 sdt_dtype_size(dtype);
    return per * (size_t)n;
}

static long find(const sdt_text_cache *c, const int32_t *ids)
{
    const int32_t *hit = c->sealed && c->n ? bsearch(ids, c->keys, (size_t)c->n, KEY_BYTES, key_cmp) : NULL;
    return hit ? (long)((hit - c->keys) / SDT_PROMPT_TOKENS) : -1;
}

const uint8_t *sdt_text_cache_context(const sdt_text_cache *c, const int32_t *ids)
{
    long i = c->context ? find(c, ids) : -1;
    return i < 0 ? NULL : c->context + (size_t)i * c->context_bytes;
}

const uint8_t *sdt_text_cache_pooled(const sdt_text_cache *c, const int32_t *ids)
{
    long i = c->pooled ? find(c, ids) : -1;
    return i < 0 ? NULL : c->pooled + (size_t)i * c->pooled_bytes;
}

void sdt_text_cache_free(sdt_text_cache *c)
{
    free(c->keys);
    free(c->context);
    free(c->pooled);
    memset(c, 0, sizeof *c);
}
