/* param_cli_common.c - the parity CLIs' arguments and file I/O (see param_cli_common.h). */
#include "param_cli_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *cli_arg(int argc, char **argv, const char *key)
{
    for (int i = 2; i + 1 < argc; i++)
        if (!strcmp(argv[i], key)) return argv[i + 1];
    return NULL;
}

bool cli_flag(int argc, char **argv, const char *key)
{
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], key)) return true;
    return false;
}

long cli_num(int argc, char **argv, const char *key)
{
    const char *v = cli_arg(argc, argv, key);
    if (!v) {
        fprintf(stderr, "%s: %s is required\n", param_cli_name, key);
        exit(2);
    }
    return atol(v);
}

void *cli_read_all(const char *path, size_t bytes)
{
    FILE *f = path ? fopen(path, "rb") : NULL;
    void *buf = malloc(bytes ? bytes : 1);
    if (!f || !buf || fread(buf, 1, bytes, f) != bytes) {
        fprintf(stderr, "%s: cannot read %zu bytes from %s\n", param_cli_name, bytes, path ? path : "(no file given)");
        exit(1);
    }
    fclose(f);
    return buf;
}

void cli_write_all(const char *path, const void *data, size_t bytes)
{
    FILE *f = path ? fopen(path, "wb") : NULL;
    if (!f || fwrite(data, 1, bytes, f) != bytes || fclose(f) != 0) {
        fprintf(stderr, "%s: cannot write %s\n", param_cli_name, path ? path : "(no file given)");
        exit(1);
    }
}

int cli_fail(const sdt_error *e)
{
    fprintf(stderr, "%s: %s\n", param_cli_name, e->message);
    return 1;
}
