/* embedding.c - embedding lifetime and name rules; see embedding.h. */
#include "ti/embedding.h"

#include "data/file_name.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sdt_embedding_free(sdt_embedding *e)
{
    if (!e) return;
    free(e->name);
    free(e->vectors);
    free(e->checkpoint_hash);
    free(e->checkpoint_name);
    free(e->init_text);
    free(e->training_note);
    free(e->load_note);
    memset(e, 0, sizeof(*e));
}

bool sdt_embedding_set_string(char **field, const char *value)
{
    char *copy = value ? strdup(value) : NULL;
    if (value && !copy) return false;
    free(*field);
    *field = copy;
    return true;
}

bool sdt_embedding_name_check(const char *name, sdt_error *error)
{
    return sdt_file_name_check("embedding", name, SDT_EMBEDDING_NAME_MAX, error);
}

char *sdt_embedding_name_sanitise(const char *name)
{
    return sdt_file_name_sanitise(name, SDT_EMBEDDING_NAME_MAX);
}

bool sdt_embedding_init(sdt_embedding *e, const char *name, int n_vectors, int dim, sdt_error *error)
{
    memset(e, 0, sizeof(*e));
    if (!sdt_embedding_name_check(name, error)) return false;
    if (n_vectors < 1 || n_vectors > SDT_EMBEDDING_MAX_VECTORS) {
        sdt_fail(error, SDT_ERR_VALIDATION, "embedding \"%s\": %d vectors per token is outside 1..%d", name, n_vectors,
                 SDT_EMBEDDING_MAX_VECTORS);
        return false;
    }
    if (dim < 1 || dim > SDT_EMBEDDING_MAX_DIM) {
        sdt_fail(error, SDT_ERR_VALIDATION, "embedding \"%s\": width %d is outside 1..%d", name, dim,
                 SDT_EMBEDDING_MAX_DIM);
        return false;
    }
    e->name = strdup(name);
    e->vectors = calloc((size_t)n_vectors * (size_t)dim, sizeof(float));
    if (!e->name || !e->vectors) {
        sdt_embedding_free(e);
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "embedding \"%s\": out of memory", name);
        return false;
    }
    e->n_vectors = n_vectors;
    e->dim = dim;
    return true;
}

double sdt_embedding_vector_norm(const float *v, int64_t dim)
{
    double s = 0;
    for (int64_t k = 0; k < dim; k++) s += (double)v[k] * v[k];
    return sqrt(s);
}

bool sdt_embedding_is_finite(const sdt_embedding *e)
{
    size_t n = (size_t)e->n_vectors * (size_t)e->dim;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(e->vectors[i])) return false;
    return true;
}

const char *sdt_embedding_encoder_key(int encoder)
{
    static const char *const keys[SDT_EMBEDDING_ENCODERS] = {"clip_l", "clip_g", "t5xxl"};
    return encoder >= 0 && encoder < SDT_EMBEDDING_ENCODERS ? keys[encoder] : "?";
}

int sdt_embedding_encoder_released_width(int encoder)
{
    static const int widths[SDT_EMBEDDING_ENCODERS] = {768, 1280, 4096};
    return encoder >= 0 && encoder < SDT_EMBEDDING_ENCODERS ? widths[encoder] : 0;
}

bool sdt_embedding_has_tables(const sdt_embedding *e)
{
    return e->encoder_dims[0] > 0 || e->encoder_dims[1] > 0 || e->encoder_dims[2] > 0;
}

float *sdt_embedding_table(const sdt_embedding *e, int encoder)
{
    if (!e->vectors || encoder < 0 || encoder >= SDT_EMBEDDING_ENCODERS || e->encoder_dims[encoder] <= 0) return NULL;
    size_t offset = 0;
    for (int k = 0; k < encoder; k++) offset += (size_t)e->n_vectors * (size_t)e->encoder_dims[k];
    return e->vectors + offset;
}

bool sdt_embedding_init_tables(sdt_embedding *e, const char *name, int n_vectors, const int dims[3], sdt_error *error)
{
    int dim = 0;
    for (int k = 0; k < SDT_EMBEDDING_ENCODERS; k++) {
        if (dims[k] < 0 || dims[k] > SDT_EMBEDDING_MAX_DIM) {
            memset(e, 0, sizeof(*e));
            return sdt_fail(error, SDT_ERR_VALIDATION, "embedding \"%s\": the %s table's width %d is outside 0..%d",
                            name, sdt_embedding_encoder_key(k), dims[k], SDT_EMBEDDING_MAX_DIM);
        }
        dim += dims[k];
    }
    if (!sdt_embedding_init(e, name, n_vectors, dim, error)) return false;
    for (int k = 0; k < SDT_EMBEDDING_ENCODERS; k++) e->encoder_dims[k] = dims[k];
    return true;
}

const char *sdt_embedding_family(const sdt_embedding *e)
{
    if (!sdt_embedding_has_tables(e)) return NULL;
    return e->encoder_dims[1] > 0 ? "sd3" : "flux";
}

const char *sdt_embedding_family_title(const sdt_embedding *e)
{
    if (!sdt_embedding_has_tables(e)) return NULL;
    return e->encoder_dims[1] > 0 ? "SD3.5" : "Flux.1";
}

double sdt_embedding_row_norm(const sdt_embedding *e, int i)
{
    if (!sdt_embedding_has_tables(e)) return sdt_embedding_vector_norm(e->vectors + (size_t)i * e->dim, e->dim);
    double s = 0;
    for (int k = 0; k < SDT_EMBEDDING_ENCODERS; k++) {
        const float *t = sdt_embedding_table(e, k);
        if (!t) continue;
        double n = sdt_embedding_vector_norm(t + (size_t)i * e->encoder_dims[k], e->encoder_dims[k]);
        s += n * n;
    }
    return sqrt(s);
}
