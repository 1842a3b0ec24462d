/* sd_pass.c - see sd_pass.h. */
#include "train/sd_pass.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/prompt.h"
#include "train/sd_cond.h"

typedef struct pass_tensors {
    sdt_tensor noisy, target, weight, timesteps;
} pass_tensors;

bool sdt_pass_shape_equal(const sdt_pass_shape *a, const sdt_pass_shape *b)
{
    return a->batch == b->batch && a->c == b->c && a->h == b->h && a->w == b->w && a->chunks == b->chunks &&
           a->in_c == b->in_c && a->weighted == b->weighted && a->t5_len == b->t5_len;
}

static pass_tensors pass_alloc(sdt_arena *a, sdt_dtype act, const sdt_pass_shape *in)
{
    int64_t lshape[4] = {in->batch, in->c, in->h, in->w}, bshape[1] = {in->batch};
    int64_t ishape[4] = {in->batch, in->in_c, in->h, in->w};
    pass_tensors t;
    memset(&t, 0, sizeof t);
    t.noisy = sdt_arena_tensor(a, act, 4, ishape);
    t.target = sdt_arena_tensor(a, SDT_F32, 4, lshape);
    if (in->weighted) t.weight = sdt_arena_tensor(a, SDT_F32, 4, lshape);
    t.timesteps = sdt_arena_tensor(a, SDT_F32, 1, bshape);
    return t;
}

/* Host float data into a device tensor of any float dtype. */
static int upload_f32(sdt_backend *be, sdt_tensor *t, const float *src)
{
    int64_t n = sdt_tensor_numel(t);
    if (t->dtype == SDT_F32) return be->upload(be, t->data, src, (size_t)n * sizeof(float));
    void *tmp = malloc(sdt_tensor_nbytes(t));
    if (!tmp) return -1;
    sdt_store_f32(src, tmp, t->dtype, n);
    int rc = be->upload(be, t->data, tmp, sdt_tensor_nbytes(t));
    free(tmp);
    return rc;
}

static bool upload_inputs(sdt_backend *be, pass_tensors *t, const sdt_pass_inputs *in, sdt_error *error)
{
    bool ok = upload_f32(be, &t->noisy, in->noisy) == 0 && upload_f32(be, &t->target, in->target) == 0 &&
              (!in->shape.weighted || upload_f32(be, &t->weight, in->weight) == 0) &&
              upload_f32(be, &t->timesteps, in->timesteps) == 0;
    if (!ok)
        sdt_fail(error, be->error.code, "copying the batch to the %s backend failed: %s", be->name, be->error.message);
    return ok;
}

/* The loss of the pass's type: L2 is A1111's MSE op, L1 and Huber the robust-loss op. */
static sdt_robust_loss robust_kind(const sdt_pass_options *opt)
{
    return opt->loss_type == SDT_LOSS_L1 ? SDT_ROBUST_LOSS_L1 : SDT_ROBUST_LOSS_HUBER;
}

static int loss_forward(sdt_backend *be, const sdt_pass_options *opt, double *loss, const sdt_tensor *pred,
                        const sdt_tensor *target, const sdt_tensor *weight)
{
    if (opt->loss_type == SDT_LOSS_L2) return be->mse_loss_forward(be, loss, pred, target, weight);
    return be->robust_loss_forward(be, loss, pred, target, weight, robust_kind(opt), opt->huber_delta);
}

static int loss_backward(sdt_backend *be, const sdt_pass_options *opt, sdt_tensor *dpred, float dloss,
                         const sdt_tensor *pred, const sdt_tensor *target, const sdt_tensor *weight)
{
    if (opt->loss_type == SDT_LOSS_L2) return be->mse_loss_backward(be, dpred, dloss, pred, target, weight);
    return be->robust_loss_backward(be, dpred, dloss, pred, target, weight, robust_kind(opt), opt->huber_delta);
}

static bool pass_transformer_rest(sd_runtime *rt, sdt_arena *a, const sdt_pass_options *opt,
                                  const sdt_pass_trainables *tr, float dloss, bool backward, double *loss,
                                  pass_tensors *t, const sdt_tensor *weight, sdt_cond *cond, void *transformer_acts,
                                  sdt_error *error);

/* SD3's MMDiT or Flux's transformer on x_t (its input in the activation dtype) predicts the velocity (f32); backward
 * from the loss to the context and the pooled vector and on to the rows, only when rows train (nothing else in it
 * trains). */
