/* ti_create_tables.c - a new SD3.5 / Flux.1 embedding's tables from the encoders' token embeddings; see
 * ti_create_tables.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sentencepiece.h"
#include "train/tokenizer_open.h"
#include "ti/ti_create_tables.h"
#include "transformer_keys.h"

/* Where an encoder's token embedding sits in the canonical key space (transformer_keys.h). */
static const struct {
    sdt_tf_part part;
    sdt_weights_part file_part;
    const char *key, *key2;
} encoder_rows[SDT_EMBEDDING_ENCODERS] = {
    {SDT_TF_CLIP_L, SDT_PART_CLIP_L, SDT_TK_CLIP_L_PREFIX "text_model.embeddings.token_embedding.weight", NULL},
    {SDT_TF_CLIP_G, SDT_PART_CLIP_G, SDT_TK_CLIP_G_PREFIX "text_model.embeddings.token_embedding.weight", NULL},
    {SDT_TF_T5XXL, SDT_PART_T5XXL, SDT_TK_T5XXL_PREFIX "shared.weight",
     SDT_TK_T5XXL_PREFIX "encoder.embed_tokens.weight"},
};

/* The spec's file for encoder k (NULL or "" when not given) and the field that names it. */
static const char *spec_file(const sdt_embedding_spec *spec, int k)
{
    const char *p = k == 0 ? spec->clip_l_path : k == 1 ? spec->clip_g_path : spec->t5xxl_path;
    return p && *p ? p : NULL;
}

typedef struct encoder_source {
    sdt_weights *own; /* the spec's file, opened here; NULL when the checkpoint carries the encoder */
    const sdt_tensor *rows;
    const char *file;
} encoder_source;

static bool open_sources(const sdt_embedding_spec *spec, const sdt_weights *w, const sdt_tf_info *info,
                         encoder_source src[SDT_EMBEDDING_ENCODERS], sdt_error *error)
{
    sdt_tf_info missing = *info; /* the spec's files supply what the checkpoint lacks */
    for (int k = 0; k < SDT_EMBEDDING_ENCODERS; k++)
        if (spec_file(spec, k)) missing.has[encoder_rows[k].part] = true;
    char *sentence = sdt_tf_missing_sentence_of(&missing, spec->model_path,
                                                (1u << SDT_TF_CLIP_L) | (1u << SDT_TF_CLIP_G) | (1u << SDT_TF_T5XXL));
    if (sentence) {
        sdt_fail(error, SDT_ERR_NOT_FOUND, "%s (In the spec: clip_l_path, clip_g_path, t5xxl_path.)", sentence);
        free(sentence);
        return false;
    }
    for (int k = 0; k < SDT_EMBEDDING_ENCODERS; k++) {
        if (!sdt_tf_family_needs(info->family, encoder_rows[k].part)) continue;
        const char *given = spec_file(spec, k);
        const sdt_weights *from = w;
        src[k].file = spec->model_path;
        if (given) {
            if (!(src[k].own = sdt_weights_open_part(given, encoder_rows[k].file_part, error))) return false;
            from = src[k].own;
            src[k].file = given;
        }
        src[k].rows = sdt_weights_get(from, encoder_rows[k].key);
        if (!src[k].rows && encoder_rows[k].key2) src[k].rows = sdt_weights_get(from, encoder_rows[k].key2);
        if (!src[k].rows || src[k].rows->ndim != 2 || src[k].rows->shape[0] < 1 || src[k].rows->shape[1] < 1 ||
            src[k].rows->device != SDT_DEVICE_CPU)
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "%s: the %s encoder has no [vocabulary, width] token embedding (%s)", src[k].file,
                            sdt_tf_part_title(encoder_rows[k].part), encoder_rows[k].key);
        if (src[k].rows->dtype != SDT_F32 && src[k].rows->dtype != SDT_F16 && src[k].rows->dtype != SDT_BF16)
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "%s: the %s token embedding is %s; expected F32, F16, BF16 or fp8", src[k].file,
                            sdt_tf_part_title(encoder_rows[k].part), sdt_dtype_name(src[k].rows->dtype));
    }
    return true;
}

/* The spec field that named encoder k's file, as sdt-host renames it ("spec.t5xxl_path" -> "--t5xxl"). */
static const char *source_field(const sdt_embedding_spec *spec, int k)
{
    if (!spec_file(spec, k)) return "spec.model_path";
    return k == 0 ? "spec.clip_l_path" : k == 1 ? "spec.clip_g_path" : "spec.t5xxl_path";
}

