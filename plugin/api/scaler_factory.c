/* scaler_factory.c - "sdtrain.scaler/1": the plugin's loss scaler for hosts that run their own
 * training loop over float32 gradient buffers in host memory.
 *
 * It wraps the core scaler (train/scaler.h) so the semantics and every safety check are
 * the same as inside the trainers. Each public optimizer index is a core optimizer whose
 * parameters are views of the host's gradient buffers, attached to the core scaler and
 * registered at the first unscale (the layout must stay the same afterwards; the pointers may
 * change). The host runs its own
 * optimizer: should_step only decides, so the core optimizer never steps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/copy_out.h"
#include "api/factories.h"
#include "api/handle.h"
#include "host/status.h"
#include "ops.h"
#include "train/scaler.h"
#include "api/scaler_state_blob.h"

#define LOSS_SCALER_MAGIC 0x4c536372u /* "LScr" */
#define MAX_OPTIMIZERS 64u

typedef struct host_optimizer {
    sdt_optimizer *core;
    sdt_tensor *views;     /* one per gradient buffer, pointed at the host's memory each unscale */
    uint32_t buffer_count; /* 0 until the first unscale */
    bool unscaled;         /* since the last update */
    bool decided;          /* should_step was called since the last update */
} host_optimizer;

struct sdt_loss_scaler {
    sdt_handle base;
    sdt_backend *backend;
    sdt_scaler *core;
    uint32_t count;
    host_optimizer *opts;
};

static bool valid(const sdt_loss_scaler *s)
{
    return s && sdt_handle_is(&s->base, LOSS_SCALER_MAGIC);
}

#define REQUIRE_SCALER(s)                                                                                              \
    do {                                                                                                               \
        if (!valid(s)) return SDT_STATUS_INVALID_ARGUMENT;                                                             \
    } while (0)

static void public_defaults(sdt_loss_scaler_config *c)
{
    memset(c, 0, sizeof *c);
    c->struct_size = sizeof *c;
    c->optimizer_count = 1;
    c->growth_interval = 2000;
    c->hysteresis = 1;
    c->init_scale = 65536.0;
    c->growth_factor = 2.0;
    c->backoff_factor = 0.5;
    c->min_scale = 0.0;
    c->enabled = true;
}

static sdt_status config_defaults(sdt_loss_scaler_config *config)
{
    sdt_loss_scaler_config d;
    public_defaults(&d);
    return sdt_defaults_write_out(config, &d, sizeof d);
}

static sdt_scaler_config core_config(const sdt_loss_scaler_config *c)
{
    sdt_scaler_config k = sdt_scaler_config_default();
    k.enabled = c->enabled;
    k.init_scale = (float)c->init_scale;
    k.growth_factor = c->growth_factor;
    k.backoff_factor = c->backoff_factor;
    k.growth_interval = c->growth_interval;
    k.hysteresis = (int)c->hysteresis;
    k.min_scale = (float)c->min_scale;
    k.shared = c->optimizer_count > 1;
    return k;
}

static void free_scaler(sdt_loss_scaler *s)
{
    if (s->core) sdt_scaler_destroy(s->core);
    for (uint32_t i = 0; s->opts && i < s->count; i++) {
        sdt_optimizer_destroy(s->opts[i].core);
        free(s->opts[i].views);
    }
    free(s->opts);
    if (s->backend) s->backend->destroy(s->backend);
    if (s->base.magic) sdt_handle_fini(&s->base);
    free(s);
}

static sdt_status create_fail(sdt_loss_scaler *s, sdt_status st, const char *sentence, char *err, uint32_t err_size)
{
    if (err && err_size) sdt_copy_string_out(sentence, err, err_size, NULL);
    if (s) free_scaler(s);
    return st;
}

static bool build_core(sdt_loss_scaler *s, const sdt_loss_scaler_config *c, sdt_error *error)
{
    sdt_scaler_config k = core_config(c);
    s->backend = sdt_backend_cpu_create(1);
    if (!s->backend) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "Out of memory creating the scaler's CPU backend.");
    s->core = sdt_scaler_create(s->backend, &k, NULL, NULL, error);
    if (!s->core) return false;
    s->opts = calloc(s->count, sizeof *s->opts);
    if (!s->opts) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "Out of memory creating the scaler.");
    sdt_adamw_hparams unused = sdt_adamw_hparams_torch_default(); /* the host runs its own optimizer */
    for (uint32_t i = 0; i < s->count; i++) {
        char name[32];
        snprintf(name, sizeof name, "optimizer %u", (unsigned)i);
        s->opts[i].core = sdt_optimizer_create(s->backend, name, &unused, error);
        if (!s->opts[i].core) return false;
    }
    return true;
}

