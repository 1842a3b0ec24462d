/* copy_out.h - how data crosses the boundary: into host-owned buffers, and struct_size-aware
 * copies of growable structs (ABI rules 3 and 5 in docs/abi.md). */
#ifndef SDT_PLUGIN_COPY_OUT_H
#define SDT_PLUGIN_COPY_OUT_H

#include <stddef.h>
#include <stdint.h>

#include "sdtrain.h"

/* Copies src (NULL = "") into buf, NUL-terminated and truncated to fit. *needed (may be NULL)
 * gets strlen(src)+1. OK, or BUFFER_TOO_SMALL when truncated (including buf NULL with size 0,
 * the size query). buf NULL with a non-zero size is INVALID_ARGUMENT. */
sdt_status sdt_copy_string_out(const char *src, char *buf, uint32_t buf_size, uint32_t *needed);

/* Reads a host input struct whose first field is uint32_t struct_size into dst (sizeof = dst_size),
 * which the caller has filled with defaults: only min(struct_size, dst_size) bytes are taken,
 * so an older host's smaller struct keeps the defaults for the fields it does not know.
 * dst's struct_size becomes dst_size. false when struct_size is smaller than the field itself. */
bool sdt_struct_read_in(void *dst, size_t dst_size, const void *host_src);

/* Writes src (sizeof = src_size, fully filled by the plugin) into a host output struct, only
 * min(host struct_size, src_size) bytes, keeping the host's struct_size. false as above. */
bool sdt_struct_write_out(void *host_dst, const void *src, size_t src_size);

/* config_defaults() and its kind: the plugin's filled defaults into the host's struct (as
 * sdt_struct_write_out); INVALID_ARGUMENT for NULL or an unset struct_size. */
sdt_status sdt_defaults_write_out(void *host_dst, const void *defaults, size_t size);

/* The struct_size the host declared; 0 for NULL. */
uint32_t sdt_struct_size_of(const void *host_struct);

#endif
