/* file_name.c - name rules shared by every trained file; see file_name.h. */
#include "file_name.h"

#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool allowed_char(gunichar c)
{
    return g_unichar_isalnum(c) || c == ' ' || c == '.' || c == '_' || c == '-';
}

bool sdt_file_name_check(const char *what, const char *name, size_t max_bytes, sdt_error *error)
{
    if (!name || !name[0]) {
        sdt_fail(error, SDT_ERR_VALIDATION, "the %s name is empty; give it a name such as \"my-style\"", what);
        return false;
    }
    if (strlen(name) > max_bytes) {
        sdt_fail(error, SDT_ERR_VALIDATION,
                 "the %s name is longer than %zu bytes; choose a shorter "
                 "name",
                 what, max_bytes);
        return false;
    }
    if (!g_utf8_validate(name, -1, NULL)) {
        sdt_fail(error, SDT_ERR_VALIDATION, "the %s name is not valid UTF-8 text; retype it", what);
        return false;
    }
    if (name[0] == '.') {
        sdt_fail(error, SDT_ERR_VALIDATION,
                 "the %s name \"%s\" starts with '.', which would make a hidden file or a "
                 "path; start it with a letter or digit",
                 what, name);
        return false;
    }
    for (const char *p = name; *p; p = g_utf8_next_char(p)) {
        gunichar c = g_utf8_get_char(p);
        if (!allowed_char(c)) {
            char shown[16];
            if (c < 0x20 || c == 0x7f)
                snprintf(shown, sizeof(shown), "0x%02x", (unsigned)c);
            else
                snprintf(shown, sizeof(shown), "'%.*s'", (int)(g_utf8_next_char(p) - p), p);
            sdt_fail(error, SDT_ERR_VALIDATION,
                     "the %s name \"%s\" contains %s; use only letters, digits, spaces, "
                     "'.', '_' and '-' (the name becomes a file name and a prompt word)",
                     what, name, shown);
            return false;
        }
    }
    return true;
}

char *sdt_file_name_sanitise(const char *name, size_t max_bytes)
{
    GString *out = g_string_new(NULL);
    if (name && g_utf8_validate(name, -1, NULL))
        for (const char *p = name; *p; p = g_utf8_next_char(p)) {
            gunichar c = g_utf8_get_char(p);
            if (allowed_char(c) && !(out->len == 0 && c == '.')) g_string_append_unichar(out, c);
        }
    if (out->len > max_bytes) g_string_truncate(out, max_bytes);
    /* truncation may split a UTF-8 sequence: drop the partial tail */
    const gchar *end;
    if (!g_utf8_validate(out->str, (gssize)out->len, &end)) g_string_truncate(out, (gsize)(end - out->str));
    char *result = strdup(out->str);
    g_string_free(out, TRUE);
    return result;
}
