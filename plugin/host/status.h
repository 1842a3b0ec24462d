/* status.h - names of the ABI status codes (for logs and the entry's status_name). */
#ifndef SDT_PLUGIN_STATUS_H
#define SDT_PLUGIN_STATUS_H

#include "sdt_error.h"
#include "sdtrain.h"

/* A constant name such as "SDT_STATUS_IO"; "SDT_STATUS_UNKNOWN" for codes this build lacks. */
const char *sdt_status_name(sdt_status status);

/* The ABI status of an internal error value: the same number (checked in status.c), so the
 * layer that failed decides the status and nothing above it guesses. A failure recorded
 * without a code (a bug) reads as INTERNAL. */
sdt_status sdt_status_of(const sdt_error *error);

#endif
