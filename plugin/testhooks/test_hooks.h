/* test_hooks.h - fault injection for the tests, and nothing in production.
 *
 * libsdtrain.so links test_hooks_off.c: every hook is off, and the plugin reads no environment
 * variable. The test build of the same plugin, libsdtrain_testhooks.so (built from the same
 * objects, never installed), links test_hooks_env.c, which reads the hooks from the
 * environment of the test process:
 *   SDTRAIN_FAULT_NAN_PIXEL=<image file name>  its first pixel becomes NaN before VAE encoding
 *                                              (8-bit image files cannot carry one)
 *   SDTRAIN_MEMORY_LIMIT_MB=<MiB>              a cap on what the memory plan may use
 *   SDTRAIN_FAULT_INF_GRAD=<group>:<step>      after the backward of that 1-based step, one
 *                                              gradient value of that parameter group ("embedding",
 *                                              "hypernetwork") becomes +inf (scaled, before unscale)
 *   SDTRAIN_DEVICE_NO_BF16=1                   the backend is taken to lack bf16 arithmetic, as a GPU
 *                                              below compute capability 8.0 (T4, RTX 20xx) does
 *   SDTRAIN_TEST_STEP_DELAY_MS=<ms>            every training step takes this much longer, so a test can
 *                                              send a signal while a step is in flight
 *   SDTRAIN_FAULT_ENOSPC=<end of a path>       every save to a path ending so (".png", "a.safetensors";
 *                                              "*": every file) fails as on a full disk (ENOSPC),
 *                                              through models/formats/write_fault.h; read at each save
 *   SDTRAIN_CPU_BLAS_GEMM=1                    the CPU backends run every GEMM through BLAS, as on a CPU
 *                                              without AVX-512F, so the OPENBLAS_CORETYPE cases check
 *                                              OpenBLAS's kernels on a machine that has it
 *   SDTRAIN_TEXT_CACHE_OFF=1                   a run that could encode its prompts once (train/text_cache.h,
 *                                              SD3.5's T5 cache train/t5_cache.h) keeps its text encoders
 *                                              and runs them every step, so a test compares the two paths
 *                                              on one run
 * and one hook that is no environment variable, as a pointer cannot be one:
 *   sdt_test_comm_provider                     a function the TEST PROGRAM exports (linked with
 *                                              ENABLE_EXPORTS), found with dlsym: a job of world_size > 1
 *                                              takes its communicator from it instead of opening NCCL, so
 *                                              ranks run as threads of one test (tests/common/thread_comm.h)
 * Neither library exports anything but sdtrain_entry.
 */
#ifndef SDT_PLUGIN_TEST_HOOKS_H
#define SDT_PLUGIN_TEST_HOOKS_H

#include <stdbool.h>

#define SDT_TEST_HOOK_NAN_PIXEL_NAME "SDTRAIN_FAULT_NAN_PIXEL"
#define SDT_TEST_HOOK_MEMORY_LIMIT_NAME "SDTRAIN_MEMORY_LIMIT_MB"
#define SDT_TEST_HOOK_INF_GRAD_NAME "SDTRAIN_FAULT_INF_GRAD"
#define SDT_TEST_HOOK_NO_BF16_NAME "SDTRAIN_DEVICE_NO_BF16"
#define SDT_TEST_HOOK_STEP_DELAY_NAME "SDTRAIN_TEST_STEP_DELAY_MS"
#define SDT_TEST_HOOK_ENOSPC_NAME "SDTRAIN_FAULT_ENOSPC"
#define SDT_TEST_HOOK_TEXT_CACHE_OFF_NAME "SDTRAIN_TEXT_CACHE_OFF"
#define SDT_TEST_HOOK_CPU_BLAS_GEMM_NAME "SDTRAIN_CPU_BLAS_GEMM"
#define SDT_TEST_HOOK_COMM_PROVIDER_SYMBOL "sdt_test_comm_provider"

struct sdt_comm; /* kernels/comm.h */
/* What the test program's provider is: rank's communicator of a job of world_size ranks (not owned by the
 * job: the test frees it), or NULL for none. */
typedef struct sdt_comm *(*sdt_test_comm_provider_fn)(int rank, int world_size);

/* The image file name whose first pixel is poisoned, or NULL. */
const char *sdt_test_hook_nan_pixel(void);
/* The memory cap in MiB, or 0 for none. */
unsigned long long sdt_test_hook_memory_limit_mib(void);
/* "<group>:<step>" whose gradient gets an inf, or NULL. */
const char *sdt_test_hook_inf_grad(void);
/* true: treat the backend as one without bf16 arithmetic. */
bool sdt_test_hook_no_bf16(void);
/* true: the plugin's CPU backends send every GEMM to BLAS (sdt_backend.blas_gemm_only). */
bool sdt_test_hook_cpu_blas_gemm(void);
/* true: keep the text encoders (and SD3.5's T5) even where the text cache (the T5 cache) could replace them. */
bool sdt_test_hook_text_cache_off(void);
/* The test program's communicator for rank of world_size, or NULL (always, in production). */
struct sdt_comm *sdt_test_hook_comm(int rank, int world_size);
/* Milliseconds added to every training step, or 0. */
unsigned sdt_test_hook_step_delay_ms(void);
/* true: saves to path fail as on a full disk. Defined only by the test build; models/formats/write_fault.c
 * holds the weak reference that every other build leaves unresolved (always false). */
bool sdt_test_hook_disk_full(const char *path);

#endif
