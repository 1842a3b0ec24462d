/* host_json.h - sdt-host's JSON (the panel's requests, replies and events; inspect's model
 * configs), the same bytes in every locale.
 * sdt-host runs in the user's locale (setlocale(LC_ALL, "")), and cJSON prints and parses numbers
 * through it, handling only a one-byte decimal point: ps_AF.UTF-8's "٫" would put a lone 0xAB
 * byte in every reply with a number. These run the cJSON call in the C locale on this thread
 * (the plugin's own calls go through models/formats/c_json.h, which sdt-host cannot include). */
#ifndef SDT_HOST_JSON_H
#define SDT_HOST_JSON_H

#include <cjson/cJSON.h>
#include <stddef.h>

cJSON *host_json_parse(const char *text, size_t len);
/* Compact text (cJSON_PrintUnformatted); free with cJSON_free. */
char *host_json_print(const cJSON *json);

#endif
