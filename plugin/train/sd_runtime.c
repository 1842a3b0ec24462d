/* sd_runtime.c - see sd_runtime.h. */
#include "train/sd_runtime.h"

#include <string.h>

static void unbind(sd_runtime *rt)
{
    if (rt->bound) sd_model_free(&rt->model);
    rt->bound = false;
    sdt_weights_close(rt->dev);
    rt->dev = NULL;
}

bool sd_runtime_set_dtype(sd_runtime *rt, sdt_dtype dtype, sdt_error *error)
{
    unbind(rt);
    rt->dtype = dtype;
    rt->dev = sdt_weights_materialize(rt->file, rt->be, dtype, error);
    if (!rt->dev) return false;
    if (!sd_model_bind(&rt->model, &rt->cfg, rt->dev, rt->be, error)) {
        unbind(rt);
        return false;
    }
    rt->bound = true;
    return true;
}

bool sd_runtime_open(sd_runtime *rt, const char *path, sdt_backend *be, sdt_dtype dtype, bool v_prediction, sdt_error *error)
{
    memset(rt, 0, sizeof(*rt));
    rt->be = be;
    rt->file = sdt_weights_open(path, error);
    if (!rt->file) return false;
    if (!sd_config_detect(rt->file, &rt->cfg, error) || !sd_weights_check_finite(&rt->cfg, rt->file, error)) {
        sd_runtime_close(rt);
        return false;
    }
    if (v_prediction) rt->cfg.unet.v_prediction = true; /* the user's word beats the default and the config */
    if (!sd_runtime_set_dtype(rt, dtype, error)) {
        sd_runtime_close(rt);
        return false;
    }
    return true;
}

void sd_runtime_close(sd_runtime *rt)
{
    unbind(rt);
    sdt_weights_close(rt->file);
    rt->file = NULL;
}
