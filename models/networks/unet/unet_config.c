/* unet_config.c - the UNet's published configurations, validation, and
 * detection from a checkpoint's tensor names and shapes. */
#include <stdio.h>
#include <string.h>

#include "unet.h"

sdt_unet_config sdt_unet_config_sd1(void)
{
    sdt_unet_config c = {
        .in_channels = 4,
        .out_channels = 4,
        .model_channels = 320,
        .num_levels = 4,
        .channel_mult = {1, 2, 4, 4},
        .attention = {true, true, true, false},
        .num_res_blocks = 2,
        .transformer_depth = {1, 1, 1, 1},
        .middle_depth = 1,
        .num_heads = 8,
        .head_dim = 0,
        .context_dim = 768,
        .time_embed_dim = 1280,
        .norm_groups = 32,
        .norm_eps = 1e-5f,
        .transformer_norm_eps = 1e-6f,
        .layernorm_eps = 1e-5f,
        .ff_mult = 4,
        .linear_proj = false,
        .v_prediction = false,
        .flip_sin_to_cos = true,
        .freq_shift = 0.0f,
    };
    return c;
}

sdt_unet_config sdt_unet_config_sd2(bool v_prediction)
{
    sdt_unet_config c = sdt_unet_config_sd1();
    c.num_heads = 0;
    c.head_dim = 64;
    c.context_dim = 1024;
    c.linear_proj = true;
    c.v_prediction = v_prediction;
    return c;
}

sdt_unet_config sdt_unet_config_tiny(void)
{
    sdt_unet_config c = sdt_unet_config_sd1();
    c.model_channels = 32;
    c.num_levels = 2;
    c.channel_mult[0] = 1;
    c.channel_mult[1] = 2;
    c.attention[0] = true;
    c.attention[1] = false;
    c.num_res_blocks = 1;
    c.num_heads = 2;
    c.context_dim = 32;
    c.time_embed_dim = 128;
    return c;
}

sdt_unet_config sdt_unet_config_sdxl(void)
{
    sdt_unet_config c = sdt_unet_config_sd2(false);
    c.num_levels = 3;
    c.channel_mult[3] = 0;
    c.attention[0] = false;
    c.attention[1] = c.attention[2] = true;
    c.attention[3] = false;
    c.transformer_depth[0] = 1; /* no attention there; LDM's config still names 1 */
    c.transformer_depth[1] = 2;
    c.transformer_depth[2] = 10;
    c.transformer_depth[3] = 0;
    c.middle_depth = 10;
    c.context_dim = 2048;
    c.adm_in_channels = 2816;
    c.addition_time_embed_dim = 256;
    return c;
}

sdt_unet_config sdt_unet_config_tiny_sdxl(void)
{
    sdt_unet_config c = sdt_unet_config_sdxl();
    c.model_channels = 32;
    c.channel_mult[2] = 2;
    c.num_res_blocks = 1;
    c.transformer_depth[1] = 1;
    c.transformer_depth[2] = 2;
    c.middle_depth = 2;
    c.num_heads = 2;
    c.head_dim = 0;
    c.context_dim = 80;
    c.adm_in_channels = 96;
    c.addition_time_embed_dim = 8;
    c.time_embed_dim = 128;
    return c;
}

int sdt_unet_config_heads(const sdt_unet_config *c, int channels)
{
    if (c->head_dim > 0) return channels / c->head_dim;
    return c->num_heads;
}

static int add_width(int *widths, int n, int width)
{
    for (int i = 0; i < n; i++)
        if (widths[i] == width) return n;
    widths[n] = width;
    return n + 1;
}

/* Mirrors unet_build.c: a transformer at each level with attention, and one in the middle block
 * at the deepest level's channels; each transformer's attn2 reads the context. */