static bool pass_transformer(sd_runtime *rt, sdt_arena *a, const sdt_pass_options *opt, const sdt_pass_inputs *in,
                             const sdt_pass_trainables *tr, float dloss, bool backward, double *loss, pass_tensors *t,
                             sdt_cond *cond, sdt_error *error)
{
    sdt_backend *be = rt->be;
    const sdt_tensor *weight = in->shape.weighted ? &t->weight : NULL;
    /* a measuring pass has no batch, only its shape: the transformer checks for timesteps all the same */
    float *no_timesteps = in->timesteps ? NULL : calloc((size_t)in->shape.batch, sizeof(float));
    if (!in->timesteps && !no_timesteps) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory");
    const float *timesteps = in->timesteps ? in->timesteps : no_timesteps;
    /* one of the two transformers' activations (each is large: only one lives on the stack) */
    bool flux = rt->model.flux != NULL;
    union {
        mmdit_acts mmdit;
        flux_acts flux;
    } *acts = malloc(sizeof *acts);
    /* Flux embeds the sigma t (its timestep 1000 t over 1000) and, dev, the distilled guidance per sample */
    float *sigmas = flux ? malloc((size_t)in->shape.batch * 2 * sizeof(float)) : NULL;
    bool forward_ok = acts && (!flux || sigmas);
    if (!forward_ok) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory");
    if (forward_ok && flux) {
        float *guidance = sigmas + in->shape.batch;
        for (int b = 0; b < in->shape.batch; b++) sigmas[b] = timesteps[b] / 1000.0f, guidance[b] = in->guidance;
        flux_inputs fi = {.latent = &t->noisy,
                          .timesteps = sigmas,
                          .guidance = guidance,
                          .context = &cond->context,
                          .pooled = sdt_cond_pooled(cond),
                          .checkpointing = opt->checkpointing,
                          .act_dtype = rt->transformer_act_dtype};
        forward_ok = flux_forward(rt->model.flux, be, a, &fi, &acts->flux, error);
    } else if (forward_ok) {
        mmdit_inputs mi = {.latent = &t->noisy,
                           .timesteps = timesteps,
                           .context = &cond->context,
                           .pooled = sdt_cond_pooled(cond),
                           .checkpointing = opt->checkpointing,
                           .act_dtype = rt->transformer_act_dtype};
        forward_ok = mmdit_forward(rt->model.mmdit, be, a, &mi, &acts->mmdit, error);
    }
    free(no_timesteps);
    free(sigmas);
    bool ok = forward_ok && pass_transformer_rest(rt, a, opt, tr, dloss, backward, loss, t, weight, cond, acts, error);
    free(acts);
    return ok;
}

/* pass_transformer's loss and way back, from the transformer's activations (flux_acts or mmdit_acts). */
static bool pass_transformer_rest(sd_runtime *rt, sdt_arena *a, const sdt_pass_options *opt,
                                  const sdt_pass_trainables *tr, float dloss, bool backward, double *loss,
                                  pass_tensors *t, const sdt_tensor *weight, sdt_cond *cond, void *transformer_acts,
                                  sdt_error *error)
{
    sdt_backend *be = rt->be;
    bool flux = rt->model.flux != NULL;
    const sdt_tensor *out = flux ? &((flux_acts *)transformer_acts)->out : &((mmdit_acts *)transformer_acts)->out;
    if (!a->measuring && loss_forward(be, opt, loss, out, &t->target, weight))
        return sdt_fail(error, be->error.code, "computing the loss failed: %s", be->error.message);
    if (!backward || !tr->drows) return true; /* only an embedding's rows train through the transformer */
    const sdt_tensor *pooled = sdt_cond_pooled(cond);
    sdt_tensor dpred = sdt_arena_tensor(a, SDT_F32, 4, out->shape);
    sdt_tensor dctx = sdt_arena_tensor(a, SDT_F32, 3, cond->context.shape);
    sdt_tensor dpool = sdt_arena_tensor(a, SDT_F32, 2, pooled->shape);
    if (!a->measuring) {
        if (!sdt_arena_fits(a)) return sdt_fail(error, a->error.code, "the loss gradient failed: %s", a->error.message);
        if (be->zero(be, &dpred) || be->zero(be, &dctx) || be->zero(be, &dpool) ||
            loss_backward(be, opt, &dpred, dloss, out, &t->target, weight))
            return sdt_fail(error, be->error.code, "the loss gradient failed: %s", be->error.message);
    }
    if (flux ? !flux_backward(rt->model.flux, be, a, transformer_acts, &dpred, &dctx, &dpool, error)
             : !mmdit_backward(rt->model.mmdit, be, a, transformer_acts, &dpred, &dctx, &dpool, error))
        return false;
    /* the encoders' backward takes its gradients in the activation dtype */
    sdt_dtype act = cond->context.dtype;
    sdt_tensor dctx_act = dctx, dpool_act = dpool;
    if (act != SDT_F32) {
        dctx_act = sdt_arena_tensor(a, act, 3, dctx.shape);
        dpool_act = sdt_arena_tensor(a, act, 2, dpool.shape);
        if (!a->measuring &&
            (!sdt_arena_fits(a) || be->convert(be, &dctx_act, &dctx) || be->convert(be, &dpool_act, &dpool)))
            return sdt_fail(error, be->error.code, "the conditioning's gradient failed: %s", be->error.message);
    }
    return sdt_cond_backward(rt, a, cond, &dctx_act, &dpool_act, tr->drows, error);
}

