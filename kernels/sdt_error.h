/* sdt_error.h - the one error value every layer passes up: a status and the sentence.
 *
 * The layer that detects a failure knows what kind it is (a missing file, a bad format, a
 * backend failure, a non-finite value) and says so here; every caller above only adds context
 * or passes it on, so no caller guesses a status or parses a message. The codes carry the
 * ABI's numbers (abi/sdtrain.h's sdt_status; api/ checks them at compile time), so the ABI
 * layer returns e.code as it is. Kernels and models do not include the ABI header. */
#ifndef SDT_ERROR_H
#define SDT_ERROR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sdt_error_code {
    SDT_ERR_OK = 0,
    SDT_ERR_INTERRUPTED = 1,
    SDT_ERR_INVALID_ARGUMENT = -1,
    SDT_ERR_UNSUPPORTED = -4,
    SDT_ERR_OUT_OF_MEMORY = -5,
    SDT_ERR_IO = -6,
    SDT_ERR_BAD_FORMAT = -7,
    SDT_ERR_VALIDATION = -8,
    SDT_ERR_BAD_STATE = -9,
    SDT_ERR_ALREADY_EXISTS = -11,
    SDT_ERR_NOT_FOUND = -12,
    SDT_ERR_NUMERICAL = -13,
    SDT_ERR_SCALER_MISUSE = -14,
    SDT_ERR_NO_GRADIENT = -15,
    SDT_ERR_DEVICE = -16,
    SDT_ERR_INTERNAL = -17,
} sdt_error_code;

#define SDT_ERROR_MESSAGE_MAX 1024

typedef struct sdt_error {
    sdt_error_code code;                 /* SDT_ERR_OK until something fails */
    char message[SDT_ERROR_MESSAGE_MAX]; /* one sentence: what, where, and the fix */
} sdt_error;

/* An empty error (code OK, no message). */
void sdt_error_clear(sdt_error *e);

/* Records code and a formatted sentence in e (e may be NULL) and returns false, so a failing
 * path reads `return sdt_fail(e, SDT_ERR_IO, "%s: ...", path);`. */
bool sdt_fail(sdt_error *e, sdt_error_code code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The same with a va_list, for a layer's own failing helper. */
bool sdt_failv(sdt_error *e, sdt_error_code code, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));

/* Puts context in front of e's sentence ("<context>: <sentence>"), keeping its code; returns false. */
bool sdt_error_wrap(sdt_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Adds to the end of e's sentence (cut at the buffer's end), keeping its code. */
void sdt_error_append(sdt_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The code for a failed system call's errno: ENOENT is NOT_FOUND, ENOMEM OUT_OF_MEMORY,
 * EEXIST ALREADY_EXISTS, anything else IO. */
sdt_error_code sdt_error_code_from_errno(int errno_value);

/* The error's status name, e.g. "IO" (for logs and tests). */
const char *sdt_error_code_name(sdt_error_code code);

#ifdef __cplusplus
}
#endif

#endif
