/* sd_runtime.c - see sd_runtime.h. */
#include "train/sd_runtime.h"

#include <glib.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "c_numeric.h"
#include "checkpoint_yaml.h"
#include "sd_text_rules.h"
#include "prediction_probe.h"
#include "sd_config_detect.h"

/* The hash thread reads the file through its own descriptor and writes only this struct, so the
 * weights being checked and placed meanwhile are shared with nothing that changes. */
struct sd_runtime_hash {
    pthread_t thread;
    char *path;
    char hash[11];
    bool ok;
    double seconds;
    sdt_error error;
};

static void *hash_thread(void *arg)
{
    struct sd_runtime_hash *h = arg;
    gint64 start = g_get_monotonic_time();
    h->ok = sdt_file_short_hash(h->path, h->hash, &h->error);
    h->seconds = (double)(g_get_monotonic_time() - start) / 1e6;
    return NULL;
}

/* Joins the hash thread, if one runs; the result stays in rt->hash. */
static struct sd_runtime_hash *hash_join(sd_runtime *rt)
{
    struct sd_runtime_hash *h = rt->hash;
    if (h && h->path) {
        pthread_join(h->thread, NULL);
        g_free(h->path);
        h->path = NULL;
    }
    return h;
}

bool sd_runtime_short_hash(sd_runtime *rt, char out[11], double *seconds, sdt_error *error)
{
    struct sd_runtime_hash *h = hash_join(rt);
    if (!h) {
        gint64 start = g_get_monotonic_time();
        bool ok = sdt_weights_short_hash(rt->file, out, error);
        *seconds = (double)(g_get_monotonic_time() - start) / 1e6;
        return ok;
    }
    *seconds = h->seconds;
    if (!h->ok) {
        if (error) *error = h->error;
        return false;
    }
    memcpy(out, h->hash, 11);
    return true;
}

static void unbind(sd_runtime *rt)
{
    if (rt->bound) sd_model_free(&rt->model);
    rt->bound = false;
    sdt_weights_close(rt->dev);
    rt->dev = NULL;
}

static double seconds_since(gint64 start)
{
    return (double)(g_get_monotonic_time() - start) / 1e6;
}

bool sd_runtime_set_dtype(sd_runtime *rt, sdt_dtype dtype, sdt_error *error)
{
    gint64 start = g_get_monotonic_time();
    unbind(rt);
    rt->dtype = dtype;
    rt->dev = sdt_weights_materialize(rt->file, rt->be, dtype, error);
    if (!rt->dev) return false;
    if (!sd_model_bind(&rt->model, &rt->cfg, rt->dev, rt->be, error)) {
        unbind(rt);
        return false;
    }
    rt->bound = true;
    rt->vae_parked = false;
    rt->text_parked = false;
    rt->vae_dtype = dtype;
    rt->place_s = seconds_since(start);
    return true;
}

/* The VAE unbound and its weights let go of; sd_runtime_vae_ready brings them back in rt->vae_dtype. */
static size_t vae_release(sd_runtime *rt)
{
    vae_free(&rt->model.vae);
    rt->vae_parked = true;
    return sdt_weights_release_prefix(rt->dev, VAE_KEY_PREFIX);
}

size_t sd_runtime_vae_park(sd_runtime *rt)
{
    if (!rt->bound || rt->vae_parked || rt->be->device == SDT_DEVICE_CPU) return 0;
    return vae_release(rt);
}

/* Bytes of the tensors under prefix that are on the backend now. */
static size_t placed_bytes(const sdt_weights *w, const char *prefix)
{
    size_t bytes = 0, n = strlen(prefix);
    for (size_t i = 0; i < sdt_weights_count(w); i++) {
        const char *key = sdt_weights_key(w, i);
        const sdt_tensor *t = strncmp(key, prefix, n) == 0 ? sdt_weights_get(w, key) : NULL;
        if (t && t->data) bytes += sdt_tensor_nbytes(t);
    }
    return bytes;
}

