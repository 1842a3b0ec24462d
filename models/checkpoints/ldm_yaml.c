/* ldm_yaml.c - the YAML subset of LDM configs; see ldm_yaml.h.
 *
 * Line-based: the text is cut into lines (blank and comment-only lines dropped), each with its
 * indentation; a recursive descent over them builds mappings and sequences, and each value on
 * a line is read by one small scanner (plain, quoted, flow sequence). Recursion is bounded by
 * SDT_YAML_MAX_DEPTH and the node count by SDT_YAML_MAX_NODES, so no input exhausts the stack
 * or memory. */
#include "ldm_yaml.h"

#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_read.h"
#include "c_numeric.h"

#define SDT_YAML_MAX_NODES 100000 /* Stability's configs have about 100 */

typedef struct yaml_line {
    const char *text; /* the first character after the indentation */
    size_t len;       /* up to the end of the line, '\r' dropped */
    int indent;       /* spaces before text */
    int number;       /* 1-based */
} yaml_line;

typedef struct yaml_parser {
    yaml_line *lines;
    size_t n, at;
    const char *path;
    size_t nodes;
    sdt_error *error;
} yaml_parser;

static bool fail(yaml_parser *p, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail(yaml_parser *p, int line, const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    sdt_c_vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return sdt_fail(p->error, SDT_ERR_BAD_FORMAT, "%s: line %d: %s", p->path, line, what);
}

static sdt_yaml_node *new_node(yaml_parser *p, sdt_yaml_kind kind, int line)
{
    if (++p->nodes > SDT_YAML_MAX_NODES) {
        fail(p, line,
             "more than %d values; an LDM config has a few hundred at most - this is not one (use the config that "
             "came with the checkpoint)",
             SDT_YAML_MAX_NODES);
        return NULL;
    }
    sdt_yaml_node *n = g_new0(sdt_yaml_node, 1);
    n->kind = kind;
    n->line = line;
    return n;
}

static void free_node(sdt_yaml_node *n)
{
    while (n) {
        sdt_yaml_node *next = n->next;
        free_node(n->first); /* depth is bounded by the parser */
        g_free(n->key);
        g_free(n->text);
        g_free(n);
        n = next;
    }
}

static void append_child(sdt_yaml_node *parent, sdt_yaml_node **tail, sdt_yaml_node *child)
{
    if (*tail)
        (*tail)->next = child;
    else
        parent->first = child;
    *tail = child;
    parent->count++;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t';
}

static const char *skip_spaces(const char *s, const char *end)
{
    while (s < end && is_space(*s)) s++;
    return s;
}

/* Nothing but spaces and maybe a comment from s to end. */
static bool rest_is_blank(const char *s, const char *end)
{
    s = skip_spaces(s, end);
    return s == end || *s == '#';
}

/* "- item" or a lone "-": a block sequence entry. */
static bool is_entry(const yaml_line *l)
{
    return l->text[0] == '-' && (l->len == 1 || is_space(l->text[1]));
}

/* The length of text's first bytes, at most max, that end on a whole UTF-8 character (for quoting
 * the start of a line in a sentence). */
static int utf8_prefix(const char *text, size_t len, size_t max)
{
    if (len <= max) return (int)len;
    while (max > 0 && ((unsigned char)text[max] & 0xC0) == 0x80) max--;
    return (int)max;
}

/* ---- scalars ---- */

static void append_utf8(GString *s, gunichar c)
{
    char buf[6];
    g_string_append_len(s, buf, g_unichar_to_utf8(c, buf));
}

static bool hex_value(const char *s, int digits, gunichar *out)
{
    gunichar v = 0;
    for (int i = 0; i < digits; i++) {
        int d = g_ascii_xdigit_value(s[i]);
        if (d < 0) return false;
        v = v * 16 + (gunichar)d;
    }
    *out = v;
    return true;
}

/* A "double-quoted" scalar starting at s (on '"'); *after: past the closing quote. */
static bool read_double_quoted(yaml_parser *p, const yaml_line *l, const char *s, const char *end, GString *out,
                               const char **after)
{
    for (s++; s < end; s++) {
        if (*s == '"') {
            *after = s + 1;
            return true;
        }
        if (*s != '\\') {
            g_string_append_c(out, *s);
            continue;
        }
        if (++s == end) break;
        gunichar c = 0;
        switch (*s) {
            case '\\':
            case '"':
            case '/':
            case ' ':
                g_string_append_c(out, *s);
                continue;
            case 'n':
                g_string_append_c(out, '\n');
                continue;
            case 't':
                g_string_append_c(out, '\t');
                continue;
            case 'r':
                g_string_append_c(out, '\r');
                continue;
            case 'x':
                if (end - s < 3 || !hex_value(s + 1, 2, &c)) break;
                s += 2;
                goto code_point;
            case 'u':
                if (end - s < 5 || !hex_value(s + 1, 4, &c)) break;
                s += 4;
                goto code_point;
            default:
                break;
        }
        return fail(p, l->number,
                    "the escape '\\%c' in a double-quoted string is not read here; write the character itself "
                    "or use \\\\, \\\", \\n, \\t, \\xNN or \\uNNNN",
                    g_ascii_isprint(*s) ? *s : '?');
    code_point:
        if (c == 0 || !g_unichar_validate(c))
            return fail(p, l->number,
                        "the escape for U+%04X in a double-quoted string is not a character a config can "
                        "hold; remove it",
                        (unsigned)c);
        append_utf8(out, c);
    }
    return fail(p, l->number,
                "a double-quoted string is not closed on its line; close it with '\"' (multi-line strings "
                "are not read here)");
}

/* A 'single-quoted' scalar ('' is a quote). */
static bool read_single_quoted(yaml_parser *p, const yaml_line *l, const char *s, const char *end, GString *out,
                               const char **after)
{
    for (s++; s < end; s++) {
        if (*s != '\'') {
            g_string_append_c(out, *s);
        } else if (s + 1 < end && s[1] == '\'') {
            g_string_append_c(out, '\'');
            s++;
        } else {
            *after = s + 1;
            return true;
        }
    }
    return fail(p, l->number,
                "a single-quoted string is not closed on its line; close it with \"'\" (multi-line strings "
                "are not read here)");
}

/* What a value may not start with, and why: YAML features outside the subset. */
static bool refuse_indicator(yaml_parser *p, const yaml_line *l, char c)
{
    switch (c) {
        case '&':
            return fail(p, l->number, "an anchor ('&') is not read here; write the value out in full");
        case '*':
            return fail(p, l->number, "an alias ('*') is not read here; write the value out in full");
        case '!':
            return fail(p, l->number, "a tag ('!') is not read here (a config needs none); remove it");
        case '|':
        case '>':
            return fail(p, l->number, "a block scalar ('%c') is not read here; write the value on one line, quoted", c);
        case '{':
            return fail(p, l->number, "a flow mapping ('{...}') is not read here; write its keys as an indented block");
        case '?':
            return fail(p, l->number, "a complex key ('?') is not read here; write 'key: value'");
        case '%':
        case '@':
        case '`':
            return fail(p, l->number, "a value may not start with '%c' in YAML; quote it", c);
        case ',':
        case ']':
        case '}':
            return fail(p, l->number, "'%c' has no opening bracket before it; quote the value or remove it", c);
        default:
            return true;
    }
}

/* A plain scalar from s up to stop_at (a flow sequence's ',' and ']') or a comment, trimmed. */
static const char *plain_end(const char *s, const char *end, bool in_flow)
{
    const char *e = s;
    while (e < end && !(in_flow && (*e == ',' || *e == ']')) && !(*e == '#' && e > s && is_space(e[-1]))) e++;
    while (e > s && is_space(e[-1])) e--;
    return e;
}

/* One scalar (quoted or plain) at s; in a flow sequence it ends at ',' or ']'. */
static sdt_yaml_node *read_scalar(yaml_parser *p, const yaml_line *l, const char *s, const char *end, bool in_flow,
                                  const char **after)
{
    GString *text = g_string_new(NULL);
    bool quoted = *s == '"' || *s == '\'';
    bool ok;
    if (*s == '"') {
        ok = read_double_quoted(p, l, s, end, text, after);
    } else if (*s == '\'') {
        ok = read_single_quoted(p, l, s, end, text, after);
    } else if ((ok = refuse_indicator(p, l, *s))) {
        const char *e = plain_end(s, end, in_flow);
        g_string_append_len(text, s, e - s);
        *after = e;
        const char *colon = strstr(text->str, ": ");
        size_t len = text->len;
        if (colon || (len && text->str[len - 1] == ':'))
            ok = fail(p, l->number, "the value '%.*s' holds ': ', which YAML reads as a key; quote the value",
                      utf8_prefix(text->str, len, 60), text->str);
        else if (in_flow && (*s == '[' || *s == '{'))
            ok = fail(p, l->number, "a flow sequence inside another is not read here; write the inner one as a block");
        else if (!in_flow && *s == '-' && len > 1 && is_space(s[1]))
            ok = fail(p, l->number, "a '- ' item cannot follow a key on its line; put the items on the lines below");
    }
    sdt_yaml_node *n = ok ? new_node(p, SDT_YAML_SCALAR, l->number) : NULL;
    if (!n) {
        g_string_free(text, TRUE);
        return NULL;
    }
    n->quoted = quoted;
    n->text = g_string_free(text, FALSE);
    return n;
}

/* "[ a, 'b', 3 ]" on one line; s is on '['. */
static sdt_yaml_node *read_flow_sequence(yaml_parser *p, const yaml_line *l, const char *s, const char *end,
                                         const char **after)
{
    sdt_yaml_node *seq = new_node(p, SDT_YAML_SEQUENCE, l->number), *tail = NULL;
    if (!seq) return NULL;
    s = skip_spaces(s + 1, end);
    while (s < end && *s != ']') {
        const char *item_end = NULL;
        if (*s == ',' || *s == '#') break;
        sdt_yaml_node *item = read_scalar(p, l, s, end, true, &item_end);
        if (!item) goto bad;
        append_child(seq, &tail, item);
        s = skip_spaces(item_end, end);
        if (s < end && *s == ',')
            s = skip_spaces(s + 1, end);
        else if (s < end && *s != ']')
            break;
    }
    if (s < end && *s == ']') {
        *after = s + 1;
        return seq;
    }
    if (s < end && *s != '#')
        fail(p, l->number,
             "a flow sequence has '%c' where ',' or ']' belongs; separate its items with ', ' and close it "
             "with ']'",
             g_ascii_isprint(*s) ? *s : '?');
    else
        fail(p, l->number,
             "a flow sequence ('[') is not closed on its line; close it with ']' (multi-line flow sequences "
             "are not read here; write them as '- item' lines)");
bad:
    free_node(seq);
    return NULL;
}

/* The value after "key:" or "- " on a line: a scalar, a flow sequence or "{}". Nothing may
 * follow it but a comment. */
static sdt_yaml_node *read_inline_value(yaml_parser *p, const yaml_line *l, const char *s)
{
    const char *end = l->text + l->len, *after = NULL;
    sdt_yaml_node *n;
    if (*s == '{') {
        const char *close = skip_spaces(s + 1, end);
        if (close == end || *close != '}') {
            refuse_indicator(p, l, '{');
            return NULL;
        }
        n = new_node(p, SDT_YAML_MAPPING, l->number);
        after = close + 1;
    } else if (*s == '[') {
        n = read_flow_sequence(p, l, s, end, &after);
    } else {
        n = read_scalar(p, l, s, end, false, &after);
    }
    if (n && !rest_is_blank(after, end)) {
        fail(p, l->number, "'%.*s' follows the value; remove it or make it a comment ('# ...')",
             utf8_prefix(after, (size_t)(end - after), 60), after);
        free_node(n);
        return NULL;
    }
    return n;
}

/* ---- keys ---- */

/* The key of "key: value" at s; *after is past the ':'. NULL (and no error) when the line has
 * no key; *key_error set when it tried and failed. */
static char *read_key(yaml_parser *p, const yaml_line *l, const char *s, const char **after, bool *key_error)
{
    const char *end = l->text + l->len;
    *key_error = false;
    if (*s == '"' || *s == '\'') {
        GString *key = g_string_new(NULL);
        const char *q_end = NULL;
        bool ok =
            *s == '"' ? read_double_quoted(p, l, s, end, key, &q_end) : read_single_quoted(p, l, s, end, key, &q_end);
        if (ok) q_end = skip_spaces(q_end, end);
        if (ok && q_end < end && *q_end == ':' && (q_end + 1 == end || is_space(q_end[1]))) {
            *after = q_end + 1;
            return g_string_free(key, FALSE);
        }
        g_string_free(key, TRUE);
        *key_error = !ok;
        return NULL;
    }
    if (*s == '[' || !refuse_indicator(p, l, *s)) {
        if (*s == '[') fail(p, l->number, "a flow sequence ('[') stands where a key belongs; write 'key: value'");
        *key_error = true;
        return NULL;
    }
    for (const char *c = s; c < end; c++) {
        if (*c == '#' && c > s && is_space(c[-1])) return NULL;
        if (*c == ':' && (c + 1 == end || is_space(c[1]))) {
            const char *k_end = c;
            while (k_end > s && is_space(k_end[-1])) k_end--;
            if (k_end == s) return NULL;
            *after = c + 1;
            return g_strndup(s, (gsize)(k_end - s));
        }
    }
    return NULL;
}

/* ---- blocks ---- */

static sdt_yaml_node *parse_block(yaml_parser *p, int indent, int depth);

/* The value of a key (or entry) whose line ends after the ':' (or '-'): the block below it,
 * deeper, or a sequence at the same indentation (a mapping's key only), else an empty value. */
static sdt_yaml_node *parse_value_below(yaml_parser *p, const yaml_line *l, int indent, bool same_level_entries,
                                        int depth)
{
    p->at++;
    const yaml_line *next = p->at < p->n ? &p->lines[p->at] : NULL;
    if (next && next->indent > indent) return parse_block(p, next->indent, depth + 1);
    if (next && same_level_entries && next->indent == indent && is_entry(next))
        return parse_block(p, indent, depth + 1);
    sdt_yaml_node *empty = new_node(p, SDT_YAML_SCALAR, l->number);
    if (empty) empty->text = g_strdup("");
    return empty;
}

/* The value after "key:" or "- " at s: on the line, or below it when the line ends there. */
static sdt_yaml_node *parse_rest(yaml_parser *p, const yaml_line *l, const char *s, int indent, bool same_level_entries,
                                 int depth)
{
    if (rest_is_blank(s, l->text + l->len)) return parse_value_below(p, l, indent, same_level_entries, depth);
    sdt_yaml_node *n = read_inline_value(p, l, s);
    p->at++;
    return n;
}

static sdt_yaml_node *parse_mapping(yaml_parser *p, int indent, int depth)
{
    sdt_yaml_node *map = new_node(p, SDT_YAML_MAPPING, p->lines[p->at].number), *tail = NULL;
    if (!map) return NULL;
    GHashTable *keys = g_hash_table_new(g_str_hash, g_str_equal);
    while (p->at < p->n && p->lines[p->at].indent >= indent) {
        yaml_line *l = &p->lines[p->at];
        if (l->indent > indent) {
            fail(p, l->number,
                 "this line is indented deeper than the keys above it, but no key above opens a block; "
                 "align it with the keys above (%d spaces) or end the key before it with ':'",
                 indent);
            goto bad;
        }
        if (is_entry(l)) {
            fail(p, l->number,
                 "a '- ' item stands among the keys of a mapping; indent the items under their key, or "
                 "give this one a key");
            goto bad;
        }
        const char *after = NULL;
        bool key_error = false;
        char *key = read_key(p, l, l->text, &after, &key_error);
        if (!key) {
            if (!key_error)
                fail(p, l->number,
                     "'%.*s' is not 'key: value'; a mapping's lines are keys (a ':' and a space after the "
                     "key)",
                     utf8_prefix(l->text, l->len, 60), l->text);
            goto bad;
        }
        if (g_hash_table_contains(keys, key)) {
            const sdt_yaml_node *first = map->first;
            while (first && strcmp(first->key, key) != 0) first = first->next;
            fail(p, l->number, "the key '%.*s' is given twice in one mapping (first on line %d); keep one of them",
                 utf8_prefix(key, strlen(key), 60), key, first ? first->line : 0);
            g_free(key);
            goto bad;
        }
        sdt_yaml_node *child = parse_rest(p, l, skip_spaces(after, l->text + l->len), indent, true, depth);
        if (!child) {
            g_free(key);
            goto bad;
        }
        child->key = key;
        g_hash_table_add(keys, key);
        append_child(map, &tail, child);
    }
    g_hash_table_destroy(keys);
    return map;
bad:
    g_hash_table_destroy(keys);
    free_node(map);
    return NULL;
}

static sdt_yaml_node *parse_sequence(yaml_parser *p, int indent, int depth)
{
    sdt_yaml_node *seq = new_node(p, SDT_YAML_SEQUENCE, p->lines[p->at].number), *tail = NULL;
    if (!seq) return NULL;
    while (p->at < p->n && p->lines[p->at].indent == indent && is_entry(&p->lines[p->at])) {
        yaml_line *l = &p->lines[p->at];
        const char *end = l->text + l->len, *item = skip_spaces(l->text + 1, end);
        sdt_yaml_node *child;
        const char *after;
        bool key_error = false;
        char *key = NULL;
        if (!rest_is_blank(item, end) &&
            ((item[0] == '-' && (item + 1 == end || is_space(item[1]))) ||
             (item[0] != '[' && item[0] != '{' && (key = read_key(p, l, item, &after, &key_error)) != NULL))) {
            /* "- key: value" or "- - x": the rest of the line opens a block at its own column */
            g_free(key);
            l->indent += (int)(item - l->text);
            l->len -= (size_t)(item - l->text);
            l->text = item;
            child = parse_block(p, l->indent, depth + 1);
        } else {
            child = key_error ? NULL : parse_rest(p, l, item, indent, false, depth);
        }
        if (!child) {
            free_node(seq);
            return NULL;
        }
        append_child(seq, &tail, child);
    }
    return seq;
}

/* The block whose first line is p->lines[p->at], at indent. */
static sdt_yaml_node *parse_block(yaml_parser *p, int indent, int depth)
{
    const yaml_line *l = &p->lines[p->at];
    if (depth > SDT_YAML_MAX_DEPTH) {
        fail(p, l->number,
             "values nest more than %d levels deep; an LDM config nests about 6 - this is not one (use the "
             "config that came with the checkpoint)",
             SDT_YAML_MAX_DEPTH);
        return NULL;
    }
    return is_entry(l) ? parse_sequence(p, indent, depth) : parse_mapping(p, indent, depth);
}

/* ---- lines ---- */

/* Cuts text into lines, dropping blank and comment-only ones and one leading "---". */
static bool split_lines(yaml_parser *p, const char *text, size_t size)
{
    size_t cap = 64;
    p->lines = g_new(yaml_line, cap);
    const char *s = text, *end = text + size;
    int number = 0;
    bool seen_content = false;
    while (s < end) {
        const char *line = s, *nl = memchr(s, '\n', (size_t)(end - s));
        const char *e = nl ? nl : end;
        s = nl ? nl + 1 : end;
        number++;
        if (e > line && e[-1] == '\r') e--;
        const char *t = line;
        while (t < e && *t == ' ') t++;
        if (rest_is_blank(t, e)) continue;
        if (*t == '\t')
            return fail(p, number,
                        "a tab indents this line; YAML indents with spaces only - replace the tab with spaces");
        int indent = (int)(t - line);
        size_t len = (size_t)(e - t);
        bool marker = indent == 0 && len >= 3 && (strncmp(t, "---", 3) == 0 || strncmp(t, "...", 3) == 0) &&
                      (len == 3 || is_space(t[3])) && rest_is_blank(t + 3, e);
        if (marker && !seen_content && t[0] == '-') {
            seen_content = true; /* the document's start: nothing before it */
            continue;
        }
        if (marker)
            return fail(p, number,
                        "'%.3s' starts or ends another YAML document; an LDM config is one document - remove "
                        "the line and what follows it",
                        t);
        if (indent == 0 && t[0] == '%')
            return fail(p, number, "a YAML directive ('%%') is not read here; remove the line");
        seen_content = true;
        if (p->n == cap) p->lines = g_renew(yaml_line, p->lines, cap *= 2);
        p->lines[p->n++] = (yaml_line){.text = t, .len = len, .indent = indent, .number = number};
    }
    return true;
}

bool sdt_yaml_parse(const char *text, size_t size, const char *path, sdt_yaml_doc *doc, sdt_error *error)
{
    memset(doc, 0, sizeof *doc);
    yaml_parser p = {.path = path, .error = error};
    if (size > SDT_YAML_MAX_BYTES)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: %zu bytes; an LDM config is a few KB (at most %u bytes are read) - "
                        "this is not one: use the config that came with the checkpoint",
                        path, size, SDT_YAML_MAX_BYTES);
    const char *nul = memchr(text, 0, size), *bad = NULL;
    if (nul || !g_utf8_validate(text, (gssize)size, &bad)) {
        const char *at = nul ? nul : bad;
        int line = 1;
        for (const char *c = text; c < at; c++) line += *c == '\n';
        return fail(&p, line, "%s; a config is UTF-8 text - re-save it as UTF-8",
                    nul ? "it holds a NUL byte" : "it holds bytes that are not UTF-8");
    }
    if (size >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) { /* a byte-order mark some editors write */
        text += 3;
        size -= 3;
    }
    bool ok = split_lines(&p, text, size);
    sdt_yaml_node *root = NULL;
    if (ok && p.n == 0) {
        root = new_node(&p, SDT_YAML_MAPPING, 1);
    } else if (ok) {
        root = parse_block(&p, p.lines[0].indent, 1);
        if (root && p.at < p.n) {
            fail(&p, p.lines[p.at].number,
                 "this line is indented less than the document's first line (%d spaces); align "
                 "the top-level keys",
                 p.lines[0].indent);
            free_node(root);
            root = NULL;
        }
    }
    g_free(p.lines);
    if (!root) return false;
    doc->root = root;
    doc->path = g_strdup(path);
    return true;
}