/* The UNet's way back from the loss to the context (and SDXL's y): the region a training pass may run as a
 * captured graph (train/step_capture.h). */
typedef struct unet_backward_region {
    sd_runtime *rt;
    sdt_arena *a;
    const sdt_pass_options *opt;
    float dloss;
    sdt_tensor *pred, *dpred, *dctx, *dy;
    const sdt_tensor *target, *weight;
    const sdt_tensor *context, *y; /* what the UNet's saved activations read (the key only) */
} unet_backward_region;

static bool unet_backward_work(void *user, sdt_error *error)
{
    unet_backward_region *r = user;
    sdt_backend *be = r->rt->be;
    if (be->zero(be, r->dpred) || be->zero(be, r->dctx) || (r->dy && be->zero(be, r->dy)) ||
        loss_backward(be, r->opt, r->dpred, r->dloss, r->pred, r->target, r->weight))
        return sdt_fail(error, be->error.code, "the loss gradient failed: %s", be->error.message);
    return sdt_unet_backward(r->rt->model.unet, be, r->a, r->dpred, r->dctx, r->dy, error);
}

/* Everything the region is recorded with: its buffers' addresses, the batch's shape, its dtype and options
 * and the host scalars its kernels take. */
static sdt_capture_key unet_backward_key(const unet_backward_region *r, const sdt_pass_shape *shape, sdt_dtype act)
{
    sdt_capture_key k;
    memset(&k, 0, sizeof k);
    k.arena_base = r->a->base;
    k.arena_capacity = r->a->capacity;
    k.arena_used = r->a->used;
    const void *t[10] = {r->rt->model.unet, r->rt->be,
                         r->pred->data,     r->dpred->data,
                         r->dctx->data,     r->dy ? r->dy->data : NULL,
                         r->target->data,   r->weight ? r->weight->data : NULL,
                         r->context->data,  r->y ? r->y->data : NULL};
    memcpy(k.tensors, t, sizeof t);
    int64_t s[8] = {shape->batch,  shape->c,    shape->h,        shape->w,
                    shape->chunks, shape->in_c, shape->weighted, shape->t5_len};
    memcpy(k.shape, s, sizeof s);
    k.dtype = (int32_t)act;
    k.flags = (r->opt->checkpointing ? 1 : 0) | (r->rt->be->deterministic ? 2 : 0) | ((int32_t)r->opt->loss_type << 2);
    k.scalars[0] = r->dloss;
    k.scalars[1] = r->opt->huber_delta;
    return k;
}

/* The whole pass on arena a; with a measuring arena nothing runs, only sizes add up
 * (in then carries only the shape). capture: the pass's captured region, or NULL (never captured). */
