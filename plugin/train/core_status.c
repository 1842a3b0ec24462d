/* core_status.c - names of the status codes and the one error formatter. */
#include "train/core_status.h"

#include <stdarg.h>
#include <stdio.h>

static const char *const status_names[SDT_CORE_STATUS_COUNT] = {
    [SDT_CORE_OK] = "SDT_CORE_OK",
    [SDT_CORE_INVALID_ARGUMENT] = "SDT_CORE_INVALID_ARGUMENT",
    [SDT_CORE_INVALID_CONFIG] = "SDT_CORE_INVALID_CONFIG",
    [SDT_CORE_NO_MEMORY] = "SDT_CORE_NO_MEMORY",
    [SDT_CORE_BACKEND_FAILED] = "SDT_CORE_BACKEND_FAILED",
    [SDT_CORE_NO_TRAINABLE_PARAMS] = "SDT_CORE_NO_TRAINABLE_PARAMS",
    [SDT_CORE_NO_BACKWARD] = "SDT_CORE_NO_BACKWARD",
    [SDT_CORE_UNSCALE_TWICE] = "SDT_CORE_UNSCALE_TWICE",
    [SDT_CORE_UNSCALE_AFTER_STEP] = "SDT_CORE_UNSCALE_AFTER_STEP",
    [SDT_CORE_STEP_TWICE] = "SDT_CORE_STEP_TWICE",
    [SDT_CORE_UPDATE_WITHOUT_RECORDS] = "SDT_CORE_UPDATE_WITHOUT_RECORDS",
    [SDT_CORE_NOT_OWNED] = "SDT_CORE_NOT_OWNED",
    [SDT_CORE_ALREADY_OWNED] = "SDT_CORE_ALREADY_OWNED",
    [SDT_CORE_FP16_MASTER] = "SDT_CORE_FP16_MASTER",
    [SDT_CORE_EMPTY_BATCH] = "SDT_CORE_EMPTY_BATCH",
    [SDT_CORE_NO_GRADIENT_FLOW] = "SDT_CORE_NO_GRADIENT_FLOW",
    [SDT_CORE_DUPLICATE_PARAM] = "SDT_CORE_DUPLICATE_PARAM",
    [SDT_CORE_SHARED_PARAM] = "SDT_CORE_SHARED_PARAM",
    [SDT_CORE_NOT_SCALED] = "SDT_CORE_NOT_SCALED",
    [SDT_CORE_GRADS_STILL_SCALED] = "SDT_CORE_GRADS_STILL_SCALED",
    [SDT_CORE_SCALE_UNDERFLOW] = "SDT_CORE_SCALE_UNDERFLOW",
    [SDT_CORE_BAD_STATE] = "SDT_CORE_BAD_STATE",
    [SDT_CORE_NONFINITE_NORM] = "SDT_CORE_NONFINITE_NORM",
};

const char *sdt_core_status_name(sdt_core_status status)
{
    if ((int)status < 0 || status >= SDT_CORE_STATUS_COUNT) return "SDT_CORE_UNKNOWN_STATUS";
    return status_names[status];
}

sdt_core_status core_fail(char *err, size_t err_size, sdt_core_status status, const char *fmt, ...)
{
    if (err && err_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_size, fmt, ap);
        va_end(ap);
    }
    return status;
}
