/* handle.c - last-error sentences per handle (see handle.h). */
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "host/copy_out.h"
#include "api/handle.h"
#include "host/status.h"
#include "c_numeric.h"

void sdt_handle_init(sdt_handle *h, uint32_t magic)
{
    h->magic = magic;
    pthread_mutex_init(&h->error_lock, NULL);
    h->last_error[0] = '\0';
}

void sdt_handle_fini(sdt_handle *h)
{
    h->magic = 0;
    pthread_mutex_destroy(&h->error_lock);
}

bool sdt_handle_is(const sdt_handle *h, uint32_t magic)
{
    return h && h->magic == magic;
}

sdt_status sdt_handle_fail_text(sdt_handle *h, sdt_status status, const char *sentence)
{
    pthread_mutex_lock(&h->error_lock);
    snprintf(h->last_error, sizeof h->last_error, "%s", sentence ? sentence : "");
    pthread_mutex_unlock(&h->error_lock);
    return status;
}

sdt_status sdt_handle_fail(sdt_handle *h, sdt_status status, const char *fmt, ...)
{
    char sentence[SDT_ERROR_SENTENCE_MAX];
    va_list ap;
    va_start(ap, fmt);
    sdt_c_vsnprintf(sentence, sizeof sentence, fmt, ap);
    va_end(ap);
    return sdt_handle_fail_text(h, status, sentence);
}

sdt_status sdt_handle_fail_error(sdt_handle *h, const sdt_error *error)
{
    return sdt_handle_fail_text(h, sdt_status_of(error), error ? error->message : "");
}

void sdt_handle_clear_error(sdt_handle *h)
{
    sdt_handle_fail_text(h, SDT_STATUS_OK, "");
}

sdt_status sdt_handle_copy_error(const sdt_handle *h, char *buf, uint32_t buf_size, uint32_t *needed)
{
    char copy[SDT_ERROR_SENTENCE_MAX];
    /* The lock is logically const: reading the sentence does not change the handle. */
    pthread_mutex_t *lock = (pthread_mutex_t *)&h->error_lock;
    pthread_mutex_lock(lock);
    memcpy(copy, h->last_error, sizeof copy);
    pthread_mutex_unlock(lock);
    return sdt_copy_string_out(copy, buf, buf_size, needed);
}

sdt_status sdt_handle_inspect_out(sdt_handle *h, void *info, const void *found, size_t found_size, char *json,
                                  char *json_buf, uint32_t json_buf_size, uint32_t *json_needed)
{
    if (info) sdt_struct_write_out(info, found, found_size);
    sdt_status st = SDT_STATUS_OK;
    if (json_buf || json_needed) st = sdt_copy_string_out(json, json_buf, json_buf_size, json_needed);
    free(json);
    if (st != SDT_STATUS_OK)
        return sdt_handle_fail(h, st,
                               "inspect(): the JSON did not fit json_buf (%u bytes); *json_needed says the size.",
                               (unsigned)json_buf_size);
    return SDT_STATUS_OK;
}
