/* ldm_yaml.h - the YAML subset that LDM configs use (A1111's <checkpoint>.yaml beside a
 * single-file checkpoint, Stability's v1-inference.yaml / v2-inference-v.yaml), read safely.
 *
 * Taken: block mappings by indentation (spaces), block sequences ("- item", also at the
 * indentation of their key, as the LDM configs write ch_mult), `#` comments, plain,
 * 'single-quoted' and "double-quoted" scalars, flow sequences of scalars on one line
 * ("[ 4, 2, 1 ]", "[]"), the empty flow mapping "{}", one leading "---". Everything else YAML
 * has (anchors, aliases, tags, block scalars "|" ">", multi-line flow collections, several
 * documents, directives, tabs in indentation, duplicate keys) is refused with a sentence that
 * names the file, the line and the fix, as is a file over SDT_YAML_MAX_BYTES, nesting deeper
 * than SDT_YAML_MAX_DEPTH, a NUL byte or text that is not UTF-8. The reader never runs
 * anything the file names (no tags, no constructors): it only builds the tree below.
 */
#ifndef SDT_MODELS_LDM_YAML_H
#define SDT_MODELS_LDM_YAML_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>

#define SDT_YAML_MAX_BYTES (1u << 20) /* Stability's configs are 2-5 KB */
#define SDT_YAML_MAX_DEPTH 32         /* theirs nest 6 deep */

typedef enum sdt_yaml_kind {
    SDT_YAML_SCALAR = 0,
    SDT_YAML_MAPPING,
    SDT_YAML_SEQUENCE,
} sdt_yaml_kind;

typedef struct sdt_yaml_node sdt_yaml_node;
struct sdt_yaml_node {
    sdt_yaml_kind kind;
    char *key;            /* the key when this node is a mapping's value, else NULL */
    char *text;           /* a scalar's text, quotes and escapes resolved ("" for an empty value) */
    bool quoted;          /* the scalar was quoted: a string, never a number, boolean or null */
    int line;             /* 1-based line the node starts on */
    sdt_yaml_node *first; /* a mapping's or sequence's first child */
    sdt_yaml_node *next;  /* the next sibling */
    size_t count;         /* number of children */
};

/* A document: the root node (a mapping for an LDM config) and the file name errors give. */
typedef struct sdt_yaml_doc {
    sdt_yaml_node *root;
    char *path;
} sdt_yaml_doc;

/* Parses size bytes of text; path names the file in errors. BAD_FORMAT with a sentence (file,
 * line, what, the fix) for anything outside the subset; true and *doc filled otherwise. */
bool sdt_yaml_parse(const char *text, size_t size, const char *path, sdt_yaml_doc *doc, sdt_error *error);
/* Reads and parses the file (NOT_FOUND / IO when it cannot be read). */
bool sdt_yaml_read_file(const char *path, sdt_yaml_doc *doc, sdt_error *error);
void sdt_yaml_doc_free(sdt_yaml_doc *doc);

/* The node at a dotted path of mapping keys ("model.params.parameterization"); NULL when a key
 * on the way is absent or a step is not a mapping. */
const sdt_yaml_node *sdt_yaml_get(const sdt_yaml_node *root, const char *dotted_path);
/* A plain scalar as YAML 1.2's core schema reads it. Each is false when the node is not that. */
bool sdt_yaml_is_null(const sdt_yaml_node *n);                /* "", "~", "null" (any case) */
bool sdt_yaml_as_bool(const sdt_yaml_node *n, bool *out);     /* true/false in any case */
bool sdt_yaml_as_int(const sdt_yaml_node *n, long long *out); /* decimal, optional sign */
bool sdt_yaml_as_double(const sdt_yaml_node *n, double *out); /* also "1.e-6", "1e4", ints */

#endif
