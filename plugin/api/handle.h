/* handle.h - what every opaque ABI handle has in common: a magic tag to catch a wrong or freed
 * pointer, and the sentence of its last error (ABI rule 4), readable from any thread. */
#ifndef SDT_PLUGIN_HANDLE_H
#define SDT_PLUGIN_HANDLE_H

#include <pthread.h>
#include <stdint.h>

#include "sdt_error.h"
#include "sdtrain.h"

#define SDT_ERROR_SENTENCE_MAX 1024

typedef struct sdt_handle {
    uint32_t magic;             /* one value per handle kind; cleared on destroy */
    pthread_mutex_t error_lock; /* the worker writes errors while the UI thread reads them */
    char last_error[SDT_ERROR_SENTENCE_MAX];
} sdt_handle;

void sdt_handle_init(sdt_handle *h, uint32_t magic);
void sdt_handle_fini(sdt_handle *h);

/* true when h is non-NULL and carries this magic. */
bool sdt_handle_is(const sdt_handle *h, uint32_t magic);

/* Records a sentence (printf format) as the handle's last error and returns status unchanged,
 * so failing paths read: return sdt_handle_fail(h, SDT_STATUS_IO, "...", ...); */
sdt_status sdt_handle_fail(sdt_handle *h, sdt_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records an already formed sentence with a status the caller decided (ABI-side checks). */
sdt_status sdt_handle_fail_text(sdt_handle *h, sdt_status status, const char *sentence);

/* Records an internal error value: its sentence, and its status as the return value. */
sdt_status sdt_handle_fail_error(sdt_handle *h, const sdt_error *error);

/* Clears the last error: called at the start of every ABI call that can fail. */
void sdt_handle_clear_error(sdt_handle *h);

/* The end of every factory's inspect(): found (filled by the plugin, found_size bytes) into
 * the host's info when info is non-NULL, json (freed here; may be NULL when not wanted) into the
 * host's buffer when json_buf or json_needed is set; a JSON that does not fit is
 * BUFFER_TOO_SMALL with a sentence. */
sdt_status sdt_handle_inspect_out(sdt_handle *h, void *info, const void *found, size_t found_size, char *json,
                                  char *json_buf, uint32_t json_buf_size, uint32_t *json_needed);

/* get_last_error for every handle kind. */
sdt_status sdt_handle_copy_error(const sdt_handle *h, char *buf, uint32_t buf_size, uint32_t *needed);

#endif