static sdt_status create(const sdt_loss_scaler_config *config, sdt_loss_scaler **out, char *err, uint32_t err_size)
{
    if (!out)
        return create_fail(NULL, SDT_STATUS_INVALID_ARGUMENT,
                           "create(): out is NULL; pass the address of an sdt_loss_scaler pointer.", err, err_size);
    *out = NULL;
    sdt_loss_scaler_config c;
    public_defaults(&c);
    if (config && !sdt_struct_read_in(&c, sizeof c, config))
        return create_fail(NULL, SDT_STATUS_INVALID_ARGUMENT,
                           "create(): config->struct_size is not set; fill the config with config_defaults() first.",
                           err, err_size);
    if (c.optimizer_count < 1 || c.optimizer_count > MAX_OPTIMIZERS)
        return create_fail(NULL, SDT_STATUS_INVALID_ARGUMENT,
                           "config.optimizer_count must be 1..64 (one per optimizer that shares this scale).", err,
                           err_size);
    if (c.hysteresis < 1)
        return create_fail(NULL, SDT_STATUS_INVALID_ARGUMENT,
                           "config.hysteresis must be at least 1 (1 = PyTorch: back off on every overflow).", err,
                           err_size);
    sdt_loss_scaler *s = calloc(1, sizeof *s);
    if (!s) return create_fail(NULL, SDT_STATUS_OUT_OF_MEMORY, "Out of memory creating the scaler.", err, err_size);
    sdt_handle_init(&s->base, LOSS_SCALER_MAGIC);
    s->count = c.optimizer_count;
    sdt_error error = {0};
    if (!build_core(s, &c, &error)) return create_fail(s, sdt_status_of(&error), error.message, err, err_size);
    if (err && err_size) err[0] = '\0';
    *out = s;
    return SDT_STATUS_OK;
}

static void destroy(sdt_loss_scaler *s)
{
    if (valid(s)) free_scaler(s);
}

static sdt_status get_last_error(const sdt_loss_scaler *s, char *buf, uint32_t buf_size, uint32_t *needed)
{
    REQUIRE_SCALER(s);
    return sdt_handle_copy_error(&s->base, buf, buf_size, needed);
}

/* A core call failed: its error value carries the status and the sentence. */
static sdt_status fail_core(sdt_loss_scaler *s, const sdt_error *error)
{
    return sdt_handle_fail_error(&s->base, error);
}

static sdt_status scale_loss(sdt_loss_scaler *s, float loss, float *scaled)
{
    REQUIRE_SCALER(s);
    sdt_handle_clear_error(&s->base);
    if (!scaled) return sdt_handle_fail(&s->base, SDT_STATUS_INVALID_ARGUMENT, "scale_loss(): scaled is NULL.");
    sdt_error error = {0};
    double out = 0;
    sdt_core_status st = sdt_scaler_scale_loss(s->core, loss, 1, &out, &error);
    if (st != SDT_CORE_OK) return fail_core(s, &error);
    *scaled = (float)out;
    return SDT_STATUS_OK;
}

static sdt_status optimizer_index_error(sdt_loss_scaler *s, const char *call, uint32_t index)
{
    return sdt_handle_fail(&s->base, SDT_STATUS_INVALID_ARGUMENT,
                           "%s(): optimizer %u does not exist; this scaler was created with optimizer_count %u.", call,
                           (unsigned)index, (unsigned)s->count);
}

