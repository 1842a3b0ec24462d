/* diffusers_names.c - canonical LDM key -> diffusers name; see diffusers_names.h. */
#include "diffusers_names.h"

#include "ldm_diffusers_pairs.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_numeric.h"

const char *sdt_diffusers_folder(sdt_diffusers_part part)
{
    static const char *names[] = {"unet", "text_encoder", "vae", "text_encoder_2"};
    return part < SDT_DIFFUSERS_PART_COUNT ? names[part] : "";
}

const char *sdt_diffusers_file_base(sdt_diffusers_part part)
{
    return part == SDT_DIFFUSERS_TEXT || part == SDT_DIFFUSERS_TEXT2 ? "model" : "diffusion_pytorch_model";
}

static char *dup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *dup_printf(const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = sdt_c_vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s) sdt_c_vsnprintf(s, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return s;
}

static const char *after(const char *s, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncmp(s, prefix, n) == 0 ? s + n : NULL;
}

/* "<prefix><int>." at the start of s: the index and the rest. */
static const char *after_indexed(const char *s, const char *prefix, int *idx)
{
    const char *r = after(s, prefix);
    if (!r || *r < '0' || *r > '9') return NULL;
    char *end;
    long v = strtol(r, &end, 10);
    if (*end != '.') return NULL;
    *idx = (int)v;
    return end + 1;
}

/* rest with its first dotted component renamed to diffusers by pairs (ldm_diffusers_pairs.h);
 * the result is in buf, or rest itself when nothing matched. */
static const char *rename_head(const char *rest, const char *const *pairs, char *buf, size_t size)
{
    const char *tail;
    const char *head = sdt_pair_head(pairs, rest, SDT_TO_DIFFUSERS, &tail);
    if (!head) return rest;
    snprintf(buf, size, "%s%s", head, tail);
    return buf;
}

/* ---- VAE ---- */

static char *vae_name(const char *rest, const vae_config *c, sdt_diffusers_form *form)
{
    const char *part = after(rest, "encoder.") ? "encoder" : after(rest, "decoder.") ? "decoder" : NULL;
    if (!part) return strdup(rest); /* quant_conv, post_quant_conv */
    const char *r = rest + strlen(part) + 1, *r2;
    char buf[256];
    int i, j;
    if ((r2 = after_indexed(r, "down.", &i)) && (r2 = after_indexed(r2, "block.", &j)))
        return dup_printf("%s.down_blocks.%d.resnets.%d.%s", part, i, j,
                          rename_head(r2, sdt_pairs_vae_resnet, buf, sizeof(buf)));
    if ((r2 = after_indexed(r, "down.", &i)) && (r2 = after(r2, "downsample.")))
        return dup_printf("%s.down_blocks.%d.downsamplers.0.%s", part, i, r2);
    if ((r2 = after_indexed(r, "up.", &i)) && (r2 = after_indexed(r2, "block.", &j)))
        return dup_printf("%s.up_blocks.%d.resnets.%d.%s", part, c->levels - 1 - i, j,
                          rename_head(r2, sdt_pairs_vae_resnet, buf, sizeof(buf)));
    if ((r2 = after_indexed(r, "up.", &i)) && (r2 = after(r2, "upsample.")))
        return dup_printf("%s.up_blocks.%d.upsamplers.0.%s", part, c->levels - 1 - i, r2);
    if ((r2 = after_indexed(r, "mid.block_", &j)))
        return dup_printf("%s.mid_block.resnets.%d.%s", part, j - 1,
                          rename_head(r2, sdt_pairs_vae_resnet, buf, sizeof(buf)));
    if ((r2 = after(r, "mid.attn_1."))) {
        const char *renamed = rename_head(r2, sdt_pairs_vae_attn, buf, sizeof(buf));
        if (strcmp(r2, "norm.weight") != 0 && strstr(r2, ".weight") != NULL) *form = SDT_DIFFUSERS_LINEAR;
        return dup_printf("%s.mid_block.attentions.0.%s", part, renamed);
    }
    if ((r2 = after(r, "norm_out."))) return dup_printf("%s.conv_norm_out.%s", part, r2);
    return strdup(rest);
}

/* ---- UNet ---- */

