/* op_checks.c - every op's argument checks, for both backends (see op_checks.h).
 *
 * The sentences are the CPU backend's from before the checks moved here; tests compare
 * them exactly, on the CPU and on the CUDA backend (tests/kernels/test_op_checks.c,
 * tests/gpu/test_cuda_op_checks.c). Each checker checks in the order its op reads its
 * arguments, so the first problem is the one reported. */
#include "op_checks.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "c_numeric.h"

#define SHAPE_TEXT 96

static bool invalid(sdt_backend *be, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool invalid(sdt_backend *be, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sdt_failv(&be->error, SDT_ERR_INVALID_ARGUMENT, fmt, ap);
    va_end(ap);
    return false;
}

/* ---- the device check: one helper for either backend's device ---- */

/* How a sentence names where a tensor lives and which backend wants it. */
static const char *device_place(sdt_device d)
{
    return d == SDT_DEVICE_CUDA ? "GPU" : "CPU";
}

static const char *backend_label(sdt_device d)
{
    return d == SDT_DEVICE_CUDA ? "CUDA" : "CPU";
}

static bool on_backend_device(sdt_backend *be, const char *op, const char *field, const sdt_tensor *t)
{
    if (t->device == be->device) return true;
    return invalid(be, "%s: tensor '%s' is not on the %s; pass %s tensors to the %s backend.", op, field,
                   device_place(be->device), device_place(be->device), backend_label(be->device));
}

/* ---- tensor checks shared by the checkers ---- */

static bool is_float_dtype(sdt_dtype d)
{
    return d == SDT_F32 || d == SDT_F16 || d == SDT_BF16;
}

/* ---- layout: which ops read a channels-last tensor (tensor.h) ---- */

/* The ops that take channels-last (NHWC memory) operands: the UNet's convolutional path, whose
 * kernels index by layout, and the elementwise ops, for which only equal layouts matter (checked
 * pairwise: same_numel, like_arg). Every other op reads a row-major [.., C] and refuses one. */
static bool op_takes_channels_last(const char *op)
{
    static const char *const prefixes[] = {"conv2d_",          "groupnorm_",          "add_channel_",
                                           "concat_channels_", "upsample_nearest2x_", "activation_",
                                           "mse_loss_",        "robust_loss_",        "dropout_"};
    static const char *const names[] = {"zero",        "convert",     "axpy",         "scale", "count_nonfinite",
                                        "add_forward", "sum_squares", "unscale_check"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(op, prefixes[i], strlen(prefixes[i])) == 0) return true;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(op, names[i]) == 0) return true;
    return false;
}

static bool layout_accepted(sdt_backend *be, const char *op, const char *field, const sdt_tensor *t)
{
    if (!t->channels_last) return true;
    if (t->ndim != 4)
        return invalid(
            be, "%s: tensor '%s' is marked channels-last but has %d dims; only a 4-D [N, C, H, W] tensor can be.", op,
            field, t->ndim);
    if (!op_takes_channels_last(op))
        return invalid(be,
                       "%s: tensor '%s' is channels-last (NHWC memory), which this op does not read; pass it in the "
                       "row-major (NCHW) layout.",
                       op, field);
    return true;
}

static const char *layout_name(const sdt_tensor *t)
{
    return t->channels_last ? "channels-last (NHWC)" : "row-major (NCHW)";
}

/* a and b are laid out alike (an elementwise pair, a gradient and its tensor, the parts of a concat). */
static bool same_layout(sdt_backend *be, const char *op, const char *field_a, const sdt_tensor *a, const char *field_b,
                        const sdt_tensor *b)
{
    if (a->channels_last == b->channels_last) return true;
    return invalid(be, "%s: '%s' is %s but '%s' is %s; pass both in one layout.", op, field_a, layout_name(a), field_b,
                   layout_name(b));
}

/* t is present, on the backend's device and (when float_only) a float tensor, with data
 * unless it is empty, in a layout the op reads. */
static bool tensor_usable(sdt_backend *be, const char *op, const char *field, const sdt_tensor *t, bool float_only)
{
    if (!t) return invalid(be, "%s: tensor '%s' is NULL; pass a tensor.", op, field);
    if (!on_backend_device(be, op, field, t) || !layout_accepted(be, op, field, t)) return false;
    if (float_only && !is_float_dtype(t->dtype))
        return invalid(be, "%s: tensor '%s' has dtype %s; pass an f32, f16 or bf16 tensor.", op, field,
                       sdt_dtype_name(t->dtype));
    if (!t->data && sdt_tensor_numel(t) > 0)
        return invalid(be, "%s: tensor '%s' has no data (an arena overflow?); size the arena by measuring first.", op,
                       field);
    return true;
}

/* A float tensor on the backend's device whose values the op does not read: only its shape and dtype
 * (a frozen layer's input in backward, which need not be kept), so its data may be NULL. */
static bool tensor_described(sdt_backend *be, const char *op, const char *field, const sdt_tensor *t)
{
    if (!t) return invalid(be, "%s: tensor '%s' is NULL; pass a tensor.", op, field);
    if (!on_backend_device(be, op, field, t) || !layout_accepted(be, op, field, t)) return false;
    if (!is_float_dtype(t->dtype))
        return invalid(be, "%s: tensor '%s' has dtype %s; pass an f32, f16 or bf16 tensor.", op, field,
                       sdt_dtype_name(t->dtype));
    return true;
}

/* A float tensor on the backend's device (every op's operand). */
static bool tensor_arg(sdt_backend *be, const char *op, const char *field, const sdt_tensor *t)
{
    return tensor_usable(be, op, field, t, true);
}

static bool same_numel(sdt_backend *be, const char *op, const char *field_a, const sdt_tensor *a, const char *field_b,
                       const sdt_tensor *b)
{
    if (!tensor_arg(be, op, field_a, a) || !tensor_arg(be, op, field_b, b)) return false;
    int64_t na = sdt_tensor_numel(a), nb = sdt_tensor_numel(b);
    if (na != nb)
        return invalid(be, "%s: '%s' has %lld elements but '%s' has %lld; pass tensors of equal size.", op, field_a,
                       (long long)na, field_b, (long long)nb);
    return same_layout(be, op, field_a, a, field_b, b);
}

