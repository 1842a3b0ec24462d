/* file_name.h - the one name rule for everything a user names that becomes a file and
 * a prompt word (embeddings, hypernetworks): A1111's character set, refused rather
 * than rewritten behind the user's back, or sanitised A1111's way for hosts that
 * prefer it. */
#ifndef SDT_DATA_FILE_NAME_H
#define SDT_DATA_FILE_NAME_H

#include <stdbool.h>
#include <stddef.h>

#include "sdt_error.h"

/* Refused: empty, longer than max_bytes, not UTF-8, a leading '.', or any character
 * outside letters, digits, space, '.', '_', '-' (this refuses '/', '\', "../", control
 * characters and ':'). `what` names the thing in the sentence ("embedding",
 * "hypernetwork"). The error is VALIDATION. */
bool sdt_file_name_check(const char *what, const char *name, size_t max_bytes, sdt_error *error);
/* A1111's rule: drop every character outside letters, digits and "._- ", and leading
 * dots; cut to max_bytes on a character boundary. Newly allocated; may be "". */
char *sdt_file_name_sanitise(const char *name, size_t max_bytes);

#endif
