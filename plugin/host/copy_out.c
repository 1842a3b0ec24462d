/* copy_out.c - buffers and growable structs across the boundary (see copy_out.h). */
#include <stdbool.h>
#include <string.h>

#include "host/copy_out.h"

sdt_status sdt_copy_string_out(const char *src, char *buf, uint32_t buf_size, uint32_t *needed)
{
    if (!src) src = "";
    size_t len = strlen(src);
    if (needed) *needed = len + 1 > UINT32_MAX ? UINT32_MAX : (uint32_t)(len + 1);
    if (!buf) return buf_size == 0 ? SDT_STATUS_BUFFER_TOO_SMALL : SDT_STATUS_INVALID_ARGUMENT;
    if (buf_size == 0) return SDT_STATUS_BUFFER_TOO_SMALL;
    size_t n = len < buf_size ? len : buf_size - 1;
    memcpy(buf, src, n);
    buf[n] = '\0';
    return n == len ? SDT_STATUS_OK : SDT_STATUS_BUFFER_TOO_SMALL;
}

uint32_t sdt_struct_size_of(const void *host_struct)
{
    uint32_t size = 0;
    if (host_struct) memcpy(&size, host_struct, sizeof size);
    return size;
}

bool sdt_struct_read_in(void *dst, size_t dst_size, const void *host_src)
{
    uint32_t host_size = sdt_struct_size_of(host_src);
    if (host_size < sizeof(uint32_t)) return false;
    size_t n = host_size < dst_size ? host_size : dst_size;
    memcpy(dst, host_src, n);
    uint32_t own = (uint32_t)dst_size;
    memcpy(dst, &own, sizeof own);
    return true;
}

sdt_status sdt_defaults_write_out(void *host_dst, const void *defaults, size_t size)
{
    return sdt_struct_write_out(host_dst, defaults, size) ? SDT_STATUS_OK : SDT_STATUS_INVALID_ARGUMENT;
}

bool sdt_struct_write_out(void *host_dst, const void *src, size_t src_size)
{
    uint32_t host_size = sdt_struct_size_of(host_dst);
    if (host_size < sizeof(uint32_t)) return false;
    size_t n = host_size < src_size ? host_size : src_size;
    /* Skip the struct_size field itself: the host's value describes the host's struct. */
    memcpy((char *)host_dst + sizeof(uint32_t), (const char *)src + sizeof(uint32_t), n - sizeof(uint32_t));
    return true;
}
