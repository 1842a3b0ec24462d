/* optimizer.c - AdamW over fp32 master parameters (see optimizer.h). */
#include "train/optimizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OPT_NAME_MAX 64

typedef struct opt_param {
    char name[OPT_NAME_MAX];
    sdt_tensor *param;
    sdt_tensor *grad;
    sdt_tensor m, v; /* AdamW moments, owned here; zero until the first step */
    bool trainable;
} opt_param;

struct sdt_optimizer {
    sdt_backend *be;
    char name[OPT_NAME_MAX];
    sdt_adamw_hparams hp;
    opt_param *params;
    int count, capacity;
    sdt_tensor **grads; /* trainable grads, for the fused backend ops */
    int grad_count;
    int64_t step_count;
    int backward_count;  /* backward passes since the last step (or zero_grad) */
    bool grads_scaled;   /* the grads still carry a loss scale */
    bool grads_stale;    /* a step used these grads and they were not zeroed since */
    bool added_to_stale; /* a backward accumulated onto such used grads */
    const void *owner;   /* the scaler that scales this optimizer, if any */
};

sdt_adamw_hparams sdt_adamw_hparams_torch_default(void)
{
    sdt_adamw_hparams hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f};
    return hp;
}

sdt_adamw_hparams sdt_adamw_hparams_textual_inversion(float lr)
{
    sdt_adamw_hparams hp = sdt_adamw_hparams_torch_default();
    hp.lr = lr;
    hp.weight_decay = 0.0f;
    return hp;
}

static sdt_core_status check_hparams(const char *name, const sdt_adamw_hparams *hp, sdt_error *error)
{
    if (!(hp->lr >= 0.0f) || !isfinite(hp->lr))
        return core_fail(error, SDT_CORE_INVALID_CONFIG, "optimizer '%s': lr %g is invalid; use a finite lr >= 0.",
                         name, hp->lr);
    if (!(hp->beta1 >= 0.0f && hp->beta1 < 1.0f) || !(hp->beta2 >= 0.0f && hp->beta2 < 1.0f))
        return core_fail(error, SDT_CORE_INVALID_CONFIG,
                         "optimizer '%s': betas (%g, %g) are invalid; each beta must be in [0, 1).", name, hp->beta1,
                         hp->beta2);
    if (!(hp->eps >= 0.0f) || !isfinite(hp->eps))
        return core_fail(error, SDT_CORE_INVALID_CONFIG,
                         "optimizer '%s': eps %g is invalid; use a finite eps >= 0 (1e-8).", name, hp->eps);
    if (!(hp->weight_decay >= 0.0f) || !isfinite(hp->weight_decay))
        return core_fail(error, SDT_CORE_INVALID_CONFIG,
                         "optimizer '%s': weight_decay %g is invalid; use a finite value >= 0.", name,
                         hp->weight_decay);
    return SDT_CORE_OK;
}

sdt_optimizer *sdt_optimizer_create(sdt_backend *be, const char *name, const sdt_adamw_hparams *hp, sdt_error *error)
{
    if (!be || !name || !*name || !hp) {
        core_fail(error, SDT_CORE_INVALID_ARGUMENT,
                  "sdt_optimizer_create: backend, a non-empty name and hyper-parameters are required.");
        return NULL;
    }
    if (check_hparams(name, hp, error) != SDT_CORE_OK) return NULL;
    sdt_optimizer *opt = calloc(1, sizeof *opt);
    if (!opt) {
        core_fail(error, SDT_CORE_NO_MEMORY, "optimizer '%s': out of host memory.", name);
        return NULL;
    }
    opt->be = be;
    snprintf(opt->name, sizeof opt->name, "%s", name);
    opt->hp = *hp;
    return opt;
}

void sdt_optimizer_destroy(sdt_optimizer *opt)
{
    if (!opt) return;
    for (int i = 0; i < opt->count; i++) {
        if (opt->params[i].m.data) opt->be->free(opt->be, opt->params[i].m.data);
        if (opt->params[i].v.data) opt->be->free(opt->be, opt->params[i].v.data);
    }
    free(opt->params);
    free(opt->grads);
    free(opt);
}

