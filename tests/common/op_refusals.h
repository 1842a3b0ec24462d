/* op_refusals.h - one table of bad op arguments, run on a backend (header only).
 *
 * Every case calls one op through the backend's table with a wrong shape, dtype, device or
 * scalar and expects SDT_ERR_INVALID_ARGUMENT with the exact sentence. The CPU test
 * (tests/kernels/test_op_checks.c) and the CUDA test (tests/gpu/test_cuda_op_checks.c) run
 * the same table, so the two backends are shown to refuse identically (a sentence that names
 * the device says the backend's). Every op of the list must have a case (synchronize, which
 * takes no argument, excepted), and every table entry must be the checked one, so an op
 * added to the list without a checker or a case fails here. No case reaches an op's
 * implementation: the tensors view one small device buffer that nothing reads.
 */
#ifndef SDT_TESTS_OP_REFUSALS_H
#define SDT_TESTS_OP_REFUSALS_H

#include <stdarg.h>
#include <string.h>

#include "c_numeric.h"
#include "ops.h"
#include "sdt_test.h"

enum {
#define OP_REFUSALS_INDEX(name, params, args) OP_REFUSALS_##name,
    SDT_BACKEND_OPS(OP_REFUSALS_INDEX)
#undef OP_REFUSALS_INDEX
        OP_REFUSALS_COUNT
};
static const char *const op_refusals_names[OP_REFUSALS_COUNT] = {
#define OP_REFUSALS_NAME(name, params, args) #name,
    SDT_BACKEND_OPS(OP_REFUSALS_NAME)
#undef OP_REFUSALS_NAME
};

#define OP_REFUSALS_FLOATS 4096

typedef struct op_refusals {
    sdt_backend *be;
    void *mem;         /* OP_REFUSALS_FLOATS floats on the backend's device, never read */
    sdt_device other;  /* a device that is not the backend's */
    const char *place; /* where the backend's tensors live, as the sentences say it: CPU or GPU */
    const char *label; /* the backend, as the sentences say it: CPU or CUDA */
    bool covered[OP_REFUSALS_COUNT];
    int cases;
} op_refusals;

static inline sdt_tensor op_refusals_tensor(const op_refusals *r, sdt_dtype dtype, const int64_t *shape, int ndim)
{
    return sdt_tensor_make(r->mem, dtype, r->be->device, ndim, shape);
}
/* T(SDT_F32, 2, 3): a [2, 3] tensor on the backend's device. */
#define T(dtype, ...)                                                                                                  \
    op_refusals_tensor(r, dtype, (const int64_t[]){__VA_ARGS__},                                                       \
                       (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))

