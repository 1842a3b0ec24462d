/* c_json.h - JSON text through cJSON, the same bytes in every locale.
 *
 * cJSON prints numbers with sprintf and parses them with strtod, swapping '.' for the first byte
 * of localeconv()'s decimal point: a host in a multi-byte-separator locale (ps_AF.UTF-8's "٫",
 * two bytes) gets files with a lone 0xAB byte and refuses every number it reads back. Every
 * cJSON print and parse in the plugin and its tools goes through here, which runs the call in
 * the C locale on this thread (tests/source/check_locale_numbers.py fails on a raw call). */
#ifndef SDT_C_JSON_H
#define SDT_C_JSON_H

#include <cjson/cJSON.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The JSON value that is all of text[0..len) (NULL when it is not). */
cJSON *sdt_json_parse(const char *text, size_t len);
/* The JSON value at the start of text[0..len); *end gets where it stops (trailing bytes allowed). */
cJSON *sdt_json_parse_prefix(const char *text, size_t len, const char **end);
/* Indented (cJSON_Print) and compact (cJSON_PrintUnformatted) text; free with cJSON_free. */
char *sdt_json_print(const cJSON *json);
char *sdt_json_print_compact(const cJSON *json);

#ifdef __cplusplus
}
#endif

#endif