const char *sdt_optimizer_name(const sdt_optimizer *opt)
{
    return opt->name;
}
int sdt_optimizer_param_count(const sdt_optimizer *opt)
{
    return opt->count;
}
int sdt_optimizer_backward_count(const sdt_optimizer *opt)
{
    return opt->backward_count;
}
bool sdt_optimizer_grads_not_zeroed(const sdt_optimizer *opt)
{
    return opt->added_to_stale;
}
void sdt_optimizer_set_lr(sdt_optimizer *opt, float lr)
{
    opt->hp.lr = lr;
}
int64_t sdt_optimizer_step_count(const sdt_optimizer *opt)
{
    return opt->step_count;
}
void sdt_optimizer_set_step_count(sdt_optimizer *opt, int64_t steps)
{
    opt->step_count = steps;
}
const void *sdt_optimizer_owner(const sdt_optimizer *opt)
{
    return opt->owner;
}
void sdt_optimizer_set_owner(sdt_optimizer *opt, const void *owner)
{
    opt->owner = owner;
}

static bool ranges_overlap(const sdt_tensor *a, const sdt_tensor *b)
{
    const char *pa = a->data, *pb = b->data;
    return pa < pb + sdt_tensor_nbytes(b) && pb < pa + sdt_tensor_nbytes(a);
}

static const opt_param *find_overlapping(const sdt_optimizer *opt, const sdt_tensor *t)
{
    for (int i = 0; i < opt->count; i++)
        if (ranges_overlap(opt->params[i].param, t)) return &opt->params[i];
    return NULL;
}

const char *sdt_optimizer_find_shared_param(const sdt_optimizer *a, const sdt_optimizer *b)
{
    for (int i = 0; i < a->count; i++)
        if (find_overlapping(b, a->params[i].param)) return a->params[i].name;
    return NULL;
}

/* A master weight or grad in 16 bits is the "Attempting to unscale FP16 gradients" case. */
static sdt_core_status check_master_dtype(const sdt_optimizer *opt, const char *name, const char *what,
                                          const sdt_tensor *t, sdt_error *error)
{
    if (t->dtype == SDT_F32) return SDT_CORE_OK;
    return core_fail(
        error, SDT_CORE_FP16_MASTER,
        "optimizer '%s': parameter '%s' has a %s %s, but master weights, their gradients and the "
        "optimizer state must be fp32; keep the trainable copy in fp32 and use fp16/bf16 only for compute.",
        opt->name, name, sdt_dtype_name(t->dtype), what);
}

static sdt_core_status check_new_param(const sdt_optimizer *opt, const char *name, const sdt_tensor *param,
                                       const sdt_tensor *grad, bool trainable, sdt_error *error)
{
    if (!name || !*name || !param || !param->data || (trainable && (!grad || !grad->data)))
        return core_fail(error, SDT_CORE_INVALID_ARGUMENT,
                         "optimizer '%s': a parameter needs a name, a tensor and (when trainable) a gradient tensor.",
                         opt->name);
    sdt_core_status st = check_master_dtype(opt, name, "master weight", param, error);
    if (st == SDT_CORE_OK && grad) st = check_master_dtype(opt, name, "gradient", grad, error);
    if (st != SDT_CORE_OK) return st;
    if (grad && !sdt_tensor_same_shape(param, grad))
        return core_fail(
            error, SDT_CORE_INVALID_ARGUMENT,
            "optimizer '%s': parameter '%s' and its gradient have different shapes; give the gradient the parameter's shape.",
            opt->name, name);
    if (param->device != opt->be->device || (grad && grad->device != opt->be->device))
        return core_fail(
            error, SDT_CORE_INVALID_ARGUMENT,
            "optimizer '%s': parameter '%s' is not on the %s backend's device; move it there before registering it.",
            opt->name, name, opt->be->name);
    const opt_param *dup = find_overlapping(opt, param);
    if (dup)
        return core_fail(
            error, SDT_CORE_DUPLICATE_PARAM,
            "optimizer '%s': parameter '%s' is already registered (as '%s'); register each parameter once, "
            "or it would be updated twice per step.",
            opt->name, name, dup->name);
    return SDT_CORE_OK;
}

