/* core_status_map.c - core codes to ABI codes (see core_status_map.h). */
#include "api/core_status_map.h"

sdt_status sdt_status_from_core(sdt_core_status status)
{
    switch (status) {
    case SDT_CORE_OK: return SDT_STATUS_OK;
    case SDT_CORE_INVALID_ARGUMENT:
    case SDT_CORE_INVALID_CONFIG:
    case SDT_CORE_EMPTY_BATCH:
    case SDT_CORE_FP16_MASTER:
    case SDT_CORE_DUPLICATE_PARAM:
    case SDT_CORE_SHARED_PARAM: return SDT_STATUS_INVALID_ARGUMENT;
    case SDT_CORE_NO_MEMORY: return SDT_STATUS_OUT_OF_MEMORY;
    case SDT_CORE_BACKEND_FAILED: return SDT_STATUS_DEVICE;
    case SDT_CORE_NO_TRAINABLE_PARAMS:
    case SDT_CORE_NO_GRADIENT_FLOW: return SDT_STATUS_NO_GRADIENT;
    case SDT_CORE_NO_BACKWARD:
    case SDT_CORE_UNSCALE_TWICE:
    case SDT_CORE_UNSCALE_AFTER_STEP:
    case SDT_CORE_STEP_TWICE:
    case SDT_CORE_UPDATE_WITHOUT_RECORDS:
    case SDT_CORE_NOT_OWNED:
    case SDT_CORE_ALREADY_OWNED:
    case SDT_CORE_NOT_SCALED:
    case SDT_CORE_GRADS_STILL_SCALED: return SDT_STATUS_SCALER_MISUSE;
    case SDT_CORE_SCALE_UNDERFLOW:
    case SDT_CORE_NONFINITE_NORM: return SDT_STATUS_NUMERICAL;
    case SDT_CORE_BAD_STATE: return SDT_STATUS_BAD_FORMAT;
    case SDT_CORE_STATUS_COUNT: break;
    }
    return SDT_STATUS_INTERNAL;
}
