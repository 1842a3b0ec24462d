/* embedding_safetensors.c - embeddings as .safetensors through models/formats/safetensors.h. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ti/embedding_file.h"
#include "safetensors.h"

bool sdt_embedding_save_safetensors(const sdt_embedding *e, const char *path, bool overwrite, sdt_error *error)
{
    if (!sdt_embedding_check_save(e, path, overwrite, error)) return false;
    char step[32], vectors[32];
    snprintf(step, sizeof(step), "%" PRId64, e->step);
    snprintf(vectors, sizeof(vectors), "%d", e->n_vectors);
    sdt_st_kv meta[7];
    size_t n_meta = 0;
    meta[n_meta++] = (sdt_st_kv){"name", e->name ? e->name : ""};
    meta[n_meta++] = (sdt_st_kv){"step", step};
    meta[n_meta++] = (sdt_st_kv){"vectors_per_token", vectors};
    if (e->checkpoint_hash) meta[n_meta++] = (sdt_st_kv){"sd_checkpoint", e->checkpoint_hash};
    if (e->checkpoint_name) meta[n_meta++] = (sdt_st_kv){"sd_checkpoint_name", e->checkpoint_name};
    if (e->init_text) meta[n_meta++] = (sdt_st_kv){"init_text", e->init_text};
    if (e->training_note) meta[n_meta++] = (sdt_st_kv){"sdtrain_fallback", e->training_note};

    if (sdt_embedding_has_tables(e)) {
        /* SD3.5 / Flux.1: one tensor per encoder under the keys ComfyUI's tokenizers look up (embedding_key) */
        sdt_st_write_item items[SDT_EMBEDDING_ENCODERS];
        int64_t shapes[SDT_EMBEDDING_ENCODERS][2];
        size_t n_items = 0;
        static const int order[SDT_EMBEDDING_ENCODERS] = {1, 0, 2}; /* clip_g, clip_l, t5xxl: sorted, as kohya's */
        for (int o = 0; o < SDT_EMBEDDING_ENCODERS; o++) {
            int k = order[o];
            if (e->encoder_dims[k] <= 0) continue;
            shapes[n_items][0] = e->n_vectors;
            shapes[n_items][1] = e->encoder_dims[k];
            items[n_items] = (sdt_st_write_item){sdt_embedding_encoder_key(k), SDT_ST_F32, 2, shapes[n_items],
                                                 sdt_embedding_table(e, k)};
            n_items++;
        }
        return sdt_st_write(path, items, n_items, meta, n_meta, error);
    }
    if (!e->clip_l_dim) {
        int64_t shape[2] = {e->n_vectors, e->dim};
        sdt_st_write_item item = {"emb_params", SDT_ST_F32, 2, shape, e->vectors};
        return sdt_st_write(path, &item, 1, meta, n_meta, error);
    }
    /* SDXL: split the side-by-side rows into kohya's two tensors. */
    int l = e->clip_l_dim, g = e->dim - e->clip_l_dim;
    float *vl = malloc((size_t)e->n_vectors * (size_t)l * sizeof(float));
    float *vg = malloc((size_t)e->n_vectors * (size_t)g * sizeof(float));
    bool ok = vl && vg;
    if (ok) {
        for (int r = 0; r < e->n_vectors; r++) {
            memcpy(vl + (size_t)r * l, e->vectors + (size_t)r * e->dim, (size_t)l * sizeof(float));
            memcpy(vg + (size_t)r * g, e->vectors + (size_t)r * e->dim + l, (size_t)g * sizeof(float));
        }
        int64_t shape_l[2] = {e->n_vectors, l}, shape_g[2] = {e->n_vectors, g};
        sdt_st_write_item items[2] = {{"clip_g", SDT_ST_F32, 2, shape_g, vg}, {"clip_l", SDT_ST_F32, 2, shape_l, vl}};
        ok = sdt_st_write(path, items, 2, meta, n_meta, error);
    } else {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    free(vl);
    free(vg);
    return ok;
}