static char *unet_name(const char *rest, const sdt_unet_config *c)
{
    const int per = c->num_res_blocks + 1; /* LDM blocks per level: res-blocks + down/upsampler */
    char buf[256];
    const char *r;
    int n, k;
    const char *fixed = sdt_pair_name(sdt_pairs_unet_fixed, rest, SDT_TO_DIFFUSERS);
    if (fixed) return strdup(fixed);
    if ((r = after_indexed(rest, "input_blocks.", &n)) && n >= 1 && (r = after_indexed(r, "", &k))) {
        int level = (n - 1) / per, j = (n - 1) % per;
        const char *op = j == per - 1 ? after(r, "op.") : NULL;
        if (op) return dup_printf("down_blocks.%d.downsamplers.0.conv.%s", level, op);
        if (k == 0)
            return dup_printf("down_blocks.%d.resnets.%d.%s", level, j,
                              rename_head(r, sdt_pairs_unet_resnet, buf, sizeof(buf)));
        return dup_printf("down_blocks.%d.attentions.%d.%s", level, j, r);
    }
    if ((r = after_indexed(rest, "output_blocks.", &n)) && (r = after_indexed(r, "", &k))) {
        int group = n / per, j = n % per;
        bool attn = c->attention[c->num_levels - 1 - group]; /* output groups run from the lowest resolution */
        if (k == 0)
            return dup_printf("up_blocks.%d.resnets.%d.%s", group, j,
                              rename_head(r, sdt_pairs_unet_resnet, buf, sizeof(buf)));
        if (k == 1 && attn) return dup_printf("up_blocks.%d.attentions.%d.%s", group, j, r);
        return dup_printf("up_blocks.%d.upsamplers.0.%s", group, r);
    }
    if ((r = after(rest, "middle_block.1."))) return dup_printf("mid_block.attentions.0.%s", r);
    if ((r = after_indexed(rest, "middle_block.", &k)))
        return dup_printf("mid_block.resnets.%d.%s", k / 2, rename_head(r, sdt_pairs_unet_resnet, buf, sizeof(buf)));
    return strdup(rest);
}

/* ---- OpenCLIP text tower (SDXL's bigG, SD 2.x's OpenCLIP-H) ---- */

/* OpenCLIP's resblock parts and transformers' CLIPEncoderLayer names (diffusers' DIFFUSERS_TO_LDM_MAPPING
 * "openclip" layers). */
static const char *const openclip_layer_pairs[] = {
    "ln_1",    "layer_norm1", "ln_2",    "layer_norm2", "attn.out_proj", "self_attn.out_proj", "mlp.c_fc",
    "mlp.fc1", "mlp.c_proj",  "mlp.fc2", NULL};

/* rest: the name after "<slot>model."; layers: how many resblocks the diffusers encoder keeps (SD 2.x's
 * folder cuts the last, unused one); with_projection: CLIPTextModelWithProjection (bigG) or CLIPTextModel. */
static char *openclip_name(const char *rest, int layers, bool with_projection, sdt_diffusers_form *form)
{
    const char *r;
    int i;
    if (!strcmp(rest, "token_embedding.weight")) return strdup("text_model.embeddings.token_embedding.weight");
    if (!strcmp(rest, "positional_embedding")) return strdup("text_model.embeddings.position_embedding.weight");
    if ((r = after(rest, "ln_final."))) return dup_printf("text_model.final_layer_norm.%s", r);
    if (!strcmp(rest, "text_projection"))
        return *form = with_projection ? SDT_DIFFUSERS_TRANSPOSE : SDT_DIFFUSERS_DROP, strdup("text_projection.weight");
    if (!strcmp(rest, "logit_scale")) return *form = SDT_DIFFUSERS_DROP, strdup("logit_scale");
    if (!(r = after_indexed(rest, "transformer.resblocks.", &i))) return NULL;
    char *name;
    if (!strcmp(r, "attn.in_proj_weight") || !strcmp(r, "attn.in_proj_bias")) {
        *form = SDT_DIFFUSERS_SPLIT_QKV;
        name = dup_printf("text_model.encoder.layers.%d.self_attn.q_proj.%s", i, strchr(r, '_') + strlen("_proj_"));
    } else {
        const char *tail, *head = sdt_pair_head(openclip_layer_pairs, r, SDT_TO_DIFFUSERS, &tail);
        if (!head) return NULL;
        name = dup_printf("text_model.encoder.layers.%d.%s%s", i, head, tail);
    }
    if (i >= layers) *form = SDT_DIFFUSERS_CUT_LAYER;
    return name;
}

char *sdt_diffusers_name(const char *key, const sd_config *cfg, sdt_diffusers_part *part, sdt_diffusers_form *form)
{
    const char *r;
    *form = SDT_DIFFUSERS_SAME;
    if ((r = after(key, "cond_stage_model.transformer.")) || (r = after(key, "conditioner.embedders.0.transformer."))) {
        *part = SDT_DIFFUSERS_TEXT;
        return strdup(r);
    }
    if ((r = after(key, "conditioner.embedders.1.transformer."))) {
        *part = SDT_DIFFUSERS_TEXT2;
        return strdup(r);
    }
    if ((r = after(key, "conditioner.embedders.1.model."))) {
        *part = SDT_DIFFUSERS_TEXT2;
        return openclip_name(r, cfg->clip2.layers, true, form);
    }
    if ((r = after(key, "cond_stage_model.model."))) {
        *part = SDT_DIFFUSERS_TEXT;
        return openclip_name(r, cfg->clip.layers, false, form);
    }
    if ((r = after(key, "first_stage_model."))) {
        *part = SDT_DIFFUSERS_VAE;
        return vae_name(r, &cfg->vae, form);
    }
    if ((r = after(key, SDT_UNET_KEY_PREFIX))) {
        *part = SDT_DIFFUSERS_UNET;
        return unet_name(r, &cfg->unet);
    }
    return NULL;
}
