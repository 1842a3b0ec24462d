/* c_numeric.h - numbers as text, the same in every locale.
 *
 * A host that calls setlocale(LC_ALL, "") in a comma-decimal locale (de_DE, fr_FR, ...) makes
 * printf's "%g" write "0,005" and strtod read "0.005" as 0. Files, schedules, options and
 * messages must mean the same everywhere, and the plugin must not change the host's locale,
 * so every number the plugin prints or parses goes through these: they use the C locale for
 * the one call (uselocale: this thread only, restored before returning). */
#ifndef SDT_C_NUMERIC_H
#define SDT_C_NUMERIC_H

#include <locale.h>
#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

int sdt_c_vsnprintf(char *buf, size_t size, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
int sdt_c_snprintf(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* For a library call that reads the locale itself (cJSON's number printing and parsing): run it
 * between these, on this thread: sdt_c_locale_leave(sdt_c_locale_enter()) around the call. */
locale_t sdt_c_locale_enter(void);
void sdt_c_locale_leave(locale_t previous);

/* strtod with '.' as the decimal point whatever the locale. */
double sdt_c_strtod(const char *text, char **end);

#ifdef __cplusplus
}
#endif

#endif