/* Rows x cols of an embedding tensor: [dim] is one row, [n, dim] n rows. */
static bool tensor_rows_cols(const char *path, const sdt_st_entry *t, int64_t *rows, int64_t *cols, sdt_error *error)
{
    if (t->ndim == 1) {
        *rows = 1;
        *cols = t->shape[0];
    } else if (t->ndim == 2) {
        *rows = t->shape[0];
        *cols = t->shape[1];
    } else {
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: tensor \"%s\" has %d dimensions; an embedding is [vectors, width]",
                 path, t->name, t->ndim);
        return false;
    }
    return true;
}

/* Converts a tensor's values to f32 into dst with row stride dst_stride. */
static bool copy_rows(const char *path, const sdt_st_entry *t, int64_t rows, int64_t cols, float *dst,
                      int64_t dst_stride, sdt_error *error)
{
    for (int64_t r = 0; r < rows; r++) {
        float *out = dst + r * dst_stride;
        size_t esz = sdt_st_dtype_size(t->dtype);
        const unsigned char *src = (const unsigned char *)t->data + (size_t)(r * cols) * esz;
        sdt_dtype dt;
        if (t->dtype == SDT_ST_F64) {
            for (int64_t c = 0; c < cols; c++) {
                double v;
                memcpy(&v, src + (size_t)c * 8, 8);
                out[c] = (float)v;
            }
        } else if (t->dtype != SDT_ST_BOOL && sdt_st_dtype_to_tensor(t->dtype, &dt) &&
                   (t->dtype == SDT_ST_F32 || t->dtype == SDT_ST_F16 || t->dtype == SDT_ST_BF16)) {
            sdt_load_f32(src, dt, out, cols);
        } else {
            sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: tensor \"%s\" is %s; an embedding must be F32, F16, BF16 or F64",
                     path, t->name, sdt_st_dtype_name(t->dtype));
            return false;
        }
    }
    return true;
}

static void take_metadata(const sdt_safetensors *st, const char *path, sdt_embedding *e)
{
    const char *name = sdt_st_metadata_get(st, "name");
    if (name && name[0])
        sdt_embedding_set_string(&e->name, name);
    else {
        char *stem = sdt_path_stem(path);
        sdt_embedding_set_string(&e->name, stem);
        free(stem);
    }
    const char *step = sdt_st_metadata_get(st, "step");
    e->step = step ? strtoll(step, NULL, 10) : 0;
    sdt_embedding_set_string(&e->checkpoint_hash, sdt_st_metadata_get(st, "sd_checkpoint"));
    sdt_embedding_set_string(&e->checkpoint_name, sdt_st_metadata_get(st, "sd_checkpoint_name"));
    sdt_embedding_set_string(&e->init_text, sdt_st_metadata_get(st, "init_text"));
    sdt_embedding_set_string(&e->training_note, sdt_st_metadata_get(st, "sdtrain_fallback"));
}

bool sdt_embedding_take_sdxl(const char *path, const sdt_st_entry *tl, const sdt_st_entry *tg, sdt_embedding *e,
                             sdt_error *error)
{
    int64_t rl, cl, rg, cg;
    if (!tensor_rows_cols(path, tl, &rl, &cl, error) || !tensor_rows_cols(path, tg, &rg, &cg, error)) return false;
    if (rl != rg) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: clip_l has %" PRId64 " vectors but clip_g has %" PRId64 "; the file is damaged", path, rl, rg);
        return false;
    }
    if (!sdt_embedding_alloc_loaded(e, rl, cl + cg, path, error)) return false;
    e->clip_l_dim = (int)cl;
    return copy_rows(path, tl, rl, cl, e->vectors, cl + cg, error) &&
           copy_rows(path, tg, rg, cg, e->vectors + cl, cl + cg, error);
}

