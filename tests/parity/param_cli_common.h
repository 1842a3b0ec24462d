/* param_cli_common.h - what the parity CLIs that drive a model from raw files share: their arguments
 * ("--key value" and "--flag" after the command word), reading and writing whole files, and failing with
 * the program's name. Each CLI defines param_cli_name (its name in messages). */
#ifndef SDT_TESTS_PARITY_PARAM_CLI_COMMON_H
#define SDT_TESTS_PARITY_PARAM_CLI_COMMON_H

#include <stdbool.h>
#include <stddef.h>

#include "sdt_error.h"

extern const char *const param_cli_name;

/* The value after key (argv[2] on; argv[1] is the command), or NULL. */
const char *cli_arg(int argc, char **argv, const char *key);
/* True when key stands among the arguments. */
bool cli_flag(int argc, char **argv, const char *key);
/* key's value as a number; exits 2 with a message when it is not given. */
long cli_num(int argc, char **argv, const char *key);
/* The first bytes of the file at path (malloc'd); exits 1 with a message when it cannot. */
void *cli_read_all(const char *path, size_t bytes);
/* Writes bytes to path; exits 1 with a message when it cannot. */
void cli_write_all(const char *path, const void *data, size_t bytes);
/* Prints e's sentence after the program's name; returns 1, main's exit status. */
int cli_fail(const sdt_error *e);

#endif
