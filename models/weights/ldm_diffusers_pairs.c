/* ldm_diffusers_pairs.c - see ldm_diffusers_pairs.h. */
#include "ldm_diffusers_pairs.h"

#include <string.h>

const char *const sdt_pairs_unet_fixed[] = {
    "time_embed.0.weight", "time_embedding.linear_1.weight", "time_embed.0.bias", "time_embedding.linear_1.bias",
    "time_embed.2.weight", "time_embedding.linear_2.weight", "time_embed.2.bias", "time_embedding.linear_2.bias",
    /* SDXL's addition embedding (LDM label_emb on y, diffusers' text_time add_embedding) */
    "label_emb.0.0.weight", "add_embedding.linear_1.weight", "label_emb.0.0.bias", "add_embedding.linear_1.bias",
    "label_emb.0.2.weight", "add_embedding.linear_2.weight", "label_emb.0.2.bias", "add_embedding.linear_2.bias",
    "input_blocks.0.0.weight", "conv_in.weight", "input_blocks.0.0.bias", "conv_in.bias", "out.0.weight",
    "conv_norm_out.weight", "out.0.bias", "conv_norm_out.bias", "out.2.weight", "conv_out.weight", "out.2.bias",
    "conv_out.bias", NULL};

const char *const sdt_pairs_unet_resnet[] = {
    "in_layers.0",     "norm1",         "in_layers.2", "conv1",        "emb_layers.1",
    "time_emb_proj",   "out_layers.0",  "norm2",       "out_layers.3", "conv2",
    "skip_connection", "conv_shortcut", NULL};

const char *const sdt_pairs_vae_resnet[] = {"nin_shortcut", "conv_shortcut", NULL};

const char *const sdt_pairs_vae_attn[] = {"norm", "group_norm", "q",        "to_q",      "k",     "to_k", "v",
                                          "to_v", "proj_out",   "to_out.0", "q",         "query", "k",    "key",
                                          "v",    "value",      "proj_out", "proj_attn", NULL};

const char *sdt_pair_name(const char *const *pairs, const char *name, sdt_name_direction to)
{
    const int from = to == SDT_TO_DIFFUSERS ? 0 : 1;
    for (int i = 0; pairs[i]; i += 2)
        if (strcmp(name, pairs[i + from]) == 0) return pairs[i + 1 - from];
    return NULL;
}

const char *sdt_pair_head(const char *const *pairs, const char *rest, sdt_name_direction to, const char **tail)
{
    const int from = to == SDT_TO_DIFFUSERS ? 0 : 1;
    for (int i = 0; pairs[i]; i += 2) {
        size_t n = strlen(pairs[i + from]);
        if (strncmp(rest, pairs[i + from], n) == 0 && (rest[n] == '.' || rest[n] == 0)) {
            *tail = rest + n;
            return pairs[i + 1 - from];
        }
    }
    return NULL;
}