/* The encoders meet the transformer the embedding is for, checked on what create reads (the token tables and two
 * of the transformer's input weights), so a file given for the wrong encoder is refused here instead of becoming an
 * embedding of the wrong shape that only training refuses (sd_config_detect_parts makes the full check there):
 * T5 is as wide as the context the transformer reads; Flux's pooled vector is CLIP-L's output, so CLIP-L is as wide
 * as that input; SD3's CLIP-L is the narrower of its two CLIPs and both fit in the context; and no table is as wide
 * as another released encoder (the rule the embedding's reader applies, sdt_embedding_encoder_released_width). */
static bool encoders_meet(const sdt_embedding_spec *spec, const sdt_weights *w, const sdt_tf_info *info,
                          const encoder_source src[SDT_EMBEDDING_ENCODERS], sdt_error *error)
{
    int64_t width[SDT_EMBEDDING_ENCODERS];
    for (int k = 0; k < SDT_EMBEDDING_ENCODERS; k++) width[k] = src[k].rows ? src[k].rows->shape[1] : 0;
    for (int k = 0; k < SDT_EMBEDDING_ENCODERS; k++)
        for (int other = 0; width[k] && other < SDT_EMBEDDING_ENCODERS; other++)
            if (other != k && width[k] == sdt_embedding_encoder_released_width(other))
                return sdt_fail(
                    error, SDT_ERR_VALIDATION,
                    "%s: the file given for %s is %lld wide, the width of %s (%s's is %d): it is %s's file or "
                    "another model's; give %s's (%s)",
                    src[k].file, sdt_tf_part_title(encoder_rows[k].part), (long long)width[k],
                    sdt_tf_part_title(encoder_rows[other].part), sdt_tf_part_title(encoder_rows[k].part),
                    sdt_embedding_encoder_released_width(k), sdt_tf_part_title(encoder_rows[other].part),
                    sdt_tf_part_title(encoder_rows[k].part), source_field(spec, k));
    const sdt_tensor *ctx = sdt_weights_get(w, SDT_TK_TRANSFORMER_PREFIX "context_embedder.weight");
    const sdt_tensor *pooled =
        sdt_weights_get(w, SDT_TK_TRANSFORMER_PREFIX "time_text_embed.text_embedder.linear_1.weight");
    int64_t context = ctx && ctx->ndim == 2 ? ctx->shape[1] : 0,
            pooled_in = pooled && pooled->ndim == 2 ? pooled->shape[1] : 0;
    if (context && width[2] && width[2] != context)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%s: the T5 encoder is %lld wide, but the transformer (%s) reads a context %lld wide; the "
                        "files come from different models: give the T5-XXL file the model uses (%s)",
                        src[2].file, (long long)width[2], spec->model_path, (long long)context, source_field(spec, 2));
    if (info->family == SDT_TF_FLUX && pooled_in && width[0] && width[0] != pooled_in)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%s: the CLIP-L encoder is %lld wide, but Flux's transformer (%s) takes CLIP-L's pooled "
                        "output of %lld values; the file is another encoder's (CLIP-G?) or another model's: give "
                        "CLIP-L's (%s)",
                        src[0].file, (long long)width[0], spec->model_path, (long long)pooled_in,
                        source_field(spec, 0));
    if (info->family == SDT_TF_SD3 && width[0] && width[1] && width[0] >= width[1])
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%s is %lld wide as CLIP-L and %s %lld as CLIP-G, but CLIP-L (768) is the narrower of SD3's "
                        "two (CLIP-G 1280): the files are swapped or one encoder was given for both (%s, %s)",
                        src[0].file, (long long)width[0], src[1].file, (long long)width[1], source_field(spec, 0),
                        source_field(spec, 1));
    if (info->family == SDT_TF_SD3 && context && width[0] + width[1] > context)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%s: CLIP-L (%s) and CLIP-G (%s) are %lld + %lld wide, more than the context of %lld the "
                        "transformer reads; the files come from different models",
                        spec->model_path, src[0].file, src[1].file, (long long)width[0], (long long)width[1],
                        (long long)context);
    return true;
}

/* The init text's ids through CLIP's tokenizer (CLIP-L and bigG share OpenAI's BPE vocabulary, as SDXL's do:
 * it must fit the smaller of their token tables); *n 0 for an empty text. */