bool sdt_yaml_read_file(const char *path, sdt_yaml_doc *doc, sdt_error *error)
{
    memset(doc, 0, sizeof *doc);
    char *text = NULL;
    size_t size = 0;
    if (!sdt_file_read_all(path, "LDM config", SDT_YAML_MAX_BYTES, &text, &size, error)) {
        if (error && error->code == SDT_ERR_BAD_FORMAT && strstr(error->message, "over the limit"))
            sdt_error_append(error,
                             "; an LDM config is a few KB, so this is not one: use the config that came with the "
                             "checkpoint");
        return false;
    }
    bool ok = sdt_yaml_parse(text, size, path, doc, error);
    free(text);
    return ok;
}

void sdt_yaml_doc_free(sdt_yaml_doc *doc)
{
    free_node(doc->root);
    g_free(doc->path);
    memset(doc, 0, sizeof *doc);
}

/* ---- reading values ---- */

const sdt_yaml_node *sdt_yaml_get(const sdt_yaml_node *root, const char *dotted_path)
{
    const sdt_yaml_node *n = root;
    const char *s = dotted_path;
    while (n && *s) {
        const char *dot = strchr(s, '.');
        size_t len = dot ? (size_t)(dot - s) : strlen(s);
        if (n->kind != SDT_YAML_MAPPING) return NULL;
        const sdt_yaml_node *c = n->first;
        while (c && !(strlen(c->key) == len && strncmp(c->key, s, len) == 0)) c = c->next;
        n = c;
        s += len + (dot ? 1 : 0);
    }
    return n;
}