int sdt_unet_config_kv_widths(const sdt_unet_config *c, int widths[SDT_UNET_MAX_KV_WIDTHS])
{
    int n = add_width(widths, 0, c->context_dim);
    int levels = c->num_levels < SDT_UNET_MAX_LEVELS ? c->num_levels : SDT_UNET_MAX_LEVELS;
    for (int level = 0; level < levels; level++)
        if (c->attention[level]) n = add_width(widths, n, c->channel_mult[level] * c->model_channels);
    if (levels > 0) n = add_width(widths, n, c->channel_mult[levels - 1] * c->model_channels);
    return n;
}

int64_t sdt_unet_config_kv_tokens(const sdt_unet_config *c, int width, int64_t h, int64_t w, int64_t context_tokens)
{
    int64_t most = width == c->context_dim ? context_tokens : 0;
    int levels = c->num_levels < SDT_UNET_MAX_LEVELS ? c->num_levels : SDT_UNET_MAX_LEVELS;
    for (int level = 0; level < levels; level++) {
        int channels = c->channel_mult[level] * c->model_channels;
        bool self = c->attention[level] || (level == levels - 1 && c->middle_depth > 0);
        if (self && channels == width && h * w > most) most = h * w;
        h = (h - 1) / 2 + 1; /* the next level: a 3x3 convolution of stride 2 and padding 1 */
        w = (w - 1) / 2 + 1;
    }
    return most;
}

void sdt_unet_config_describe_kv_widths(const sdt_unet_config *c, char *buf, size_t size)
{
    int widths[SDT_UNET_MAX_KV_WIDTHS];
    int n = sdt_unet_config_kv_widths(c, widths);
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used < size; i++) {
        const char *sep = i == 0 ? "" : i == n - 1 ? " and " : ", ";
        int wrote =
            i == 0 ? snprintf(buf + used, size - used, "%d (cross-attention context %d)", widths[i], c->context_dim)
                   : snprintf(buf + used, size - used, "%s%d", sep, widths[i]);
        if (wrote < 0) break;
        used += (size_t)wrote;
    }
}

#define FAIL(...)                                                                                                      \
    do {                                                                                                               \
        sdt_fail(error, SDT_ERR_BAD_FORMAT, __VA_ARGS__);                                                              \
        return false;                                                                                                  \
    } while (0)

bool sdt_unet_config_validate(const sdt_unet_config *c, sdt_error *error)
{
    if (c->in_channels <= 0 || c->out_channels <= 0 || c->model_channels <= 0 || c->context_dim <= 0 ||
        c->time_embed_dim <= 0)
        FAIL("unet config: channel counts (in %d, out %d, model %d, context %d, time embed %d) must be positive",
             c->in_channels, c->out_channels, c->model_channels, c->context_dim, c->time_embed_dim);
    if (c->num_levels < 1 || c->num_levels > SDT_UNET_MAX_LEVELS)
        FAIL("unet config: num_levels %d must be in 1..%d", c->num_levels, SDT_UNET_MAX_LEVELS);
    if (c->num_res_blocks < 1 || c->middle_depth < 1 || c->ff_mult < 1)
        FAIL("unet config: num_res_blocks (%d), middle_depth (%d) and ff_mult (%d) must be at least 1",
             c->num_res_blocks, c->middle_depth, c->ff_mult);
    if (c->adm_in_channels < 0)
        FAIL("unet config: adm_in_channels %d must be 0 (no label_emb) or the width of y", c->adm_in_channels);
    if (c->adm_in_channels > 0 && (c->addition_time_embed_dim < 2 || c->addition_time_embed_dim % 2 ||
                                   6 * c->addition_time_embed_dim >= c->adm_in_channels))
        FAIL("unet config: addition_time_embed_dim %d must be even, positive and leave room in y's %d for the pooled "
             "text embedding (6 size numbers x that width + pooled width)",
             c->addition_time_embed_dim, c->adm_in_channels);
    if ((c->num_heads > 0) == (c->head_dim > 0))
        FAIL("unet config: set exactly one of num_heads (%d) and head_dim (%d)", c->num_heads, c->head_dim);
    if (c->norm_groups < 1) FAIL("unet config: norm_groups %d must be positive", c->norm_groups);
    if (c->model_channels % c->norm_groups)
        FAIL("unet config: model_channels %d is not divisible by norm_groups %d", c->model_channels, c->norm_groups);
    for (int l = 0; l < c->num_levels; l++) {
        int ch = c->channel_mult[l] * c->model_channels;
        if (c->channel_mult[l] < 1) FAIL("unet config: channel_mult[%d] = %d must be positive", l, c->channel_mult[l]);
        if (c->transformer_depth[l] < 1)
            FAIL("unet config: transformer_depth[%d] = %d must be at least 1 (1 at a level without attention)", l,
                 c->transformer_depth[l]);
        if (ch % c->norm_groups)
            FAIL("unet config: level %d width %d is not divisible by norm_groups %d", l, ch, c->norm_groups);
        int heads = sdt_unet_config_heads(c, ch);
        if (heads < 1 || ch % heads)
            FAIL("unet config: level %d width %d cannot be split into heads (num_heads %d, head_dim %d)", l, ch,
                 c->num_heads, c->head_dim);
    }
    if (!(c->norm_eps > 0) || !(c->transformer_norm_eps > 0) || !(c->layernorm_eps > 0))
        FAIL("unet config: norm epsilons must be positive");
    return true;
}

