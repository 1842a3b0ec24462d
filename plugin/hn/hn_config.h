/* hn_config.h - the description of an A1111 hypernetwork: what "Create hypernetwork"
 * asks for, checked field by field, and the layer plan it implies.
 *
 * One module is a small MLP applied to the K (or V) input of every attention whose
 * K/V input is `width` wide: y = x + f(x) * strength. f is, for each consecutive pair
 * of layer-structure entries (m_i, m_i+1), in A1111's order:
 *   Linear(int(width*m_i), int(width*m_i+1)),
 *   the activation (not after the last Linear unless activate_output; never for "linear"),
 *   LayerNorm(int(width*m_i+1)) when layer_norm (after the last Linear too),
 *   Dropout(p) when the dropout structure's entry i+1 is > 0 (after the last Linear too).
 * Positions count in that Sequential, so A1111's state-dict keys come out as
 * "linear.<position>.weight": [1, 2, 1] with relu gives linear.0 and linear.2.
 */
#ifndef SDT_HN_CONFIG_H
#define SDT_HN_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops.h"
#include "sdt_error.h"

#define SDT_HN_NAME_MAX 200       /* bytes, as embedding names */
#define SDT_HN_MAX_WIDTHS 8       /* module widths in one hypernetwork */
#define SDT_HN_MAX_ENTRIES 16     /* entries of the layer structure: up to 15 Linear layers */
#define SDT_HN_MAX_WIDTH 16384    /* K/V input width */
#define SDT_HN_MAX_HIDDEN 65536   /* int(width * multiplier) */
#define SDT_HN_ACTIVATION_MAX 32  /* bytes of an activation name */
#define SDT_HN_LEGACY_DROPOUT 0.3 /* A1111's fixed p before dropout structures existed */

typedef enum sdt_hn_init {
    SDT_HN_INIT_NORMAL = 0,      /* W ~ N(0, 0.01), b = 0 */
    SDT_HN_INIT_XAVIER_UNIFORM,  /* torch.nn.init.xavier_uniform_, gain 1, b = 0 */
    SDT_HN_INIT_XAVIER_NORMAL,   /* torch.nn.init.xavier_normal_, gain 1, b = 0 */
    SDT_HN_INIT_KAIMING_UNIFORM, /* torch.nn.init.kaiming_uniform_, fan_in, gain sqrt 2, b = 0 */
    SDT_HN_INIT_KAIMING_NORMAL,  /* torch.nn.init.kaiming_normal_, fan_in, gain sqrt 2, b = 0 */
    SDT_HN_INIT_COUNT
} sdt_hn_init;

typedef struct sdt_hn_config {
    char name[SDT_HN_NAME_MAX + 1];
    int width_count;
    int widths[SDT_HN_MAX_WIDTHS];              /* distinct; default 768, 320, 640, 1280 */
    int entry_count;                            /* entries of layer_structure (>= 2) */
    double layer_structure[SDT_HN_MAX_ENTRIES]; /* width multipliers; first and last are 1 */
    char activation[SDT_HN_ACTIVATION_MAX];     /* A1111's lower-case name: "linear", "relu", "swish"... */
    sdt_hn_init init;
    bool layer_norm;
    bool use_dropout;                             /* off: every dropout entry counts as 0 */
    double dropout_structure[SDT_HN_MAX_ENTRIES]; /* entry_count entries; entry i+1 > 0: Dropout after Linear i */
    bool activate_output;                         /* the activation after the last Linear too */
} sdt_hn_config;

/* A1111's Create tab defaults with an empty name: widths 768, 320, 640, 1280, "1, 2, 1",
 * linear, Normal, no layer norm, no dropout ("0, 0, 0"), no output activation. */
sdt_hn_config sdt_hn_config_default(void);

