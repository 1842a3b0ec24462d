/* op_checks.h - every op's argument checks, written once for both backends.
 *
 * One checker per entry of the op list (ops.h), sdt_check_<op>, with the op's own
 * parameters: it checks shapes, dtypes, the tensors' device against the backend's and the
 * scalar arguments, and returns false with be->error set (SDT_ERR_INVALID_ARGUMENT and one
 * sentence naming the op and the argument) before a backend touches memory. The prototypes
 * come from the op list, and every table entry calls its checker (checked_ops.c), so an op
 * added to the list without a checker does not link. What only one backend cannot do (a
 * launch limit, a dtype a kernel lacks) and what needs the data itself (token ids in the
 * vocabulary) stays in that backend's op.
 */
#ifndef SDT_KERNELS_OP_CHECKS_H
#define SDT_KERNELS_OP_CHECKS_H

#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SDT_OP_CHECK_PROTOTYPE(name, params, args) bool sdt_check_##name params;
SDT_BACKEND_OPS(SDT_OP_CHECK_PROTOTYPE)
#undef SDT_OP_CHECK_PROTOTYPE

#ifdef __cplusplus
}
#endif

#endif
