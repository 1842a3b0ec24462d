/* status.c - one table from status code to its name, so logs and hosts print the same words. */
#include "host/status.h"

/* sdt_error's codes are the ABI's numbers; a mismatch is a build error, not a wrong status. */
#define SAME_CODE(name) _Static_assert((int)SDT_ERR_##name == (int)SDT_STATUS_##name, "sdt_error code " #name)
SAME_CODE(OK);
SAME_CODE(INTERRUPTED);
SAME_CODE(INVALID_ARGUMENT);
SAME_CODE(UNSUPPORTED);
SAME_CODE(OUT_OF_MEMORY);
SAME_CODE(IO);
SAME_CODE(BAD_FORMAT);
SAME_CODE(VALIDATION);
SAME_CODE(BAD_STATE);
SAME_CODE(ALREADY_EXISTS);
SAME_CODE(NOT_FOUND);
SAME_CODE(NUMERICAL);
SAME_CODE(SCALER_MISUSE);
SAME_CODE(NO_GRADIENT);
SAME_CODE(DEVICE);
SAME_CODE(INTERNAL);

sdt_status sdt_status_of(const sdt_error *error)
{
    if (!error) return SDT_STATUS_INTERNAL;
    return error->code == SDT_ERR_OK && error->message[0] ? SDT_STATUS_INTERNAL : (sdt_status)error->code;
}

const char *sdt_status_name(sdt_status status)
{
    switch (status) {
        case SDT_STATUS_OK:
            return "SDT_STATUS_OK";
        case SDT_STATUS_INTERRUPTED:
            return "SDT_STATUS_INTERRUPTED";
        case SDT_STATUS_INVALID_ARGUMENT:
            return "SDT_STATUS_INVALID_ARGUMENT";
        case SDT_STATUS_VERSION_MISMATCH:
            return "SDT_STATUS_VERSION_MISMATCH";
        case SDT_STATUS_NOT_INITIALIZED:
            return "SDT_STATUS_NOT_INITIALIZED";
        case SDT_STATUS_UNSUPPORTED:
            return "SDT_STATUS_UNSUPPORTED";
        case SDT_STATUS_OUT_OF_MEMORY:
            return "SDT_STATUS_OUT_OF_MEMORY";
        case SDT_STATUS_IO:
            return "SDT_STATUS_IO";
        case SDT_STATUS_BAD_FORMAT:
            return "SDT_STATUS_BAD_FORMAT";
        case SDT_STATUS_VALIDATION:
            return "SDT_STATUS_VALIDATION";
        case SDT_STATUS_BAD_STATE:
            return "SDT_STATUS_BAD_STATE";
        case SDT_STATUS_BUFFER_TOO_SMALL:
            return "SDT_STATUS_BUFFER_TOO_SMALL";
        case SDT_STATUS_ALREADY_EXISTS:
            return "SDT_STATUS_ALREADY_EXISTS";
        case SDT_STATUS_NOT_FOUND:
            return "SDT_STATUS_NOT_FOUND";
        case SDT_STATUS_NUMERICAL:
            return "SDT_STATUS_NUMERICAL";
        case SDT_STATUS_SCALER_MISUSE:
            return "SDT_STATUS_SCALER_MISUSE";
        case SDT_STATUS_NO_GRADIENT:
            return "SDT_STATUS_NO_GRADIENT";
        case SDT_STATUS_DEVICE:
            return "SDT_STATUS_DEVICE";
        case SDT_STATUS_INTERNAL:
            return "SDT_STATUS_INTERNAL";
        case SDT_STATUS_FORCE_32BIT:
            break;
    }
    return "SDT_STATUS_UNKNOWN";
}
