/* checked_ops.c - the table entries every backend gets: the op's argument checker
 * (op_checks.c), then the backend's implementation. Generated from the op list, so a new
 * op is checked without anyone remembering to (its checker must exist to link). */
#include "op_checks.h"

#define SDT_CHECKED_OP(name, params, args)                                                                             \
    static int checked_##name params                                                                                   \
    {                                                                                                                  \
        return sdt_check_##name args ? be->impl.name args : -1;                                                        \
    }
SDT_BACKEND_OPS(SDT_CHECKED_OP)
#undef SDT_CHECKED_OP

void sdt_backend_set_ops(sdt_backend *be, const sdt_backend_ops *impl)
{
    be->impl = *impl;
#define SDT_CHECKED_ENTRY(name, params, args) be->name = checked_##name;
    SDT_BACKEND_OPS(SDT_CHECKED_ENTRY)
#undef SDT_CHECKED_ENTRY
}