/* Compares one refused call with the sentence fmt makes; marks the op the sentence names. */
static inline void op_refused(op_refusals *r, int rc, const char *call, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static inline void op_refused(op_refusals *r, int rc, const char *call, int line, const char *fmt, ...)
{
    char want[SDT_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    sdt_c_vsnprintf(want, sizeof want, fmt, ap);
    va_end(ap);
    const sdt_error *e = &r->be->error;
    CHECK(rc != 0 && e->code == SDT_ERR_INVALID_ARGUMENT && strcmp(e->message, want) == 0,
          "line %d on %s: %s\n  returned %d, %s: \"%s\"\n  expected INVALID_ARGUMENT: \"%s\"", line, r->be->name, call,
          rc, sdt_error_code_name(e->code), e->message, want);
    size_t name_len = strcspn(want, ":");
    for (int i = 0; i < OP_REFUSALS_COUNT; i++)
        if (strlen(op_refusals_names[i]) == name_len && strncmp(op_refusals_names[i], want, name_len) == 0)
            r->covered[i] = true;
    r->cases++;
}
/* REFUSE(call, sentence format, ...): call must fail as INVALID_ARGUMENT with that sentence. */
#define REFUSE(call, ...) (sdt_error_clear(&r->be->error), op_refused(r, (call), #call, __LINE__, __VA_ARGS__))

static inline void op_refusals_tensor_checks(op_refusals *r)
{
    sdt_backend *be = r->be;
    sdt_tensor other = T(SDT_F32, 4), i32 = T(SDT_I32, 4), empty = T(SDT_F32, 4);
    other.device = r->other;
    empty.data = NULL;
    REFUSE(be->scale(be, NULL, 2.0f), "scale: tensor 'x' is NULL; pass a tensor.");
    REFUSE(be->scale(be, &other, 2.0f), "scale: tensor 'x' is not on the %s; pass %s tensors to the %s backend.",
           r->place, r->place, r->label);
    REFUSE(be->scale(be, &i32, 2.0f), "scale: tensor 'x' has dtype i32; pass an f32, f16 or bf16 tensor.");
    REFUSE(be->scale(be, &empty, 2.0f),
           "scale: tensor 'x' has no data (an arena overflow?); size the arena by measuring first.");
    float host[4] = {0};
    REFUSE(be->upload(be, NULL, host, 16), "upload: a buffer of the 16-byte copy is NULL; pass both buffers.");
    REFUSE(be->download(be, host, NULL, 16), "download: a buffer of the 16-byte copy is NULL; pass both buffers.");
    REFUSE(be->zero(be, &empty),
           "zero: tensor 't' has no data (an arena overflow?); size the arena by measuring first.");
    REFUSE(be->zero(be, &other), "zero: tensor 't' is not on the %s; pass %s tensors to the %s backend.", r->place,
           r->place, r->label);
    REFUSE(be->memory_stats(be, NULL, false), "memory_stats: stats is NULL; pass a struct to fill.");
}

static inline void op_refusals_utilities(op_refusals *r)
{
    sdt_backend *be = r->be;
    sdt_tensor v4 = T(SDT_F32, 4), v5 = T(SDT_F32, 5);
    REFUSE(be->convert(be, &v4, &v5), "convert: 'dst' has 4 elements but 'src' has 5; pass tensors of equal size.");
    REFUSE(be->axpy(be, &v4, 1.0f, &v5), "axpy: 'dst' has 4 elements but 'src' has 5; pass tensors of equal size.");
    REFUSE(be->transpose_forward(be, &v4, &v4),
           "transpose_forward: 'x' has 1 dims; pass a [B, M, N] (or [M, N]) tensor.");
    REFUSE(be->transpose_backward(be, &v4, &v5),
           "transpose_backward: 'dx' has 4 elements but 'dout' has 5; pass tensors of equal size.");
    REFUSE(be->count_nonfinite(be, &v4, NULL), "count_nonfinite: count is NULL; pass where to write the count.");
}

static inline void op_refusals_embedding(op_refusals *r)
{
    sdt_backend *be = r->be;
    sdt_tensor table = T(SDT_F32, 10, 4), tokens = T(SDT_I32, 2, 3), f32_tokens = T(SDT_F32, 2, 3);
    sdt_tensor short_pos = T(SDT_F32, 2, 4), out = T(SDT_F32, 2, 3, 4), wide_out = T(SDT_F32, 2, 3, 5);
    sdt_tensor wide_dtable = T(SDT_F32, 10, 5);
    REFUSE(be->embedding_forward(be, &out, &f32_tokens, &table, NULL),
           "embedding_forward: tokens must be an i32 %s tensor [B, T].", r->place);
    REFUSE(be->embedding_forward(be, &out, &tokens, &table, &short_pos),
           "embedding_forward: pos [P, C] has 2 positions but the sequence has 3 tokens; give it at least T rows.");
    REFUSE(be->embedding_forward(be, &wide_out, &tokens, &table, NULL),
           "embedding_forward: out [B, T, C] has shape [2, 3, 5] but [2, 3, 4] is required.");
    REFUSE(be->embedding_backward(be, &wide_dtable, NULL, &out, &tokens),
           "embedding_backward: dtable [V, C] has shape [10, 5] but [*, 4] is required.");
}

static inline void op_refusals_norms(op_refusals *r)
{
    sdt_backend *be = r->be;
    sdt_tensor x = T(SDT_F32, 6, 4), wide = T(SDT_F32, 6, 5), c3 = T(SDT_F32, 3), n5 = T(SDT_F32, 5),
               n6 = T(SDT_F32, 6);
    REFUSE(be->layernorm_forward(be, &x, &n5, &n6, &x, NULL, NULL, 1e-5f),
           "layernorm_forward: mean and rstd hold 5 and 6 values but x has 6 rows; size them [N].");
    REFUSE(be->layernorm_forward(be, &x, &n6, &n6, &x, &c3, NULL, 1e-5f),
           "layernorm_forward: gamma [C] has shape [3] but [4] is required.");
    REFUSE(be->layernorm_forward(be, &wide, &n6, &n6, &x, NULL, NULL, 1e-5f),
           "layernorm_forward: out has shape [6, 5] but must match x's shape [6, 4].");
    REFUSE(be->layernorm_backward(be, &x, &c3, NULL, &x, &x, NULL, &n6, &n6),
           "layernorm_backward: dgamma [C] has shape [3] but [4] is required.");
    REFUSE(be->rmsnorm_forward(be, &x, &n5, &x, NULL, 1e-6f),
           "rmsnorm_forward: rstd holds 5 values but x has 6 rows; size it [N].");
    REFUSE(be->rmsnorm_forward(be, &x, &n6, &x, NULL, -1.0f),
           "rmsnorm_forward: eps -1 must be finite and >= 0 (T5 uses 1e-6).");
    REFUSE(be->rmsnorm_backward(be, &x, &c3, &x, &x, NULL, &n6),
           "rmsnorm_backward: dgamma was given without gamma; pass both or neither.");
    REFUSE(be->rmsnorm_backward(be, &wide, NULL, &x, &x, NULL, &n6),
           "rmsnorm_backward: dx has shape [6, 5] but must match x's shape [6, 4].");
    sdt_tensor tab64 = T(SDT_F32, 6, 4), tab3 = T(SDT_F32, 6, 3), tab5 = T(SDT_F32, 5, 4);
    REFUSE(be->rope_forward(be, &x, &x, &tab3, &tab3),
           "rope_forward: cos must be [S, D] with D even (the rotated pairs), not 2-D with last dim 3.");
    REFUSE(be->rope_forward(be, &x, &x, &tab5, &tab5),
           "rope_forward: x has 6 positions of width 4 but cos and sin are [5, 4]; give one table row per position "
           "and a head width that divides x's last dim.");
    REFUSE(be->rope_backward(be, &x, &x, &tab64, &tab64),
           "rope_backward: dx aliases dout; backward accumulates, so give dx its own buffer.");

    sdt_tensor img70 = T(SDT_F32, 2, 70, 2, 2), stats70 = T(SDT_F32, 2, 32), flat = T(SDT_F32, 8);
    sdt_tensor img8 = T(SDT_F32, 2, 8, 2, 2), stats8 = T(SDT_F32, 2, 4), narrow = T(SDT_F32, 2, 2);
    sdt_tensor c5 = T(SDT_F32, 5);
    REFUSE(be->groupnorm_forward(be, &img70, &stats70, &stats70, &img70, NULL, NULL, 32, 1e-5f, SDT_ACT_IDENTITY),
           "groupnorm_forward: 70 channels do not split into 32 groups; use a group count that divides C.");
    REFUSE(be->groupnorm_forward(be, &img8, &stats8, &stats8, &img8, NULL, NULL, 0, 1e-5f, SDT_ACT_SILU),
           "groupnorm_forward: 8 channels do not split into 0 groups; use a group count that divides C.");
    REFUSE(be->groupnorm_forward(be, &flat, &stats8, &stats8, &flat, NULL, NULL, 4, 1e-5f, SDT_ACT_IDENTITY),
           "groupnorm_forward: x has 1 dimension(s) but [B, C, spatial...] needs at least 2.");
    REFUSE(be->groupnorm_forward(be, &img8, &stats8, &stats8, &img8, NULL, NULL, 4, 1e-5f, SDT_ACT_COUNT),
           "groupnorm_forward: activation %d is unknown; pass an sdt_activation value.", (int)SDT_ACT_COUNT);
    REFUSE(
        be->groupnorm_backward(be, &img8, NULL, NULL, &img8, &img8, NULL, NULL, &narrow, &stats8, 4, SDT_ACT_IDENTITY),
        "groupnorm_backward: mean [B, groups] has shape [2, 2] but [2, 4] is required.");
    /* the activated norm's backward recomputes its output, so it reads beta */
    REFUSE(be->groupnorm_backward(be, &img8, NULL, NULL, &img8, &img8, NULL, &c5, &stats8, &stats8, 4, SDT_ACT_SILU),
           "groupnorm_backward: beta [C] has shape [5] but [8] is required.");
}

static inline void op_refusals_matmuls(op_refusals *r)
{
    sdt_backend *be = r->be;
    sdt_tensor x = T(SDT_F32, 3, 4), w = T(SDT_F32, 5, 4), w6 = T(SDT_F32, 5, 6), out = T(SDT_F32, 3, 5);
    sdt_tensor out6 = T(SDT_F32, 3, 6), b6 = T(SDT_F32, 6), w55 = T(SDT_F32, 5, 5);
    REFUSE(be->linear_forward(be, &out, &x, &w6, NULL),
           "linear_forward: w [OC, C] has shape [5, 6] but [*, 4] is required.");
    REFUSE(be->linear_forward(be, &out6, &x, &w, NULL), "linear_forward: out has shape [3, 6] but [3, 5] is required.");
    REFUSE(be->linear_forward(be, &out, &x, &w, &b6), "linear_forward: b [OC] has shape [6] but [5] is required.");
    sdt_tensor res_small = T(SDT_F32, 3, 4);
    REFUSE(be->linear_residual_forward(be, &out, &x, &w, NULL, &out),
           "linear_residual_forward: 'residual' shares memory with 'out'; pass a separate output tensor.");
    REFUSE(be->linear_residual_forward(be, &out, &x, &w, NULL, NULL),
           "linear_residual_forward: tensor 'residual' is NULL; pass a tensor (or call linear_forward).");
    REFUSE(be->linear_residual_forward(be, &out, &x, &w, NULL, &res_small),
           "linear_residual_forward: residual has shape [3, 4] but must match out's shape [3, 5].");
    REFUSE(be->linear_backward(be, NULL, &w55, NULL, &out, &x, &w),
           "linear_backward: dw has shape [5, 5] but must match w's shape [5, 4].");
    /* x without data: a shape for dx alone, refused once dw needs its values */
    sdt_tensor x_shape = x, w_grad = T(SDT_F32, 5, 4);
    x_shape.data = NULL;
    REFUSE(be->linear_backward(be, NULL, &w_grad, NULL, &out, &x_shape, &w),
           "linear_backward: tensor 'x' has no data (an arena overflow?); size the arena by measuring first.");
    /* the input gradient written whole: dx gives x's shape and must have data */
    REFUSE(be->linear_input_grad(be, &x, &out, &w6),
           "linear_input_grad: w [OC, C] has shape [5, 6] but [*, 4] is required.");
    REFUSE(be->linear_input_grad(be, &x, &out6, &w),
           "linear_input_grad: dout has shape [3, 6] but [3, 5] is required.");
    REFUSE(be->linear_input_grad(be, &x_shape, &out, &w),
           "linear_input_grad: tensor 'dx' has no data (an arena overflow?); size the arena by measuring first.");

    sdt_tensor img = T(SDT_F32, 1, 2, 4, 4), k3 = T(SDT_F32, 3, 2, 3, 3), k3c4 = T(SDT_F32, 3, 4, 3, 3);
    sdt_tensor k7 = T(SDT_F32, 3, 2, 7, 7), y = T(SDT_F32, 1, 3, 4, 4), b4 = T(SDT_F32, 4);
    REFUSE(be->conv2d_forward(be, &y, &img, &k3, NULL, 0, 1),
           "conv2d_forward: stride 0 and padding 1 are invalid; stride must be >= 1 and padding >= 0.");
    REFUSE(be->conv2d_forward(be, &y, &img, &k3, NULL, 1, -1),
           "conv2d_forward: stride 1 and padding -1 are invalid; stride must be >= 1 and padding >= 0.");
    REFUSE(be->conv2d_forward(be, &y, &img, &k7, NULL, 1, 1),
           "conv2d_forward: the 7x7 kernel is larger than the padded 6x6 input.");
    REFUSE(be->conv2d_forward(be, &y, &img, &k3c4, NULL, 1, 1),
           "conv2d_forward: w [OC, C, KH, KW] has shape [3, 4, 3, 3] but [*, 2, *, *] is required.");
    REFUSE(be->conv2d_forward(be, &img, &img, &k3, NULL, 1, 1),
           "conv2d_forward: out has shape [1, 2, 4, 4] but [1, 3, 4, 4] is required.");
    REFUSE(be->conv2d_backward(be, NULL, NULL, &b4, &y, &img, &k3, 1, 1),
           "conv2d_backward: db [OC] has shape [4] but [3] is required.");
    sdt_tensor img_shape = img, k3_grad = T(SDT_F32, 3, 2, 3, 3);
    img_shape.data = NULL;
    REFUSE(
        be->conv2d_backward(be, NULL, &k3_grad, NULL, &y, &img_shape, &k3, 1, 1),
        "conv2d_backward: tensor 'x [B, C, H, W]' has no data (an arena overflow?); size the arena by measuring first.");
    REFUSE(be->conv2d_input_grad(be, &img, &img, &k3, 1, 1),
           "conv2d_input_grad: dout has shape [1, 2, 4, 4] but [1, 3, 4, 4] is required.");
    REFUSE(be->conv2d_input_grad(be, &img, &y, &k3, 0, 1),
           "conv2d_input_grad: stride 0 and padding 1 are invalid; stride must be >= 1 and padding >= 0.");
    REFUSE(be->conv2d_input_grad(be, &x, &y, &k3, 1, 1),
           "conv2d_input_grad: dx [B, C, H, W] has shape [3, 4] but [*, *, *, *] is required.");
    REFUSE(
        be->conv2d_input_grad(be, &img_shape, &y, &k3, 1, 1),
        "conv2d_input_grad: tensor 'dx [B, C, H, W]' has no data (an arena overflow?); size the arena by measuring first.");
}

static inline void op_refusals_attention(op_refusals *r)
{
    sdt_backend *be = r->be;
    sdt_tensor q6 = T(SDT_F32, 1, 4, 6), q = T(SDT_F32, 1, 4, 8), k5 = T(SDT_F32, 1, 5, 8);
    sdt_tensor lse16 = T(SDT_F16, 1, 2, 4), lse = T(SDT_F32, 1, 2, 4), v_short = T(SDT_F32, 1, 4, 4);
    REFUSE(be->attention_forward(be, &q6, NULL, &q6, &q6, &q6, 4, false),
           "attention_forward: q's last dim 6 is not divisible by heads = 4; pass the model's head count.");
    REFUSE(be->attention_forward(be, &q, NULL, &q, &k5, &k5, 2, true),
           "attention_forward: causal attention needs Tq == Tk but q has 4 tokens and k has 5.");
    REFUSE(be->attention_forward(be, &q, &lse16, &q, &q, &q, 2, false),
           "attention_forward: lse must be f32 (it holds softmax statistics) but is f16.");
    REFUSE(be->attention_forward(be, &q, NULL, &q, &q, &v_short, 2, false),
           "attention_forward: v has shape [1, 4, 4] but must match k's shape [1, 4, 8].");
    REFUSE(be->attention_backward(be, &q, &q, &q, &q, &q, &q, &q, NULL, &lse, 2, false),
           "attention_backward: lse was given without forward's out; pass both or neither.");

    sdt_tensor bias = T(SDT_F32, 1, 2, 4, 4), bias16 = T(SDT_F16, 1, 2, 4, 4), bias_b3 = T(SDT_F32, 3, 2, 4, 4);
    sdt_tensor bias_short = T(SDT_F32, 1, 2, 4, 3);
    REFUSE(be->attention_bias_forward(be, &q, NULL, &q, &q, &q, &bias, 2, 0.0f),
           "attention_bias_forward: scale 0 must be finite and > 0 (1 / sqrt(head_dim) for SDPA, 1 for T5).");
    REFUSE(be->attention_bias_forward(be, &q, NULL, &q, &q, &q, &bias16, 2, 1.0f),
           "attention_bias_forward: bias must be f32 (it may hold -inf to mask keys) but is f16.");
    REFUSE(be->attention_bias_forward(be, &q, NULL, &q, &q, &q, &bias_b3, 2, 1.0f),
           "attention_bias_forward: bias has 3 batch rows but q has batch 1; give 1 (shared) or B.");
    REFUSE(be->attention_bias_backward(be, &q, &q, &q, &q, &q, &q, &q, NULL, &lse, &bias, 2, 1.0f),
           "attention_bias_backward: lse was given without forward's out; pass both or neither.");
    REFUSE(be->attention_bias_backward(be, &q, &q, &q, &q, &q, &q, &q, NULL, NULL, &bias_short, 2, 1.0f),
           "attention_bias_backward: bias [1 or B, H, Tq, Tk] has shape [1, 2, 4, 3] but [*, 2, 4, 4] is required.");

    sdt_tensor x = T(SDT_F32, 2, 4), wide = T(SDT_F32, 2, 5);
    REFUSE(be->softmax_forward(be, &wide, &x),
           "softmax_forward: out has shape [2, 5] but must match x's shape [2, 4].");
    REFUSE(be->softmax_backward(be, &wide, &x, &x),
           "softmax_backward: dx has shape [2, 5] but must match out's shape [2, 4].");
}

static inline void op_refusals_elementwise(op_refusals *r)
{
    sdt_backend *be = r->be;
    sdt_tensor v4 = T(SDT_F32, 4), v5 = T(SDT_F32, 5), v4f16 = T(SDT_F16, 4);
    REFUSE(be->activation_forward(be, &v4, &v4, SDT_ACT_COUNT),
           "activation_forward: activation %d is unknown; pass an sdt_activation value.", (int)SDT_ACT_COUNT);
    REFUSE(be->activation_backward(be, &v4, &v5, &v4, SDT_ACT_GELU),
           "activation_backward: 'dout' has 5 elements but 'x' has 4; pass tensors of equal size.");
    REFUSE(be->add_forward(be, &v4, &v4, &v5),
           "add_forward: 'out' has 4 elements but 'b' has 5; pass tensors of equal size.");
    REFUSE(be->dropout_forward(be, &v4, &v4, &v4, 1.5f, 1),
           "dropout_forward: p = 1.5 is outside [0, 1]; pass a probability.");
    REFUSE(be->dropout_forward(be, &v4, &v4f16, &v4, 0.5f, 1),
           "dropout_forward: tensor 'mask' is f16; it must be f32 (optimizer state and statistics are f32).");
    REFUSE(be->dropout_backward(be, &v4, &v4, &v5),
           "dropout_backward: 'mask' has 5 elements but 'dout' has 4; pass tensors of equal size.");

    sdt_tensor x = T(SDT_F32, 2, 6), x8 = T(SDT_F32, 2, 8), half = T(SDT_F32, 2, 4), dx = T(SDT_F32, 2, 5);
    REFUSE(be->geglu_forward(be, &half, &x),
           "geglu_forward: x's last dim is 6 but out's is 4; x must be [..., 2C] for out [..., C].");
    REFUSE(be->geglu_backward(be, &dx, &half, &x8),
           "geglu_backward: 'dx' has 10 elements but 'x' has 16; pass tensors of equal size.");

    REFUSE(be->gated_activation_forward(be, &half, &half, &x, SDT_ACT_GELU_TANH),
           "gated_activation_forward: 'up' has 12 elements but 'gate' has 8; pass tensors of equal size.");
    REFUSE(be->gated_activation_backward(be, &half, NULL, &half, &half, &half, SDT_ACT_COUNT),
           "gated_activation_backward: activation %d is unknown; pass an sdt_activation value.", (int)SDT_ACT_COUNT);

    sdt_tensor img = T(SDT_F32, 2, 3, 4, 4), v = T(SDT_F32, 2, 4);
    REFUSE(be->add_channel_forward(be, &img, &v),
           "add_channel_forward: v must be [B, C] matching x [B, C, spatial...]; check the time-embedding projection.");
    REFUSE(
        be->add_channel_backward(be, &v, &img),
        "add_channel_backward: v must be [B, C] matching x [B, C, spatial...]; check the time-embedding projection.");

    sdt_tensor whole = T(SDT_F32, 1, 5, 2, 2), part = T(SDT_F32, 1, 2, 2, 2), off = T(SDT_F32, 1, 2, 3, 3);
    REFUSE(be->concat_channels_forward(be, &whole, &part, NULL),
           "concat_channels_forward: a and b are required; pass both tensors.");
    REFUSE(be->concat_channels_forward(be, &whole, &part, &part),
           "concat_channels_forward: a [B, Ca, ...], b [B, Cb, ...] and out [B, Ca+Cb, ...] disagree; check the skip "
           "connection's shapes.");
    REFUSE(be->concat_channels_backward(be, &off, NULL, &whole),
           "concat_channels_backward: a [B, Ca, ...], b [B, Cb, ...] and out [B, Ca+Cb, ...] disagree; check the skip "
           "connection's shapes.");

    sdt_tensor big = T(SDT_F32, 1, 2, 4, 5), small = T(SDT_F32, 1, 2, 2, 2);
    REFUSE(
        be->upsample_nearest2x_forward(be, &big, &small),
        "upsample_nearest2x_forward: out must be [N, C, 2H, 2W] for x [N, C, H, W]; check the Upsample block's shapes.");
    REFUSE(
        be->upsample_nearest2x_backward(be, &small, &big),
        "upsample_nearest2x_backward: out must be [N, C, 2H, 2W] for x [N, C, H, W]; check the Upsample block's shapes.");
}

static inline void op_refusals_diffusion_and_optimizer(op_refusals *r)
{
    sdt_backend *be = r->be;
    sdt_tensor t2 = T(SDT_F32, 2), emb = T(SDT_F32, 2, 8), emb3 = T(SDT_F32, 3, 8);
    REFUSE(be->timestep_embedding(be, &emb3, &t2, true, 0.0f, 10000.0f),
           "timestep_embedding: out must be [B, dim] for t [B]; check the embedding shape.");
    REFUSE(be->timestep_embedding(be, &emb, &t2, true, 4.0f, 10000.0f),
           "timestep_embedding: downscale_freq_shift equals dim/2, dividing by zero; use 0 or 1.");
    REFUSE(be->timestep_embedding(be, &emb, &t2, true, 0.0f, 0.0f),
           "timestep_embedding: max_period = 0 must be positive; SD uses 10000.");

    sdt_tensor v4 = T(SDT_F32, 4), v5 = T(SDT_F32, 5), none = T(SDT_F32, 0), v4f16 = T(SDT_F16, 4);
    double loss = 0;
    REFUSE(be->mse_loss_forward(be, &loss, &none, &none, NULL),
           "mse_loss_forward: pred is empty; the mean of nothing is undefined.");
    REFUSE(be->mse_loss_forward(be, &loss, &v4, &v4, &v5),
           "mse_loss_forward: 'weight' has 5 elements but 'pred' has 4; pass tensors of equal size.");
    REFUSE(be->mse_loss_backward(be, &v5, 1.0f, &v4, &v4, NULL),
           "mse_loss_backward: 'dpred' has 5 elements but 'pred' has 4; pass tensors of equal size.");
    REFUSE(
        be->robust_loss_forward(be, &loss, &v4, &v4, NULL, SDT_ROBUST_LOSS_COUNT, 1.0f),
        "robust_loss_forward: kind 2 is not a robust loss; use SDT_ROBUST_LOSS_L1 or SDT_ROBUST_LOSS_HUBER (L2 is mse_loss).");
    REFUSE(be->robust_loss_forward(be, &loss, &none, &none, NULL, SDT_ROBUST_LOSS_L1, 1.0f),
           "robust_loss_forward: pred is empty; the mean of nothing is undefined.");
    REFUSE(be->robust_loss_backward(be, &v4, 1.0f, &v4, &v4, NULL, SDT_ROBUST_LOSS_HUBER, 0.0f),
           "robust_loss_backward: the Huber delta 0 must be positive and finite; the default is 1.");
    REFUSE(be->robust_loss_backward(be, &v5, 1.0f, &v4, &v4, NULL, SDT_ROBUST_LOSS_L1, 1.0f),
           "robust_loss_backward: 'dpred' has 5 elements but 'pred' has 4; pass tensors of equal size.");

    sdt_tensor i32 = T(SDT_I32, 4), other = T(SDT_F32, 4);
    other.device = r->other;
    const sdt_tensor *norms[3] = {&v4, NULL, &i32};
    double sumsq = 0;
    REFUSE(be->sum_squares(be, &sumsq, norms, 3),
           "sum_squares: tensor 'tensors[k]' has dtype i32; pass an f32, f16 or bf16 tensor.");
    sdt_tensor *grads[2] = {NULL, &other};
    bool found_inf = false;
    REFUSE(be->unscale_check(be, grads, 2, 0.5f, &found_inf),
           "unscale_check: tensor 'grads[k]' is not on the %s; pass %s tensors to the %s backend.", r->place, r->place,
           r->label);
    REFUSE(be->adamw_update(be, &v4, &v4, &v4, &v4, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 0, 1.0f),
           "adamw_update: step = 0; bias correction needs step >= 1 (count from 1).");
    REFUSE(be->adamw_update(be, &v4f16, &v4, &v4, &v4, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, 1.0f),
           "adamw_update: tensor 'param' is f16; it must be f32 (optimizer state and statistics are f32).");
    REFUSE(be->adamw_update(be, &v4, &v4, &v4, &v5, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, 1.0f),
           "adamw_update: 'v' has 5 elements but 'param' has 4; pass tensors of equal size.");
}

/* Channels-last tensors (tensor.h): only 4-D ones, only where an op reads them, and in one layout with
 * the tensors they pair with. */
static inline void op_refusals_layouts(op_refusals *r)
{
    sdt_backend *be = r->be;
    sdt_tensor cl = T(SDT_F32, 2, 3, 4, 4), rm = T(SDT_F32, 2, 3, 4, 4), t3 = T(SDT_F32, 2, 3, 16);
    cl.channels_last = t3.channels_last = true;
    REFUSE(be->scale(be, &t3, 2.0f),
           "scale: tensor 'x' is marked channels-last but has 3 dims; only a 4-D [N, C, H, W] tensor can be.");
    sdt_tensor w = T(SDT_F32, 5, 4), lout = T(SDT_F32, 2, 3, 4, 5);
    REFUSE(be->linear_forward(be, &lout, &cl, &w, NULL),
           "linear_forward: tensor 'x' is channels-last (NHWC memory), which this op does not read; pass it in the "
           "row-major (NCHW) layout.");
    REFUSE(be->add_forward(be, &rm, &cl, &cl),
           "add_forward: 'out' is row-major (NCHW) but 'a' is channels-last (NHWC); pass both in one layout.");
    sdt_tensor stat = T(SDT_F32, 2, 3);
    REFUSE(be->groupnorm_forward(be, &rm, &stat, &stat, &cl, NULL, NULL, 3, 1e-5f, SDT_ACT_IDENTITY),
           "groupnorm_forward: 'out' is row-major (NCHW) but 'x' is channels-last (NHWC); pass both in one layout.");
    sdt_tensor whole = T(SDT_F32, 2, 6, 4, 4);
    whole.channels_last = true;
    REFUSE(
        be->concat_channels_forward(be, &whole, &rm, &cl),
        "concat_channels_forward: 'a/da' is row-major (NCHW) but 'out/dout' is channels-last (NHWC); pass both in one "
        "layout.");
    sdt_tensor big = T(SDT_F32, 2, 3, 8, 8);
    REFUSE(
        be->upsample_nearest2x_forward(be, &big, &cl),
        "upsample_nearest2x_forward: 'x/dx' is channels-last (NHWC) but 'out/dout' is row-major (NCHW); pass both in "
        "one layout.");
    sdt_tensor f = T(SDT_F32, 5, 3, 1, 1), dout = T(SDT_F32, 2, 5, 4, 4);
    REFUSE(be->conv2d_backward(be, &rm, NULL, NULL, &dout, &cl, &f, 1, 0),
           "conv2d_backward: 'dx' is row-major (NCHW) but 'x' is channels-last (NHWC); pass both in one layout.");
}

#undef T

/* Runs every case on be (whose alloc gives the buffer the tensors view) and checks that each
 * op of the list had one and that every table entry is the checked one. */
static inline void op_refusals_run(sdt_backend *be)
{
    op_refusals run = {0}, *r = &run;
    r->be = be;
    r->mem = be->alloc(be, OP_REFUSALS_FLOATS * sizeof(float));
    CHECK(r->mem != NULL, "%s: cannot allocate the test buffer: %s", be->name, be->error.message);
    if (!r->mem) return;
    r->other = be->device == SDT_DEVICE_CUDA ? SDT_DEVICE_CPU : SDT_DEVICE_CUDA;
    r->place = be->device == SDT_DEVICE_CUDA ? "GPU" : "CPU";
    r->label = be->device == SDT_DEVICE_CUDA ? "CUDA" : "CPU";
    op_refusals_tensor_checks(r);
    op_refusals_utilities(r);
    op_refusals_embedding(r);
    op_refusals_norms(r);
    op_refusals_matmuls(r);
    op_refusals_attention(r);
    op_refusals_elementwise(r);
    op_refusals_diffusion_and_optimizer(r);
    op_refusals_layouts(r);
    r->covered[OP_REFUSALS_synchronize] = true; /* takes no argument to refuse */
    for (int i = 0; i < OP_REFUSALS_COUNT; i++)
        CHECK(r->covered[i], "op %s has no refusal case in tests/common/op_refusals.h; add its bad arguments",
              op_refusals_names[i]);
    const char *backend = be->name; /* `name` below is the macro's parameter */
#define OP_REFUSALS_ROUTED(name, params, args)                                                                         \
    CHECK(be->name != be->impl.name, "%s: the table entry " #name " skips its argument checker", backend);
    SDT_BACKEND_OPS(OP_REFUSALS_ROUTED)
#undef OP_REFUSALS_ROUTED
    printf("%s: %d refusals checked\n", be->name, r->cases);
    be->free(be, r->mem);
}

#endif
