/* test_hooks_off.c - the production plugin: no fault injection (see test_hooks.h). */
#include "testhooks/test_hooks.h"

#include <stddef.h>

const char *sdt_test_hook_nan_pixel(void)
{
    return NULL;
}

unsigned long long sdt_test_hook_memory_limit_mib(void)
{
    return 0;
}

const char *sdt_test_hook_inf_grad(void)
{
    return NULL;
}

bool sdt_test_hook_no_bf16(void)
{
    return false;
}

unsigned sdt_test_hook_step_delay_ms(void)
{
    return 0;
}

bool sdt_test_hook_cpu_blas_gemm(void)
{
    return false;
}

bool sdt_test_hook_text_cache_off(void)
{
    return false;
}

struct sdt_comm *sdt_test_hook_comm(int rank, int world_size)
{
    (void)rank, (void)world_size;
    return NULL;
}