static bool tokenize_clip(const sdt_embedding_spec *spec, const sdt_host_callbacks *host, int64_t rows, int32_t **ids,
                          size_t *n, sdt_error *error)
{
    *ids = NULL;
    *n = 0;
    if (!spec->init_text || !*spec->init_text) return true;
    sdt_tokenizer *tok = sdt_open_tokenizer(spec->tokenizer_path, spec->model_path, (int)rows, host, error);
    if (!tok) return false;
    sdt_tokenizer_tokenize(tok, spec->init_text, ids, n);
    sdt_tokenizer_free(tok);
    return true;
}

/* The init text's ids through T5's SentencePiece tokenizer; *n 0 for an empty text. */
static bool tokenize_t5(const sdt_embedding_spec *spec, const sdt_host_callbacks *host, const sdt_tensor *rows,
                        int32_t **ids, size_t *n, sdt_error *error)
{
    *ids = NULL;
    *n = 0;
    if (!spec->init_text || !*spec->init_text) return true;
    int t5_rows = rows->shape[0] < INT32_MAX ? (int)rows->shape[0] : INT32_MAX;
    sdt_spm *t5 = sdt_open_t5_tokenizer(spec_file(spec, 2), spec->model_path, t5_rows, host, error);
    if (!t5) {
        if (error->code == SDT_ERR_NOT_FOUND) /* creating can do without one */
            sdt_error_append(error, ", or create with an empty init text");
        return sdt_error_wrap(error, "%s: the t5xxl table's init text", spec->model_path);
    }
    bool ok = sdt_spm_tokenize(t5, spec->init_text, ids, n, error);
    sdt_spm_free(t5);
    return ok;
}

/* Table k's vector i = token row ids[floor(i * n / N)] of the text's first N tokens (A1111's rule). */
static bool fill_table(const sdt_embedding *e, int k, const sdt_tensor *rows, const int32_t *ids, size_t n,
                       const char *file, sdt_error *error)
{
    if (n > (size_t)e->n_vectors) n = (size_t)e->n_vectors;
    if (n == 0) return true;
    int width = e->encoder_dims[k];
    size_t esz = sdt_dtype_size(rows->dtype);
    float *table = sdt_embedding_table(e, k);
    for (int i = 0; i < e->n_vectors; i++) {
        int32_t id = ids[(size_t)i * n / (size_t)e->n_vectors];
        if (id < 0 || id >= rows->shape[0])
            return sdt_fail(error, SDT_ERR_VALIDATION, "%s: token id %d is past the %s encoder's %lld token rows", file,
                            (int)id, sdt_embedding_encoder_key(k), (long long)rows->shape[0]);
        sdt_load_f32((const char *)rows->data + (size_t)id * (size_t)width * esz, rows->dtype,
                     table + (size_t)i * (size_t)width, width);
    }
    return true;
}

bool ti_create_tables(const sdt_embedding_spec *spec, const sdt_host_callbacks *host, const sdt_weights *w,
                      const sdt_tf_info *info, sdt_embedding *e, sdt_error *error)
{
    memset(e, 0, sizeof *e);
    encoder_source src[SDT_EMBEDDING_ENCODERS];
    memset(src, 0, sizeof src);
    bool ok = open_sources(spec, w, info, src, error) && encoders_meet(spec, w, info, src, error);
    int dims[SDT_EMBEDDING_ENCODERS] = {0, 0, 0};
    for (int k = 0; ok && k < SDT_EMBEDDING_ENCODERS; k++) dims[k] = src[k].rows ? (int)src[k].rows->shape[1] : 0;
    ok = ok && sdt_embedding_init_tables(e, spec->name, (int)spec->vectors_per_token, dims, error);
    int64_t clip_rows = src[0].rows ? src[0].rows->shape[0] : 0;
    if (src[1].rows && (!clip_rows || src[1].rows->shape[0] < clip_rows)) clip_rows = src[1].rows->shape[0];
    int32_t *clip_ids = NULL, *t5_ids = NULL;
    size_t n_clip = 0, n_t5 = 0;
    ok = ok && (!clip_rows || tokenize_clip(spec, host, clip_rows, &clip_ids, &n_clip, error)) &&
         (!src[2].rows || tokenize_t5(spec, host, src[2].rows, &t5_ids, &n_t5, error));
    for (int k = 0; ok && k < SDT_EMBEDDING_ENCODERS; k++)
        if (src[k].rows)
            ok = fill_table(e, k, src[k].rows, k < 2 ? clip_ids : t5_ids, k < 2 ? n_clip : n_t5, src[k].file, error);
    free(clip_ids);
    free(t5_ids);
    for (int k = 0; k < SDT_EMBEDDING_ENCODERS; k++)
        if (src[k].own) sdt_weights_close(src[k].own);
    if (!ok) sdt_embedding_free(e);
    return ok;
}
