/* core_log.h - the log callback the numerics core reports warnings through.
 *
 * The library never prints: warnings (grads not zeroed between steps, a skipped
 * step, the fallback firing) go to a callback the caller provides, which the ABI
 * layer forwards to the host. A NULL callback drops them.
 */
#ifndef SDT_CORE_LOG_H
#define SDT_CORE_LOG_H

typedef enum sdt_core_log_level {
    SDT_CORE_LOG_DEBUG = 0,
    SDT_CORE_LOG_INFO,
    SDT_CORE_LOG_WARNING,
    SDT_CORE_LOG_ERROR,
} sdt_core_log_level;

typedef void (*sdt_core_log_fn)(void *user, sdt_core_log_level level, const char *message);

#endif
