/* preview_prompts.c - see preview_prompts.h. */
#include "data/preview_prompts.h"

#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "file_read.h"

void sdt_preview_prompts_free(sdt_preview_prompts *p)
{
    for (int i = 0; p->prompts && i < p->count; i++) free(p->prompts[i]);
    free(p->prompts);
    p->prompts = NULL;
    p->count = 0;
}

bool sdt_preview_prompts_load(const char *path, sdt_preview_prompts *out, sdt_error *error)
{
    out->count = 0;
    out->prompts = NULL;
    char *text = NULL;
    size_t len = 0;
    if (!sdt_file_read_all(path, "preview prompts file", SDT_FILE_LIMIT_TEXT, &text, &len, error)) {
        sdt_error_append(error, "; set preview prompts to a text file with one prompt per line");
        return false;
    }
    bool ok = true;
    if (memchr(text, 0, len))
        ok = sdt_fail(error, SDT_ERR_VALIDATION,
                      "%s: the preview prompts file holds a NUL byte; it must be UTF-8 text with "
                      "one prompt per line",
                      path);
    out->prompts = calloc(SDT_PREVIEW_GRID_MAX_ROWS, sizeof(char *));
    if (ok && !out->prompts) ok = sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory reading %s", path);
    char *line = text;
    for (int number = 1; ok && line && *line; number++) {
        char *end = strchr(line, '\n');
        if (end) *end = '\0';
        if (!g_utf8_validate(line, -1, NULL)) {
            ok = sdt_fail(error, SDT_ERR_VALIDATION,
                          "%s line %d is not UTF-8 text; save the preview prompts file as UTF-8", path, number);
            break;
        }
        g_strstrip(line); /* also drops a Windows line end's \r */
        if (line[0] && line[0] != '#') {
            if (out->count == SDT_PREVIEW_GRID_MAX_ROWS) {
                ok = sdt_fail(error, SDT_ERR_VALIDATION,
                              "%s line %d is prompt %d; a preview grid takes at most %d prompts "
                              "(comment the rest out with #)",
                              path, number, out->count + 1, SDT_PREVIEW_GRID_MAX_ROWS);
                break;
            }
            if (!(out->prompts[out->count++] = strdup(line)))
                ok = sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory reading %s", path);
        }
        line = end ? end + 1 : NULL;
    }
    if (ok && out->count == 0)
        ok = sdt_fail(error, SDT_ERR_VALIDATION,
                      "%s has no prompt (only blank lines and # comments); write one prompt per "
                      "line",
                      path);
    free(text);
    if (!ok) sdt_preview_prompts_free(out);
    return ok;
}

/* One unsigned decimal number; *p moves past it. */
static bool read_number(const char **p, uint64_t *value)
{
    const char *s = *p;
    if (!g_ascii_isdigit(*s)) return false;
    uint64_t v = 0;
    for (; g_ascii_isdigit(*s); s++) {
        if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10) return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *p = s;
    *value = v;
    return true;
}

bool sdt_preview_seeds_parse(const char *text, const char *field, sdt_preview_seeds *out, sdt_error *error)
{
    memset(out, 0, sizeof *out);
    out->count = 1;
    if (!text || !text[0]) return true;
    const char *p = text;
    int n = 0;
    while (true) {
        while (*p == ' ') p++;
        if (n == SDT_PREVIEW_GRID_MAX_COLS)
            return sdt_fail(error, SDT_ERR_VALIDATION, "%s \"%s\" lists more than %d seeds; a preview grid takes 1..%d",
                            field, text, SDT_PREVIEW_GRID_MAX_COLS, SDT_PREVIEW_GRID_MAX_COLS);
        if (!read_number(&p, &out->seeds[n]))
            return sdt_fail(error, SDT_ERR_VALIDATION,
                            "%s \"%s\" is not a number of seeds (\"4\") or a list of seeds "
                            "(\"1, 2, 3\"): seeds are whole numbers from 0",
                            field, text);
        n++;
        while (*p == ' ') p++;
        if (!*p) break;
        if (*p++ != ',')
            return sdt_fail(error, SDT_ERR_VALIDATION,
                            "%s \"%s\" is not a number of seeds (\"4\") or a list of seeds "
                            "(\"1, 2, 3\", separated by commas)",
                            field, text);
    }
    if (n == 1) { /* one number: how many */
        if (out->seeds[0] < 1 || out->seeds[0] > SDT_PREVIEW_GRID_MAX_COLS)
            return sdt_fail(error, SDT_ERR_VALIDATION,
                            "%s is %s seeds; a preview grid takes 1..%d (or list the seeds, "
                            "\"1, 2, 3\")",
                            field, text, SDT_PREVIEW_GRID_MAX_COLS);
        out->count = (int)out->seeds[0];
        out->seeds[0] = 0;
        return true;
    }
    out->count = n;
    out->listed = true;
    return true;
}
