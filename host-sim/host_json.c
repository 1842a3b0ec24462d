/* host_json.c - see host_json.h. */
#include "host_json.h"

#include <locale.h>

/* glibc's "C" locale object is static: newlocale returns it without allocating. */
static locale_t enter_c(void)
{
    locale_t c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    return c == (locale_t)0 ? (locale_t)0 : uselocale(c);
}

static void leave_c(locale_t previous)
{
    if (previous != (locale_t)0) uselocale(previous);
}

cJSON *host_json_parse(const char *text, size_t len)
{
    locale_t previous = enter_c();
    cJSON *json = cJSON_ParseWithLength(text, len);
    leave_c(previous);
    return json;
}

char *host_json_print(const cJSON *json)
{
    locale_t previous = enter_c();
    char *text = cJSON_PrintUnformatted(json);
    leave_c(previous);
    return text;
}
