/* model_util.c - tensor views, formatted weight lookup and parameter emission; see model_util.h. */
#include "model_util.h"

#include <string.h>

#include "c_numeric.h"

#define MU_KEY_MAX 256

sdt_tensor mu_rows(const sdt_tensor *t, int64_t row, int64_t nrows)
{
    sdt_tensor v = *t;
    int64_t row_elems = 1;
    for (int i = 1; i < t->ndim; i++) row_elems *= t->shape[i];
    v.data = t->data ? (uint8_t *)t->data + (size_t)(row * row_elems) * sdt_dtype_size(t->dtype) : NULL;
    v.shape[0] = nrows;
    return v;
}

sdt_tensor mu_reshape(const sdt_tensor *t, int ndim, const int64_t *shape)
{
    sdt_tensor v = *t;
    v.ndim = ndim;
    for (int i = 0; i < SDT_MAX_DIMS; i++) v.shape[i] = i < ndim ? shape[i] : 0;
    return v;
}

sdt_tensor mu_reshape2(const sdt_tensor *t, int64_t d0, int64_t d1)
{
    int64_t s[2] = {d0, d1};
    return mu_reshape(t, 2, s);
}

sdt_tensor mu_reshape3(const sdt_tensor *t, int64_t d0, int64_t d1, int64_t d2)
{
    int64_t s[3] = {d0, d1, d2};
    return mu_reshape(t, 3, s);
}

sdt_tensor mu_alloc(sdt_arena *a, sdt_dtype dtype, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    int64_t s[4] = {d0, d1, d2, d3};
    return sdt_arena_tensor(a, dtype, ndim, s);
}

static void format_key(char key[MU_KEY_MAX], const char *fmt, va_list ap)
{
    sdt_c_vsnprintf(key, MU_KEY_MAX, fmt, ap);
}

/* key from key_fmt and the variadic arguments after it, in a function whose last named parameter is key_fmt. */
#define FORMAT_KEY(key, key_fmt)                                                                                       \
    do {                                                                                                               \
        va_list ap_;                                                                                                   \
        va_start(ap_, key_fmt);                                                                                        \
        format_key(key, key_fmt, ap_);                                                                                 \
        va_end(ap_);                                                                                                   \
    } while (0)

bool mu_require(const sdt_weights *w, sdt_tensor *out, int ndim, const int64_t *shape, sdt_error *error,
                const char *key_fmt, ...)
{
    char key[MU_KEY_MAX];
    FORMAT_KEY(key, key_fmt);
    const sdt_tensor *t = sdt_weights_require(w, key, ndim, shape, error);
    if (!t) return false;
    *out = *t;
    return true;
}

bool mu_vrequire_model(const sdt_weights *w, sdt_tensor *out, int ndim, const int64_t *shape, sdt_error *error,
                       const char *missing, const char *key_fmt, va_list ap)
{
    char key[MU_KEY_MAX];
    format_key(key, key_fmt, ap);
    if (!sdt_weights_get(w, key))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: key '%s' is missing; %s", sdt_weights_path(w), key, missing);
    return mu_require(w, out, ndim, shape, error, "%s", key);
}

static bool shape_equals(const sdt_tensor *t, int ndim, const int64_t *shape)
{
    if (t->ndim != ndim) return false;
    for (int i = 0; i < ndim; i++)
        if (t->shape[i] != shape[i]) return false;
    return true;
}

bool mu_require_either(const sdt_weights *w, sdt_tensor *out, int ndim_a, const int64_t *shape_a, int ndim_b,
                       const int64_t *shape_b, sdt_error *error, const char *key_fmt, ...)
{
    char key[MU_KEY_MAX];
    FORMAT_KEY(key, key_fmt);
    const sdt_tensor *t = sdt_weights_get(w, key);
    if (t && (shape_equals(t, ndim_a, shape_a) || shape_equals(t, ndim_b, shape_b))) {
        *out = mu_reshape(t, ndim_b, shape_b);
        return true;
    }
    /* Anything else: the weights store words the error (file, key, shapes). */
    t = sdt_weights_require(w, key, ndim_b, shape_b, error);
    if (!t) return false;
    *out = *t;
    return true;
}

bool mu_has(const sdt_weights *w, const char *key_fmt, ...)
{
    char key[MU_KEY_MAX];
    FORMAT_KEY(key, key_fmt);
    return sdt_weights_get(w, key) != NULL;
}

const sdt_tensor *mu_get(const sdt_weights *w, const char *key_fmt, ...)
{
    char key[MU_KEY_MAX];
    FORMAT_KEY(key, key_fmt);
    return sdt_weights_get(w, key);
}

bool mu_emit(sdt_param_visitor visit, void *user, sdt_param_init init, float std, int ndim, const int64_t *shape,
             const char *key_fmt, ...)
{
    char key[MU_KEY_MAX];
    FORMAT_KEY(key, key_fmt);
    sdt_param_info p;
    memset(&p, 0, sizeof(p));
    p.key = key;
    p.ndim = ndim;
    for (int i = 0; i < ndim && i < 4; i++) p.shape[i] = shape[i];
    p.init = init;
    p.std = std;
    return visit(user, &p);
}