/* The first unscale fixes the buffer layout; later ones must match it (pointers may move). */
static sdt_status bind_buffers(sdt_loss_scaler *s, host_optimizer *o, uint32_t index, float *const *grads,
                               const uint64_t *counts, uint32_t n)
{
    if (o->buffer_count == 0) {
        o->views = calloc(n, sizeof *o->views);
        if (!o->views) return sdt_handle_fail(&s->base, SDT_STATUS_OUT_OF_MEMORY, "Out of memory in unscale().");
        sdt_error error = {0};
        for (uint32_t i = 0; i < n; i++) {
            int64_t shape[1] = {(int64_t)counts[i]};
            o->views[i] = sdt_tensor_make(grads[i], SDT_F32, SDT_DEVICE_CPU, 1, shape);
            char name[32];
            snprintf(name, sizeof name, "buffer %u", (unsigned)i);
            sdt_core_status st = sdt_optimizer_add_param(o->core, name, &o->views[i], &o->views[i], true, &error);
            if (st != SDT_CORE_OK) return fail_core(s, &error);
        }
        o->buffer_count = n;
        return SDT_STATUS_OK;
    }
    if (n != o->buffer_count)
        return sdt_handle_fail(
            &s->base, SDT_STATUS_INVALID_ARGUMENT,
            "unscale(): optimizer %u had %u gradient buffers at its first unscale and now %u; pass the "
            "same buffers every iteration.",
            (unsigned)index, (unsigned)o->buffer_count, (unsigned)n);
    for (uint32_t i = 0; i < n; i++) {
        if ((int64_t)counts[i] != o->views[i].shape[0])
            return sdt_handle_fail(&s->base, SDT_STATUS_INVALID_ARGUMENT,
                                   "unscale(): buffer %u of optimizer %u had %lld floats and now %llu; pass the same "
                                   "buffers every iteration.",
                                   (unsigned)i, (unsigned)index, (long long)o->views[i].shape[0],
                                   (unsigned long long)counts[i]);
        o->views[i].data = grads[i];
    }
    return SDT_STATUS_OK;
}

/* An index joins the core scaler at its first unscale, so the scaler's sentences name the
 * optimizers the host uses, not every index optimizer_count reserved. */
static sdt_status attach_on_first_use(sdt_loss_scaler *s, host_optimizer *o)
{
    if (o->buffer_count) return SDT_STATUS_OK;
    sdt_error error = {0};
    return sdt_scaler_attach(s->core, o->core, &error) == SDT_CORE_OK ? SDT_STATUS_OK : fail_core(s, &error);
}

static sdt_status check_buffers(sdt_loss_scaler *s, float *const *grads, const uint64_t *counts, uint32_t n)
{
    if (!grads || !counts || n == 0)
        return sdt_handle_fail(&s->base, SDT_STATUS_INVALID_ARGUMENT,
                               "unscale(): no gradient buffers; pass grads[], counts[] and buffer_count >= 1.");
    for (uint32_t i = 0; i < n; i++)
        if (!grads[i] || counts[i] == 0 || counts[i] > (uint64_t)INT64_MAX)
            return sdt_handle_fail(&s->base, SDT_STATUS_INVALID_ARGUMENT,
                                   "unscale(): buffer %u is NULL or empty; every buffer needs at least one float.",
                                   (unsigned)i);
    return SDT_STATUS_OK;
}

static sdt_status unscale(sdt_loss_scaler *s, uint32_t index, float *const *grads, const uint64_t *counts,
                          uint32_t buffer_count, bool *found_inf)
{
    REQUIRE_SCALER(s);
    sdt_handle_clear_error(&s->base);
    if (index >= s->count) return optimizer_index_error(s, "unscale", index);
    host_optimizer *o = &s->opts[index];
    if (o->decided)
        return sdt_handle_fail(&s->base, SDT_STATUS_SCALER_MISUSE,
                               "optimizer %u: unscale after should_step (PyTorch: \"unscale_() is being called after "
                               "step().\"); call update() to start the next iteration first.",
                               (unsigned)index);
    sdt_status st = check_buffers(s, grads, counts, buffer_count);
    if (st == SDT_STATUS_OK) st = attach_on_first_use(s, o);
    if (st == SDT_STATUS_OK) st = bind_buffers(s, o, index, grads, counts, buffer_count);
    if (st != SDT_STATUS_OK) return st;
    sdt_optimizer_note_backward(o->core, sdt_scaler_enabled(s->core)); /* the host's backward filled these */
    sdt_error error = {0};
    sdt_core_status cst = sdt_scaler_unscale(s->core, o->core, &error);
    if (cst != SDT_CORE_OK) return fail_core(s, &error);
    o->unscaled = true;
    if (found_inf) *found_inf = sdt_scaler_found_inf(s->core, o->core);
    return SDT_STATUS_OK;
}

