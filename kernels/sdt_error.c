/* sdt_error.c - see sdt_error.h. */
#include "sdt_error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "c_numeric.h"

void sdt_error_clear(sdt_error *e)
{
    if (!e) return;
    e->code = SDT_ERR_OK;
    e->message[0] = '\0';
}

bool sdt_failv(sdt_error *e, sdt_error_code code, const char *fmt, va_list ap)
{
    if (!e) return false;
    e->code = code;
    sdt_c_vsnprintf(e->message, sizeof e->message, fmt, ap);
    return false;
}

bool sdt_fail(sdt_error *e, sdt_error_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sdt_failv(e, code, fmt, ap);
    va_end(ap);
    return false;
}

bool sdt_error_wrap(sdt_error *e, const char *fmt, ...)
{
    if (!e) return false;
    char sentence[SDT_ERROR_MESSAGE_MAX];
    memcpy(sentence, e->message, sizeof sentence);
    va_list ap;
    va_start(ap, fmt);
    int n = sdt_c_vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    /* The context first; the sentence after it, cut at the buffer's end if it must be. */
    size_t at = n < 0 ? 0 : (size_t)n < sizeof e->message ? (size_t)n : sizeof e->message - 1;
    size_t room = sizeof e->message - at;
    if (room > 2) {
        memcpy(e->message + at, ": ", 2);
        size_t len = strnlen(sentence, sizeof sentence - 1);
        if (len > room - 3) len = room - 3;
        memcpy(e->message + at + 2, sentence, len);
        e->message[at + 2 + len] = '\0';
    }
    if (e->code == SDT_ERR_OK) e->code = SDT_ERR_INTERNAL; /* wrapping nothing is a bug, not a success */
    return false;
}

void sdt_error_append(sdt_error *e, const char *fmt, ...)
{
    if (!e) return;
    size_t used = strnlen(e->message, sizeof e->message - 1);
    va_list ap;
    va_start(ap, fmt);
    sdt_c_vsnprintf(e->message + used, sizeof e->message - used, fmt, ap);
    va_end(ap);
}

const char *sdt_error_code_name(sdt_error_code code)
{
    switch (code) {
        case SDT_ERR_OK:
            return "OK";
        case SDT_ERR_INTERRUPTED:
            return "INTERRUPTED";
        case SDT_ERR_INVALID_ARGUMENT:
            return "INVALID_ARGUMENT";
        case SDT_ERR_UNSUPPORTED:
            return "UNSUPPORTED";
        case SDT_ERR_OUT_OF_MEMORY:
            return "OUT_OF_MEMORY";
        case SDT_ERR_IO:
            return "IO";
        case SDT_ERR_BAD_FORMAT:
            return "BAD_FORMAT";
        case SDT_ERR_VALIDATION:
            return "VALIDATION";
        case SDT_ERR_BAD_STATE:
            return "BAD_STATE";
        case SDT_ERR_ALREADY_EXISTS:
            return "ALREADY_EXISTS";
        case SDT_ERR_NOT_FOUND:
            return "NOT_FOUND";
        case SDT_ERR_NUMERICAL:
            return "NUMERICAL";
        case SDT_ERR_SCALER_MISUSE:
            return "SCALER_MISUSE";
        case SDT_ERR_NO_GRADIENT:
            return "NO_GRADIENT";
        case SDT_ERR_DEVICE:
            return "DEVICE";
        case SDT_ERR_INTERNAL:
            return "INTERNAL";
    }
    return "UNKNOWN";
}

sdt_error_code sdt_error_code_from_errno(int errno_value)
{
    switch (errno_value) {
        case ENOENT:
        case ENOTDIR:
            return SDT_ERR_NOT_FOUND;
        case ENOMEM:
            return SDT_ERR_OUT_OF_MEMORY;
        case EEXIST:
            return SDT_ERR_ALREADY_EXISTS;
        default:
            return SDT_ERR_IO;
    }
}
