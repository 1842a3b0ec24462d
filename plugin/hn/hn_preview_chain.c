/* hn_preview_chain.c - see hn_preview_chain.h. */
#include "hn/hn_preview_chain.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "c_numeric.h"
#include "hn/hn_file.h"

/* One "FILE[:STRENGTH]" entry (trimmed) into the chain. */
static bool parse_entry(sdt_hn_preview_chain *c, const char *begin, const char *end, const char *field,
                        sdt_error *error)
{
    while (begin < end && isspace((unsigned char)*begin)) begin++;
    while (end > begin && isspace((unsigned char)end[-1])) end--;
    if (begin == end) return true; /* "a.pt; ; b.pt" or a trailing ';' */
    if (c->count == SDT_HN_PREVIEW_EXTRA_MAX)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%s names more than %d hypernetworks; the chain holds %d with the "
                        "trained one, so leave some out",
                        field, SDT_HN_PREVIEW_EXTRA_MAX, SDT_HN_MAX_CHAIN);
    char *entry = strndup(begin, (size_t)(end - begin));
    if (!entry) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory");
    double strength = 1.0;
    char *colon = strrchr(entry, ':'), *num_end = NULL;
    if (colon) {
        double s = sdt_c_strtod(colon + 1, &num_end);
        if (num_end != colon + 1 && *num_end == '\0') { /* a number: the strength */
            if (!(s >= -10 && s <= 10)) {
                sdt_fail(error, SDT_ERR_VALIDATION, "%s: the strength of \"%s\" must be a number in [-10, 10]", field,
                         entry);
                free(entry);
                return false;
            }
            strength = s;
            *colon = '\0';
        }
    }
    if (access(entry, R_OK) != 0) {
        sdt_fail(error, SDT_ERR_NOT_FOUND,
                 "%s: %s cannot be read; check the path (entries are FILE or "
                 "FILE:STRENGTH, separated by ';')",
                 field, entry);
        free(entry);
        return false;
    }
    c->paths[c->count] = entry;
    c->strengths[c->count++] = (float)strength;
    return true;
}

bool sdt_hn_preview_chain_parse(sdt_hn_preview_chain *c, const char *list, const char *field, float strength,
                                double preview_strength, sdt_error *error)
{
    memset(c, 0, sizeof *c);
    c->trained_strength = strength;
    c->trained_preview_strength = preview_strength != 0 ? (float)preview_strength : strength;
    for (const char *p = list; p && *p;) {
        const char *semi = strchr(p, ';');
        const char *end = semi ? semi : p + strlen(p);
        if (!parse_entry(c, p, end, field, error)) return false;
        p = semi ? semi + 1 : end;
    }
    return true;
}

bool sdt_hn_preview_chain_bind(sdt_hn_preview_chain *c, sdt_hn_binding *b, sdt_backend *be, sdt_error *error)
{
    for (int k = 0; k < c->count; k++) {
        if (!(c->members[k] = sdt_hn_load(c->paths[k], be, error))) return false;
        if (!sdt_hn_binding_add(b, c->members[k], 0.0f, false, error)) return false;
    }
    return true;
}

/* The binding's strengths are checked finite when set; these were checked when parsed. */
static void set_all(const sdt_hn_preview_chain *c, sdt_hn_binding *b, float trained, bool preview)
{
    sdt_error ignored;
    sdt_error_clear(&ignored);
    sdt_hn_binding_set_strength(b, 0, trained, &ignored);
    for (int k = 0; k < c->count && k + 1 < sdt_hn_binding_count(b); k++)
        sdt_hn_binding_set_strength(b, k + 1, preview ? c->strengths[k] : 0.0f, &ignored);
}

void sdt_hn_preview_chain_begin(const sdt_hn_preview_chain *c, sdt_hn_binding *b)
{
    set_all(c, b, c->trained_preview_strength, true);
}

void sdt_hn_preview_chain_end(const sdt_hn_preview_chain *c, sdt_hn_binding *b)
{
    set_all(c, b, c->trained_strength, false);
}

void sdt_hn_preview_chain_free(sdt_hn_preview_chain *c)
{
    for (int k = 0; k < c->count; k++) {
        sdt_hn_free(c->members[k]);
        free(c->paths[k]);
    }
    memset(c, 0, sizeof *c);
}
