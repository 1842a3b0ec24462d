/* embedding.h - a textual-inversion embedding in memory, and its name rules.
 *
 * vectors is [n_vectors, dim] float32, row-major: one row per prompt-token slot.
 * SDXL embeddings carry both encoders' rows side by side: the first clip_l_dim
 * columns are CLIP-L (768), the rest CLIP-G (1280); clip_l_dim is 0 for SD1/SD2.
 */
#ifndef SDT_EMBEDDING_H
#define SDT_EMBEDDING_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SDT_EMBEDDING_NAME_MAX 200 /* bytes; leaves room for "-<step>.safetensors" */
#define SDT_EMBEDDING_MAX_VECTORS 75
#define SDT_EMBEDDING_MAX_DIM 8192

typedef struct sdt_embedding {
    char *name;
    int n_vectors;
    int dim;
    float *vectors; /* [n_vectors, dim] */
    int clip_l_dim; /* SDXL split, 0 otherwise */
    /* SD3.5 and Flux.1: one table per text encoder, widths indexed clip_l, clip_g, t5xxl (0: the family has no
     * such encoder; all 0 for SD 1.x/2.x/SDXL). Their vectors are table-major, unlike SDXL's side-by-side
     * rows: vectors holds the clip_l table [n_vectors, encoder_dims[0]], then clip_g's, then t5xxl's, each
     * contiguous (a view per table for the optimizer and the pass), and dim is the widths' sum. */
    int encoder_dims[3];
    int64_t step;          /* optimizer steps taken */
    char *checkpoint_hash; /* sd_checkpoint: short hash of the model, or NULL */
    char *checkpoint_name; /* sd_checkpoint_name, or NULL */
    char *init_text;       /* initialisation text, or NULL */
    char *training_note;   /* sdtrain_fallback: what the NaN/Inf fallback did while training, or NULL */
    bool from_card_pixels; /* read: a PNG card's copy hidden in the pixels was used, not its text chunk */
    char *load_note;       /* read: why the file was read the way it was (a damaged text chunk...), or NULL */
} sdt_embedding;

/* Allocates zeroed vectors. false + error on bad sizes or a bad name. */
bool sdt_embedding_init(sdt_embedding *e, const char *name, int n_vectors, int dim, sdt_error *error);
void sdt_embedding_free(sdt_embedding *e);
/* Replaces one string field (NULL clears it). */
bool sdt_embedding_set_string(char **field, const char *value);

/* Names become file names and prompt words. Refused (never rewritten behind
 * the user's back): empty, longer than SDT_EMBEDDING_NAME_MAX bytes, not UTF-8,
 * a leading '.', or any character outside letters, digits, space, '.', '_', '-'
 * (this refuses '/', '\', "../", control characters and ':'). */
bool sdt_embedding_name_check(const char *name, sdt_error *error);
/* A1111's rule for hosts that prefer it: drop every character outside
 * letters, digits and "._- ", and leading dots. Newly allocated; may be "". */
char *sdt_embedding_name_sanitise(const char *name);

/* SD3.5 / Flux.1 tables (encoder_dims): index 0 clip_l, 1 clip_g, 2 t5xxl. */
#define SDT_EMBEDDING_ENCODERS 3
/* "clip_l", "clip_g", "t5xxl": the table's key in files (ComfyUI's embedding_key) and its name in sentences. */
const char *sdt_embedding_encoder_key(int encoder);
/* The width the released encoder has (768, 1280, 4096): a file's table of another released encoder's width
 * is refused as mislabelled (tiny test encoders have widths of their own and pass). */
int sdt_embedding_encoder_released_width(int encoder);
/* Whether e holds per-encoder tables (an SD3.5 or Flux.1 embedding). */
bool sdt_embedding_has_tables(const sdt_embedding *e);
/* The first value of table `encoder` ([n_vectors, encoder_dims[encoder]], contiguous); NULL when absent. */
float *sdt_embedding_table(const sdt_embedding *e, int encoder);
/* Like sdt_embedding_init, for per-encoder tables of widths dims[0..3) (0: the family lacks it). */
bool sdt_embedding_init_tables(sdt_embedding *e, const char *name, int n_vectors, const int dims[3], sdt_error *error);
/* "sd3" when the tables include clip_g, else "flux"; NULL without tables. And how people name them. */
const char *sdt_embedding_family(const sdt_embedding *e);
const char *sdt_embedding_family_title(const sdt_embedding *e);
/* The L2 norm of vector i across all its values (a table embedding's vector spans its tables), in double. */
double sdt_embedding_row_norm(const sdt_embedding *e, int i);

/* true when every value is finite. */
bool sdt_embedding_is_finite(const sdt_embedding *e);
/* The L2 norm of one vector of dim values (an embedding row, or a token embedding row),
 * summed in double. */
double sdt_embedding_vector_norm(const float *v, int64_t dim);

#endif
