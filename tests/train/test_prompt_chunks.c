/* test_prompt_chunks.c - long prompts in 75-token chunks (plugin/train/ti_prompt.h):
 *  - sdt_prompt_encode cuts random ~200-token captions (words, commas, the embedding
 *    anywhere, including straddling a chunk boundary) exactly as a plain transcription of
 *    A1111's tokenize_line here does: ids, chunk count, slot positions and rows;
 *  - the text encoder over the batch of chunks (sdt_prompt_batch, sdt_prompt_context) equals
 *    running it on each chunk alone and concatenating the outputs, embedding rows included;
 *  - a prompt past SDT_PROMPT_MAX_CHUNKS counts its cut slots.
 * The CLIP tokenizer is the one built into the library; the text encoder is a tiny random one
 * with CLIP's vocabulary size. Seed printed; SDT_TEST_SEED replays it. */
#include <glib.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint_gen.h"
#include "clip_tokenizer_builtin.h"
#include "sdt_test.h"
#include "train/prompt.h"

#define MAX_IDS (SDT_PROMPT_MAX_CHUNKS * SDT_PROMPT_TOKENS)

/* A1111's tokenize_line (sd_hijack_clip.py), written out as Python has it, on token ids. */
typedef struct ref_chunks {
    int32_t ids[MAX_IDS + SDT_PROMPT_TOKENS];
    int row[MAX_IDS + SDT_PROMPT_TOKENS]; /* embedding row per position, -1 for tokens */
    int n_chunks;
} ref_chunks;

static void ref_next_chunk(ref_chunks *r, const int32_t *tok, const int *row, int *n, int *last_comma, int32_t bos,
                           int32_t eos, int32_t pad)
{
    int32_t *ids = r->ids + r->n_chunks * SDT_PROMPT_TOKENS;
    int *rows = r->row + r->n_chunks * SDT_PROMPT_TOKENS;
    ids[0] = bos, rows[0] = -1;
    for (int i = 0; i < SDT_PROMPT_CHUNK_BODY; i++) {
        ids[1 + i] = i < *n ? tok[i] : eos; /* A1111 pads with the end token ... */
        rows[1 + i] = i < *n ? row[i] : -1;
    }
    ids[SDT_PROMPT_TOKENS - 1] = eos, rows[SDT_PROMPT_TOKENS - 1] = -1;
    for (int i = *n + 2; i < SDT_PROMPT_TOKENS; i++)
        ids[i] = pad; /* ... then what follows the first end token is id_pad */
    r->n_chunks++;
    *n = 0;
    *last_comma = -1;
}

static void ref_tokenize_line(const int32_t *raw, size_t n_raw, int32_t placeholder, int vectors, int32_t comma,
                              int32_t bos, int32_t eos, int32_t pad, ref_chunks *r)
{
    memset(r, 0, sizeof *r);
    int32_t tok[SDT_PROMPT_CHUNK_BODY + 80];
    int row[SDT_PROMPT_CHUNK_BODY + 80];
    int n = 0, last_comma = -1;
    for (size_t position = 0; position < n_raw; position++) {
        int32_t token = raw[position];
        if (token == comma) {
            last_comma = n;
        } else if (n == SDT_PROMPT_CHUNK_BODY && last_comma != -1 && n - last_comma <= SDT_PROMPT_COMMA_BACKTRACK) {
            int break_location = last_comma + 1, n_reloc = n - break_location;
            int32_t reloc[SDT_PROMPT_CHUNK_BODY];
            int reloc_row[SDT_PROMPT_CHUNK_BODY];
            memcpy(reloc, tok + break_location, sizeof(int32_t) * (size_t)n_reloc);
            memcpy(reloc_row, row + break_location, sizeof(int) * (size_t)n_reloc);
            n = break_location;
            ref_next_chunk(r, tok, row, &n, &last_comma, bos, eos, pad);
            memcpy(tok, reloc, sizeof(int32_t) * (size_t)n_reloc);
            memcpy(row, reloc_row, sizeof(int) * (size_t)n_reloc);
            n = n_reloc;
        }
        if (n == SDT_PROMPT_CHUNK_BODY) ref_next_chunk(r, tok, row, &n, &last_comma, bos, eos, pad);
        if (token != placeholder) {
            tok[n] = token, row[n++] = -1;
            continue;
        }
        if (n + vectors > SDT_PROMPT_CHUNK_BODY) ref_next_chunk(r, tok, row, &n, &last_comma, bos, eos, pad);
        for (int k = 0; k < vectors; k++) tok[n] = 0, row[n++] = k;
    }
    if (n > 0 || r->n_chunks == 0) ref_next_chunk(r, tok, row, &n, &last_comma, bos, eos, pad);
}