static bool alloc_moment(sdt_backend *be, sdt_tensor *dst, const sdt_tensor *like)
{
    *dst = *like;
    dst->dtype = SDT_F32;
    dst->data = be->alloc(be, sdt_tensor_nbytes(dst));
    return dst->data && be->zero(be, dst) == 0;
}

static bool grow_params(sdt_optimizer *opt)
{
    if (opt->count < opt->capacity) return true;
    int cap = opt->capacity ? opt->capacity * 2 : 8;
    opt_param *p = realloc(opt->params, (size_t)cap * sizeof *p);
    if (!p) return false;
    opt->params = p;
    sdt_tensor **g = realloc(opt->grads, (size_t)cap * sizeof *g);
    if (!g) return false;
    opt->grads = g;
    opt->capacity = cap;
    return true;
}

sdt_core_status sdt_optimizer_add_param(sdt_optimizer *opt, const char *name, sdt_tensor *param, sdt_tensor *grad,
                                        bool trainable, sdt_error *error)
{
    sdt_core_status st = check_new_param(opt, name, param, grad, trainable, error);
    if (st != SDT_CORE_OK) return st;
    if (!grow_params(opt))
        return core_fail(error, SDT_CORE_NO_MEMORY, "optimizer '%s': out of host memory.", opt->name);
    opt_param *p = &opt->params[opt->count];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->param = param;
    p->grad = grad;
    p->trainable = trainable;
    if (trainable) {
        if (!alloc_moment(opt->be, &p->m, param) || !alloc_moment(opt->be, &p->v, param)) {
            if (p->m.data) opt->be->free(opt->be, p->m.data);
            if (p->v.data) opt->be->free(opt->be, p->v.data);
            return core_fail(error, SDT_CORE_NO_MEMORY,
                             "optimizer '%s': no device memory for the AdamW state of '%s' (%s).", opt->name, name,
                             opt->be->error.message);
        }
        opt->grads[opt->grad_count++] = grad;
    }
    opt->count++;
    return SDT_CORE_OK;
}

sdt_core_status sdt_optimizer_prepare(const sdt_optimizer *opt, sdt_error *error)
{
    if (opt->grad_count > 0) return SDT_CORE_OK;
    return core_fail(error, SDT_CORE_NO_TRAINABLE_PARAMS,
                     "optimizer '%s' has no trainable parameter (%d registered, all frozen): nothing would train; "
                     "make the embedding or hypernetwork layers trainable (not frozen, not empty) before starting.",
                     opt->name, opt->count);
}

static sdt_core_status backend_fail(const sdt_optimizer *opt, const char *op, sdt_error *error)
{
    sdt_core_status status = core_fail(error, SDT_CORE_BACKEND_FAILED, "optimizer '%s': the %s backend's %s failed: %s",
                                       opt->name, opt->be->name, op, opt->be->error.message);
    if (error)
        error->code = opt->be->error.code; /* the backend decided the kind: out of memory, a bad argument, the device */
    return status;
}

sdt_core_status sdt_optimizer_zero_grad(sdt_optimizer *opt, sdt_error *error)
{
    for (int i = 0; i < opt->grad_count; i++)
        if (opt->be->zero(opt->be, opt->grads[i]) != 0) return backend_fail(opt, "zero", error);
    opt->backward_count = 0;
    opt->grads_scaled = false;
    opt->grads_stale = false;
    opt->added_to_stale = false;
    return SDT_CORE_OK;
}

void sdt_optimizer_note_backward(sdt_optimizer *opt, float loss_scale)
{
    bool scaled = loss_scale != 1.0f; /* a disabled scaler seeds backward with 1 */
    opt->backward_count++;
    if (opt->grads_stale) opt->added_to_stale = true;
    /* Once any pass added scaled values, the sum is scaled until unscaled. */
    if (scaled) opt->grads_scaled = true;
}

