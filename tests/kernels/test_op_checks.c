/* test_op_checks.c - the CPU backend refuses every op's bad arguments with
 * INVALID_ARGUMENT and the exact sentence (tests/common/op_refusals.h; the CUDA
 * backend runs the same table in tests/gpu/test_cuda_op_checks.c). Fixed cases,
 * no random draws. */
#include "kernel_test.h"
#include "op_refusals.h"

int main(void)
{
    sdt_backend *be = kt_backend();
    printf("op_checks: fixed cases, no random draws\n");
    op_refusals_run(be);
    be->destroy(be);
    return sdt_test_finish("op_checks");
}