/* A caption of about n_words words with commas, the placeholder at word place_at (or none). */
static char *random_caption(sdt_test_rng *rng, int n_words, int place_at)
{
    static const char *words[] = {"cat",      "photo",      "red",    "watercolor", "of",       "a",         "sunset",
                                  "over",     "mountains",  "highly", "detailed",   "portrait", "astronaut", "8k",
                                  "trending", "artstation", "blue",   "sky",        "forest",   "river"};
    GString *s = g_string_new(NULL);
    for (int i = 0; i < n_words; i++) {
        if (i == place_at) g_string_append(s, "<emb> ");
        g_string_append(s, words[sdt_test_next(rng) % G_N_ELEMENTS(words)]);
        g_string_append(s, sdt_test_next(rng) % 6 == 0 ? ", " : " ");
    }
    return g_string_free(s, FALSE);
}

static void check_against_a1111(sdt_tokenizer *tok, const sdt_slot_rules *rules, const char *caption)
{
    sdt_prompt_encoded e;
    sdt_prompt_encode(tok, rules, caption, &e);
    int32_t *raw = NULL;
    size_t n_raw = 0;
    sdt_tokenizer_tokenize(tok, caption, &raw, &n_raw);
    static ref_chunks r;
    ref_tokenize_line(raw, n_raw, rules->placeholder_id, rules->n_vectors, sdt_tokenizer_token_id(tok, ",</w>"),
                      sdt_tokenizer_bos(tok), sdt_tokenizer_eos(tok), rules->pad_id, &r);
    free(raw);
    CHECK(e.n_chunks == r.n_chunks, "%zu raw tokens: %d chunks, A1111 makes %d", n_raw, e.n_chunks, r.n_chunks);
    if (e.n_chunks != r.n_chunks) return;
    int first_diff = -1;
    for (int i = 0; i < e.n_chunks * SDT_PROMPT_TOKENS && first_diff < 0; i++)
        if (e.ids[i] != r.ids[i]) first_diff = i;
    CHECK(first_diff < 0, "ids differ from A1111's first at position %d (%d vs %d)", first_diff,
          first_diff < 0 ? 0 : e.ids[first_diff], first_diff < 0 ? 0 : r.ids[first_diff]);
    int n_ref_slots = 0;
    for (int i = 0; i < e.n_chunks * SDT_PROMPT_TOKENS; i++) n_ref_slots += r.row[i] >= 0;
    CHECK(e.n_slots == n_ref_slots && e.n_cut_slots == 0, "%d slots, A1111 places %d (%d cut)", e.n_slots, n_ref_slots,
          e.n_cut_slots);
    for (int s = 0; s < e.n_slots; s++)
        CHECK(r.row[e.slot_pos[s]] == e.slot_row[s], "slot %d at %d takes row %d, A1111 row %d", s, e.slot_pos[s],
              e.slot_row[s], r.row[e.slot_pos[s]]);
    for (int s = 0; s + 1 < e.n_slots; s += rules->n_vectors) /* one occurrence stays in one chunk */
        CHECK(e.slot_pos[s] / SDT_PROMPT_TOKENS == e.slot_pos[s + rules->n_vectors - 1] / SDT_PROMPT_TOKENS,
              "an occurrence of the embedding is split across chunks at %d", e.slot_pos[s]);
}

/* The text encoder on [n_seq, 77] tokens with overrides; out [n_seq * 77 * width] floats. */
static bool run_clip(const clip_text_model *m, sdt_backend *be, const int32_t *ids, int n_seq, const float *rows,
                     int n_rows, const clip_override *ov, int n_ov, float *out)
{
    sdt_error err = {0};
    int64_t tshape[2] = {n_seq, SDT_PROMPT_TOKENS}, rshape[2] = {n_rows, m->cfg.width};
    sdt_tensor tokens = sdt_tensor_make((void *)ids, SDT_I32, SDT_DEVICE_CPU, 2, tshape);
    sdt_tensor rows_t = sdt_tensor_make((void *)rows, SDT_F32, SDT_DEVICE_CPU, 2, rshape);
    clip_text_inputs in = {
        .tokens = &tokens, .rows = n_ov ? &rows_t : NULL, .overrides = ov, .n_overrides = n_ov, .act_dtype = SDT_F32};
    sdt_arena meas, arena;
    sdt_arena_init_measure(&meas, be);
    clip_text_acts acts;
    bool ok = clip_text_forward(m, be, &meas, &in, &acts, &err) && sdt_arena_init(&arena, be, meas.peak);
    ok = ok && clip_text_forward(m, be, &arena, &in, &acts, &err);
    if (ok) sdt_load_f32(acts.out.data, acts.out.dtype, out, (int64_t)n_seq * SDT_PROMPT_TOKENS * m->cfg.width);
    if (ok) sdt_arena_release(&arena);
    CHECK(ok, "text encoder: %s", err.message);
    return ok;
}

