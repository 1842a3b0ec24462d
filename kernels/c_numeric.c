/* c_numeric.c - see c_numeric.h. */
#include "c_numeric.h"

#include <locale.h>
#include <stdio.h>
#include <stdlib.h>

/* glibc's "C" locale object is static: newlocale returns it without allocating, so there is
 * nothing to free and nothing to race on. */
static locale_t c_locale(void)
{
    return newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

/* Switches this thread to the C locale; the returned value restores what it had. */
locale_t sdt_c_locale_enter(void)
{
    locale_t c = c_locale();
    return c == (locale_t)0 ? (locale_t)0 : uselocale(c);
}

void sdt_c_locale_leave(locale_t previous)
{
    if (previous != (locale_t)0) uselocale(previous);
}

int sdt_c_vsnprintf(char *buf, size_t size, const char *fmt, va_list ap)
{
    locale_t previous = sdt_c_locale_enter();
    int n = vsnprintf(buf, size, fmt, ap);
    sdt_c_locale_leave(previous);
    return n;
}

int sdt_c_snprintf(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = sdt_c_vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    return n;
}

double sdt_c_strtod(const char *text, char **end)
{
    locale_t previous = sdt_c_locale_enter();
    double v = strtod(text, end);
    sdt_c_locale_leave(previous);
    return v;
}
