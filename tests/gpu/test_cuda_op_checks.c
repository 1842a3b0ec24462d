/* test_cuda_op_checks.c - the CUDA backend refuses every op's bad arguments as the CPU
 * backend does: the same table (tests/common/op_refusals.h), the same INVALID_ARGUMENT and
 * the same sentences, device words aside. Token ids, which only the backend can read, are
 * checked against the vocabulary by embedding forward and backward alike (backward once
 * scattered an id past the table's end). Fixed cases, no random draws. Skips (77) when the
 * CUDA module or a GPU is absent. */
#include <string.h>

#include "gpu_module.h"
#include "op_refusals.h"

static void check_token_ids(sdt_backend *gpu)
{
    const int32_t ids[6] = {0, 3, 9, 10, 2, 1}; /* 10 is past a 10-row table */
    const int64_t tshape[2] = {2, 3}, table_shape[2] = {10, 4}, out_shape[3] = {2, 3, 4};
    void *tok_mem = gpu->alloc(gpu, sizeof ids), *mem = gpu->alloc(gpu, 64 * sizeof(float));
    sdt_tensor tokens = sdt_tensor_make(tok_mem, SDT_I32, SDT_DEVICE_CUDA, 2, tshape);
    sdt_tensor table = sdt_tensor_make(mem, SDT_F32, SDT_DEVICE_CUDA, 2, table_shape);
    sdt_tensor out = sdt_tensor_make(mem, SDT_F32, SDT_DEVICE_CUDA, 3, out_shape);
    bool ready = tok_mem && mem && gpu->upload(gpu, tok_mem, ids, sizeof ids) == 0 && gpu->zero(gpu, &table) == 0;
    CHECK(ready, "token id setup failed: %s", gpu->error.message);
    if (!ready) return;
    const char *want[2] = {
        "embedding_forward: a token id is outside the vocabulary [0, 10); check the tokenizer and the "
        "embedding table.",
        "embedding_backward: a token id is outside the vocabulary [0, 10); check the tokenizer and the "
        "embedding table."};
    for (int pass = 0; pass < 2; pass++) {
        sdt_error_clear(&gpu->error);
        int rc = pass ? gpu->embedding_backward(gpu, &table, NULL, &out, &tokens)
                      : gpu->embedding_forward(gpu, &out, &tokens, &table, NULL);
        CHECK(rc != 0 && gpu->error.code == SDT_ERR_INVALID_ARGUMENT && strcmp(gpu->error.message, want[pass]) == 0,
              "an id past the table: got %d, %s: \"%s\"; expected \"%s\"", rc, sdt_error_code_name(gpu->error.code),
              gpu->error.message, want[pass]);
    }
    gpu->free(gpu, tok_mem);
    gpu->free(gpu, mem);
}

int main(void)
{
    sdt_backend *gpu = gpu_test_backend("cuda_op_checks");
    if (!gpu) return SDT_TEST_SKIP;
    printf("cuda_op_checks: fixed cases, no random draws\n");
    op_refusals_run(gpu);
    check_token_ids(gpu);
    gpu->destroy(gpu);
    return sdt_test_finish("cuda_op_checks");
}
