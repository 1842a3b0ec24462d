/* train_state_describe.h - what a run's resume state (<name>.state.safetensors, written by
 * train_job_state.c) holds, for every factory's inspect(): the method(s) it trains, the step,
 * each paired file with the hash of the values saved and of those it held when the run began,
 * the precision, the loss scale, and whether its seal and values are sound. One home, so an
 * embedding, a hypernetwork and a joint state are described alike whichever factory is asked. */
#ifndef SDT_TRAIN_TRAIN_STATE_DESCRIBE_H
#define SDT_TRAIN_TRAIN_STATE_DESCRIBE_H

#include <stdbool.h>
#include <stdint.h>

#include "sdt_error.h"

#define SDT_STATE_FACTS_MAX_PARTS 4

typedef struct sdt_state_part_facts {
    char what[32];         /* "embedding", "hypernetwork" */
    char file[4096];       /* the file the run trains */
    char sha256[72];       /* its values when the state was saved */
    char start_sha256[72]; /* its values when the run began */
    int64_t start_step;
    int64_t trained_values;  /* the part's trained numbers in the state (its tensors without moments) */
    int64_t rows, cols;      /* an embedding's vectors x width (0 for other parts) */
    double vector_norm_mean; /* an embedding's mean vector length, as inspect shows a lone one's */
} sdt_state_part_facts;

typedef struct sdt_state_facts {
    char name[256];
    int64_t step;
    char precision[16];
    bool has_loss_scale;
    double loss_scale;
    char checkpoint_name[256];
    char checkpoint_hash[72];
    int n_parts;
    sdt_state_part_facts parts[SDT_STATE_FACTS_MAX_PARTS];
    int64_t tensor_count;
    bool all_finite;
    bool sealed;             /* the seal matches tensors and metadata */
    char seal_problem[1024]; /* why not, when !sealed */
} sdt_state_facts;

/* true when path is a safetensors file with sdtrain's state marker (no error when not). */
bool sdt_state_file_is_state(const char *path);

/* The facts of the state at path, and (json_out not NULL) one JSON object describing it
 * (format "sdtrain-training-state"; malloc'd). When base_json is given (a method's own JSON of
 * the same file, e.g. the embedding in a lone embedding's state), the facts are added to it.
 * false + BAD_FORMAT when path is not a readable state; a broken seal or non-finite values are
 * facts, not errors (inspect exists to show them). */
bool sdt_state_describe(const char *path, sdt_state_facts *facts, const char *base_json, char **json_out,
                        sdt_error *error);

/* The part named what ("embedding", "hypernetwork"), or NULL. */
const sdt_state_part_facts *sdt_state_facts_part(const sdt_state_facts *facts, const char *what);

#endif
