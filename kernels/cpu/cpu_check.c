/* cpu_check.c - shape and dtype checks with readable failure sentences. */
#include "cpu_check.h"

#include <stdio.h>

const char *cpu_shape_str(const sdt_tensor *t, char *buf, size_t size)
{
    if (!t) {
        snprintf(buf, size, "NULL");
        return buf;
    }
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < t->ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

int cpu_check_shape(sdt_backend *be, const char *op, const char *name, const sdt_tensor *t,
                    int ndim, const int64_t *dims)
{
    if (cpu_check_tensor(be, op, name, t)) return -1;
    bool ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        if (dims[i] >= 0 && t->shape[i] != dims[i]) ok = false;
    if (ok) return 0;
    char got[96], want[96];
    size_t used = (size_t)snprintf(want, sizeof want, "[");
    for (int i = 0; i < ndim && used < sizeof want; i++) {
        if (dims[i] >= 0)
            used += (size_t)snprintf(want + used, sizeof want - used, i ? ", %lld" : "%lld", (long long)dims[i]);
        else
            used += (size_t)snprintf(want + used, sizeof want - used, i ? ", *" : "*");
    }
    if (used < sizeof want) snprintf(want + used, sizeof want - used, "]");
    return cpu_fail(be, SDT_ERR_INVALID_ARGUMENT, "%s: %s has shape %s but %s is required.", op, name,
                    cpu_shape_str(t, got, sizeof got), want);
}

int cpu_check_like(sdt_backend *be, const char *op, const char *name, const sdt_tensor *t,
                   const char *like_name, const sdt_tensor *like)
{
    if (!t) return 0;
    if (cpu_check_tensor(be, op, name, t)) return -1;
    if (sdt_tensor_same_shape(t, like)) return 0;
    char got[96], want[96];
    return cpu_fail(be, SDT_ERR_INVALID_ARGUMENT, "%s: %s has shape %s but must match %s's shape %s.", op, name,
                    cpu_shape_str(t, got, sizeof got), like_name, cpu_shape_str(like, want, sizeof want));
}

int64_t cpu_rows(const sdt_tensor *t)
{
    int64_t rows = 1;
    for (int i = 0; i + 1 < t->ndim; i++) rows *= t->shape[i];
    return rows;
}

int64_t cpu_last_dim(const sdt_tensor *t)
{
    return t->ndim ? t->shape[t->ndim - 1] : 1;
}

int cpu_fail_oom(sdt_backend *be, const char *op, size_t bytes)
{
    return cpu_fail(be, SDT_ERR_OUT_OF_MEMORY, "%s: could not allocate %zu bytes of workspace; free memory or use smaller shapes.", op, bytes);
}