static bool f32_arg(sdt_backend *be, const char *op, const char *field, const sdt_tensor *t)
{
    if (!tensor_arg(be, op, field, t)) return false;
    if (t->dtype != SDT_F32)
        return invalid(be, "%s: tensor '%s' is %s; it must be f32 (optimizer state and statistics are f32).", op, field,
                       sdt_dtype_name(t->dtype));
    return true;
}

/* Writes t's shape as "[2, 3, 4]" (or "NULL") into buf and returns buf. */
static const char *shape_text(const sdt_tensor *t, char *buf, size_t size)
{
    if (!t) {
        sdt_c_snprintf(buf, size, "NULL");
        return buf;
    }
    size_t used = (size_t)sdt_c_snprintf(buf, size, "[");
    for (int i = 0; i < t->ndim && used < size; i++)
        used += (size_t)sdt_c_snprintf(buf + used, size - used, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    if (used < size) sdt_c_snprintf(buf + used, size - used, "]");
    return buf;
}

/* tensor_arg plus an exact shape: ndim dims, each equal to dims[i] unless dims[i] < 0 (any size). */
static bool shape_matches(sdt_backend *be, const char *op, const char *name, const sdt_tensor *t, int ndim,
                          const int64_t *dims)
{
    bool ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        if (dims[i] >= 0 && t->shape[i] != dims[i]) ok = false;
    if (ok) return true;
    char got[SHAPE_TEXT], want[SHAPE_TEXT];
    size_t used = (size_t)sdt_c_snprintf(want, sizeof want, "[");
    for (int i = 0; i < ndim && used < sizeof want; i++) {
        if (dims[i] >= 0)
            used += (size_t)sdt_c_snprintf(want + used, sizeof want - used, i ? ", %lld" : "%lld", (long long)dims[i]);
        else
            used += (size_t)sdt_c_snprintf(want + used, sizeof want - used, i ? ", *" : "*");
    }
    if (used < sizeof want) sdt_c_snprintf(want + used, sizeof want - used, "]");
    return invalid(be, "%s: %s has shape %s but %s is required.", op, name, shape_text(t, got, sizeof got), want);
}

static bool shape_arg(sdt_backend *be, const char *op, const char *name, const sdt_tensor *t, int ndim,
                      const int64_t *dims)
{
    return tensor_arg(be, op, name, t) && shape_matches(be, op, name, t, ndim, dims);
}

/* t (skipped when NULL: an optional gradient) has exactly the shape of `like`. */
static bool like_arg(sdt_backend *be, const char *op, const char *name, const sdt_tensor *t, const char *like_name,
                     const sdt_tensor *like)
{
    if (!t) return true;
    if (!tensor_arg(be, op, name, t)) return false;
    if (sdt_tensor_same_shape(t, like)) return same_layout(be, op, name, t, like_name, like);
    char got[SHAPE_TEXT], want[SHAPE_TEXT];
    return invalid(be, "%s: %s has shape %s but must match %s's shape %s.", op, name, shape_text(t, got, sizeof got),
                   like_name, shape_text(like, want, sizeof want));
}

/* ---- memory ---- */

static bool copy_buffers(sdt_backend *be, const char *op, const void *dst, const void *src, size_t bytes)
{
    if (bytes && (!dst || !src))
        return invalid(be, "%s: a buffer of the %zu-byte copy is NULL; pass both buffers.", op, bytes);
    return true;
}

bool sdt_check_upload(sdt_backend *be, void *dst, const void *host_src, size_t bytes)
{
    return copy_buffers(be, "upload", dst, host_src, bytes);
}

bool sdt_check_download(sdt_backend *be, void *host_dst, const void *src, size_t bytes)
{
    return copy_buffers(be, "download", host_dst, src, bytes);
}

/* Any dtype: token buffers are zeroed too. */
bool sdt_check_zero(sdt_backend *be, sdt_tensor *t)
{
    return tensor_usable(be, "zero", "t", t, false);
}

bool sdt_check_synchronize(sdt_backend *be)
{
    (void)be; /* no arguments */
    return true;
}

bool sdt_check_memory_stats(sdt_backend *be, sdt_memory_stats *stats, bool reset_peak)
{
    (void)reset_peak;
    if (!stats) return invalid(be, "memory_stats: stats is NULL; pass a struct to fill.");
    return true;
}

/* ---- tensor utilities ---- */

bool sdt_check_convert(sdt_backend *be, sdt_tensor *dst, const sdt_tensor *src)
{
    return same_numel(be, "convert", "dst", dst, "src", src);
}

bool sdt_check_axpy(sdt_backend *be, sdt_tensor *dst, float alpha, const sdt_tensor *src)
{
    (void)alpha;
    return same_numel(be, "axpy", "dst", dst, "src", src);
}

bool sdt_check_scale(sdt_backend *be, sdt_tensor *x, float alpha)
{
    (void)alpha;
    return tensor_arg(be, "scale", "x", x);
}

/* The transpose reads t as [B, M, N] (an [M, N] matrix is one of them). */
static bool batched_matrix(sdt_backend *be, const char *op, const char *field, const sdt_tensor *t)
{
    if (t->ndim < 2)
        return invalid(be, "%s: '%s' has %d dims; pass a [B, M, N] (or [M, N]) tensor.", op, field, t->ndim);
    return true;
}

bool sdt_check_transpose_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x)
{
    const char *op = "transpose_forward";
    return same_numel(be, op, "out", out, "x", x) && batched_matrix(be, op, "x", x);
}

bool sdt_check_transpose_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout)
{
    const char *op = "transpose_backward";
    if (!dx) return true;
    return same_numel(be, op, "dx", dx, "dout", dout) && batched_matrix(be, op, "dx", dx);
}

bool sdt_check_count_nonfinite(sdt_backend *be, const sdt_tensor *x, int64_t *count)
{
    if (!tensor_arg(be, "count_nonfinite", "x", x)) return false;
    if (!count) return invalid(be, "count_nonfinite: count is NULL; pass where to write the count.");
    return true;
}

/* ---- embedding ---- */

/* tokens must be an i32 [B, T] tensor with data on the backend's device (the ids themselves
 * are checked against the vocabulary by each backend, which alone can read them). */