size_t sd_runtime_text_park(sd_runtime *rt)
{
    if (!rt->bound || rt->text_parked) return 0;
    /* each encoder's whole slot: its projection sits beside the prefix its layers have (clip_key_prefix) */
    bool sdxl = sd_text_rules_of(&rt->cfg).sdxl;
    const char *slots[2] = {sdxl ? "conditioner.embedders.0." : "cond_stage_model.",
                            sdxl ? "conditioner.embedders.1." : NULL};
    size_t bytes = 0;
    for (int i = 0; i < 2 && slots[i]; i++) {
        bytes += placed_bytes(rt->dev, slots[i]);
        sdt_weights_release_prefix(rt->dev, slots[i]);
    }
    rt->text_parked = true;
    return bytes;
}

bool sd_runtime_set_vae_dtype(sd_runtime *rt, sdt_dtype dtype, sdt_error *error)
{
    if (!rt->bound || rt->vae_dtype == dtype) return true;
    if (!rt->vae_parked) vae_release(rt); /* on every backend: the new dtype is materialized below */
    rt->vae_dtype = dtype;
    return sd_runtime_vae_ready(rt, error);
}

bool sd_runtime_vae_ready(sd_runtime *rt, sdt_error *error)
{
    if (!rt->vae_parked) return true;
    if (!sdt_weights_rematerialize_prefix(rt->dev, rt->file, VAE_KEY_PREFIX, rt->vae_dtype, error) ||
        !vae_load(&rt->model.vae, &rt->model.cfg.vae, rt->dev, rt->be, error))
        return false;
    rt->vae_parked = false;
    return true;
}

/* No choice from the user or a config: an SD 2.x model's UNet answers (on the bound model). */
static bool probe_prediction(sd_runtime *rt, sdt_error *error)
{
    sd_config *c = &rt->cfg;
    if (c->prediction_source == SD_PREDICTION_FROM_CONFIG ||
        c->prediction_source == SD_PREDICTION_FROM_CHECKPOINT_YAML || !sd_prediction_probe_applies(c))
        return true;
    bool v;
    if (!sd_prediction_probe(rt->model.unet, rt->be, rt->dtype, &c->prediction_probe, &v, error)) return false;
    c->unet.v_prediction = v;
    c->prediction_source = SD_PREDICTION_FROM_PROBE;
    /* the bound model keeps its own copy of the config (sd_model_bind) */
    rt->model.cfg.unet.v_prediction = v;
    rt->model.cfg.prediction_source = c->prediction_source;
    rt->model.cfg.prediction_probe = c->prediction_probe;
    return true;
}

bool sd_runtime_read(sd_runtime *rt, const char *path, sdt_backend *be, bool hash_alongside, sdt_error *error)
{
    memset(rt, 0, sizeof(*rt));
    rt->be = be;
    gint64 start = g_get_monotonic_time();
    rt->file = sdt_weights_open(path, error);
    if (!rt->file) return false;
    if (hash_alongside) { /* a thread that cannot start leaves the hash to sd_runtime_short_hash */
        struct sd_runtime_hash *h = g_new0(struct sd_runtime_hash, 1);
        h->path = g_strdup(sdt_weights_hash_file(rt->file));
        if (pthread_create(&h->thread, NULL, hash_thread, h) == 0) {
            rt->hash = h;
        } else {
            g_free(h->path);
            g_free(h);
        }
    }
    if (!sd_config_detect(rt->file, &rt->cfg, error)) {
        sd_runtime_close(rt);
        return false;
    }
    rt->open_s = seconds_since(start);
    start = g_get_monotonic_time();
    if (!sd_weights_check_finite(&rt->cfg, rt->file, error)) {
        sd_runtime_close(rt);
        return false;
    }
    rt->check_s = seconds_since(start);
    return true;
}

