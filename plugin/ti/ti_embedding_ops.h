/* ti_embedding_ops.h - an embedding's files outside training: creating one from a spec and
 * reading one of any format (ti_embedding_ops.c). The ABI side (api/part_files.c) checks handles,
 * struct sizes and the plain spec fields first.
 *
 * Every function writes one sentence (file, field, fix) into *error on failure. Configs and specs
 * arrive complete (current sizeof, defaults filled in); their strings are borrowed for the call. */
#ifndef SDT_TI_EMBEDDING_OPS_H
#define SDT_TI_EMBEDDING_OPS_H

#include "sdt_error.h"

#include <stddef.h>

#include "sdtrain.h"

/* Writes the new embedding file; its path goes into path_out. */
bool ti_create_embedding(const sdt_embedding_spec *spec, const sdt_host_callbacks *host, char *path_out,
                         size_t path_out_size, sdt_error *error);

/* Reads an embedding file. *json_out (NULL when not wanted) receives a malloc'd JSON object
 * the caller frees with free(). */
bool ti_inspect_file(const char *path, sdt_embedding_info *info, char **json_out, sdt_error *error);

#endif
