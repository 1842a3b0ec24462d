#!/usr/bin/env bash
# The OPENBLAS_CORETYPE cases run every GEMM through OpenBLAS (the test build's SDTRAIN_CPU_BLAS_GEMM,
# exported by e2e_lib.sh), so they check OpenBLAS's kernels also on a CPU with AVX-512F, where the
# plugin's own kernel would take most products. This checks the hook takes: with AVX-512F the two
# paths give other bits (other kernels, other summation), without it both are OpenBLAS (the same bits).
source "$(dirname "$0")/e2e_lib.sh"

[ "${SDTRAIN_CPU_BLAS_GEMM:-}" = 1 ] || fail "e2e_lib.sh did not set SDTRAIN_CPU_BLAS_GEMM for a core case"
for gemm in blas own; do
    new_embedding "$gemm" cat 1
    flag=1
    [ "$gemm" = own ] && flag=0
    SDTRAIN_CPU_BLAS_GEMM=$flag run_host train --embedding "$gemm/cat.safetensors" --dataset "$DATASET" \
        --template "$SDT_TEMPLATES/style.txt" "${TRAIN_COMMON[@]}" --max-steps 2 --save-every 0 --preview-every 0 \
        --log-dir "$gemm/logs"
    expect_rc 0 "train 2 steps ($gemm GEMMs)"
done
if grep -qw avx512f /proc/cpuinfo; then
    cmp -s blas/cat.safetensors own/cat.safetensors &&
        fail "with AVX-512F, the run with every GEMM through OpenBLAS gave the own kernel's bits: the hook did not take"
else
    cmp -s blas/cat.safetensors own/cat.safetensors ||
        fail "without AVX-512F both runs are OpenBLAS's, yet their embeddings differ"
fi
e2e_finish