static bool embedding_tokens(sdt_backend *be, const char *op, const sdt_tensor *tokens)
{
    if (!tokens || !tokens->data || tokens->dtype != SDT_I32 || tokens->ndim != 2 || tokens->device != be->device)
        return invalid(be, "%s: tokens must be an i32 %s tensor [B, T].", op, device_place(be->device));
    return true;
}

/* pos (or dpos) must be [P, C] with P >= T. */
static bool embedding_pos(sdt_backend *be, const char *op, const char *name, const sdt_tensor *pos, int64_t t,
                          int64_t c)
{
    const int64_t pdims[2] = {-1, c};
    if (!shape_arg(be, op, name, pos, 2, pdims)) return false;
    if (pos->shape[0] < t)
        return invalid(be, "%s: %s has %lld positions but the sequence has %lld tokens; give it at least T rows.", op,
                       name, (long long)pos->shape[0], (long long)t);
    return true;
}

bool sdt_check_embedding_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *tokens, const sdt_tensor *table,
                                 const sdt_tensor *pos)
{
    const char *op = "embedding_forward";
    const int64_t any2[2] = {-1, -1};
    if (!shape_arg(be, op, "table [V, C]", table, 2, any2) || !embedding_tokens(be, op, tokens)) return false;
    if (pos && !embedding_pos(be, op, "pos [P, C]", pos, tokens->shape[1], table->shape[1])) return false;
    const int64_t odims[3] = {tokens->shape[0], tokens->shape[1], table->shape[1]};
    return shape_arg(be, op, "out [B, T, C]", out, 3, odims);
}

bool sdt_check_embedding_backward(sdt_backend *be, sdt_tensor *dtable, sdt_tensor *dpos, const sdt_tensor *dout,
                                  const sdt_tensor *tokens)
{
    const char *op = "embedding_backward";
    if (!dtable && !dpos) return true;
    if (!embedding_tokens(be, op, tokens)) return false;
    const int64_t b = tokens->shape[0], t = tokens->shape[1];
    const int64_t ddims[3] = {b, t, -1};
    if (!shape_arg(be, op, "dout [B, T, C]", dout, 3, ddims)) return false;
    const int64_t c = dout->shape[2];
    const int64_t tdims[2] = {-1, c};
    if (dtable && !shape_arg(be, op, "dtable [V, C]", dtable, 2, tdims)) return false;
    return !dpos || embedding_pos(be, op, "dpos [P, C]", dpos, t, c);
}

/* ---- normalisation ---- */

/* out: x's shape (after the op's own statistics checks). */
static bool known_activation(sdt_backend *be, const char *op, sdt_activation act)
{
    if ((int)act < 0 || act >= SDT_ACT_COUNT)
        return invalid(be, "%s: activation %d is unknown; pass an sdt_activation value.", op, (int)act);
    return true;
}

static bool norm_output(sdt_backend *be, const char *op, const sdt_tensor *out, const sdt_tensor *x)
{
    return tensor_arg(be, op, "out", out) && like_arg(be, op, "out", out, "x", x);
}

/* dout and dx: x's shape; dgamma and dbeta: [channels]. */
static bool norm_gradients(sdt_backend *be, const char *op, const sdt_tensor *dx, const sdt_tensor *dgamma,
                           const sdt_tensor *dbeta, const sdt_tensor *dout, const sdt_tensor *x, int64_t channels)
{
    if (!tensor_arg(be, op, "dout", dout) || !like_arg(be, op, "dout", dout, "x", x) ||
        !like_arg(be, op, "dx", dx, "x", x))
        return false;
    const int64_t cdims[1] = {channels};
    return (!dgamma || shape_arg(be, op, "dgamma [C]", dgamma, 1, cdims)) &&
           (!dbeta || shape_arg(be, op, "dbeta [C]", dbeta, 1, cdims));
}

static bool layernorm_operands(sdt_backend *be, const char *op, const sdt_tensor *x, const sdt_tensor *gamma,
                               const sdt_tensor *beta, const sdt_tensor *mean, const sdt_tensor *rstd)
{
    if (!tensor_arg(be, op, "x", x)) return false;
    const int64_t cdims[1] = {sdt_tensor_last_dim(x)};
    if (gamma && !shape_arg(be, op, "gamma [C]", gamma, 1, cdims)) return false;
    if (beta && !shape_arg(be, op, "beta [C]", beta, 1, cdims)) return false;
    const int64_t rows = sdt_tensor_rows(x);
    if (!tensor_arg(be, op, "mean", mean) || !tensor_arg(be, op, "rstd", rstd)) return false;
    if (sdt_tensor_numel(mean) != rows || sdt_tensor_numel(rstd) != rows)
        return invalid(be, "%s: mean and rstd hold %lld and %lld values but x has %lld rows; size them [N].", op,
                       (long long)sdt_tensor_numel(mean), (long long)sdt_tensor_numel(rstd), (long long)rows);
    return true;
}

bool sdt_check_layernorm_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd,
                                 const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *beta, float eps)
{
    const char *op = "layernorm_forward";
    (void)eps;
    return layernorm_operands(be, op, x, gamma, beta, mean, rstd) && norm_output(be, op, out, x);
}

bool sdt_check_layernorm_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta,
                                  const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *gamma,
                                  const sdt_tensor *mean, const sdt_tensor *rstd)
{
    const char *op = "layernorm_backward";
    return layernorm_operands(be, op, x, gamma, NULL, mean, rstd) &&
           norm_gradients(be, op, dx, dgamma, dbeta, dout, x, sdt_tensor_last_dim(x));
}

/* x [N, C] (any rank, C its last dim), gamma [C] (optional), rstd f32 with one value per row. */
static bool rmsnorm_operands(sdt_backend *be, const char *op, const sdt_tensor *x, const sdt_tensor *gamma,
                             const sdt_tensor *rstd)
{
    if (!tensor_arg(be, op, "x", x)) return false;
    const int64_t cdims[1] = {sdt_tensor_last_dim(x)};
    if (gamma && !shape_arg(be, op, "gamma [C]", gamma, 1, cdims)) return false;
    if (!f32_arg(be, op, "rstd", rstd)) return false;
    if (sdt_tensor_numel(rstd) != sdt_tensor_rows(x))
        return invalid(be, "%s: rstd holds %lld values but x has %lld rows; size it [N].", op,
                       (long long)sdt_tensor_numel(rstd), (long long)sdt_tensor_rows(x));
    return true;
}

