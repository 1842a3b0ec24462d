/* param_list.h - what parameters a model configuration has, by canonical key.
 *
 * Every model (CLIP text encoder, UNet, VAE, hypernetwork) can enumerate its
 * parameters for a config without any weights. The loader uses it to check a
 * checkpoint, the checkpoint generator to write random weights, and the plugin
 * to estimate memory.
 */
#ifndef SDT_MODELS_PARAM_LIST_H
#define SDT_MODELS_PARAM_LIST_H

#include <stdbool.h>
#include <stdint.h>

typedef enum sdt_param_init {
    SDT_INIT_NORMAL = 0, /* N(0, std) */
    SDT_INIT_ONES,       /* norm weights */
    SDT_INIT_ZEROS,      /* biases, norm biases */
} sdt_param_init;

typedef struct sdt_param_info {
    const char *key; /* canonical LDM key, valid during the callback only */
    int ndim;
    int64_t shape[4];
    sdt_param_init init;
    float std; /* for SDT_INIT_NORMAL */
} sdt_param_info;

/* Called once per parameter; return false to stop the enumeration. */
typedef bool (*sdt_param_visitor)(void *user, const sdt_param_info *p);

#endif
