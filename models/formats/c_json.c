/* c_json.c - see c_json.h. */
#include "c_json.h"

#include <stdbool.h>

#include "c_numeric.h"

cJSON *sdt_json_parse(const char *text, size_t len)
{
    locale_t previous = sdt_c_locale_enter();
    cJSON *json = cJSON_ParseWithLength(text, len);
    sdt_c_locale_leave(previous);
    return json;
}

cJSON *sdt_json_parse_prefix(const char *text, size_t len, const char **end)
{
    locale_t previous = sdt_c_locale_enter();
    cJSON *json = cJSON_ParseWithLengthOpts(text, len, end, false);
    sdt_c_locale_leave(previous);
    return json;
}

char *sdt_json_print(const cJSON *json)
{
    locale_t previous = sdt_c_locale_enter();
    char *text = cJSON_Print(json);
    sdt_c_locale_leave(previous);
    return text;
}

char *sdt_json_print_compact(const cJSON *json)
{
    locale_t previous = sdt_c_locale_enter();
    char *text = cJSON_PrintUnformatted(json);
    sdt_c_locale_leave(previous);
    return text;
}
