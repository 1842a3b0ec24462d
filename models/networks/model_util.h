/* model_util.h - small helpers every model definition shares.
 *
 * Tensor views (a slice of rows of a row-major tensor, a reshape), weight
 * lookup by a printf-formatted canonical key with a shape check, parameter
 * enumeration with formatted keys, and the op-call error macro.
 */
#ifndef SDT_MODELS_MODEL_UTIL_H
#define SDT_MODELS_MODEL_UTIL_H

#include "sdt_error.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "arena.h"
#include "ops.h"
#include "param_list.h"
#include "weights.h"

/* Rows [row, row + nrows) of t, seen as [rows, rest...]: the first dim sliced, the others kept. */
sdt_tensor mu_rows(const sdt_tensor *t, int64_t row, int64_t nrows);
/* The same memory under another shape (same numel; the caller guarantees it). */
sdt_tensor mu_reshape(const sdt_tensor *t, int ndim, const int64_t *shape);
sdt_tensor mu_reshape2(const sdt_tensor *t, int64_t d0, int64_t d1);
sdt_tensor mu_reshape3(const sdt_tensor *t, int64_t d0, int64_t d1, int64_t d2);
/* An arena tensor; shape given inline. */
sdt_tensor mu_alloc(sdt_arena *a, sdt_dtype dtype, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3);

/* Looks up a weight by a formatted key and checks its shape (ndim entries of shape).
 * On success copies the view into *out. */
bool mu_require(const sdt_weights *w, sdt_tensor *out, int ndim, const int64_t *shape, sdt_error *error,
                const char *key_fmt, ...) __attribute__((format(printf, 6, 7)));
/* mu_require in one model's words: a missing key fails with "<file>: key '<key>' is missing; <missing>" (the
 * generic sentence speaks of Stable Diffusion checkpoints). key_fmt's arguments come in ap, for the model's own
 * variadic wrapper. */
bool mu_vrequire_model(const sdt_weights *w, sdt_tensor *out, int ndim, const int64_t *shape, sdt_error *error,
                       const char *missing, const char *key_fmt, va_list ap) __attribute__((format(printf, 7, 0)));
/* Like mu_require but accepts either of two shapes with the same numel (e.g. a 1x1
 * conv stored as [C, C, 1, 1] or as a linear [C, C]); the view gets shape_b's shape
 * when it matched shape_a only in numel. */
bool mu_require_either(const sdt_weights *w, sdt_tensor *out, int ndim_a, const int64_t *shape_a, int ndim_b,
                       const int64_t *shape_b, sdt_error *error, const char *key_fmt, ...)
    __attribute__((format(printf, 8, 9)));
/* True when the checkpoint has the formatted key. */
bool mu_has(const sdt_weights *w, const char *key_fmt, ...) __attribute__((format(printf, 2, 3)));
/* The tensor under a formatted key or NULL. */
const sdt_tensor *mu_get(const sdt_weights *w, const char *key_fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parameter enumeration with a formatted key. Returns the visitor's answer. */
bool mu_emit(sdt_param_visitor visit, void *user, sdt_param_init init, float std, int ndim, const int64_t *shape,
             const char *key_fmt, ...) __attribute__((format(printf, 7, 8)));

/* Calls a backend op; on failure records "<module>: <backend error>" with the backend's code and returns false. */
#define MU_TRY(be, out_error, module, call)                                                                            \
    do {                                                                                                               \
        if ((call) != 0)                                                                                               \
            return sdt_fail((out_error), (be)->error.code, "%s: the %s backend failed: %s", (module), (be)->name,      \
                            (be)->error.message);                                                                      \
    } while (0)

#endif