bool sd_runtime_place(sd_runtime *rt, sdt_dtype dtype, sd_prediction_choice prediction, sdt_error *error)
{
    if (prediction != SD_PREDICTION_AUTO) {
        /* a config file that said otherwise is named in the log line */
        bool asked_v = prediction == SD_PREDICTION_V;
        bool file_said = rt->cfg.prediction_source == SD_PREDICTION_FROM_CONFIG ||
                         rt->cfg.prediction_source == SD_PREDICTION_FROM_CHECKPOINT_YAML;
        rt->overruled =
            file_said && rt->cfg.unet.v_prediction != asked_v ? rt->cfg.prediction_source : SD_PREDICTION_FROM_DEFAULT;
        rt->cfg.unet.v_prediction = asked_v;
        rt->cfg.prediction_source = SD_PREDICTION_FROM_USER;
    }
    if (!sd_runtime_set_dtype(rt, dtype, error) || (prediction == SD_PREDICTION_AUTO && !probe_prediction(rt, error))) {
        sd_runtime_close(rt);
        return false;
    }
    return true;
}

bool sd_runtime_open(sd_runtime *rt, const char *path, sdt_backend *be, sdt_dtype dtype,
                     sd_prediction_choice prediction, bool hash_alongside, sdt_error *error)
{
    return sd_runtime_read(rt, path, be, hash_alongside, error) && sd_runtime_place(rt, dtype, prediction, error);
}

void sd_runtime_prediction_sentence(const sd_runtime *rt, char *buf, size_t size)
{
    const sd_config *c = &rt->cfg;
    const char *what = c->unet.v_prediction ? "v" : "the noise (epsilon)";
    switch (c->prediction_source) {
        case SD_PREDICTION_FROM_USER:
            if (rt->overruled == SD_PREDICTION_FROM_CHECKPOINT_YAML) {
                char *yaml = sdt_checkpoint_yaml_path(sdt_weights_path(rt->file));
                snprintf(buf, size, "the model predicts %s (as asked, over %s beside the checkpoint, which says %s)",
                         what, yaml, c->unet.v_prediction ? "eps" : "v");
                g_free(yaml);
            } else if (rt->overruled == SD_PREDICTION_FROM_CONFIG) {
                snprintf(buf, size,
                         "the model predicts %s (as asked, over its scheduler/scheduler_config.json, which says %s)",
                         what, c->unet.v_prediction ? "epsilon" : "v_prediction");
            } else {
                snprintf(buf, size, "the model predicts %s (as asked)", what);
            }
            break;
        case SD_PREDICTION_FROM_CONFIG:
            snprintf(buf, size, "the model predicts %s (its scheduler/scheduler_config.json says so)", what);
            break;
        case SD_PREDICTION_FROM_CHECKPOINT_YAML: {
            char *yaml = sdt_checkpoint_yaml_path(sdt_weights_path(rt->file));
            snprintf(buf, size,
                     "the model predicts %s (%s beside the checkpoint, the config A1111 reads, %s; set v-prediction "
                     "or epsilon to overrule it)",
                     what, yaml,
                     c->unet.v_prediction
                         ? "says model.params.parameterization: \"v\""
                         : "says model.params.parameterization: \"eps\" or leaves it to LDM's default, eps");
            g_free(yaml);
            break;
        }
        case SD_PREDICTION_FROM_PROBE:
            sdt_c_snprintf(
                buf, size,
                "the model predicts %s (detected: at t = 999 on a flat latent of 0.5 the UNet's output is %.3g "
                "from its input on average, %s A1111's v threshold of %g; set v-prediction or epsilon if this is wrong)",
                what, c->prediction_probe, c->unet.v_prediction ? "below" : "above", SD_PREDICTION_PROBE_V_BELOW);
            break;
        default:
            snprintf(buf, size, "the model predicts %s (%s)", what,
                     c->clip.act == SDT_ACT_GELU ? "an SD 2.x inpainting or depth model: epsilon, as A1111 takes it"
                                                 : "SD 1.x's objective; set v-prediction for a v-model");
            break;
    }
}

void sd_runtime_close(sd_runtime *rt)
{
    g_free(hash_join(rt));
    rt->hash = NULL;
    unbind(rt);
    sdt_weights_close(rt->file);
    rt->file = NULL;
}