bool sdt_check_rmsnorm_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *rstd, const sdt_tensor *x,
                               const sdt_tensor *gamma, float eps)
{
    const char *op = "rmsnorm_forward";
    if (!(eps >= 0.0f) || !isfinite(eps))
        return invalid(be, "%s: eps %g must be finite and >= 0 (T5 uses 1e-6).", op, (double)eps);
    return rmsnorm_operands(be, op, x, gamma, rstd) && norm_output(be, op, out, x);
}

bool sdt_check_rmsnorm_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, const sdt_tensor *dout,
                                const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *rstd)
{
    const char *op = "rmsnorm_backward";
    if (dgamma && !gamma) return invalid(be, "%s: dgamma was given without gamma; pass both or neither.", op);
    return rmsnorm_operands(be, op, x, gamma, rstd) &&
           norm_gradients(be, op, dx, dgamma, NULL, dout, x, sdt_tensor_last_dim(x));
}

/* x [..., S, heads*D] (rank >= 2), cos and sin [S, D] with D even and dividing x's last dim. */
static bool rope_operands(sdt_backend *be, const char *op, const sdt_tensor *x, const sdt_tensor *cos,
                          const sdt_tensor *sin)
{
    if (!tensor_arg(be, op, "x", x) || !tensor_arg(be, op, "cos", cos) || !tensor_arg(be, op, "sin", sin)) return false;
    if (x->ndim < 2)
        return invalid(be, "%s: x has %d dimension(s) but [..., S, heads*D] needs at least 2.", op, x->ndim);
    if (cos->ndim != 2 || cos->shape[1] < 2 || cos->shape[1] % 2)
        return invalid(be, "%s: cos must be [S, D] with D even (the rotated pairs), not %d-D with last dim %lld.", op,
                       cos->ndim, (long long)sdt_tensor_last_dim(cos));
    const int64_t dims[2] = {cos->shape[0], cos->shape[1]};
    if (!shape_matches(be, op, "sin", sin, 2, dims)) return false;
    if (x->shape[x->ndim - 2] != dims[0] || x->shape[x->ndim - 1] % dims[1])
        return invalid(be,
                       "%s: x has %lld positions of width %lld but cos and sin are [%lld, %lld]; give one table row "
                       "per position and a head width that divides x's last dim.",
                       op, (long long)x->shape[x->ndim - 2], (long long)x->shape[x->ndim - 1], (long long)dims[0],
                       (long long)dims[1]);
    return true;
}

bool sdt_check_rope_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *cos,
                            const sdt_tensor *sin)
{
    const char *op = "rope_forward";
    return rope_operands(be, op, x, cos, sin) && norm_output(be, op, out, x);
}

bool sdt_check_rope_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *cos,
                             const sdt_tensor *sin)
{
    const char *op = "rope_backward";
    if (!rope_operands(be, op, dout, cos, sin) || !like_arg(be, op, "dx", dx, "dout", dout)) return false;
    if (dx && dx->data == dout->data)
        return invalid(be, "%s: dx aliases dout; backward accumulates, so give dx its own buffer.", op);
    return true;
}

static bool groupnorm_operands(sdt_backend *be, const char *op, const sdt_tensor *x, const sdt_tensor *gamma,
                               const sdt_tensor *beta, const sdt_tensor *mean, const sdt_tensor *rstd, int groups)
{
    if (!tensor_arg(be, op, "x", x)) return false;
    if (x->ndim < 2)
        return invalid(be, "%s: x has %d dimension(s) but [B, C, spatial...] needs at least 2.", op, x->ndim);
    const int64_t c = x->shape[1];
    if (groups < 1 || c % groups != 0)
        return invalid(be, "%s: %lld channels do not split into %d groups; use a group count that divides C.", op,
                       (long long)c, groups);
    const int64_t cdims[1] = {c};
    if (gamma && !shape_arg(be, op, "gamma [C]", gamma, 1, cdims)) return false;
    if (beta && !shape_arg(be, op, "beta [C]", beta, 1, cdims)) return false;
    const int64_t sdims[2] = {x->shape[0], groups};
    return shape_arg(be, op, "mean [B, groups]", mean, 2, sdims) &&
           shape_arg(be, op, "rstd [B, groups]", rstd, 2, sdims);
}

bool sdt_check_groupnorm_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd,
                                 const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *beta, int groups,
                                 float eps, sdt_activation act)
{
    const char *op = "groupnorm_forward";
    (void)eps;
    return known_activation(be, op, act) && groupnorm_operands(be, op, x, gamma, beta, mean, rstd, groups) &&
           norm_output(be, op, out, x);
}

bool sdt_check_groupnorm_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta,
                                  const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *gamma,
                                  const sdt_tensor *beta, const sdt_tensor *mean, const sdt_tensor *rstd, int groups,
                                  sdt_activation act)
{
    const char *op = "groupnorm_backward";
    return known_activation(be, op, act) &&
           groupnorm_operands(be, op, x, gamma, act == SDT_ACT_IDENTITY ? NULL : beta, mean, rstd, groups) &&
           norm_gradients(be, op, dx, dgamma, dbeta, dout, x, x->shape[1]);
}

/* ---- matmul-shaped ops ---- */

/* x [..., C], w [OC, C] and a result (out or dout) with x's leading dims and OC last. */
static bool linear_operands(sdt_backend *be, const char *op, const char *out_name, const sdt_tensor *out,
                            const sdt_tensor *x, const sdt_tensor *w, bool reads_x)
{
    if (!(reads_x ? tensor_arg(be, op, "x", x) : tensor_described(be, op, "x", x))) return false;
    const int64_t wdims[2] = {-1, sdt_tensor_last_dim(x)};
    if (!shape_arg(be, op, "w [OC, C]", w, 2, wdims)) return false;
    int64_t odims[SDT_MAX_DIMS] = {0};
    for (int i = 0; i < x->ndim; i++) odims[i] = x->shape[i];
    if (x->ndim > 0) odims[x->ndim - 1] = w->shape[0];
    return shape_arg(be, op, out_name, out, x->ndim, odims);
}