/* ---- detection ---- */

static const sdt_tensor *find(const sdt_weights *w, const char *fmt, int a, int b)
{
    char key[256];
    snprintf(key, sizeof key, fmt, a, b);
    return sdt_weights_get(w, key);
}

#define P SDT_UNET_KEY_PREFIX

bool sdt_unet_config_detect(const sdt_weights *w, sdt_unet_config *out, sdt_error *error)
{
    const char *path = sdt_weights_path(w) ? sdt_weights_path(w) : "(weights)";
    sdt_unet_config c = sdt_unet_config_sd1();
    const sdt_tensor *conv_in = sdt_weights_get(w, P "input_blocks.0.0.weight");
    const sdt_tensor *conv_out = sdt_weights_get(w, P "out.2.weight");
    const sdt_tensor *time0 = sdt_weights_get(w, P "time_embed.0.weight");
    if (!conv_in && sdt_weights_missing_part(w, P, error)) return false;
    if (!conv_in || conv_in->ndim != 4 || !conv_out || conv_out->ndim != 4 || !time0 || time0->ndim != 2)
        FAIL("%s: no UNet found (keys " P "input_blocks.0.0.weight, out.2.weight, time_embed.0.weight missing or "
             "not 4-D/2-D); pass a Stable Diffusion checkpoint",
             path);
    c.model_channels = (int)conv_in->shape[0];
    c.in_channels = (int)conv_in->shape[1];
    c.out_channels = (int)conv_out->shape[0];
    c.time_embed_dim = (int)time0->shape[0];

    /* Input blocks: 1 + levels * (res_blocks + 1) - 1; the first Downsample sits at index res_blocks + 1. */
    int blocks = 0;
    while (find(w, P "input_blocks.%d.0.in_layers.0.weight", blocks, 0) ||
           find(w, P "input_blocks.%d.0.op.weight", blocks, 0) || find(w, P "input_blocks.%d.0.weight", blocks, 0))
        blocks++;
    int nrb = 0;
    while (find(w, P "input_blocks.%d.0.in_layers.0.weight", nrb + 1, 0)) nrb++;
    if (nrb < 1 || blocks % (nrb + 1))
        FAIL("%s: UNet input_blocks (%d blocks, %d res blocks per level) do not form whole levels", path, blocks, nrb);
    c.num_res_blocks = nrb;
    c.num_levels = blocks / (nrb + 1);
    if (c.num_levels > SDT_UNET_MAX_LEVELS)
        FAIL("%s: UNet has %d levels, more than the %d supported", path, c.num_levels, SDT_UNET_MAX_LEVELS);
    for (int l = 0; l < c.num_levels; l++) {
        int first = 1 + l * (nrb + 1);
        const sdt_tensor *conv = find(w, P "input_blocks.%d.0.in_layers.2.weight", first, 0);
        if (!conv || conv->ndim != 4 || conv->shape[0] % c.model_channels)
            FAIL("%s: key " P "input_blocks.%d.0.in_layers.2.weight is missing or not a multiple of %d channels", path,
                 first, c.model_channels);
        c.channel_mult[l] = (int)(conv->shape[0] / c.model_channels);
        c.attention[l] = find(w, P "input_blocks.%d.1.proj_in.weight", first, 0) != NULL;
        int depth = 0;
        while (c.attention[l] && find(w, P "input_blocks.%d.1.transformer_blocks.%d.norm1.weight", first, depth))
            depth++;
        if (c.attention[l] && depth < 1)
            FAIL("%s: key " P "input_blocks.%d.1.transformer_blocks.0.norm1.weight is missing; level %d's "
                 "SpatialTransformer has no transformer blocks",
                 path, first, l);
        c.transformer_depth[l] = c.attention[l] ? depth : 1;
    }
    const sdt_tensor *proj_in = sdt_weights_get(w, P "middle_block.1.proj_in.weight");
    const sdt_tensor *to_k = sdt_weights_get(w, P "middle_block.1.transformer_blocks.0.attn2.to_k.weight");
    const sdt_tensor *ff = sdt_weights_get(w, P "middle_block.1.transformer_blocks.0.ff.net.2.weight");
    if (!proj_in || !to_k || to_k->ndim != 2 || !ff || ff->ndim != 2)
        FAIL("%s: key " P "middle_block.1 (proj_in, transformer_blocks.0.attn2.to_k, ff.net.2) is missing; "
             "the UNet has no middle SpatialTransformer",
             path);
    c.linear_proj = proj_in->ndim == 2;
    c.context_dim = (int)to_k->shape[1];
    c.ff_mult = (int)(ff->shape[1] / ff->shape[0]);
    int depth = 0;
    while (find(w, P "middle_block.1.transformer_blocks.%d.norm1.weight", depth, 0)) depth++;
    c.middle_depth = depth;
    /* SDXL's addition embedding: label_emb.0.0 [time_embed_dim, adm_in], label_emb.0.2 [time_embed_dim]^2. */
    const sdt_tensor *label0 = sdt_weights_get(w, P "label_emb.0.0.weight");
    const sdt_tensor *label2 = sdt_weights_get(w, P "label_emb.0.2.weight");
    c.adm_in_channels = 0;
    if (label0 || label2) {
        if (!label0 || !label2 || label0->ndim != 2 || label2->ndim != 2 || label0->shape[0] != c.time_embed_dim)
            FAIL("%s: keys " P "label_emb.0.0.weight and label_emb.0.2.weight must both be there as [%d, y width] "
                 "and [%d, %d] (SDXL's addition embedding); the checkpoint is damaged",
                 path, c.time_embed_dim, c.time_embed_dim, c.time_embed_dim);
        c.adm_in_channels = (int)label0->shape[1];
        c.addition_time_embed_dim = c.model_channels == 320 ? 256 : 8;
    }
    /* The head split is not in the weights: the published 320-channel models
     * map to their family (SD 2.x and SDXL, linear projections with context
     * 1024 or 2048: 64-wide heads), any other size uses the tiny convention. */
    c.head_dim = 0;
    if (c.model_channels != 320) {
        c.num_heads = 2;
    } else if (c.linear_proj || c.context_dim == 1024 || c.context_dim == 2048) {
        c.num_heads = 0;
        c.head_dim = 64;
    } else {
        c.num_heads = 8;
    }
    c.v_prediction = false;
    if (!sdt_unet_config_validate(&c, error)) return false;
    *out = c;
    return true;
}
