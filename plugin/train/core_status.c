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

sdt_error_code sdt_core_status_kind(sdt_core_status status)
{
    switch (status) {
        case SDT_CORE_OK:
            return SDT_ERR_OK;
        case SDT_CORE_INVALID_ARGUMENT:
        case SDT_CORE_INVALID_CONFIG:
        case SDT_CORE_EMPTY_BATCH:
        case SDT_CORE_FP16_MASTER:
        case SDT_CORE_DUPLICATE_PARAM:
        case SDT_CORE_SHARED_PARAM:
            return SDT_ERR_INVALID_ARGUMENT;
        case SDT_CORE_NO_MEMORY:
            return SDT_ERR_OUT_OF_MEMORY;
        case SDT_CORE_BACKEND_FAILED:
            return SDT_ERR_DEVICE;
        case SDT_CORE_NO_TRAINABLE_PARAMS:
        case SDT_CORE_NO_GRADIENT_FLOW:
            return SDT_ERR_NO_GRADIENT;
        case SDT_CORE_NO_BACKWARD:
        case SDT_CORE_UNSCALE_TWICE:
        case SDT_CORE_UNSCALE_AFTER_STEP:
        case SDT_CORE_STEP_TWICE:
        case SDT_CORE_UPDATE_WITHOUT_RECORDS:
        case SDT_CORE_NOT_OWNED:
        case SDT_CORE_ALREADY_OWNED:
        case SDT_CORE_NOT_SCALED:
        case SDT_CORE_GRADS_STILL_SCALED:
            return SDT_ERR_SCALER_MISUSE;
        case SDT_CORE_SCALE_UNDERFLOW:
        case SDT_CORE_NONFINITE_NORM:
            return SDT_ERR_NUMERICAL;
        case SDT_CORE_BAD_STATE:
            return SDT_ERR_BAD_FORMAT;
        case SDT_CORE_STATUS_COUNT:
            break;
    }
    return SDT_ERR_INTERNAL;
}

sdt_core_status core_fail(sdt_error *error, sdt_core_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sdt_failv(error, sdt_core_status_kind(status), fmt, ap);
    va_end(ap);
    return status;
}