bool sdt_check_linear_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w,
                              const sdt_tensor *b)
{
    const char *op = "linear_forward";
    if (!linear_operands(be, op, "out", out, x, w, true)) return false;
    const int64_t bdims[1] = {w->shape[0]};
    return !b || shape_arg(be, op, "b [OC]", b, 1, bdims);
}

bool sdt_check_linear_residual_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w,
                                       const sdt_tensor *b, const sdt_tensor *residual)
{
    const char *op = "linear_residual_forward";
    if (!linear_operands(be, op, "out", out, x, w, true)) return false;
    const int64_t bdims[1] = {w->shape[0]};
    if (b && !shape_arg(be, op, "b [OC]", b, 1, bdims)) return false;
    if (!residual) return invalid(be, "%s: tensor 'residual' is NULL; pass a tensor (or call linear_forward).", op);
    if (!like_arg(be, op, "residual", residual, "out", out)) return false;
    /* the CPU writes out before it reads the residual */
    const char *o = (const char *)out->data, *r = (const char *)residual->data;
    size_t on = sdt_tensor_nbytes(out), rn = sdt_tensor_nbytes(residual);
    if (o && r && o < r + rn && r < o + on)
        return invalid(be, "%s: 'residual' shares memory with 'out'; pass a separate output tensor.", op);
    return true;
}

bool sdt_check_linear_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dw, sdt_tensor *db, const sdt_tensor *dout,
                               const sdt_tensor *x, const sdt_tensor *w)
{
    const char *op = "linear_backward";
    if (!linear_operands(be, op, "dout", dout, x, w, dw != NULL) || !like_arg(be, op, "dx", dx, "x", x) ||
        !like_arg(be, op, "dw", dw, "w", w))
        return false;
    const int64_t bdims[1] = {w->shape[0]};
    return !db || shape_arg(be, op, "db [OC]", db, 1, bdims);
}

/* dx stands for x: the layer's input shape, and the tensor written. */
bool sdt_check_linear_input_grad(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *w)
{
    return tensor_arg(be, "linear_input_grad", "dx", dx) &&
           linear_operands(be, "linear_input_grad", "dout", dout, dx, w, false);
}

/* x [B, C, H, W], w [OC, C, KH, KW], stride and padding, the result (out or dout)
 * [B, OC, OH, OW] and b [OC]. */
static bool conv2d_operands(sdt_backend *be, const char *op, const char *out_name, const sdt_tensor *out,
                            const sdt_tensor *x, const sdt_tensor *w, const sdt_tensor *b, int stride, int pad,
                            bool reads_x)
{
    const int64_t any4[4] = {-1, -1, -1, -1};
    const char *x_name = "x [B, C, H, W]";
    if (!(reads_x ? tensor_arg(be, op, x_name, x) : tensor_described(be, op, x_name, x)) ||
        !shape_matches(be, op, x_name, x, 4, any4))
        return false;
    const int64_t wdims[4] = {-1, x->shape[1], -1, -1};
    if (!shape_arg(be, op, "w [OC, C, KH, KW]", w, 4, wdims)) return false;
    if (stride < 1 || pad < 0)
        return invalid(be, "%s: stride %d and padding %d are invalid; stride must be >= 1 and padding >= 0.", op,
                       stride, pad);
    if (x->shape[2] + 2 * pad < w->shape[2] || x->shape[3] + 2 * pad < w->shape[3])
        return invalid(be, "%s: the %lldx%lld kernel is larger than the padded %lldx%lld input.", op,
                       (long long)w->shape[2], (long long)w->shape[3], (long long)(x->shape[2] + 2 * pad),
                       (long long)(x->shape[3] + 2 * pad));
    const int64_t oh = (x->shape[2] + 2 * pad - w->shape[2]) / stride + 1;
    const int64_t ow = (x->shape[3] + 2 * pad - w->shape[3]) / stride + 1;
    const int64_t odims[4] = {x->shape[0], w->shape[0], oh, ow};
    if (!shape_arg(be, op, out_name, out, 4, odims)) return false;
    const int64_t bdims[1] = {w->shape[0]};
    return !b || shape_arg(be, op, "b [OC]", b, 1, bdims);
}

bool sdt_check_conv2d_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w,
                              const sdt_tensor *b, int stride, int pad)
{
    return conv2d_operands(be, "conv2d_forward", "out", out, x, w, b, stride, pad, true);
}

bool sdt_check_conv2d_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dw, sdt_tensor *db, const sdt_tensor *dout,
                               const sdt_tensor *x, const sdt_tensor *w, int stride, int pad)
{
    const char *op = "conv2d_backward";
    if (!conv2d_operands(be, op, "dout", dout, x, w, NULL, stride, pad, dw != NULL) ||
        !like_arg(be, op, "dx", dx, "x", x) || !like_arg(be, op, "dw", dw, "w", w))
        return false;
    const int64_t bdims[1] = {w->shape[0]};
    return !db || shape_arg(be, op, "db [OC]", db, 1, bdims);
}

bool sdt_check_conv2d_input_grad(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *w,
                                 int stride, int pad)
{
    const int64_t any4[4] = {-1, -1, -1, -1};
    return shape_arg(be, "conv2d_input_grad", "dx [B, C, H, W]", dx, 4, any4) &&
           conv2d_operands(be, "conv2d_input_grad", "dout", dout, dx, w, NULL, stride, pad, false);
}

/* q [B, Tq, H*D], k and v [B, Tk, H*D], heads, the causal mask's Tq == Tk and lse [B, H, Tq] f32. */
static bool attention_operands(sdt_backend *be, const char *op, const sdt_tensor *q, const sdt_tensor *k,
                               const sdt_tensor *v, const sdt_tensor *lse, int heads, bool causal)
{
    const int64_t any3[3] = {-1, -1, -1};
    if (!shape_arg(be, op, "q [B, Tq, H*D]", q, 3, any3)) return false;
    if (heads < 1 || q->shape[2] % heads != 0)
        return invalid(be, "%s: q's last dim %lld is not divisible by heads = %d; pass the model's head count.", op,
                       (long long)q->shape[2], heads);
    const int64_t kdims[3] = {q->shape[0], -1, q->shape[2]};
    if (!shape_arg(be, op, "k [B, Tk, H*D]", k, 3, kdims)) return false;
    if (!like_arg(be, op, "v", v, "k", k) || !tensor_arg(be, op, "v", v)) return false;
    if (causal && q->shape[1] != k->shape[1])
        return invalid(be, "%s: causal attention needs Tq == Tk but q has %lld tokens and k has %lld.", op,
                       (long long)q->shape[1], (long long)k->shape[1]);
    const int64_t ldims[3] = {q->shape[0], heads, q->shape[1]};
    if (lse && !shape_arg(be, op, "lse [B, H, Tq]", lse, 3, ldims)) return false;
    if (lse && lse->dtype != SDT_F32)
        return invalid(be, "%s: lse must be f32 (it holds softmax statistics) but is %s.", op,
                       sdt_dtype_name(lse->dtype));
    return true;
}

