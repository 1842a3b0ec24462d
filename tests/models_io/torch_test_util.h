/* torch_test_util.h - building and comparing pickle_value trees for the torch file tests. */
#ifndef SDT_TORCH_TEST_UTIL_H
#define SDT_TORCH_TEST_UTIL_H

#include <string.h>

#include "pickle_value.h"
#include "sdt_test.h"

/* Deep equality of two trees: kinds, scalars, strings, container items in order, tensor dtype, shape and
 * elements (read row-major through strides). Writes the first difference into why. */
static inline bool tt_tensor_equal(const sdt_pv *a, const sdt_pv *b, char *why, size_t n)
{
    const sdt_pv_tensor *x = &a->u.t, *y = &b->u.t;
    if (x->storage->dtype != y->storage->dtype || x->ndim != y->ndim) {
        snprintf(why, n, "tensor dtype or rank differs");
        return false;
    }
    for (int d = 0; d < x->ndim; d++)
        if (x->shape[d] != y->shape[d]) {
            snprintf(why, n, "tensor shape differs at dim %d", d);
            return false;
        }
    size_t el = sdt_st_dtype_size(x->storage->dtype);
    int64_t numel = sdt_pv_tensor_numel(a), idx[SDT_PV_MAX_DIMS] = {0};
    const uint8_t *pa = sdt_pv_tensor_data(a), *pb = sdt_pv_tensor_data(b);
    for (int64_t i = 0; i < numel; i++) {
        int64_t oa = 0, ob = 0;
        for (int d = 0; d < x->ndim; d++) {
            oa += idx[d] * x->stride[d];
            ob += idx[d] * y->stride[d];
        }
        if (memcmp(pa + oa * (int64_t)el, pb + ob * (int64_t)el, el) != 0) {
            snprintf(why, n, "tensor element %lld differs", (long long)i);
            return false;
        }
        for (int d = x->ndim; d-- > 0;) {
            if (++idx[d] < x->shape[d]) break;
            idx[d] = 0;
        }
    }
    return true;
}

static inline bool tt_equal(const sdt_pv *a, const sdt_pv *b, char *why, size_t n)
{
    if (!a || !b || a->kind != b->kind) {
        snprintf(why, n, "kinds differ (%s vs %s)", a ? sdt_pv_kind_name(a->kind) : "NULL",
                 b ? sdt_pv_kind_name(b->kind) : "NULL");
        return false;
    }
    switch (a->kind) {
        case SDT_PV_NONE:
            return true;
        case SDT_PV_BOOL:
            return a->u.b == b->u.b || (snprintf(why, n, "bools differ"), false);
        case SDT_PV_INT:
            return a->u.i == b->u.i ||
                   (snprintf(why, n, "ints %lld vs %lld", (long long)a->u.i, (long long)b->u.i), false);
        case SDT_PV_FLOAT:
            return memcmp(&a->u.f, &b->u.f, sizeof(double)) == 0 ||
                   (snprintf(why, n, "floats %g vs %g", a->u.f, b->u.f), false);
        case SDT_PV_STR:
        case SDT_PV_BYTES:
            return (a->u.s.len == b->u.s.len && memcmp(a->u.s.data, b->u.s.data, a->u.s.len) == 0) ||
                   (snprintf(why, n, "strings '%s' vs '%s'", a->u.s.data, b->u.s.data), false);
        case SDT_PV_LIST:
        case SDT_PV_TUPLE:
        case SDT_PV_DICT:
            if (a->u.seq.n != b->u.seq.n || (a->kind == SDT_PV_DICT && a->u.seq.ordered != b->u.seq.ordered)) {
                snprintf(why, n, "%s sizes or orderedness differ (%zu vs %zu)", sdt_pv_kind_name(a->kind), a->u.seq.n,
                         b->u.seq.n);
                return false;
            }
            for (size_t i = 0; i < a->u.seq.n; i++)
                if (!tt_equal(a->u.seq.items[i], b->u.seq.items[i], why, n)) return false;
            return true;
        case SDT_PV_TENSOR:
            return tt_tensor_equal(a, b, why, n);
        default:
            snprintf(why, n, "unexpected kind %s", sdt_pv_kind_name(a->kind));
            return false;
    }
}

#endif