bool sdt_embedding_take_tables(const char *path, const sdt_st_entry *const tables[3], sdt_embedding *e,
                               sdt_error *error)
{
    int64_t rows[SDT_EMBEDDING_ENCODERS] = {0}, cols[SDT_EMBEDDING_ENCODERS] = {0}, n = -1, dim = 0;
    int first = -1;
    for (int k = 0; k < SDT_EMBEDDING_ENCODERS; k++) {
        if (!tables[k]) continue;
        if (!tensor_rows_cols(path, tables[k], &rows[k], &cols[k], error)) return false;
        if (n >= 0 && rows[k] != n)
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "%s: the %s table has %" PRId64 " vectors but %s has %" PRId64
                            "; every encoder's table holds the same vectors, so the file is damaged or mixes two "
                            "embeddings",
                            path, tables[k]->name, rows[k], tables[first]->name, n);
        for (int other = 0; other < SDT_EMBEDDING_ENCODERS; other++)
            if (other != k && cols[k] == sdt_embedding_encoder_released_width(other))
                return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                                "%s: the %s table is %" PRId64 " wide, the width of %s's rows, not %s's (%d); the "
                                "tables are mislabelled: save each encoder's rows under its own key (clip_l 768, "
                                "clip_g 1280, t5xxl 4096)",
                                path, tables[k]->name, cols[k], sdt_embedding_encoder_key(other),
                                sdt_embedding_encoder_key(k), sdt_embedding_encoder_released_width(k));
        if (first < 0) first = k;
        n = rows[k];
        dim += cols[k];
    }
    if (first < 0)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: no clip_l, clip_g or t5xxl table; this is no SD3.5/Flux embedding", path);
    if (!sdt_embedding_alloc_loaded(e, n, dim, path, error)) return false;
    for (int k = 0; k < SDT_EMBEDDING_ENCODERS; k++) e->encoder_dims[k] = (int)cols[k];
    for (int k = 0; k < SDT_EMBEDDING_ENCODERS; k++)
        if (tables[k] && !copy_rows(path, tables[k], n, cols[k], sdt_embedding_table(e, k), cols[k], error))
            return false;
    return true;
}

bool sdt_embedding_take_tensor(const char *path, const sdt_st_entry *t, sdt_embedding *e, sdt_error *error)
{
    int64_t rows = 0, cols = 0;
    return tensor_rows_cols(path, t, &rows, &cols, error) && sdt_embedding_alloc_loaded(e, rows, cols, path, error) &&
           copy_rows(path, t, rows, cols, e->vectors, cols, error);
}

bool sdt_embedding_load_safetensors(const char *path, sdt_embedding *e, sdt_error *error)
{
    memset(e, 0, sizeof(*e));
    sdt_safetensors *st = sdt_st_open(path, error);
    if (!st) return false;
    const sdt_st_entry *t = sdt_st_find(st, "emb_params");
    const sdt_st_entry *tl = sdt_st_find(st, "clip_l"), *tg = sdt_st_find(st, "clip_g");
    const sdt_st_entry *t5 = sdt_st_find(st, "t5xxl"), *t5_short = sdt_st_find(st, "t5");
    bool ok;
    if (!t && (t5 || t5_short)) {
        /* SD3.5 / Flux.1: ComfyUI's key t5xxl, or OneTrainer's and diffusers' t5 */
        const sdt_st_entry *tables[SDT_EMBEDDING_ENCODERS] = {tl, tg, t5 ? t5 : t5_short};
        ok = t5 && t5_short
                 ? sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "%s: holds both a t5xxl and a t5 table; keep one (t5xxl is what ComfyUI reads)", path)
                 : sdt_embedding_take_tables(path, tables, e, error);
        if (ok && (sdt_st_find(st, "clip_l_out") || sdt_st_find(st, "clip_g_out") || sdt_st_find(st, "t5_out")))
            sdt_embedding_set_string(&e->load_note, "OneTrainer's output-embedding tables (*_out) were left out: no "
                                                    "host applies them as prompt rows");
    } else if (!t && tl && tg) {
        ok = sdt_embedding_take_sdxl(path, tl, tg, e, error);
    } else {
        if (!t && sdt_st_count(st) == 1) t = sdt_st_at(st, 0);
        if (!t) {
            sdt_fail(
                error, SDT_ERR_BAD_FORMAT,
                "%s: holds %zu tensors and none is \"emb_params\" (or clip_l + clip_g); an embedding file holds one "
                "tensor, so this is probably a model or LoRA, not an embedding",
                path, sdt_st_count(st));
            ok = false;
        } else {
            ok = sdt_embedding_take_tensor(path, t, e, error);
        }
    }
    if (ok) take_metadata(st, path, e);
    sdt_st_close(st);
    if (!ok) sdt_embedding_free(e);
    return ok;
}