bool sdt_check_attention_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *lse, const sdt_tensor *q,
                                 const sdt_tensor *k, const sdt_tensor *v, int heads, bool causal)
{
    const char *op = "attention_forward";
    return attention_operands(be, op, q, k, v, lse, heads, causal) && like_arg(be, op, "out", out, "q", q) &&
           tensor_arg(be, op, "out", out);
}

/* What every attention backward checks after its operands: dout and the gradients shaped like q, k and v, and
 * forward's out given with its lse (both or neither). */
static bool attention_grads(sdt_backend *be, const char *op, sdt_tensor *dq, sdt_tensor *dk, sdt_tensor *dv,
                            const sdt_tensor *dout, const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *v,
                            const sdt_tensor *out, const sdt_tensor *lse)
{
    if (!tensor_arg(be, op, "dout", dout) || !like_arg(be, op, "dout", dout, "q", q) ||
        !like_arg(be, op, "dq", dq, "q", q) || !like_arg(be, op, "dk", dk, "k", k) ||
        !like_arg(be, op, "dv", dv, "v", v))
        return false;
    if (!lse) return true;
    if (!out) return invalid(be, "%s: lse was given without forward's out; pass both or neither.", op);
    return like_arg(be, op, "out", out, "q", q) && tensor_arg(be, op, "out", out);
}

bool sdt_check_attention_backward(sdt_backend *be, sdt_tensor *dq, sdt_tensor *dk, sdt_tensor *dv,
                                  const sdt_tensor *dout, const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *v,
                                  const sdt_tensor *out, const sdt_tensor *lse, int heads, bool causal)
{
    const char *op = "attention_backward";
    return attention_operands(be, op, q, k, v, lse, heads, causal) &&
           attention_grads(be, op, dq, dk, dv, dout, q, k, v, out, lse);
}

/* attention_operands (never causal) plus the bias f32 [1 or B, H, Tq, Tk] and a finite, positive scale. */
static bool attention_bias_operands(sdt_backend *be, const char *op, const sdt_tensor *q, const sdt_tensor *k,
                                    const sdt_tensor *v, const sdt_tensor *lse, const sdt_tensor *bias, int heads,
                                    float scale)
{
    if (!attention_operands(be, op, q, k, v, lse, heads, false)) return false;
    if (!(scale > 0.0f) || !isfinite(scale))
        return invalid(be, "%s: scale %g must be finite and > 0 (1 / sqrt(head_dim) for SDPA, 1 for T5).", op,
                       (double)scale);
    if (!bias) return true;
    const int64_t bdims[4] = {-1, heads, q->shape[1], k->shape[1]};
    if (!shape_arg(be, op, "bias [1 or B, H, Tq, Tk]", bias, 4, bdims)) return false;
    if (bias->shape[0] != 1 && bias->shape[0] != q->shape[0])
        return invalid(be, "%s: bias has %lld batch rows but q has batch %lld; give 1 (shared) or B.", op,
                       (long long)bias->shape[0], (long long)q->shape[0]);
    if (bias->dtype != SDT_F32)
        return invalid(be, "%s: bias must be f32 (it may hold -inf to mask keys) but is %s.", op,
                       sdt_dtype_name(bias->dtype));
    return true;
}

bool sdt_check_attention_bias_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *lse, const sdt_tensor *q,
                                      const sdt_tensor *k, const sdt_tensor *v, const sdt_tensor *bias, int heads,
                                      float scale)
{
    const char *op = "attention_bias_forward";
    return attention_bias_operands(be, op, q, k, v, lse, bias, heads, scale) && like_arg(be, op, "out", out, "q", q) &&
           tensor_arg(be, op, "out", out);
}

bool sdt_check_attention_bias_backward(sdt_backend *be, sdt_tensor *dq, sdt_tensor *dk, sdt_tensor *dv,
                                       const sdt_tensor *dout, const sdt_tensor *q, const sdt_tensor *k,
                                       const sdt_tensor *v, const sdt_tensor *out, const sdt_tensor *lse,
                                       const sdt_tensor *bias, int heads, float scale)
{
    const char *op = "attention_bias_backward";
    return attention_bias_operands(be, op, q, k, v, lse, bias, heads, scale) &&
           attention_grads(be, op, dq, dk, dv, dout, q, k, v, out, lse);
}

bool sdt_check_softmax_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x)
{
    const char *op = "softmax_forward";
    return tensor_arg(be, op, "x", x) && tensor_arg(be, op, "out", out) && like_arg(be, op, "out", out, "x", x);
}

bool sdt_check_softmax_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *out)
{
    const char *op = "softmax_backward";
    return tensor_arg(be, op, "out", out) && tensor_arg(be, op, "dout", dout) &&
           like_arg(be, op, "dout", dout, "out", out) && like_arg(be, op, "dx", dx, "out", out);
}

/* ---- elementwise ---- */

bool sdt_check_activation_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, sdt_activation act)
{
    const char *op = "activation_forward";
    return known_activation(be, op, act) && same_numel(be, op, "out", out, "x", x);
}

bool sdt_check_activation_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *x,
                                   sdt_activation act)
{
    const char *op = "activation_backward";
    if (!dx) return true;
    return known_activation(be, op, act) && same_numel(be, op, "dx", dx, "x", x) &&
           same_numel(be, op, "dout", dout, "x", x);
}