static void check_encoder_per_chunk(sdt_tokenizer *tok, const sdt_slot_rules *rules, const clip_text_model *m,
                                    sdt_backend *be, sdt_test_rng *rng)
{
    const int batch = 2, C = m->cfg.width;
    sdt_prompt_encoded e[2];
    char *caps[2] = {random_caption(rng, 190, 120), random_caption(rng, 40, 3)};
    for (int b = 0; b < batch; b++) sdt_prompt_encode(tok, rules, caps[b], &e[b]);
    CHECK(e[0].n_chunks >= 3 && e[1].n_chunks == 1, "chunks %d and %d (want >= 3 and 1)", e[0].n_chunks, e[1].n_chunks);
    static int32_t ids[2 * MAX_IDS];
    static clip_override ov[2 * MAX_IDS];
    int n_ov = 0, chunks = sdt_prompt_batch(tok, rules, e, batch, ids, ov, &n_ov);
    CHECK(chunks == e[0].n_chunks && n_ov == e[0].n_slots + e[1].n_slots, "batch of %d chunks, %d overrides", chunks,
          n_ov);
    float *rows = malloc((size_t)rules->n_vectors * C * sizeof(float));
    sdt_test_fill_normal(rng, rows, (int64_t)rules->n_vectors * C, 0.5);
    size_t seq = (size_t)SDT_PROMPT_TOKENS * C;
    float *all = malloc((size_t)batch * chunks * seq * sizeof(float)), *one = malloc(seq * sizeof(float));
    if (!run_clip(m, be, ids, batch * chunks, rows, rules->n_vectors, ov, n_ov, all)) goto done;
    int64_t cshape[3] = {batch * chunks, SDT_PROMPT_TOKENS, C};
    sdt_tensor clip_out = sdt_tensor_make(all, SDT_F32, SDT_DEVICE_CPU, 3, cshape);
    sdt_tensor context = sdt_prompt_context(&clip_out, batch);
    CHECK(context.shape[0] == batch && context.shape[1] == (int64_t)chunks * SDT_PROMPT_TOKENS && context.shape[2] == C,
          "the context is [%lld, %lld, %lld]", (long long)context.shape[0], (long long)context.shape[1],
          (long long)context.shape[2]);
    double worst = 0;
    for (int b = 0; b < batch; b++) {
        for (int k = 0; k < chunks; k++) {
            /* The reference: this chunk alone (an empty chunk where the prompt has fewer). */
            int32_t chunk_ids[SDT_PROMPT_TOKENS];
            clip_override chunk_ov[SDT_PROMPT_TOKENS];
            int n_chunk_ov = 0;
            if (k < e[b].n_chunks) {
                memcpy(chunk_ids, e[b].ids + k * SDT_PROMPT_TOKENS, sizeof chunk_ids);
                for (int s = 0; s < e[b].n_slots; s++)
                    if (e[b].slot_pos[s] / SDT_PROMPT_TOKENS == k)
                        chunk_ov[n_chunk_ov++] =
                            (clip_override){0, e[b].slot_pos[s] % SDT_PROMPT_TOKENS, e[b].slot_row[s]};
            } else {
                chunk_ids[0] = sdt_tokenizer_bos(tok);
                chunk_ids[1] = sdt_tokenizer_eos(tok);
                for (int i = 2; i < SDT_PROMPT_TOKENS; i++) chunk_ids[i] = rules->pad_id;
            }
            if (!run_clip(m, be, chunk_ids, 1, rows, rules->n_vectors, chunk_ov, n_chunk_ov, one)) goto done;
            const float *got = (const float *)context.data + ((size_t)b * chunks + (size_t)k) * seq;
            for (size_t i = 0; i < seq; i++) worst = fmax(worst, fabs((double)got[i] - one[i]));
        }
    }
    printf("chunked batch vs chunk by chunk: max |diff| %.3g over %d chunks\n", worst, batch * chunks);
    CHECK(worst < 1e-5, "the chunked encoding differs from the chunk-by-chunk reference by %g", worst);
done:
    free(all);
    free(one);
    free(rows);
    for (int b = 0; b < batch; b++) g_free(caps[b]);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("test_prompt_chunks");
    sdt_error err = {0};
    sdt_tokenizer *tok = sdt_tokenizer_load_builtin_clip(&err);
    CHECK(tok != NULL, "built-in tokenizer: %s", err.message);
    if (!tok) return sdt_test_finish("test_prompt_chunks");
    int32_t placeholder = -1;
    CHECK(sdt_tokenizer_add_token(tok, "<emb>", -1, &placeholder, &err), "add token: %s", err.message);
    sdt_slot_rules rules = {placeholder, 3, 0, sdt_tokenizer_eos(tok)};

    /* Random long captions, the embedding at every kind of place; SD 1.x and SD 2.x padding. */
    for (int trial = 0; trial < 60; trial++) {
        rules.n_vectors = 1 + (int)(sdt_test_next(&rng) % 8);
        rules.pad_id = trial % 2 ? 0 : sdt_tokenizer_eos(tok);
        char *cap = random_caption(&rng, 60 + (int)(sdt_test_next(&rng) % 160), (int)(sdt_test_next(&rng) % 200));
        check_against_a1111(tok, &rules, cap);
        g_free(cap);
    }
    /* The embedding right at a chunk boundary: 74 plain words, then 3 vectors. */
    GString *g = g_string_new(NULL);
    for (int i = 0; i < 74; i++) g_string_append(g, "cat ");
    g_string_append(g, "<emb> dog");
    rules.n_vectors = 3;
    rules.pad_id = sdt_tokenizer_eos(tok);
    check_against_a1111(tok, &rules, g->str);
    sdt_prompt_encoded e;
    sdt_prompt_encode(tok, &rules, g->str, &e);
    CHECK(e.n_chunks == 2 && e.n_slots == 3 && e.slot_pos[0] == SDT_PROMPT_TOKENS + 1,
          "an embedding that does not fit the first chunk starts the second (%d chunks, first slot at %d)", e.n_chunks,
          e.slot_pos[0]);
    g_string_free(g, TRUE);
    /* Past the last chunk: the slots are counted as cut. */
    g = g_string_new(NULL);
    for (int i = 0; i < SDT_PROMPT_MAX_CHUNKS * SDT_PROMPT_CHUNK_BODY + 5; i++) g_string_append(g, "cat ");
    g_string_append(g, "<emb>");
    sdt_prompt_encode(tok, &rules, g->str, &e);
    CHECK(e.n_chunks == SDT_PROMPT_MAX_CHUNKS && e.n_cut_slots == 3 && e.n_slots == 0,
          "a prompt past %d chunks: %d chunks, %d slots cut", SDT_PROMPT_MAX_CHUNKS, e.n_chunks, e.n_cut_slots);
    g_string_free(g, TRUE);

    /* The text encoder: a tiny random model with CLIP's vocabulary. */
    char path[512];
    snprintf(path, sizeof path, "%s/sdt-prompt-chunks-%ld.safetensors", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (long)getpid());
    sdt_ckpt_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.config = sd_config_preset(SD_FAMILY_TINY);
    spec.config.clip.vocab = SDT_CLIP_BUILTIN_VOCAB;
    spec.dtype = SDT_F32;
    spec.seed = sdt_test_next(&rng);
    spec.perturb_all = true;
    spec.text_only = true;
    sdt_weights *w = NULL;
    clip_text_model m;
    sdt_backend *be = sdt_backend_cpu_create(1);
    bool ok = sdt_ckpt_generate(path, &spec, &err) && (w = sdt_weights_open(path, &err)) &&
              clip_text_load(&m, &spec.config.clip, w, &err);
    CHECK(ok && be, "the tiny text encoder: %s", err.message);
    if (ok && be) check_encoder_per_chunk(tok, &rules, &m, be, &rng);
    if (be) be->destroy(be);
    sdt_weights_close(w);
    unlink(path);
    sdt_tokenizer_free(tok);
    return sdt_test_finish("test_prompt_chunks");
}
