/* prompt.c - see prompt.h. */
#include "train/prompt.h"

#include <stdlib.h>
#include <string.h>

/* The chunk being filled (body tokens only) and where the last comma went. */
typedef struct chunker {
    const sdt_slot_rules *rules;
    int32_t bos, eos;
    sdt_prompt_encoded *out;
    int32_t body[SDT_PROMPT_CHUNK_BODY];
    int body_row[SDT_PROMPT_CHUNK_BODY]; /* embedding row of a slot, -1 for a token */
    int n, last_comma;
} chunker;

/* Frames the current body as a chunk (start, body, end, padding); past the last chunk it is counted as cut. */
static void close_chunk(chunker *c)
{
    sdt_prompt_encoded *o = c->out;
    if (o->n_chunks == SDT_PROMPT_MAX_CHUNKS) {
        for (int i = 0; i < c->n; i++) {
            o->n_cut_tokens++;
            o->n_cut_slots += c->body_row[i] >= 0;
        }
    } else {
        int32_t *ids = o->ids + o->n_chunks * SDT_PROMPT_TOKENS;
        int base = o->n_chunks * SDT_PROMPT_TOKENS;
        ids[0] = c->bos;
        for (int i = 0; i < c->n; i++) {
            ids[1 + i] = c->body[i];
            if (c->body_row[i] >= 0) {
                o->slot_pos[o->n_slots] = base + 1 + i;
                o->slot_row[o->n_slots] = c->body_row[i];
                o->n_slots++;
            }
        }
        ids[1 + c->n] = c->eos;
        for (int i = 2 + c->n; i < SDT_PROMPT_TOKENS; i++) ids[i] = c->rules->pad_id;
        o->n_chunks++;
    }
    c->n = 0;
    c->last_comma = -1;
}

static void push(chunker *c, int32_t id, int row)
{
    c->body[c->n] = id;
    c->body_row[c->n] = row;
    c->n++;
}

/* A1111: a full chunk with a comma among its last SDT_PROMPT_COMMA_BACKTRACK tokens is closed after
 * the comma; what followed the comma starts the next chunk. */
static void backtrack_to_comma(chunker *c)
{
    int keep = c->last_comma + 1, n_move = c->n - keep;
    int32_t ids[SDT_PROMPT_CHUNK_BODY];
    int rows[SDT_PROMPT_CHUNK_BODY];
    memcpy(ids, c->body + keep, (size_t)n_move * sizeof ids[0]);
    memcpy(rows, c->body_row + keep, (size_t)n_move * sizeof rows[0]);
    c->n = keep;
    close_chunk(c);
    for (int i = 0; i < n_move; i++) push(c, ids[i], rows[i]);
}

void sdt_prompt_encode(sdt_tokenizer *tok, const sdt_slot_rules *rules, const char *prompt, sdt_prompt_encoded *out)
{
    memset(out, 0, sizeof(*out));
    int32_t *raw = NULL;
    size_t n_raw = 0;
    sdt_tokenizer_tokenize(tok, prompt, &raw, &n_raw);
    chunker c = {.rules = rules,
                 .bos = sdt_tokenizer_bos(tok),
                 .eos = sdt_tokenizer_eos(tok),
                 .out = out,
                 .n = 0,
                 .last_comma = -1};
    int32_t comma = sdt_tokenizer_token_id(tok, ",</w>");
    for (size_t i = 0; i < n_raw; i++) {
        int32_t id = raw[i];
        bool is_slot = id == rules->placeholder_id;
        out->n_prompt_tokens += is_slot ? rules->n_vectors : 1;
        if (comma >= 0 && id == comma)
            c.last_comma = c.n;
        else if (c.n == SDT_PROMPT_CHUNK_BODY && c.last_comma >= 0 && c.n - c.last_comma <= SDT_PROMPT_COMMA_BACKTRACK)
            backtrack_to_comma(&c);
        if (c.n == SDT_PROMPT_CHUNK_BODY) close_chunk(&c);
        if (!is_slot) {
            push(&c, id, -1);
            continue;
        }
        if (rules->n_vectors > SDT_PROMPT_CHUNK_BODY) { /* can never fit one chunk: A1111 would split it */
            out->n_cut_slots += rules->n_vectors;
            continue;
        }
        if (c.n + rules->n_vectors > SDT_PROMPT_CHUNK_BODY) close_chunk(&c);
        for (int k = 0; k < rules->n_vectors; k++) push(&c, rules->slot_token, k);
    }
    free(raw);
    if (c.n > 0 || out->n_chunks == 0) close_chunk(&c);
}

int sdt_prompt_batch(sdt_tokenizer *tok, const sdt_slot_rules *rules, const sdt_prompt_encoded *enc, int batch,
                     int32_t *tokens, clip_override *overrides, int *n_overrides)
{
    int chunks = 1;
    for (int b = 0; b < batch; b++)
        if (enc[b].n_chunks > chunks) chunks = enc[b].n_chunks;
    *n_overrides = 0;
    for (int b = 0; b < batch; b++) {
        int32_t *dst = tokens + (size_t)b * chunks * SDT_PROMPT_TOKENS;
        memcpy(dst, enc[b].ids, (size_t)enc[b].n_chunks * SDT_PROMPT_TOKENS * sizeof(int32_t));
        for (int k = enc[b].n_chunks; k < chunks; k++) { /* A1111's empty_chunk */
            int32_t *e = dst + k * SDT_PROMPT_TOKENS;
            e[0] = sdt_tokenizer_bos(tok);
            e[1] = sdt_tokenizer_eos(tok);
            for (int i = 2; i < SDT_PROMPT_TOKENS; i++) e[i] = rules->pad_id;
        }
        for (int s = 0; s < enc[b].n_slots; s++) {
            int pos = enc[b].slot_pos[s];
            overrides[(*n_overrides)++] =
                (clip_override){b * chunks + pos / SDT_PROMPT_TOKENS, pos % SDT_PROMPT_TOKENS, enc[b].slot_row[s]};
        }
    }
    return chunks;
}

sdt_tensor sdt_prompt_context(const sdt_tensor *clip_out, int batch)
{
    sdt_tensor v = *clip_out;
    v.shape[1] = clip_out->shape[0] / batch * clip_out->shape[1];
    v.shape[0] = batch;
    return v;
}