/* half (out or dout) [..., C] against x [..., 2C]. */
static bool geglu_operands(sdt_backend *be, const char *op, const sdt_tensor *half, const sdt_tensor *x)
{
    if (!tensor_arg(be, op, "x", x) || !tensor_arg(be, op, "out/dout", half)) return false;
    if (x->ndim < 1 || half->ndim < 1)
        return invalid(be, "%s: x and out need a last dimension; pass [..., 2C] and [..., C].", op);
    const int64_t c = half->shape[half->ndim - 1];
    if (x->shape[x->ndim - 1] != 2 * c || sdt_tensor_numel(x) != 2 * sdt_tensor_numel(half))
        return invalid(be, "%s: x's last dim is %lld but out's is %lld; x must be [..., 2C] for out [..., C].", op,
                       (long long)x->shape[x->ndim - 1], (long long)c);
    return true;
}

bool sdt_check_geglu_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x)
{
    return geglu_operands(be, "geglu_forward", out, x);
}

bool sdt_check_geglu_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *x)
{
    const char *op = "geglu_backward";
    if (!dx) return true;
    return geglu_operands(be, op, dout, x) && same_numel(be, op, "dx", dx, "x", x);
}

bool sdt_check_gated_activation_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *gate, const sdt_tensor *up,
                                        sdt_activation act)
{
    const char *op = "gated_activation_forward";
    return known_activation(be, op, act) && same_numel(be, op, "out", out, "gate", gate) &&
           same_numel(be, op, "up", up, "gate", gate);
}

bool sdt_check_gated_activation_backward(sdt_backend *be, sdt_tensor *dgate, sdt_tensor *dup, const sdt_tensor *dout,
                                         const sdt_tensor *gate, const sdt_tensor *up, sdt_activation act)
{
    const char *op = "gated_activation_backward";
    if (!dgate && !dup) return true;
    return known_activation(be, op, act) && same_numel(be, op, "dout", dout, "gate", gate) &&
           same_numel(be, op, "up", up, "gate", gate) && (!dgate || same_numel(be, op, "dgate", dgate, "gate", gate)) &&
           (!dup || same_numel(be, op, "dup", dup, "gate", gate));
}

bool sdt_check_add_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *a, const sdt_tensor *b)
{
    const char *op = "add_forward";
    return same_numel(be, op, "out", out, "a", a) && same_numel(be, op, "out", out, "b", b);
}

/* x (or dout) [B, C, spatial...] against v (or dv) [B, C]. */
static bool add_channel_operands(sdt_backend *be, const char *op, const sdt_tensor *x, const sdt_tensor *v)
{
    if (!tensor_arg(be, op, "x/dout", x) || !tensor_arg(be, op, "v/dv", v)) return false;
    if (x->ndim < 2 || v->ndim != 2 || v->shape[0] != x->shape[0] || v->shape[1] != x->shape[1])
        return invalid(be, "%s: v must be [B, C] matching x [B, C, spatial...]; check the time-embedding projection.",
                       op);
    return true;
}

bool sdt_check_add_channel_forward(sdt_backend *be, sdt_tensor *x, const sdt_tensor *v)
{
    return add_channel_operands(be, "add_channel_forward", x, v);
}

bool sdt_check_add_channel_backward(sdt_backend *be, sdt_tensor *dv, const sdt_tensor *dout)
{
    return !dv || add_channel_operands(be, "add_channel_backward", dout, dv);
}

/* part (a or b, possibly NULL in backward) must be [B, C_part, spatial...] of whole [B, C, spatial...]. */
static bool concat_part_fits(const sdt_tensor *part, const sdt_tensor *whole)
{
    if (!part) return true;
    if (part->ndim != whole->ndim || part->shape[0] != whole->shape[0] || part->shape[1] > whole->shape[1])
        return false;
    for (int i = 2; i < whole->ndim; i++)
        if (part->shape[i] != whole->shape[i]) return false;
    return true;
}

/* whole (out or dout) against a and b; either part may be NULL (a skipped gradient). */
static bool concat_operands(sdt_backend *be, const char *op, const sdt_tensor *whole, const sdt_tensor *a,
                            const sdt_tensor *b)
{
    if (!tensor_arg(be, op, "out/dout", whole) || (a && !tensor_arg(be, op, "a/da", a)) ||
        (b && !tensor_arg(be, op, "b/db", b)))
        return false;
    bool ok = whole->ndim >= 2 && concat_part_fits(a, whole) && concat_part_fits(b, whole);
    if (ok && a && b) ok = a->shape[1] + b->shape[1] == whole->shape[1];
    if (!ok)
        return invalid(be,
                       "%s: a [B, Ca, ...], b [B, Cb, ...] and out [B, Ca+Cb, ...] disagree; "
                       "check the skip connection's shapes.",
                       op);
    return (!a || same_layout(be, op, "a/da", a, "out/dout", whole)) &&
           (!b || same_layout(be, op, "b/db", b, "out/dout", whole));
}

bool sdt_check_concat_channels_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *a, const sdt_tensor *b)
{
    const char *op = "concat_channels_forward";
    if (!a || !b) return invalid(be, "%s: a and b are required; pass both tensors.", op);
    return concat_operands(be, op, out, a, b);
}

bool sdt_check_concat_channels_backward(sdt_backend *be, sdt_tensor *da, sdt_tensor *db, const sdt_tensor *dout)
{
    return (!da && !db) || concat_operands(be, "concat_channels_backward", dout, da, db);
}

/* big (out or dout) [N, C, 2H, 2W] against small (x or dx) [N, C, H, W]. */
static bool upsample_operands(sdt_backend *be, const char *op, const sdt_tensor *big, const sdt_tensor *small)
{
    if (!tensor_arg(be, op, "out/dout", big) || !tensor_arg(be, op, "x/dx", small)) return false;
    if (small->ndim != 4 || big->ndim != 4 || big->shape[0] != small->shape[0] || big->shape[1] != small->shape[1] ||
        big->shape[2] != 2 * small->shape[2] || big->shape[3] != 2 * small->shape[3])
        return invalid(be, "%s: out must be [N, C, 2H, 2W] for x [N, C, H, W]; check the Upsample block's shapes.", op);
    return same_layout(be, op, "x/dx", small, "out/dout", big);
}

bool sdt_check_upsample_nearest2x_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x)
{
    return upsample_operands(be, "upsample_nearest2x_forward", out, x);
}

bool sdt_check_upsample_nearest2x_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout)
{
    return !dx || upsample_operands(be, "upsample_nearest2x_backward", dout, dx);
}

