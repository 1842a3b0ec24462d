/* core_status.h - status codes of the numerics core (optimizer, scaler, fallback).
 *
 * Every safety check has its own code so a caller (a test, the trainer) can react
 * to the cause without parsing text; the sdt_error the caller passes receives the
 * sentence (optimizer, cause, fix) and the code's kind (sdt_core_status_kind).
 */
#ifndef SDT_CORE_STATUS_H
#define SDT_CORE_STATUS_H

#include "sdt_error.h"

#include <stddef.h>

typedef enum sdt_core_status {
    SDT_CORE_OK = 0,
    SDT_CORE_INVALID_ARGUMENT, /* NULL handle, bad shape/device, bad name */
    SDT_CORE_INVALID_CONFIG,   /* scale <= 0/NaN/underflow, growth <= 1, backoff >= 1, interval <= 0 ... */
    SDT_CORE_NO_MEMORY,
    SDT_CORE_BACKEND_FAILED,      /* an op of the backend table failed */
    SDT_CORE_NO_TRAINABLE_PARAMS, /* frozen embedding, empty hypernetwork */
    SDT_CORE_NO_BACKWARD,         /* torch: "No inf checks were recorded for this optimizer." */
    SDT_CORE_UNSCALE_TWICE, /* torch: "unscale_() has already been called on this optimizer since the last update()." */
    SDT_CORE_UNSCALE_AFTER_STEP,     /* torch: "unscale_() is being called after step()." */
    SDT_CORE_STEP_TWICE,             /* torch: "step() has already been called since the last update()." */
    SDT_CORE_UPDATE_WITHOUT_RECORDS, /* torch: "No inf checks were recorded prior to update." */
    SDT_CORE_NOT_OWNED,              /* the scaler was handed an optimizer it does not own */
    SDT_CORE_ALREADY_OWNED,          /* the optimizer already belongs to another scaler */
    SDT_CORE_FP16_MASTER, /* torch: "Attempting to unscale FP16 gradients." (16-bit master weights or grads) */
    SDT_CORE_EMPTY_BATCH,
    SDT_CORE_NO_GRADIENT_FLOW,   /* backward ran but every gradient is exactly zero */
    SDT_CORE_DUPLICATE_PARAM,    /* the same parameter registered twice in one optimizer */
    SDT_CORE_SHARED_PARAM,       /* one parameter owned by two optimizers (unscaled twice in torch) */
    SDT_CORE_NOT_SCALED,         /* torch: "Attempted step but _scale is None." */
    SDT_CORE_GRADS_STILL_SCALED, /* clip or step on grads that still carry the loss scale */
    SDT_CORE_SCALE_UNDERFLOW,    /* the backoff would make the scale 0 (or 1/scale infinite) */
    SDT_CORE_BAD_STATE,          /* a saved scaler state that cannot be loaded */
    SDT_CORE_NONFINITE_NORM,     /* clip_grad_norm with error_if_nonfinite */
    SDT_CORE_STATUS_COUNT
} sdt_core_status;

/* The code's identifier as text ("SDT_CORE_STEP_TWICE"), for logs and tests. */
const char *sdt_core_status_name(sdt_core_status status);

/* The kind of failure a detailed code is (the error value's status): a scaler called out of
 * order is SCALER_MISUSE, a backend failure DEVICE, and so on. */
sdt_error_code sdt_core_status_kind(sdt_core_status status);

/* Records the sentence in error (when non-NULL) with status's kind and returns status, so a
 * check reads `return core_fail(error, SDT_CORE_X, "...", ...)`: the caller keeps the
 * detailed code, the error value carries its kind up to the ABI. */
sdt_core_status core_fail(sdt_error *error, sdt_core_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
