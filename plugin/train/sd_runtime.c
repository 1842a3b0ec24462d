/* sd_runtime.c - see sd_runtime.h. */
#include "train/sd_runtime.h"

#include <glib.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "c_numeric.h"
#include "checkpoint_yaml.h"
#include "prediction_probe.h"
#include "sd_config_detect.h"
#include "transformer_detect.h"

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
    for (int p = 0; p < SD_PART_COUNT; p++) {
        sdt_weights_close(rt->part_dev[p]);
        rt->part_dev[p] = NULL;
    }
}

/* The backend copy holding a part, and the file it came from. */
static sdt_weights *part_dev(const sd_runtime *rt, sd_part p)
{
    return rt->part_dev[p] ? rt->part_dev[p] : rt->dev;
}

static const sdt_weights *part_source(const sd_runtime *rt, sd_part p)
{
    return rt->part_file[p] ? rt->part_file[p] : rt->file;
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
    for (int p = 0; p < SD_PART_COUNT; p++)
        if (rt->part_file[p] && !(rt->part_dev[p] = sdt_weights_materialize(rt->part_file[p], rt->be, dtype, error))) {
            unbind(rt);
            return false;
        }
    const sdt_weights *parts[SD_PART_COUNT];
    sd_config_part_sources(&rt->cfg, rt->dev, (const sdt_weights *const *)rt->part_dev, parts);
    if (!sd_model_bind_parts(&rt->model, &rt->cfg, parts, rt->be, error)) {
        unbind(rt);
        return false;
    }
    rt->bound = true;
    rt->vae_parked = false;
    rt->text_parked = false;
    memset(rt->part_parked, 0, sizeof rt->part_parked);
    rt->vae_dtype = dtype;
    rt->transformer_act_dtype = dtype;
    rt->place_s = seconds_since(start);
    return true;
}

/* The VAE unbound and its weights let go of; sd_runtime_vae_ready brings them back in rt->vae_dtype. */
static size_t vae_release(sd_runtime *rt)
{
    vae_free(&rt->model.vae);
    rt->vae_parked = true;
    return sdt_weights_release_prefix(part_dev(rt, SD_PART_VAE), VAE_KEY_PREFIX);
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

size_t sd_runtime_part_park(sd_runtime *rt, sd_part part)
{
    if (!rt->bound || rt->part_parked[part] || part == SD_PART_DENOISER || part == SD_PART_VAE) return 0;
    const char *prefixes[3];
    sd_part_prefixes(&rt->cfg, part, prefixes);
    sdt_weights *dev = part_dev(rt, part);
    size_t bytes = 0;
    for (int i = 0; prefixes[i]; i++) {
        bytes += placed_bytes(dev, prefixes[i]);
        sdt_weights_release_prefix(dev, prefixes[i]);
    }
    rt->part_parked[part] = true;
    return bytes;
}

size_t sd_runtime_text_park(sd_runtime *rt)
{
    if (!rt->bound || rt->text_parked) return 0;
    size_t bytes = 0;
    for (int p = SD_PART_CLIP_L; p <= SD_PART_T5XXL; p++) bytes += sd_runtime_part_park(rt, (sd_part)p);
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
    if (!sdt_weights_rematerialize_prefix(part_dev(rt, SD_PART_VAE), part_source(rt, SD_PART_VAE), VAE_KEY_PREFIX,
                                          rt->vae_dtype, error) ||
        !vae_load(&rt->model.vae, &rt->model.cfg.vae, rt->dev, rt->be, error))
        return false;
    rt->vae_parked = false;
    return true;
}

/* No choice from the user or a config: an SD 2.x model's UNet answers (on the bound model). */
static bool probe_prediction(sd_runtime *rt, sdt_error *error)
{
    sd_config *c = &rt->cfg;
    if (sd_config_is_transformer(c) || c->prediction_source == SD_PREDICTION_FROM_CONFIG ||
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
    return sd_runtime_read_parts(rt, path, NULL, be, hash_alongside, error);
}

/* What sdt_weights_open_part calls each part. */
static const sdt_weights_part open_part_of[SD_PART_COUNT] = {SDT_PART_CLIP_L, SDT_PART_CLIP_L, SDT_PART_CLIP_G,
                                                             SDT_PART_T5XXL, SDT_PART_VAE};

/* Opens the part files given; a part file beside a UNet checkpoint is refused (nothing would read it). */
static bool open_parts(sd_runtime *rt, const char *const part_paths[SD_PART_COUNT], bool transformer, sdt_error *error)
{
    for (int p = SD_PART_CLIP_L; part_paths && p < SD_PART_COUNT; p++) {
        if (!part_paths[p] || !part_paths[p][0]) continue;
        if (!transformer)
            return sdt_fail(error, SDT_ERR_VALIDATION,
                            "%s is set (%s) but the model %s is not an SD3/SD3.5 checkpoint (its family: %s), and its "
                            "parts all come from its own file: leave %s empty",
                            sd_part_option_field((sd_part)p), part_paths[p], sdt_weights_path(rt->file),
                            sd_family_title(rt->cfg.family), sd_part_option_field((sd_part)p));
        rt->part_file[p] = sdt_weights_open_part(part_paths[p], open_part_of[p], error);
        if (!rt->part_file[p]) {
            sdt_error_append(error, " (%s)", sd_part_option_field((sd_part)p));
            return false;
        }
    }
    return true;
}

/* The config: a UNet family's from the checkpoint alone, a transformer family's from it and the part files. */
static bool detect_config(sd_runtime *rt, const char *const part_paths[SD_PART_COUNT], sdt_error *error)
{
    sdt_tf_info tf;
    if (!sdt_tf_detect(rt->file, &tf)) {
        if (!sd_config_detect(rt->file, &rt->cfg, error)) return false;
        return open_parts(rt, part_paths, false, error);
    }
    if (!open_parts(rt, part_paths, true, error)) return false;
    return sd_config_detect_parts(rt->file, (const sdt_weights *const *)rt->part_file, &rt->cfg, error);
}

bool sd_runtime_read_parts(sd_runtime *rt, const char *path, const char *const part_paths[SD_PART_COUNT],
                           sdt_backend *be, bool hash_alongside, sdt_error *error)
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
    if (!detect_config(rt, part_paths, error)) {
        sd_runtime_close(rt);
        return false;
    }
    rt->open_s = seconds_since(start);
    start = g_get_monotonic_time();
    const sdt_weights *sources[SD_PART_COUNT];
    sd_config_part_sources(&rt->cfg, rt->file, (const sdt_weights *const *)rt->part_file, sources);
    if (!sd_weights_check_finite_parts(&rt->cfg, sources, error)) {
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
    for (int p = 0; p < SD_PART_COUNT; p++) {
        sdt_weights_close(rt->part_file[p]);
        rt->part_file[p] = NULL;
    }
}

int sd_runtime_image_divisor(const sd_runtime *rt)
{
    const sd_config *c = &rt->cfg;
    if (sd_config_is_flux(c)) return vae_factor(&c->vae) * 2; /* Flux packs 2 x 2 latent patches */
    if (sd_config_is_transformer(c)) return vae_factor(&c->vae) * c->mmdit.patch;
    return vae_factor(&c->vae) << (c->unet.num_levels - 1);
}