bool sdt_check_dropout_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mask, const sdt_tensor *x, float p,
                               uint64_t seed)
{
    const char *op = "dropout_forward";
    (void)seed;
    if (!same_numel(be, op, "out", out, "x", x) || !same_numel(be, op, "mask", mask, "x", x) ||
        !f32_arg(be, op, "mask", mask))
        return false;
    if (!(p >= 0.0f && p <= 1.0f))
        return invalid(be, "%s: p = %g is outside [0, 1]; pass a probability.", op, (double)p);
    return true;
}

bool sdt_check_dropout_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *mask)
{
    const char *op = "dropout_backward";
    if (!dx) return true;
    return same_numel(be, op, "dx", dx, "dout", dout) && same_numel(be, op, "mask", mask, "dout", dout);
}

/* ---- diffusion-specific ---- */

bool sdt_check_timestep_embedding(sdt_backend *be, sdt_tensor *out, const sdt_tensor *t, bool flip_sin_to_cos,
                                  float downscale_freq_shift, float max_period)
{
    const char *op = "timestep_embedding";
    (void)flip_sin_to_cos;
    if (!tensor_arg(be, op, "out", out) || !tensor_arg(be, op, "t", t)) return false;
    if (out->ndim != 2 || out->shape[0] != sdt_tensor_numel(t))
        return invalid(be, "%s: out must be [B, dim] for t [B]; check the embedding shape.", op);
    const int64_t half = out->shape[1] / 2;
    if (half > 0 && (double)half == (double)downscale_freq_shift)
        return invalid(be, "%s: downscale_freq_shift equals dim/2, dividing by zero; use 0 or 1.", op);
    if (!(max_period > 0.0f))
        return invalid(be, "%s: max_period = %g must be positive; SD uses 10000.", op, (double)max_period);
    return true;
}

static bool mse_operands(sdt_backend *be, const char *op, const sdt_tensor *pred, const sdt_tensor *target,
                         const sdt_tensor *weight)
{
    return same_numel(be, op, "pred", pred, "target", target) &&
           (!weight || same_numel(be, op, "weight", weight, "pred", pred));
}

bool sdt_check_mse_loss_forward(sdt_backend *be, double *loss, const sdt_tensor *pred, const sdt_tensor *target,
                                const sdt_tensor *weight)
{
    const char *op = "mse_loss_forward";
    (void)loss;
    if (!mse_operands(be, op, pred, target, weight)) return false;
    if (sdt_tensor_numel(pred) == 0) return invalid(be, "%s: pred is empty; the mean of nothing is undefined.", op);
    return true;
}

bool sdt_check_mse_loss_backward(sdt_backend *be, sdt_tensor *dpred, float dloss, const sdt_tensor *pred,
                                 const sdt_tensor *target, const sdt_tensor *weight)
{
    const char *op = "mse_loss_backward";
    (void)dloss;
    if (!dpred) return true;
    return mse_operands(be, op, pred, target, weight) && same_numel(be, op, "dpred", dpred, "pred", pred);
}

static bool robust_kind_delta(sdt_backend *be, const char *op, sdt_robust_loss kind, float delta)
{
    if ((unsigned)kind >= SDT_ROBUST_LOSS_COUNT)
        return invalid(
            be, "%s: kind %d is not a robust loss; use SDT_ROBUST_LOSS_L1 or SDT_ROBUST_LOSS_HUBER (L2 is mse_loss).",
            op, (int)kind);
    if (kind == SDT_ROBUST_LOSS_HUBER && !(delta > 0.0f && isfinite(delta)))
        return invalid(be, "%s: the Huber delta %g must be positive and finite; the default is 1.", op, (double)delta);
    return true;
}

bool sdt_check_robust_loss_forward(sdt_backend *be, double *loss, const sdt_tensor *pred, const sdt_tensor *target,
                                   const sdt_tensor *weight, sdt_robust_loss kind, float delta)
{
    const char *op = "robust_loss_forward";
    (void)loss;
    if (!robust_kind_delta(be, op, kind, delta) || !mse_operands(be, op, pred, target, weight)) return false;
    if (sdt_tensor_numel(pred) == 0) return invalid(be, "%s: pred is empty; the mean of nothing is undefined.", op);
    return true;
}

bool sdt_check_robust_loss_backward(sdt_backend *be, sdt_tensor *dpred, float dloss, const sdt_tensor *pred,
                                    const sdt_tensor *target, const sdt_tensor *weight, sdt_robust_loss kind,
                                    float delta)
{
    const char *op = "robust_loss_backward";
    (void)dloss;
    if (!dpred) return true;
    return robust_kind_delta(be, op, kind, delta) && mse_operands(be, op, pred, target, weight) &&
           same_numel(be, op, "dpred", dpred, "pred", pred);
}

/* ---- optimisation ---- */

bool sdt_check_sum_squares(sdt_backend *be, double *sumsq, const sdt_tensor *const *tensors, int count)
{
    (void)sumsq;
    for (int k = 0; k < count; k++)
        if (tensors[k] && !tensor_arg(be, "sum_squares", "tensors[k]", tensors[k])) return false;
    return true;
}

bool sdt_check_unscale_check(sdt_backend *be, sdt_tensor *const *grads, int count, float inv_scale, bool *found_inf)
{
    (void)inv_scale;
    (void)found_inf;
    for (int k = 0; k < count; k++)
        if (grads[k] && !tensor_arg(be, "unscale_check", "grads[k]", grads[k])) return false;
    return true;
}

bool sdt_check_adamw_update(sdt_backend *be, sdt_tensor *param, const sdt_tensor *grad, sdt_tensor *m, sdt_tensor *v,
                            float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step,
                            float grad_scale)
{
    const char *op = "adamw_update";
    (void)lr, (void)beta1, (void)beta2, (void)eps, (void)weight_decay, (void)grad_scale;
    if (!f32_arg(be, op, "param", param) || !f32_arg(be, op, "m", m) || !f32_arg(be, op, "v", v) ||
        !same_numel(be, op, "grad", grad, "param", param) || !same_numel(be, op, "m", m, "param", param) ||
        !same_numel(be, op, "v", v, "param", param))
        return false;
    if (step < 1)
        return invalid(be, "%s: step = %lld; bias correction needs step >= 1 (count from 1).", op, (long long)step);
    return true;
}
