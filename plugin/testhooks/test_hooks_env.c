/* test_hooks_env.c - the test build of the plugin: hooks from the environment (see test_hooks.h). */
#define _GNU_SOURCE /* RTLD_DEFAULT: the test program's own symbols */
#include "testhooks/test_hooks.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

const char *sdt_test_hook_nan_pixel(void)
{
    return getenv(SDT_TEST_HOOK_NAN_PIXEL_NAME);
}

unsigned long long sdt_test_hook_memory_limit_mib(void)
{
    const char *text = getenv(SDT_TEST_HOOK_MEMORY_LIMIT_NAME);
    char *end = NULL;
    unsigned long long mib = text && *text ? strtoull(text, &end, 10) : 0;
    return end && *end == '\0' ? mib : 0;
}

const char *sdt_test_hook_inf_grad(void)
{
    return getenv(SDT_TEST_HOOK_INF_GRAD_NAME);
}

unsigned sdt_test_hook_step_delay_ms(void)
{
    const char *text = getenv(SDT_TEST_HOOK_STEP_DELAY_NAME);
    char *end = NULL;
    unsigned long ms = text && *text ? strtoul(text, &end, 10) : 0;
    return end && *end == '\0' && ms < 60000 ? (unsigned)ms : 0;
}

bool sdt_test_hook_no_bf16(void)
{
    const char *text = getenv(SDT_TEST_HOOK_NO_BF16_NAME);
    return text && strcmp(text, "1") == 0;
}

bool sdt_test_hook_cpu_blas_gemm(void)
{
    const char *text = getenv(SDT_TEST_HOOK_CPU_BLAS_GEMM_NAME);
    return text && strcmp(text, "1") == 0;
}

bool sdt_test_hook_text_cache_off(void)
{
    const char *text = getenv(SDT_TEST_HOOK_TEXT_CACHE_OFF_NAME);
    return text && strcmp(text, "1") == 0;
}

bool sdt_test_hook_disk_full(const char *path)
{
    const char *end = getenv(SDT_TEST_HOOK_ENOSPC_NAME);
    if (!end || !*end || !path) return false;
    size_t n = strlen(path), k = strlen(end);
    return strcmp(end, "*") == 0 || (n >= k && strcmp(path + n - k, end) == 0);
}

struct sdt_comm *sdt_test_hook_comm(int rank, int world_size)
{
    /* dlsym hands back void *; POSIX guarantees it converts to a function pointer */
    void *symbol = dlsym(RTLD_DEFAULT, SDT_TEST_HOOK_COMM_PROVIDER_SYMBOL);
    sdt_test_comm_provider_fn provider;
    memcpy(&provider, &symbol, sizeof provider);
    return symbol ? provider(rank, world_size) : NULL;
}