static const char *plain_text(const sdt_yaml_node *n)
{
    return n && n->kind == SDT_YAML_SCALAR && !n->quoted ? n->text : NULL;
}

bool sdt_yaml_is_null(const sdt_yaml_node *n)
{
    const char *t = plain_text(n);
    return t && (!t[0] || strcmp(t, "~") == 0 || g_ascii_strcasecmp(t, "null") == 0);
}

bool sdt_yaml_as_bool(const sdt_yaml_node *n, bool *out)
{
    const char *t = plain_text(n);
    if (t && g_ascii_strcasecmp(t, "true") == 0)
        *out = true;
    else if (t && g_ascii_strcasecmp(t, "false") == 0)
        *out = false;
    else
        return false;
    return true;
}

bool sdt_yaml_as_int(const sdt_yaml_node *n, long long *out)
{
    const char *t = plain_text(n);
    if (!t || !t[0]) return false;
    const char *digits = t + (t[0] == '-' || t[0] == '+');
    if (!*digits) return false;
    for (const char *c = digits; *c; c++)
        if (!g_ascii_isdigit(*c)) return false;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(t, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

bool sdt_yaml_as_double(const sdt_yaml_node *n, double *out)
{
    const char *t = plain_text(n);
    if (!t || !t[0]) return false;
    /* digits, one '.', an exponent: no "inf", "nan" or hex, which g_ascii_strtod would take */
    for (const char *c = t; *c; c++)
        if (!g_ascii_isdigit(*c) && !strchr("+-.eE", *c)) return false;
    char *end = NULL;
    double v = g_ascii_strtod(t, &end);
    if (end == t || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}
