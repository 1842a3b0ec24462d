/* template.c - load, check and fill prompt templates; see template.h. */
#include "data/template.h"

#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_read.h"

void sdt_template_free(sdt_template *t)
{
    if (!t) return;
    for (int i = 0; i < t->n_lines; i++) free(t->lines[i]);
    free(t->lines);
    memset(t, 0, sizeof(*t));
}

/* Python's str.strip() for the ASCII whitespace a text file has. */
static char *stripped_copy(const char *b, const char *e)
{
    while (b < e && g_ascii_isspace(*b)) b++;
    while (e > b && g_ascii_isspace(e[-1])) e--;
    char *s = malloc((size_t)(e - b) + 1);
    if (!s) return NULL;
    memcpy(s, b, (size_t)(e - b));
    s[e - b] = 0;
    return s;
}

bool sdt_template_parse(const char *text, size_t len, const char *origin, sdt_template *out, sdt_error *error)
{
    memset(out, 0, sizeof(*out));
    if (!origin) origin = "template";
    if (memchr(text, 0, len) || !g_utf8_validate(text, (gssize)len, NULL)) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: the template is not UTF-8 text; save it as plain UTF-8", origin);
        return false;
    }
    const char *p = text, *end = text + len;
    if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3;
    while (p < end) {
        /* Universal newlines: \n, \r\n and \r all end a line, as Python's readlines() does. */
        const char *e = p;
        while (e < end && *e != '\n' && *e != '\r') e++;
        char **grown = realloc(out->lines, (size_t)(out->n_lines + 1) * sizeof(char *));
        char *line = grown ? stripped_copy(p, e) : NULL;
        if (grown) out->lines = grown;
        if (!line) {
            sdt_template_free(out);
            sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory reading the template", origin);
            return false;
        }
        out->lines[out->n_lines++] = line;
        if (strstr(line, "[name]")) out->has_name = true;
        if (strstr(line, "[filewords]")) out->has_filewords = true;
        if (e < end && *e == '\r' && e + 1 < end && e[1] == '\n') e++;
        p = e + 1;
    }
    return true;
}

bool sdt_template_load(const char *path, sdt_template *out, sdt_error *error)
{
    memset(out, 0, sizeof(*out));
    char *text = NULL;
    size_t len = 0;
    if (!sdt_file_read_all(path, "prompt template", SDT_FILE_LIMIT_TEXT, &text, &len, error)) {
        sdt_error_append(error, "; choose an existing template file");
        return false;
    }
    bool ok = sdt_template_parse(text, len, path, out, error);
    free(text);
    return ok;
}

bool sdt_template_check_for_embedding(const sdt_template *t, const char *origin, sdt_error *error)
{
    if (!origin) origin = "template";
    if (t->n_lines == 0) {
        sdt_fail(error, SDT_ERR_NO_GRADIENT,
                 "%s: the prompt template is empty; add lines such as \"a photo of [name]\"", origin);
        return false;
    }
    if (!t->has_name) {
        sdt_fail(error, SDT_ERR_NO_GRADIENT,
                 "%s: no line of the prompt template contains [name], so the embedding would never appear in a prompt "
                 "and would learn nothing; use a template such as \"a photo of [name], [filewords]\"",
                 origin);
        return false;
    }
    return true;
}

int sdt_template_pick(const sdt_template *t, sdt_data_rng *rng)
{
    if (t->n_lines <= 0) return -1;
    return (int)sdt_data_rng_below(rng, (uint64_t)t->n_lines);
}

char *sdt_string_replace_all(const char *text, const char *needle, const char *replacement)
{
    size_t nl = strlen(needle), rl = strlen(replacement), count = 0;
    if (nl == 0) return strdup(text);
    for (const char *p = text; (p = strstr(p, needle)); p += nl) count++;
    size_t size = strlen(text) + count * rl - count * nl + 1;
    char *out = malloc(size), *o = out;
    if (!out) return NULL;
    for (const char *p = text;;) {
        const char *hit = strstr(p, needle);
        if (!hit) {
            strcpy(o, p);
            break;
        }
        memcpy(o, p, (size_t)(hit - p));
        o += hit - p;
        memcpy(o, replacement, rl);
        o += rl;
        p = hit + nl;
    }
    return out;
}

char *sdt_template_fill(const char *line, const char *name, const char *filewords)
{
    char *with_words = sdt_string_replace_all(line, "[filewords]", filewords ? filewords : "");
    if (!with_words) return NULL;
    char *filled = sdt_string_replace_all(with_words, "[name]", name ? name : "");
    free(with_words);
    return filled;
}
