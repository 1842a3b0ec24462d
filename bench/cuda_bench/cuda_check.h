/* cuda_check.h - the standalone cuDNN benches' (bench/conv_cudnn, bench/sdpa_cudnn) checks of a CUDA runtime
 * call (CK) and a cuDNN call (DK): on failure, "file:line: reason" on stderr and exit 1 (a bench, not the plugin). */
#ifndef SDT_BENCH_CUDA_CHECK_H
#define SDT_BENCH_CUDA_CHECK_H

#include <cuda_runtime.h>
#include <cudnn.h>

#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                                                          \
    do {                                                                                                               \
        cudaError_t e_ = (x);                                                                                          \
        if (e_ != cudaSuccess) {                                                                                       \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));                                \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)
#define DK(x)                                                                                                          \
    do {                                                                                                               \
        cudnnStatus_t s_ = (x);                                                                                        \
        if (s_ != CUDNN_STATUS_SUCCESS) {                                                                              \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudnnGetErrorString(s_));                               \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

#endif