static bool pass_sequence(sd_runtime *rt, sdt_arena *a, sdt_step_capture *capture, const sdt_pass_options *opt,
                          const sdt_pass_inputs *in, const sdt_pass_trainables *tr, float dloss, bool backward,
                          double *loss, sdt_error *error)
{
    sdt_backend *be = rt->be;
    sd_model *m = &rt->model;
    sdt_dtype act = rt->dtype;
    pass_tensors t = pass_alloc(a, act, &in->shape);
    const sdt_tensor *weight = in->shape.weighted ? &t.weight : NULL;
    if (!a->measuring && !sdt_arena_fits(a))
        return sdt_fail(error, a->error.code,
                        "the activation arena is too small for this batch (a bug: please report): %s",
                        a->error.message);
    if (!a->measuring && !upload_inputs(be, &t, in, error)) return false;
    sdt_cond_inputs ci = {.tokens = in->tokens,
                          .batch = in->shape.batch,
                          .chunks = in->shape.chunks,
                          .end_id = in->end_id,
                          .overrides = in->overrides,
                          .n_overrides = in->n_overrides,
                          .rows = tr->rows,
                          .sizes = in->sizes,
                          .clip_skip = opt->clip_skip,
                          .act_dtype = act,
                          .anomaly_check = opt->anomaly_check,
                          .t5_tokens = in->t5_tokens,
                          .t5_len = in->shape.t5_len,
                          .t5_overrides = in->t5_overrides,
                          .n_t5_overrides = in->n_t5_overrides,
                          .trained_tables = tr->tables};
    sdt_cond cond;
    if (!sdt_cond_forward(rt, a, &ci, &cond, error)) return false;
    if (cond.sd3 || cond.flux) return pass_transformer(rt, a, opt, in, tr, dloss, backward, loss, &t, &cond, error);
    sdt_unet_options uo = sdt_unet_options_default();
    uo.act_dtype = act;
    uo.for_backward = backward;
    uo.checkpointing = opt->checkpointing;
    uo.anomaly_check = opt->anomaly_check;
    uo.hook = tr->hook;
    sdt_tensor pred;
    if (!sdt_unet_forward(m->unet, be, a, &uo, &t.noisy, &t.timesteps, &cond.context, sdt_cond_y(&cond), &pred, error))
        return false;
    if (!a->measuring && loss_forward(be, opt, loss, &pred, &t.target, weight)) {
        sdt_fail(error, be->error.code, "computing the loss failed: %s", be->error.message);
        return false;
    }
    if (!backward) return true;
    sdt_tensor dpred = sdt_arena_tensor(a, act, 4, pred.shape);
    sdt_tensor dctx = sdt_arena_tensor(a, act, 3, cond.context.shape);
    /* y's gradient only where it leads somewhere: an SDXL embedding's rows through the pooled embedding */
    bool want_dy = tr->drows && cond.sdxl;
    sdt_tensor dy = want_dy ? sdt_arena_tensor(a, act, 2, cond.y.shape) : (sdt_tensor){0};
    unet_backward_region region = {rt,        a,      opt,           dloss,
                                   &pred,     &dpred, &dctx,         want_dy ? &dy : NULL,
                                   &t.target, weight, &cond.context, sdt_cond_y(&cond)};
    if (a->measuring) {
        if (!sdt_unet_backward(m->unet, be, a, &dpred, &dctx, want_dy ? &dy : NULL, error)) return false;
    } else {
        if (!sdt_arena_fits(a)) return sdt_fail(error, a->error.code, "the loss gradient failed: %s", a->error.message);
        /* a hypernetwork's hook draws its dropout per step and anomaly mode reads values back: never captured */
        bool capturable = capture && !tr->hook && !opt->anomaly_check;
        sdt_capture_key key = unet_backward_key(&region, &in->shape, act);
        if (capturable ? !sdt_step_capture_run(capture, be, a, &key, unet_backward_work, &region, error)
                       : !unet_backward_work(&region, error))
            return false;
    }
    if (!tr->drows) return true; /* nothing in the text encoders trains: no backward into them */
    return sdt_cond_backward(rt, a, &cond, &dctx, want_dy ? &dy : NULL, tr->drows, error);
}

bool sdt_pass_measure(sd_runtime *rt, const sdt_pass_options *opt, const sdt_pass_shape *shape,
                      const sdt_pass_trainables *tr, size_t *bytes, sdt_error *error)
{
    sdt_pass_inputs in;
    memset(&in, 0, sizeof in);
    in.shape = *shape;
    /* an embedding's slot, so the text encoders' backward is measured too (a pass without one skips it) */
    static const clip_override slot = {0, 1, 0};
    static const t5_override t5_slot = {0, 0, 0};
    if (tr->rows) in.overrides = &slot, in.n_overrides = 1;
    if (tr->rows && shape->t5_len > 0) in.t5_overrides = &t5_slot, in.n_t5_overrides = 1;
    sdt_arena a;
    sdt_arena_init_measure(&a, rt->be);
    double loss = 0;
    if (!pass_sequence(rt, &a, NULL, opt, &in, tr, 1.0f, true, &loss, error)) return false;
    *bytes = a.peak;
    return true;
}

bool sdt_pass_run(sd_runtime *rt, work_arena *wa, const sdt_pass_options *opt, const sdt_pass_inputs *in,
                  const sdt_pass_trainables *tr, float dloss, bool backward, double *loss, sdt_error *error)
{
    sdt_arena_rewind(&wa->arena, 0);
    sdt_arena_clear_error(&wa->arena);
    return pass_sequence(rt, &wa->arena, backward ? &wa->capture : NULL, opt, in, tr, dloss, backward, loss, error);
}