sdt_core_status sdt_optimizer_unscale_grads(sdt_optimizer *opt, float inv_scale, bool *found_inf, sdt_error *error)
{
    bool found = false;
    if (opt->grad_count > 0 && opt->be->unscale_check(opt->be, opt->grads, opt->grad_count, inv_scale, &found) != 0)
        return backend_fail(opt, "unscale_check", error);
    *found_inf = *found_inf || found;
    opt->grads_scaled = false;
    return SDT_CORE_OK;
}

static sdt_core_status require_unscaled(const sdt_optimizer *opt, const char *what, sdt_error *error)
{
    if (!opt->grads_scaled) return SDT_CORE_OK;
    return core_fail(error, SDT_CORE_GRADS_STILL_SCALED,
                     "optimizer '%s': %s on gradients that still carry the loss scale; unscale them first "
                     "(sdt_scaler_unscale) so thresholds and updates see the true gradients.",
                     opt->name, what);
}

sdt_core_status sdt_optimizer_grad_norm(sdt_optimizer *opt, double *norm, sdt_error *error)
{
    double sumsq = 0.0;
    if (opt->grad_count > 0 &&
        opt->be->sum_squares(opt->be, &sumsq, (const sdt_tensor *const *)opt->grads, opt->grad_count) != 0)
        return backend_fail(opt, "sum_squares", error);
    *norm = sqrt(sumsq);
    return SDT_CORE_OK;
}

sdt_core_status sdt_optimizer_clip_grad_norm(sdt_optimizer *opt, double max_norm, bool error_if_nonfinite,
                                             double *total_norm, sdt_error *error)
{
    sdt_core_status st = require_unscaled(opt, "clip_grad_norm", error);
    if (st != SDT_CORE_OK) return st;
    if (!(max_norm > 0.0) || !isfinite(max_norm))
        return core_fail(error, SDT_CORE_INVALID_ARGUMENT,
                         "optimizer '%s': clip_grad_norm max_norm %g is invalid; use a finite value > 0.", opt->name,
                         max_norm);
    double norm = 0.0;
    st = sdt_optimizer_grad_norm(opt, &norm, error);
    if (st != SDT_CORE_OK) return st;
    if (total_norm) *total_norm = norm;
    if (error_if_nonfinite && !isfinite(norm))
        return core_fail(error, SDT_CORE_NONFINITE_NORM,
                         "optimizer '%s': the total gradient norm is non-finite, so it cannot be clipped; skip this "
                         "step or pass error_if_nonfinite = false.",
                         opt->name);
    /* torch computes the norm and coefficient in fp32 and multiplies by the clamped
     * coefficient; coef >= 1 is a bitwise no-op so it is skipped, NaN is not. */
    float coef = (float)max_norm / ((float)norm + 1e-6f);
    if (!(coef < 1.0f) && !isnan(coef)) return SDT_CORE_OK;
    for (int i = 0; i < opt->grad_count; i++)
        if (opt->be->scale(opt->be, opt->grads[i], coef) != 0) return backend_fail(opt, "scale", error);
    return SDT_CORE_OK;
}

/* The table has no clamp op; value clipping is rare and grads of embeddings and
 * hypernetworks are small, so it round-trips through host memory. */
static sdt_core_status clamp_tensor(sdt_optimizer *opt, sdt_tensor *g, float limit, sdt_error *error)
{
    int64_t count = sdt_tensor_numel(g);
    float *host = malloc((size_t)count * sizeof *host + 1);
    if (!host)
        return core_fail(error, SDT_CORE_NO_MEMORY, "optimizer '%s': out of host memory for clipping.", opt->name);
    sdt_core_status st = SDT_CORE_OK;
    if (opt->be->download(opt->be, host, g->data, sdt_tensor_nbytes(g)) != 0) {
        st = backend_fail(opt, "download", error);
    } else {
        /* torch.clamp_: NaN stays NaN. */
        for (int64_t i = 0; i < count; i++) host[i] = host[i] > limit ? limit : (host[i] < -limit ? -limit : host[i]);
        if (opt->be->upload(opt->be, g->data, host, sdt_tensor_nbytes(g)) != 0) st = backend_fail(opt, "upload", error);
    }
    free(host);
    return st;
}

