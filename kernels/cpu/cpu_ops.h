/* cpu_ops.h - the CPU backend's op implementations (internal to kernels/cpu).
 *
 * One function per sdt_backend field, named cpu_<field>, with the field's exact
 * signature, declared from the one op list (ops.h); backend_cpu.c puts them in the table. Semantics are documented once,
 * in ops.h; the arguments are checked before an op runs (kernels/op_checks.c), so the ops trust them. Helpers for dtype handling are at the bottom.
 */
#ifndef SDT_KERNELS_CPU_OPS_H
#define SDT_KERNELS_CPU_OPS_H

#include "../ops.h"

void *cpu_alloc(sdt_backend *be, size_t bytes);
void cpu_free(sdt_backend *be, void *ptr);
void cpu_destroy(sdt_backend *be);
#define SDT_CPU_OP_PROTOTYPE(name, params, args) int cpu_##name params;
SDT_BACKEND_OPS(SDT_CPU_OP_PROTOTYPE)
#undef SDT_CPU_OP_PROTOTYPE
/* Points the convolutional ops' entries of ops at their channels-last staging (channels_last.c),
 * which runs the cpu_ functions above on row-major copies. */
void cpu_channels_last_ops(sdt_backend_ops *ops);

/* ---- dtype handling shared by every CPU op ----
 * Ops compute on float arrays. A tensor stored as f16/bf16 is converted into a
 * per-backend scratch slot on read and rounded back on write, so the ops
 * themselves only ever see float. Slots are independent growable buffers;
 * an op uses distinct slots for tensors it needs at the same time. */
#define SDT_CPU_SCRATCH_SLOTS 12
/* A float view of t: t's own data when f32, else a converted copy in scratch[slot]. NULL if t is NULL. */
const float *cpu_read_f32(sdt_backend *be, const sdt_tensor *t, int slot);
/* A float buffer for writing t: t's data when f32, else scratch[slot] (filled with t's
 * current values when load_existing, for accumulating backward ops). NULL if t is NULL. */
float *cpu_write_begin(sdt_backend *be, sdt_tensor *t, int slot, bool load_existing);
/* A float workspace of n elements in scratch[slot] (contents undefined; grown, never shrunk). NULL
 * on out of memory. */
float *cpu_scratch_floats(sdt_backend *be, int slot, int64_t n);
/* Rounds buf into t when t is not f32 (no-op for f32 or NULL). */
void cpu_write_end(sdt_backend *be, sdt_tensor *t, float *buf);
/* Sets be->error to code and a formatted sentence and returns -1. The code is decided here, where
 * the failure happens: SDT_ERR_INVALID_ARGUMENT for a bad argument, SDT_ERR_OUT_OF_MEMORY for a
 * failed allocation, SDT_ERR_INTERNAL for a bug in the backend itself. */
int cpu_fail(sdt_backend *be, sdt_error_code code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Fails with OUT_OF_MEMORY when an op's workspace could not be allocated. */
int cpu_fail_oom(sdt_backend *be, const char *op, size_t bytes);

#endif
