/* cpu_check.h - argument checks shared by the CPU ops (internal to kernels/cpu).
 *
 * Every op validates its tensors before touching memory and turns a mismatch
 * into one sentence in be->error that names the op, the argument and both
 * shapes, so a model bug reads as "conv2d: w has shape [..] but ..." instead
 * of a crash.
 */
#ifndef SDT_KERNELS_CPU_CHECK_H
#define SDT_KERNELS_CPU_CHECK_H

#include "cpu_context.h"

/* Writes t's shape as "[2, 3, 4]" (or "NULL") into buf and returns buf. */
const char *cpu_shape_str(const sdt_tensor *t, char *buf, size_t size);

/* cpu_check_tensor plus an exact shape: ndim dims, each must equal dims[i]
 * unless dims[i] < 0 (any size). */
int cpu_check_shape(sdt_backend *be, const char *op, const char *name, const sdt_tensor *t,
                    int ndim, const int64_t *dims);

/* Checks that t (skipped when NULL: an optional gradient) has exactly the
 * shape of `like` (an output of its input, a gradient of its tensor). */
int cpu_check_like(sdt_backend *be, const char *op, const char *name, const sdt_tensor *t,
                   const char *like_name, const sdt_tensor *like);

/* Rows and last-dimension length of t viewed as a matrix [rows, last]. */
int64_t cpu_rows(const sdt_tensor *t);
int64_t cpu_last_dim(const sdt_tensor *t);

/* Fails with a sentence when malloc returned NULL for an op's workspace. */
int cpu_fail_oom(sdt_backend *be, const char *op, size_t bytes);

#endif