sdt_core_status sdt_optimizer_clip_grad_value(sdt_optimizer *opt, float clip_value, sdt_error *error)
{
    sdt_core_status st = require_unscaled(opt, "clip_grad_value", error);
    if (st != SDT_CORE_OK) return st;
    if (!(clip_value > 0.0f) || !isfinite(clip_value))
        return core_fail(error, SDT_CORE_INVALID_ARGUMENT,
                         "optimizer '%s': clip_grad_value %g is invalid; use a finite value > 0.", opt->name,
                         clip_value);
    for (int i = 0; i < opt->grad_count && st == SDT_CORE_OK; i++)
        st = clamp_tensor(opt, opt->grads[i], clip_value, error);
    return st;
}

sdt_core_status sdt_optimizer_require_gradients(const sdt_optimizer *opt, sdt_error *error)
{
    sdt_core_status st = sdt_optimizer_prepare(opt, error);
    if (st != SDT_CORE_OK) return st;
    if (opt->backward_count == 0)
        return core_fail(
            error, SDT_CORE_NO_BACKWARD,
            "optimizer '%s': step with no gradients: no backward pass reached its %d trainable parameter(s) "
            "since the last step or zero_grad (%d frozen); run backward on the loss before stepping, and check "
            "that the loss actually depends on these parameters.",
            opt->name, opt->grad_count, opt->count - opt->grad_count);
    return SDT_CORE_OK;
}

/* Shared by the scaler: backward ran, but did any gradient arrive? */
static sdt_core_status require_gradient_flow(sdt_optimizer *opt, sdt_error *error)
{
    double norm = 0.0;
    sdt_core_status st = sdt_optimizer_grad_norm(opt, &norm, error);
    if (st != SDT_CORE_OK || norm != 0.0) return st;
    return core_fail(
        error, SDT_CORE_NO_GRADIENT_FLOW,
        "optimizer '%s': backward ran but every gradient of its %d trainable parameter(s) is exactly zero, "
        "so nothing would train; make sure the trained token appears in every prompt (the template contains "
        "[name]) and is not truncated out of the 77-token window by a long caption.",
        opt->name, opt->grad_count);
}

sdt_core_status sdt_optimizer_step(sdt_optimizer *opt, sdt_error *error)
{
    sdt_core_status st = sdt_optimizer_require_gradients(opt, error);
    if (st == SDT_CORE_OK) st = require_unscaled(opt, "step", error);
    if (st == SDT_CORE_OK) st = require_gradient_flow(opt, error);
    if (st != SDT_CORE_OK) return st;
    int64_t step = opt->step_count + 1;
    for (int i = 0; i < opt->count; i++) {
        opt_param *p = &opt->params[i];
        if (!p->trainable) continue;
        if (opt->be->adamw_update(opt->be, p->param, p->grad, &p->m, &p->v, opt->hp.lr, opt->hp.beta1, opt->hp.beta2,
                                  opt->hp.eps, opt->hp.weight_decay, step, 1.0f) != 0)
            return backend_fail(opt, "adamw_update", error);
    }
    opt->step_count = step;
    sdt_optimizer_note_skipped_step(opt);
    return SDT_CORE_OK;
}

/* Whether stepped or skipped, these grads are used up: the next step needs a new backward. */
void sdt_optimizer_note_skipped_step(sdt_optimizer *opt)
{
    opt->grads_stale = true;
    opt->added_to_stale = false;
    opt->backward_count = 0;
}

bool sdt_optimizer_param_views(sdt_optimizer *opt, int i, const char **name, sdt_tensor **param, sdt_tensor **grad,
                               sdt_tensor **m, sdt_tensor **v)
{
    if (i < 0 || i >= opt->count) return false;
    opt_param *p = &opt->params[i];
    if (name) *name = p->name;
    if (param) *param = p->param;
    if (grad) *grad = p->grad;
    if (m) *m = p->trainable ? &p->m : NULL;
    if (v) *v = p->trainable ? &p->v : NULL;
    return true;
}