static sdt_status should_step(sdt_loss_scaler *s, uint32_t index, bool *step)
{
    REQUIRE_SCALER(s);
    sdt_handle_clear_error(&s->base);
    if (index >= s->count) return optimizer_index_error(s, "should_step", index);
    if (!step) return sdt_handle_fail(&s->base, SDT_STATUS_INVALID_ARGUMENT, "should_step(): should_step is NULL.");
    host_optimizer *o = &s->opts[index];
    if (o->decided)
        return sdt_handle_fail(
            &s->base, SDT_STATUS_SCALER_MISUSE,
            "optimizer %u: should_step was already called since the last update (PyTorch: \"step() has "
            "already been called since the last update().\"); call update() once per iteration.",
            (unsigned)index);
    if (!o->unscaled && sdt_scaler_enabled(s->core))
        return sdt_handle_fail(
            &s->base, SDT_STATUS_SCALER_MISUSE,
            "optimizer %u: should_step without unscale since the last update (PyTorch: \"No inf checks "
            "were recorded for this optimizer.\"); run backward, then unscale(%u, ...) with its "
            "gradients, then should_step.",
            (unsigned)index, (unsigned)index);
    *step = !sdt_scaler_found_inf(s->core, o->core);
    o->decided = true;
    if (o->buffer_count) sdt_optimizer_note_skipped_step(o->core); /* the host steps; our record is used up */
    return SDT_STATUS_OK;
}

static sdt_status update(sdt_loss_scaler *s)
{
    REQUIRE_SCALER(s);
    sdt_handle_clear_error(&s->base);
    sdt_error error = {0};
    sdt_core_status st = sdt_scaler_update(s->core, NULL, &error);
    if (st != SDT_CORE_OK) return fail_core(s, &error);
    for (uint32_t i = 0; i < s->count; i++) s->opts[i].unscaled = s->opts[i].decided = false;
    return SDT_STATUS_OK;
}

static sdt_status get_scale(const sdt_loss_scaler *s, double *scale)
{
    REQUIRE_SCALER(s);
    if (!scale) return SDT_STATUS_INVALID_ARGUMENT;
    *scale = sdt_scaler_get_scale(s->core);
    return SDT_STATUS_OK;
}

static bool mid_iteration(const sdt_loss_scaler *s)
{
    for (uint32_t i = 0; i < s->count; i++)
        if (s->opts[i].unscaled || s->opts[i].decided) return true;
    return false;
}

static sdt_status save_state(const sdt_loss_scaler *cs, void *buf, uint32_t buf_size, uint32_t *needed)
{
    REQUIRE_SCALER(cs);
    sdt_loss_scaler *s = (sdt_loss_scaler *)cs; /* only the last error changes */
    sdt_handle_clear_error(&s->base);
    if (needed) *needed = SDT_SCALER_BLOB_SIZE;
    if (mid_iteration(s))
        return sdt_handle_fail(&s->base, SDT_STATUS_BAD_STATE,
                               "save_state() in the middle of an iteration; save after update() (PyTorch pickles a "
                               "GradScaler only at the start of an iteration or after update()).");
    if (!buf || buf_size < SDT_SCALER_BLOB_SIZE)
        return sdt_handle_fail(&s->base, SDT_STATUS_BUFFER_TOO_SMALL,
                               "save_state() needs %u bytes and got %u; *needed says the size.", SDT_SCALER_BLOB_SIZE,
                               (unsigned)buf_size);
    sdt_scaler_state state;
    sdt_scaler_get_state(s->core, &state);
    sdt_scaler_blob_encode(&state, buf);
    return SDT_STATUS_OK;
}

static sdt_status load_state(sdt_loss_scaler *s, const void *buf, uint32_t buf_size)
{
    REQUIRE_SCALER(s);
    sdt_handle_clear_error(&s->base);
    if (mid_iteration(s))
        return sdt_handle_fail(&s->base, SDT_STATUS_BAD_STATE,
                               "load_state() in the middle of an iteration; load before scale_loss or after update().");
    sdt_error error = {0};
    sdt_scaler_state state;
    if (!sdt_scaler_blob_decode(buf, buf_size, &state, &error)) return sdt_handle_fail_error(&s->base, &error);
    sdt_core_status st = sdt_scaler_set_state(s->core, &state, &error);
    return st == SDT_CORE_OK ? SDT_STATUS_OK : fail_core(s, &error);
}

static const sdt_loss_scaler_factory loss_scaler_factory = {
    .struct_size = sizeof(sdt_loss_scaler_factory),
    .config_defaults = config_defaults,
    .create = create,
    .destroy = destroy,
    .get_last_error = get_last_error,
    .scale_loss = scale_loss,
    .unscale = unscale,
    .should_step = should_step,
    .update = update,
    .get_scale = get_scale,
    .save_state = save_state,
    .load_state = load_state,
};

const sdt_loss_scaler_factory *sdt_loss_scaler_factory_get(void)
{
    return &loss_scaler_factory;
}
