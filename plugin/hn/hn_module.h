/* hn_module.h - a hypernetwork in memory: for each width a pair of MLPs (K and V),
 * their parameters on a backend, and one module's forward and backward.
 *
 * Parameters are f32 on the backend's device, in A1111's order (widths in config
 * order, K then V, Sequential positions ascending, weight before bias), each named
 * by its A1111 state-dict path "<width>.<0 for K, 1 for V>.linear.<position>.<weight|bias>"
 * - the .safetensors twin's tensor names (hn_file.h).
 *
 * A module computes y = x + f(x) * strength on rows of x [..., width]. With an f32 x,
 * f runs in f32. With an f16/bf16 x (the 16-bit step), f runs as A1111's autocast: its
 * GEMMs take 16-bit operands (16-bit copies of the weights: made per call, or once per UNet
 * pass by the caller, sdt_hn_module_copy_weights16) with f32
 * accumulation, activations and the gradients between layers stay in x's dtype,
 * LayerNorm statistics, master weights and weight gradients stay f32. Training turns dropout on, its masks drawn from a
 * counter-based key (sdt_hn_run.dropout_seed) so the backward, a checkpointing
 * recompute and a resumed run all see the same masks. The backward recomputes the
 * forward from x in its workspace instead of keeping per-site activations alive.
 */
#ifndef SDT_HN_MODULE_H
#define SDT_HN_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hn/hn_config.h"
#include "ops.h"
#include "unet.h"

#define SDT_HN_PARAM_NAME_MAX 48
#define SDT_HN_CHECKPOINT_MAX 256
#define SDT_HN_LAYERNORM_EPS 1e-5f /* torch.nn.LayerNorm default */

typedef struct sdt_hn_param {
    char name[SDT_HN_PARAM_NAME_MAX]; /* "768.0.linear.0.weight" */
    int width;
    sdt_unet_kv kind;
    int position; /* Sequential position (A1111's state-dict index) */
    bool is_norm; /* a LayerNorm's weight/bias, not a Linear's */
    bool is_bias;
    sdt_tensor value; /* f32 on the device: [out, in] weights, [out] biases and norms */
    sdt_tensor grad;  /* same shape, f32; data NULL until sdt_hn_enable_grads */
} sdt_hn_param;

/* What A1111 keeps beside the weights. */
typedef struct sdt_hn_info {
    int64_t step;                                   /* optimizer steps taken */
    char sd_checkpoint[SDT_HN_CHECKPOINT_MAX];      /* short hash of the model trained on, "" = None */
    char sd_checkpoint_name[SDT_HN_CHECKPOINT_MAX]; /* its name, "" = None */
} sdt_hn_info;

typedef struct sdt_hn sdt_hn;

/* A new hypernetwork: checks the config as "Create" does (sdt_hn_config_validate with
 * creating), allocates on be and initialises every Linear per c->init and every
 * LayerNorm with A1111's Normal init (weight ~ N(0, 0.01), bias 0), drawn from
 * init_seed (the same seed gives the same weights on every backend). */
sdt_hn *sdt_hn_create(const sdt_hn_config *c, sdt_backend *be, uint64_t init_seed, sdt_error *error);
/* Zeroed parameters of a config that passed sdt_hn_config_validate (files fill them). */
sdt_hn *sdt_hn_alloc(const sdt_hn_config *c, sdt_backend *be, sdt_error *error);
void sdt_hn_free(sdt_hn *hn);

const sdt_hn_config *sdt_hn_get_config(const sdt_hn *hn);
sdt_backend *sdt_hn_backend(const sdt_hn *hn);
sdt_hn_info *sdt_hn_get_info(sdt_hn *hn);
const sdt_hn_info *sdt_hn_get_info_const(const sdt_hn *hn);

int sdt_hn_param_count(const sdt_hn *hn);
sdt_hn_param *sdt_hn_param_at(sdt_hn *hn, int index);
const sdt_hn_param *sdt_hn_param_at_const(const sdt_hn *hn, int index);
/* NULL when no parameter has this name. */
sdt_hn_param *sdt_hn_param_find(sdt_hn *hn, const char *name);
int64_t sdt_hn_param_numel(const sdt_hn *hn);

/* Gradients: allocated zeroed on first call; zeroing again is sdt_hn_zero_grads. */
bool sdt_hn_enable_grads(sdt_hn *hn, sdt_error *error);
bool sdt_hn_zero_grads(sdt_hn *hn, sdt_error *error);

/* Host copies of every value (f32, parameter order, sdt_hn_param_numel floats) and back. */
bool sdt_hn_download(const sdt_hn *hn, float *host, sdt_error *error);
bool sdt_hn_upload(sdt_hn *hn, const float *host, sdt_error *error);

/* ---- one module ---- */
typedef struct sdt_hn_run {
    bool training;         /* dropout on (A1111's train mode) */
    uint64_t dropout_seed; /* the masks' key; derive one per call site and step */
    const void *weights16; /* NULL: a 16-bit call copies its weights into the workspace; else a block
                            * of sdt_hn_weights16_bytes that sdt_hn_module_copy_weights16 filled for
                            * this module in the call's dtype, with the master weights as they are now */
} sdt_hn_run;

/* True when a training call of some module draws dropout masks (a layer with p > 0): its output
 * then depends on the call's key, so two calls on the same input differ. */
bool sdt_hn_has_dropout(const sdt_hn *hn);
/* The module (width, kind)'s index in 0 .. 2 x widths - 1, or -1 when the hypernetwork has none. */
int sdt_hn_module_index(const sdt_hn *hn, int width, sdt_unet_kv kind);
/* Device bytes of 16-bit copies of every Linear weight of every module (each module at its own
 * place in the block), and the copy of one module's into such a block (dtype F16 or BF16). */
size_t sdt_hn_weights16_bytes(const sdt_hn *hn);
bool sdt_hn_module_copy_weights16(const sdt_hn *hn, int width, sdt_unet_kv kind, sdt_dtype dtype, void *block,
                                  sdt_error *error);

/* The key of the dropout masks after Linear `layer` in one module call: the mask is
 * dropout_forward's (kernels/ops.h) for this seed, so tests and tools can redraw it. */
uint64_t sdt_hn_dropout_seed(const sdt_hn_run *run, int layer);
/* True when the hypernetwork has modules for this width. */
bool sdt_hn_has_width(const sdt_hn *hn, int width);
/* Device bytes one module call over `rows` rows of this width needs as workspace
 * (either compute dtype). */
size_t sdt_hn_module_workspace_bytes(const sdt_hn_config *c, int width, int64_t rows);
/* out = in + f(in) * strength for in, out [..., width] (out may be in's storage only
 * if it is not also needed by a later backward). work: device memory of
 * sdt_hn_module_workspace_bytes. Returns false + a sentence. */
bool sdt_hn_module_forward(const sdt_hn *hn, int width, sdt_unet_kv kind, const sdt_hn_run *run, float strength,
                           const sdt_tensor *in, sdt_tensor *out, void *work, sdt_error *error);
/* d_in += d_out + strength * J_f(in)^T d_out, and (when grads are enabled and
 * with_weight_grads) each weight's gradient += its share. Recomputes the forward
 * of the same run (same masks) in work first. */
bool sdt_hn_module_backward(sdt_hn *hn, int width, sdt_unet_kv kind, const sdt_hn_run *run, float strength,
                            const sdt_tensor *in, const sdt_tensor *d_out, sdt_tensor *d_in, bool with_weight_grads,
                            void *work, sdt_error *error);

#endif