/* Every check "Create hypernetwork" makes (the name by A1111's characters; widths;
 * structure; activation; init; dropout), each failure one sentence naming the field
 * and the fix. `creating` adds the checks that only a new file needs (the dropout
 * structure's first entry is 0); files written by A1111 pass with it false. */
bool sdt_hn_config_validate(const sdt_hn_config *c, bool creating, sdt_error *error);

/* ---- parsing the Create tab's text fields ---- */
/* "1, 2, 1" -> numbers (Python float() syntax per entry, commas between). `field` names
 * the field in the sentence. */
bool sdt_hn_parse_numbers(const char *field, const char *text, double *out, int max, int *count, sdt_error *error);
/* The Create tab's two structure fields into c: "1, 2, 1" sets entry_count and the
 * multipliers; the dropout text must then give one entry per layer-structure entry
 * (A1111 fails on a shorter one and ignores a longer one's tail; both are refused here). */
bool sdt_hn_parse_layer_structure(const char *text, sdt_hn_config *c, sdt_error *error);
bool sdt_hn_parse_dropout_structure(const char *text, sdt_hn_config *c, sdt_error *error);
/* "768, 320, 640, 1280" -> widths; or a family's preset: "sd1", "sd2", "sdxl" (2048, 640, 1280). */
bool sdt_hn_parse_widths(const char *text, int *out, int max, int *count, sdt_error *error);

/* ---- activations (A1111 accepts torch.nn activation classes by lower-case name) ---- */
/* The kernel activation for an A1111 name; false + a sentence listing the accepted
 * names (or why a torch name cannot be used) otherwise. */
bool sdt_hn_activation_lookup(const char *name, sdt_activation *out, sdt_error *error);
/* Accepted names in a stable order, for menus and docs; NULL past the end. */
const char *sdt_hn_activation_name_at(int index);

/* ---- weight init names: "Normal", "XavierUniform", ... (A1111's spelling) ---- */
const char *sdt_hn_init_name(sdt_hn_init init);
bool sdt_hn_init_parse(const char *name, sdt_hn_init *out, sdt_error *error);

/* ---- derived values ---- */
/* int(width * multiplier) as Python computes it (double product, truncated). */
int sdt_hn_layer_size(int width, double multiplier);
/* The dropout p after Linear `layer` (0-based): entry layer+1 when use_dropout, else 0. */
double sdt_hn_config_dropout(const sdt_hn_config *c, int layer);
/* A1111's "last_layer_dropout" key: entry entry_count-2 of the effective dropout
 * structure is non-zero (dropout after the second-to-last Linear). */
bool sdt_hn_config_last_layer_dropout(const sdt_hn_config *c);
/* A1111's rebuild for files older than dropout structures:
 * [0, 0.3 x (entries-3), (0.3 if last_layer_dropout else 0), 0], or all zeros without dropout. */
void sdt_hn_legacy_dropout(int entry_count, bool use_dropout, bool last_layer_dropout, double *out);
/* True when width is one of c's widths. */
bool sdt_hn_config_has_width(const sdt_hn_config *c, int width);

/* One Linear and what follows it, with A1111's Sequential positions (-1: absent). */
typedef struct sdt_hn_layer_plan {
    int in_size, out_size; /* for a given width */
    int linear_position;   /* "linear.<p>.weight" / ".bias" */
    int activation_position;
    int norm_position; /* LayerNorm: "linear.<p>.weight" / ".bias" too */
    int dropout_position;
    double dropout_p;
} sdt_hn_layer_plan;

/* Fills plan[0 .. entry_count-2] for a module of this width; returns the layer count.
 * The config must be valid. */
int sdt_hn_config_plan(const sdt_hn_config *c, int width, sdt_hn_layer_plan *plan);
/* Parameters of one module (K or V) of this width, and of the whole hypernetwork. */
int64_t sdt_hn_module_param_count(const sdt_hn_config *c, int width);
int64_t sdt_hn_config_param_count(const sdt_hn_config *c);

#endif
