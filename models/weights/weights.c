/* weights.c - checkpoints in the canonical LDM key space; see weights.h.
 *
 * A single-file checkpoint (.safetensors, or a PyTorch .ckpt told by its content and read by torch_file.h)
 * is used as is, with A1111's key rules (single_file_key). A diffusers folder is mapped name by
 * name the way diffusers' scripts/convert_diffusers_to_original_stable_diffusion.py
 * does, generalised over the number of levels and res-blocks per level so tiny
 * configurations map too (the level layout is read from the names present).
 */
#include "weights.h"

#include <cjson/cJSON.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file_read.h"
#include "fp8.h"
#include "host_convert.h"
#include "ldm_diffusers_pairs.h"
#include "safetensors.h"
#include "sha256.h"
#include "torch_file.h"
#include "transformer_keys.h"
#include "c_json.h"

#define MAX_LEVELS 16
#define MAX_FILES 5   /* unet or transformer, text_encoder, vae, text_encoder_2, text_encoder_3 */
#define MAX_SHARDS 64 /* files of one sharded component (*.safetensors.index.json) */

typedef struct weight_entry {
    char *key;          /* canonical */
    const char *source; /* the name in the file (owned by the safetensors entry) */
    const char *file;   /* the file it lives in */
    sdt_tensor tensor;
} weight_entry;

struct sdt_weights {
    char *path;
    char *hash_file;
    bool is_folder;
    bool has_unet, has_text, has_vae;
    bool has_text2; /* a diffusers folder's text_encoder_2/ (SDXL's bigG) */
    bool sdxl_text; /* a diffusers folder with text_encoder_2/: text_encoder/ is SDXL's first encoder */
    sdt_safetensors *files[MAX_FILES * MAX_SHARDS];
    sdt_torch_file *torch; /* a .ckpt single file, when that is what was opened */
    int n_files;
    GArray *entries;      /* weight_entry */
    GHashTable *index;    /* canonical key -> position + 1 */
    GHashTable *unusable; /* canonical key (owned) -> dtype name, for tensors no model can use (I64, F64, ...) */
    char hash[11];
    sdt_backend *owner;    /* set on a materialized copy: tensors whose data it allocated are freed here */
    GPtrArray *owned;      /* device/host buffers allocated by owner */
    GPtrArray *host_owned; /* g_malloc'd conversions made when opening: fp8 upcast to bf16, swapped halves */
};

/* ---- name mapping -------------------------------------------------------------- */

/* Matches "<prefix><int>." at the start of s; on success sets *idx and returns the rest. */
static const char *match_indexed(const char *s, const char *prefix, int *idx)
{
    size_t n = strlen(prefix);
    if (strncmp(s, prefix, n) != 0) return NULL;
    s += n;
    if (*s < '0' || *s > '9') return NULL;
    long v = 0;
    while (*s >= '0' && *s <= '9' && v < 1000000) v = v * 10 + (*s++ - '0');
    if (*s != '.') return NULL;
    *idx = (int)v;
    return s + 1;
}

static const char *match_prefix(const char *s, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncmp(s, prefix, n) == 0 ? s + n : NULL;
}

/* rest with its first dotted component renamed to LDM by pairs (ldm_diffusers_pairs.h). */
static char *rename_head(const char *rest, const char *const *pairs)
{
    const char *tail;
    const char *head = sdt_pair_head(pairs, rest, SDT_TO_LDM, &tail);
    return head ? g_strconcat(head, tail, NULL) : g_strdup(rest);
}

/* What the level layout of a diffusers UNet is, read from its names. */
typedef struct unet_layout {
    int resnets_per_down; /* res-blocks per down level; up levels have one more */
    bool up_has_attn[MAX_LEVELS];
} unet_layout;

/* Adds one file's names to l (zeroed by the caller; a sharded UNet scans every shard). */
static bool unet_layout_scan(const sdt_safetensors *st, unet_layout *l, sdt_error *error)
{
    for (size_t i = 0; i < sdt_st_count(st); i++) {
        const char *name = sdt_st_at(st, i)->name, *rest;
        int lvl, j;
        if ((rest = match_indexed(name, "down_blocks.", &lvl)) && (rest = match_indexed(rest, "resnets.", &j)) &&
            j + 1 > l->resnets_per_down)
            l->resnets_per_down = j + 1;
        if ((rest = match_indexed(name, "up_blocks.", &lvl)) || (rest = match_indexed(name, "down_blocks.", &lvl))) {
            if (lvl >= MAX_LEVELS) {
                sdt_fail(error, SDT_ERR_BAD_FORMAT,
                         "%s: key '%s' names level %d, more than the %d levels supported; this is not a "
                         "Stable Diffusion UNet",
                         sdt_st_path(st), name, lvl, MAX_LEVELS);
                return false;
            }
            if (match_prefix(name, "up_blocks.") && match_prefix(rest, "attentions.")) l->up_has_attn[lvl] = true;
        }
    }
    return true;
}

static char *unet_key(const char *name, const unet_layout *l)
{
    const int per = l->resnets_per_down + 1; /* LDM input_blocks per level: res-blocks + downsampler */
    const char *rest;
    int i, j;
    const char *fixed = sdt_pair_name(sdt_pairs_unet_fixed, name, SDT_TO_LDM);
    if (fixed) return g_strdup(fixed);
    if ((rest = match_indexed(name, "down_blocks.", &i))) {
        const char *r2;
        if ((r2 = match_indexed(rest, "resnets.", &j))) {
            char *tail = rename_head(r2, sdt_pairs_unet_resnet);
            char *k = g_strdup_printf("input_blocks.%d.0.%s", per * i + j + 1, tail);
            g_free(tail);
            return k;
        }
        if ((r2 = match_indexed(rest, "attentions.", &j)))
            return g_strdup_printf("input_blocks.%d.1.%s", per * i + j + 1, r2);
        if ((r2 = match_prefix(rest, "downsamplers.0.conv.")))
            return g_strdup_printf("input_blocks.%d.0.op.%s", per * (i + 1), r2);
    }
    if ((rest = match_indexed(name, "up_blocks.", &i))) {
        const char *r2;
        if ((r2 = match_indexed(rest, "resnets.", &j))) {
            char *tail = rename_head(r2, sdt_pairs_unet_resnet);
            char *k = g_strdup_printf("output_blocks.%d.0.%s", per * i + j, tail);
            g_free(tail);
            return k;
        }
        if ((r2 = match_indexed(rest, "attentions.", &j)))
            return g_strdup_printf("output_blocks.%d.1.%s", per * i + j, r2);
        if ((r2 = match_prefix(rest, "upsamplers.0.")))
            return g_strdup_printf("output_blocks.%d.%d.%s", per * i + per - 1, l->up_has_attn[i] ? 2 : 1, r2);
    }
    if ((rest = match_prefix(name, "mid_block.attentions.0."))) return g_strconcat("middle_block.1.", rest, NULL);
    if ((rest = match_indexed(name, "mid_block.resnets.", &j))) {
        char *tail = rename_head(rest, sdt_pairs_unet_resnet);
        char *k = g_strdup_printf("middle_block.%d.%s", 2 * j, tail);
        g_free(tail);
        return k;
    }
    return g_strdup(name); /* unknown names keep their spelling, as the reference script does */
}

/* Levels of the decoder (its up blocks are numbered in reverse in LDM). */
static int vae_decoder_levels(const sdt_safetensors *st)
{
    int levels = 0, i;
    for (size_t k = 0; k < sdt_st_count(st); k++)
        if (match_indexed(sdt_st_at(st, k)->name, "decoder.up_blocks.", &i) && i + 1 > levels) levels = i + 1;
    return levels;
}

/* Maps a VAE name; *attn_linear is set for the attention projections LDM stores as 1x1 convs. */
static char *vae_key(const char *name, int dec_levels, bool *attn_linear)
{
    *attn_linear = false;
    const char *part = match_prefix(name, "encoder.") ? "encoder" : match_prefix(name, "decoder.") ? "decoder" : NULL;
    if (!part) return g_strdup(name);
    const char *rest = name + strlen(part) + 1, *r2;
    int i, j;
    char *tail = NULL, *key = NULL;
    if ((r2 = match_indexed(rest, "down_blocks.", &i)) && (r2 = match_indexed(r2, "resnets.", &j))) {
        tail = rename_head(r2, sdt_pairs_vae_resnet);
        key = g_strdup_printf("%s.down.%d.block.%d.%s", part, i, j, tail);
    } else if ((r2 = match_indexed(rest, "down_blocks.", &i)) && (r2 = match_prefix(r2, "downsamplers.0."))) {
        key = g_strdup_printf("%s.down.%d.downsample.%s", part, i, r2);
    } else if ((r2 = match_indexed(rest, "up_blocks.", &i)) && (r2 = match_indexed(r2, "resnets.", &j))) {
        tail = rename_head(r2, sdt_pairs_vae_resnet);
        key = g_strdup_printf("%s.up.%d.block.%d.%s", part, dec_levels - 1 - i, j, tail);
    } else if ((r2 = match_indexed(rest, "up_blocks.", &i)) && (r2 = match_prefix(r2, "upsamplers.0."))) {
        key = g_strdup_printf("%s.up.%d.upsample.%s", part, dec_levels - 1 - i, r2);
    } else if ((r2 = match_indexed(rest, "mid_block.resnets.", &j))) {
        tail = rename_head(r2, sdt_pairs_vae_resnet);
        key = g_strdup_printf("%s.mid.block_%d.%s", part, j + 1, tail);
    } else if ((r2 = match_prefix(rest, "mid_block.attentions.0."))) {
        tail = rename_head(r2, sdt_pairs_vae_attn);
        *attn_linear = g_str_has_suffix(tail, ".weight") && strcmp(tail, "norm.weight") != 0;
        key = g_strdup_printf("%s.mid.attn_1.%s", part, tail);
    } else if ((r2 = match_prefix(rest, "conv_norm_out."))) {
        key = g_strdup_printf("%s.norm_out.%s", part, r2);
    } else {
        key = g_strdup(name);
    }
    g_free(tail);
    return key;
}

/* ---- building the key space ------------------------------------------------------ */

/* COMP_TEXT2: SDXL's text_encoder_2 (CLIPTextModelWithProjection), kept in transformers' names under
 * its own slot; clip_text reads that layout directly, so nothing is repacked into OpenCLIP's in_proj. */
/* COMP_TRANSFORMER .. COMP_T5: a transformer family's folder (SD3, Flux), kept in diffusers' and transformers'
 * names under the canonical prefixes of transformer_keys.h. */
typedef enum component {
    COMP_LDM,
    COMP_UNET,
    COMP_TEXT,
    COMP_VAE,
    COMP_TEXT2,
    COMP_TRANSFORMER,
    COMP_CLIP_L,
    COMP_CLIP_G,
    COMP_T5,
    COMP_LDM_PART_VAE /* a lone VAE in LDM names (Flux's ae.safetensors): under first_stage_model. as it is */
} component;

static char *clip_key(const sdt_weights *w, component c, const char *name)
{
    const char *prefix = c == COMP_TEXT2 ? "conditioner.embedders.1.transformer."
                         : w->sdxl_text  ? "conditioner.embedders.0.transformer."
                                         : "cond_stage_model.transformer.";
    return g_strconcat(prefix, name, NULL);
}

/* Adds one tensor under key (owned by w from here on, also on failure). source and file name where it came
 * from, for sentences; both must outlive w. */
static bool add_view(sdt_weights *w, char *key, const char *source, const char *file, sdt_tensor t, bool to_conv1x1,
                     sdt_error *error)
{
    size_t prev = GPOINTER_TO_SIZE(g_hash_table_lookup(w->index, key));
    if (prev) {
        const weight_entry *p = &g_array_index(w->entries, weight_entry, prev - 1);
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: tensors '%s' (%s) and '%s' (%s) both map to key '%s'; remove the duplicate from the "
                 "checkpoint",
                 w->path, p->source, p->file, source, file, key);
        g_free(key);
        return false;
    }
    if (to_conv1x1 && t.ndim == 2) { /* diffusers linear [C,C] -> LDM conv [C,C,1,1], same bytes */
        t.ndim = 4;
        t.shape[2] = t.shape[3] = 1;
    }
    weight_entry we = {key, source, file, t};
    g_array_append_val(w->entries, we);
    g_hash_table_insert(w->index, key, GSIZE_TO_POINTER(w->entries->len));
    return true;
}

/* A buffer of bytes owned by w (freed with it); NULL + sentence when memory is short. */
static void *host_alloc(sdt_weights *w, size_t bytes, const char *file, const char *name, sdt_error *error)
{
    void *p = g_try_malloc(bytes ? bytes : 1);
    if (!p) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory converting tensor '%s' (%zu bytes); free memory",
                 file, name, bytes);
        return NULL;
    }
    if (!w->host_owned) w->host_owned = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(w->host_owned, p);
    return p;
}

/* ComfyUI's "scaled fp8" storage: X.weight in fp8 beside a scalar X.scale_weight. ComfyUI dequantizes as
 * weight.to(dtype) * scale_weight.to(dtype) in the compute dtype (comfy/ops.py, scaled_fp8_op.convert_weight);
 * with bf16 that is bf16(fp8 * bf16(scale)), which is what is done here. Returns the scale's entry or NULL. */
static const sdt_st_entry *scale_of(const sdt_safetensors *st, const char *name)
{
    if (!g_str_has_suffix(name, ".weight")) return NULL;
    char *key = g_strconcat(name, "", NULL);
    key[strlen(key) - strlen("weight")] = '\0';
    char *scale_key = g_strconcat(key, "scale_weight", NULL);
    const sdt_st_entry *s = sdt_st_find(st, scale_key);
    g_free(scale_key);
    g_free(key);
    return s;
}

/* The scalar in a scale_weight entry; false + sentence when it is not one float. */
static bool scale_value(const sdt_safetensors *st, const sdt_st_entry *s, float *out, sdt_error *error)
{
    sdt_dtype dt;
    uint64_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= (uint64_t)s->shape[i];
    if (n != 1 || !sdt_st_dtype_to_tensor(s->dtype, &dt) || dt == SDT_I32)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: tensor '%s' should be one float (ComfyUI's scaled fp8 scale) but is %s with %llu "
                        "values; the file is damaged: re-download it",
                        sdt_st_path(st), s->name, sdt_st_dtype_name(s->dtype), (unsigned long long)n);
    sdt_load_f32(s->data, dt, out, 1);
    return true;
}

/* The tensor of an entry: a view into the mapping, or for fp8 storage an exact bf16 copy owned by w (fp8.h;
 * scaled by its scale_weight as ComfyUI does when the file has one). false with *usable false for dtypes no
 * model uses (integer buffers); false with *usable true on an error. */
static bool entry_tensor(sdt_weights *w, const sdt_safetensors *st, const sdt_st_entry *e, sdt_tensor *t, bool *usable,
                         sdt_error *error)
{
    sdt_error not_float;
    *usable = true;
    const sdt_st_entry *scale = scale_of(st, e->name);
    bool fp8 = e->dtype == SDT_ST_F8_E4M3 || e->dtype == SDT_ST_F8_E5M2;
    if (scale && !fp8)
        return sdt_fail(error, SDT_ERR_UNSUPPORTED,
                        "%s: tensor '%s' is stored as %s beside a scale_weight; sdtrain reads ComfyUI's scaled "
                        "fp8 only for fp8 weights: use the bf16/fp16 file",
                        sdt_st_path(st), e->name, sdt_st_dtype_name(e->dtype));
    if (fp8) {
        if (e->ndim > SDT_MAX_DIMS)
            return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: tensor '%s' has %d dimensions, more than the %d supported",
                            sdt_st_path(st), e->name, e->ndim, SDT_MAX_DIMS);
        float factor = 1.0f;
        if (scale && !scale_value(st, scale, &factor, error)) return false;
        uint16_t *bf16 = host_alloc(w, (size_t)e->nbytes * 2, sdt_st_path(st), e->name, error);
        if (!bf16) return false;
        sdt_fp8_kind kind = e->dtype == SDT_ST_F8_E4M3 ? SDT_FP8_E4M3 : SDT_FP8_E5M2;
        if (scale) { /* bf16(fp8 * bf16(scale)): the product of two short mantissas is exact in f32 */
            float s16 = sdt_bf16_to_f32(sdt_f32_to_bf16(factor)), table[256];
            for (int i = 0; i < 256; i++) table[i] = sdt_fp8_to_f32((uint8_t)i, kind) * s16;
            const uint8_t *src = e->data;
            for (uint64_t i = 0; i < e->nbytes; i++) bf16[i] = sdt_f32_to_bf16(table[src[i]]);
        } else {
            sdt_fp8_to_bf16_n(e->data, bf16, (size_t)e->nbytes, kind);
        }
        memset(t, 0, sizeof *t);
        t->data = bf16;
        t->dtype = SDT_BF16;
        t->device = SDT_DEVICE_CPU;
        t->ndim = e->ndim;
        for (int i = 0; i < e->ndim; i++) t->shape[i] = e->shape[i];
        return true;
    }
    if (!sdt_st_entry_tensor(st, e, t, &not_float)) {
        *usable = false;
        return false;
    }
    return true;
}

/* ComfyUI's scaled fp8 bookkeeping (each Linear's scale_weight and scale_input, the scaled_fp8 marker): no
 * model parameter; the scales are applied to their weights (entry_tensor). */
static bool is_scaled_fp8_bookkeeping(const char *name)
{
    return g_str_has_suffix(name, ".scale_weight") || g_str_has_suffix(name, ".scale_input") ||
           strcmp(name, "scaled_fp8") == 0 || g_str_has_suffix(name, ".scaled_fp8");
}

static bool add_entry(sdt_weights *w, char *key, const sdt_safetensors *st, const sdt_st_entry *e, bool to_conv1x1,
                      sdt_error *error)
{
    sdt_tensor t;
    bool usable;
    if (!entry_tensor(w, st, e, &t, &usable, error)) {
        if (usable) {
            g_free(key);
            return false;
        }
        /* Integer buffers such as position_ids are no model parameter: left out, remembered for error sentences. */
        g_hash_table_replace(w->unusable, key, (gpointer)sdt_st_dtype_name(e->dtype));
        return true;
    }
    return add_view(w, key, e->name, sdt_st_path(st), t, to_conv1x1, error);
}

/* bitsandbytes' NF4/FP4 files pack two weights a byte beside quant_state tensors; reading them as plain tensors
 * would give wrong weights (or misleading sentences), so they are refused by name. */
static bool refuse_quantized(const sdt_safetensors *st, sdt_error *error)
{
    for (size_t i = 0; i < sdt_st_count(st); i++) {
        const char *name = sdt_st_at(st, i)->name;
        if (strstr(name, ".quant_state.bitsandbytes__"))
            return sdt_fail(error, SDT_ERR_UNSUPPORTED,
                            "%s: tensor '%s' marks bitsandbytes' 4-bit storage (NF4/FP4, as Forge's "
                            "flux1-dev-bnb-nf4), which sdtrain does not read; use the bf16/fp16 or fp8 file",
                            sdt_st_path(st), name);
    }
    return true;
}

/* A transformer family's tensor (transformer_keys.h): its pieces under diffusers' names, row views of the file's
 * tensor (of its bf16 upcast for fp8), or a copy with the shift/scale halves exchanged. */
static bool add_transformer_entry(sdt_weights *w, const sdt_tk_context *ctx, const sdt_safetensors *st,
                                  const sdt_st_entry *e, bool *mapped, sdt_error *error)
{
    sdt_tk_piece pieces[SDT_TK_MAX_PIECES];
    int n = sdt_tk_map(ctx, sdt_st_path(st), e->name, e->ndim, e->ndim ? e->shape[0] : 0, pieces, error);
    *mapped = n != 0;
    if (n <= 0) return n == 0;
    sdt_tensor t;
    bool usable, ok = true;
    if (!entry_tensor(w, st, e, &t, &usable, error)) {
        if (!usable)
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: tensor '%s' is stored as %s, which no transformer weight is; the file is damaged: "
                     "re-download it",
                     sdt_st_path(st), e->name, sdt_st_dtype_name(e->dtype));
        sdt_tk_pieces_free(pieces, n);
        return false;
    }
    size_t row_bytes = sdt_dtype_size(t.dtype);
    for (int d = 1; d < t.ndim; d++) row_bytes *= (size_t)t.shape[d];
    for (int i = 0; i < n && ok; i++) {
        sdt_tensor v = t;
        v.shape[0] = pieces[i].rows;
        v.data = (char *)t.data + (size_t)pieces[i].row_begin * row_bytes;
        if (pieces[i].swap) { /* [shift; scale] -> [scale; shift] */
            size_t half = (size_t)(t.shape[0] / 2) * row_bytes;
            char *copy = host_alloc(w, 2 * half, sdt_st_path(st), e->name, error);
            if (!copy) {
                ok = false;
                break;
            }
            memcpy(copy, (const char *)t.data + half, half);
            memcpy(copy + half, t.data, half);
            v.data = copy;
        }
        ok = add_view(w, pieces[i].key, e->name, sdt_st_path(st), v, false, error);
        pieces[i].key = NULL; /* owned by w now */
    }
    sdt_tk_pieces_free(pieces, n);
    return ok;
}

/* A single file's key as A1111 loads it (sd_models.py): EMA copies ("model_ema.*") are not the model
 * (LatentDiffusion is built without EMA, so load_state_dict leaves them out): NULL. Old text encoder names
 * gain "text_model." (checkpoint_dict_replacements_sd1). */
static char *single_file_key(const char *name)
{
    static const char *const renames[][2] = {
        {"cond_stage_model.transformer.embeddings.", "cond_stage_model.transformer.text_model.embeddings."},
        {"cond_stage_model.transformer.encoder.", "cond_stage_model.transformer.text_model.encoder."},
        {"cond_stage_model.transformer.final_layer_norm.", "cond_stage_model.transformer.text_model.final_layer_norm."},
    };
    if (g_str_has_prefix(name, "model_ema.")) return NULL;
    for (size_t i = 0; i < G_N_ELEMENTS(renames); i++)
        if (g_str_has_prefix(name, renames[i][0]))
            return g_strconcat(renames[i][1], name + strlen(renames[i][0]), NULL);
    return g_strdup(name);
}

/* Maps one file's tensors; layout and dec_levels describe the whole component (all its shards). */
static bool add_file_mapped(sdt_weights *w, sdt_safetensors *st, component c, const unet_layout *layout, int dec_levels,
                            sdt_error *error)
{
    sdt_tk_context tk;
    sdt_tk_context_init(&tk);
    if (c == COMP_LDM) {
        if (!refuse_quantized(st, error)) return false;
        for (size_t i = 0; i < sdt_st_count(st); i++)
            sdt_tk_scan(&tk, sdt_st_at(st, i)->name, sdt_st_at(st, i)->ndim, sdt_st_at(st, i)->shape);
    }
    for (size_t i = 0; i < sdt_st_count(st); i++) {
        const sdt_st_entry *e = sdt_st_at(st, i);
        char *key = NULL, *mapped;
        bool conv1x1 = false, transformer;
        switch (c) {
            case COMP_LDM:
                if (is_scaled_fp8_bookkeeping(e->name)) continue;
                if (!add_transformer_entry(w, &tk, st, e, &transformer, error)) return false;
                if (transformer) continue;
                if (sdt_tk_vae_prefix(&tk) && g_str_has_prefix(e->name, sdt_tk_vae_prefix(&tk))) {
                    key = g_strconcat("first_stage_model.", e->name + strlen(sdt_tk_vae_prefix(&tk)), NULL);
                    break;
                }
                if (!(key = single_file_key(e->name))) continue;
                break;
            case COMP_UNET:
                mapped = unet_key(e->name, layout);
                key = g_strconcat("model.diffusion_model.", mapped, NULL);
                g_free(mapped);
                break;
            case COMP_TEXT:
            case COMP_TEXT2:
                key = clip_key(w, c, e->name);
                break;
            case COMP_TRANSFORMER:
                key = g_strconcat(SDT_TK_TRANSFORMER_PREFIX, e->name, NULL);
                break;
            case COMP_CLIP_L:
                key = g_strconcat(SDT_TK_CLIP_L_PREFIX, e->name, NULL);
                break;
            case COMP_CLIP_G:
                key = g_strconcat(SDT_TK_CLIP_G_PREFIX, e->name, NULL);
                break;
            case COMP_T5:
                key = g_strconcat(SDT_TK_T5XXL_PREFIX, e->name, NULL);
                break;
            case COMP_LDM_PART_VAE:
                key = g_strconcat("first_stage_model.", e->name, NULL);
                break;
            case COMP_VAE:
                mapped = vae_key(e->name, dec_levels, &conv1x1);
                key = g_strconcat("first_stage_model.", mapped, NULL);
                g_free(mapped);
                break;
        }
        if (!add_entry(w, key, st, e, conv1x1, error)) return false;
    }
    return true;
}

/* The files of one component (n > 1: shards), owned by w from here on. */
static bool add_files(sdt_weights *w, sdt_safetensors **st, int n, component c, sdt_error *error)
{
    unet_layout layout;
    memset(&layout, 0, sizeof layout);
    int dec_levels = 0;
    for (int i = 0; i < n; i++) w->files[w->n_files++] = st[i];
    for (int i = 0; i < n; i++) {
        if (c == COMP_UNET && !unet_layout_scan(st[i], &layout, error)) return false;
        int levels = c == COMP_VAE ? vae_decoder_levels(st[i]) : 0;
        if (levels > dec_levels) dec_levels = levels;
    }
    for (int i = 0; i < n; i++)
        if (!add_file_mapped(w, st[i], c, &layout, dec_levels, error)) return false;
    return true;
}

static bool add_file(sdt_weights *w, sdt_safetensors *st, component c, sdt_error *error)
{
    return add_files(w, &st, 1, c, error);
}

/* Opens the shards a <base>.safetensors.index.json names (its weight_map's distinct files, in
 * the folder of the index). 0 + error on failure; the files opened so far are closed. */
static int open_shards(const char *index_path, sdt_safetensors **out, sdt_error *error)
{
    char *text = NULL;
    size_t len = 0;
    if (!sdt_file_read_all(index_path, "sharded-checkpoint index", SDT_FILE_LIMIT_LARGE_TEXT, &text, &len, error))
        return 0;
    cJSON *j = sdt_json_parse(text, len);
    free(text);
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(j, "weight_map");
    if (!cJSON_IsObject(map)) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: not a sharded-checkpoint index (no 'weight_map' object); restore the "
                 "file from the model's download",
                 index_path);
        cJSON_Delete(j);
        return 0;
    }
    char *dir = g_path_get_dirname(index_path);
    GPtrArray *names = g_ptr_array_new();
    const cJSON *e;
    bool ok = true;
    cJSON_ArrayForEach(e, map)
    {
        const char *f = cJSON_GetStringValue(e);
        if (!f || !*f || strchr(f, '/') || strstr(f, "..")) {
            ok = sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: weight_map entry '%s' does not name a file beside the index",
                          index_path, e->string ? e->string : "?");
            break;
        }
        bool seen = false;
        for (guint k = 0; k < names->len && !seen; k++) seen = !strcmp(g_ptr_array_index(names, k), f);
        if (!seen) g_ptr_array_add(names, (gpointer)f);
    }
    if (ok && (names->len == 0 || names->len > MAX_SHARDS))
        ok = sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: names %u shard files; a component holds 1 to %d", index_path,
                      names->len, MAX_SHARDS);
    int n = 0;
    for (guint k = 0; ok && k < names->len; k++) {
        char *p = g_build_filename(dir, (const char *)g_ptr_array_index(names, k), NULL);
        out[n] = sdt_st_open(p, error);
        g_free(p);
        if (!out[n])
            ok = false;
        else
            n++;
    }
    if (!ok) {
        while (n > 0) sdt_st_close(out[--n]);
    }
    g_ptr_array_free(names, TRUE);
    g_free(dir);
    cJSON_Delete(j);
    return n;
}

/* Opens <dir>/<sub>/<base>.safetensors, else the .fp16 variant; NULL + *missing when neither exists. */
static sdt_safetensors *open_component(const char *dir, const char *sub, const char *base, char **used_path,
                                       bool *missing, sdt_error *error)
{
    const char *variants[] = {"%s.safetensors", "%s.fp16.safetensors"};
    *missing = true;
    for (int v = 0; v < 2; v++) {
        char *file = g_strdup_printf(variants[v], base);
        char *p = g_build_filename(dir, sub, file, NULL);
        g_free(file);
        if (g_file_test(p, G_FILE_TEST_EXISTS)) {
            *missing = false;
            sdt_safetensors *st = sdt_st_open(p, error);
            if (st)
                *used_path = p;
            else
                g_free(p);
            return st;
        }
        g_free(p);
    }
    return NULL;
}

/* <dir>/<sub>/<base>.safetensors.index.json (else its .fp16 variant, as diffusers names it):
 * the shards it names. 0 + *missing when no index exists. */
static int open_sharded_component(const char *dir, const char *sub, const char *base, sdt_safetensors **shards,
                                  bool *missing, sdt_error *error)
{
    const char *variants[] = {"%s.safetensors.index.json", "%s.safetensors.index.fp16.json"};
    *missing = true;
    for (int v = 0; v < 2; v++) {
        char *file = g_strdup_printf(variants[v], base);
        char *p = g_build_filename(dir, sub, file, NULL);
        g_free(file);
        int n = 0;
        if (g_file_test(p, G_FILE_TEST_EXISTS)) {
            *missing = false;
            n = open_shards(p, shards, error);
        }
        g_free(p);
        if (!*missing) return n;
    }
    return 0;
}

/* transformer/config.json's _class_name: which transformer family a diffusers folder holds (SDT_TK_NONE without
 * transformer/). false + sentence for a class sdtrain does not read. */
static bool transformer_folder_family(const char *dir, sdt_tk_layout *family, sdt_error *error)
{
    *family = SDT_TK_NONE;
    char *sub = g_build_filename(dir, "transformer", NULL), *config = g_build_filename(sub, "config.json", NULL);
    bool is_dir = g_file_test(sub, G_FILE_TEST_IS_DIR), ok = true;
    char *text = NULL;
    size_t len = 0;
    if (is_dir && (ok = sdt_file_read_all(config, "transformer config", SDT_FILE_LIMIT_TEXT, &text, &len, error))) {
        cJSON *j = sdt_json_parse(text, len);
        const char *cls = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "_class_name"));
        if (cls && strcmp(cls, "SD3Transformer2DModel") == 0)
            *family = SDT_TK_SAI_SD3;
        else if (cls && strcmp(cls, "FluxTransformer2DModel") == 0)
            *family = SDT_TK_BFL_FLUX;
        else
            ok = sdt_fail(error, SDT_ERR_UNSUPPORTED,
                          "%s: _class_name is %s%.64s%s, not SD3Transformer2DModel or FluxTransformer2DModel; "
                          "sdtrain reads SD 1.x/2.x, SDXL, SD3/SD3.5 and Flux.1 folders",
                          config, cls ? "\"" : "", cls ? cls : "missing", cls ? "\"" : "");
        cJSON_Delete(j);
        free(text);
    }
    g_free(config);
    g_free(sub);
    return ok;
}

/* One component of a folder, whole or sharded; *found false when the folder lacks it. */
static bool open_part(sdt_weights *w, const char *sub, const char *base, component c, bool *found, sdt_error *error)
{
    char *used = NULL;
    bool missing;
    *found = false;
    sdt_safetensors *st = open_component(w->path, sub, base, &used, &missing, error);
    if (!st && !missing) return false;
    if (st) {
        *found = true;
        if (c == COMP_TRANSFORMER || c == COMP_UNET) w->hash_file = g_strdup(used);
        g_free(used);
        return add_file(w, st, c, error);
    }
    sdt_safetensors *shards[MAX_SHARDS];
    int n = open_sharded_component(w->path, sub, base, shards, &missing, error);
    if (!n) return missing;
    *found = true;
    if (c == COMP_TRANSFORMER || c == COMP_UNET) w->hash_file = g_strdup(sdt_st_path(shards[0]));
    return add_files(w, shards, n, c, error);
}

/* An SD3 or Flux.1 diffusers folder: transformer/, text_encoder/ (CLIP-L), text_encoder_2/ (SD3: CLIP-G, Flux:
 * T5-XXL), text_encoder_3/ (SD3: T5-XXL), vae/. */
static bool open_transformer_folder(sdt_weights *w, sdt_tk_layout family, sdt_error *error)
{
    const struct {
        const char *sub, *base;
        component c;
    } parts[] = {{"transformer", "diffusion_pytorch_model", COMP_TRANSFORMER},
                 {"text_encoder", "model", COMP_CLIP_L},
                 {"text_encoder_2", "model", family == SDT_TK_SAI_SD3 ? COMP_CLIP_G : COMP_T5},
                 {"text_encoder_3", "model", COMP_T5},
                 {"vae", "diffusion_pytorch_model", COMP_VAE}};
    for (size_t i = 0; i < G_N_ELEMENTS(parts); i++) {
        if (family == SDT_TK_BFL_FLUX && strcmp(parts[i].sub, "text_encoder_3") == 0) continue;
        bool found;
        if (!open_part(w, parts[i].sub, parts[i].base, parts[i].c, &found, error)) return false;
        if (parts[i].c == COMP_TRANSFORMER) w->has_unet = found;
        if (parts[i].c == COMP_VAE) w->has_vae = found;
        if (parts[i].c == COMP_CLIP_L) w->has_text = found;
    }
    if (!w->has_unet)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: transformer/config.json names a transformer but transformer/ has no "
                        "diffusion_pytorch_model.safetensors (nor shards); restore it from the model's download",
                        w->path);
    return true;
}

static bool open_folder(sdt_weights *w, sdt_error *error)
{
    sdt_tk_layout family;
    if (!transformer_folder_family(w->path, &family, error)) return false;
    if (family != SDT_TK_NONE) return open_transformer_folder(w, family, error);
    static const struct {
        const char *sub, *base;
        component c;
    } parts[] = {{"unet", "diffusion_pytorch_model", COMP_UNET},
                 {"text_encoder", "model", COMP_TEXT},
                 {"vae", "diffusion_pytorch_model", COMP_VAE},
                 {"text_encoder_2", "model", COMP_TEXT2}};
    bool *have[] = {&w->has_unet, &w->has_text, &w->has_vae, &w->has_text2};
    char *second = g_build_filename(w->path, "text_encoder_2", NULL);
    w->sdxl_text = g_file_test(second, G_FILE_TEST_IS_DIR);
    g_free(second);
    for (int i = 0; i < 4; i++) {
        char *used = NULL;
        bool missing;
        sdt_safetensors *st = open_component(w->path, parts[i].sub, parts[i].base, &used, &missing, error);
        if (!st && !missing) return false;
        if (!st) {
            sdt_safetensors *shards[MAX_SHARDS];
            int n = open_sharded_component(w->path, parts[i].sub, parts[i].base, shards, &missing, error);
            if (!n && !missing) return false;
            if (!n) continue;
            *have[i] = true;
            if (parts[i].c == COMP_UNET) w->hash_file = g_strdup(sdt_st_path(shards[0]));
            if (!add_files(w, shards, n, parts[i].c, error)) return false;
            continue;
        }
        *have[i] = true;
        if (parts[i].c == COMP_UNET) w->hash_file = g_strdup(used);
        g_free(used);
        if (!add_file(w, st, parts[i].c, error)) return false;
    }
    if (!w->n_files) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: the folder has no unet/diffusion_pytorch_model.safetensors, "
                 "text_encoder/model.safetensors or vae/diffusion_pytorch_model.safetensors (nor .fp16 variants or "
                 "*.safetensors.index.json shards); give a "
                 ".safetensors checkpoint or a diffusers folder saved with safetensors",
                 w->path);
        return false;
    }
    if (!w->hash_file) w->hash_file = g_strdup(sdt_st_path(w->files[0]));
    return true;
}

/* A PyTorch single file (.ckpt): its state dict, under "state_dict" or at the top as A1111 reads it. */
static bool open_torch_single(sdt_weights *w, sdt_error *error)
{
    w->torch = sdt_torch_open(w->path, error);
    if (!w->torch) return false;
    const sdt_pv *root = sdt_torch_root(w->torch), *wrapped = sdt_pv_dict_get(root, "state_dict");
    const sdt_pv *sd = wrapped ? wrapped : root;
    if (!sdt_pv_is(sd, SDT_PV_DICT))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: the file holds a %s where a checkpoint holds a dict of tensors "
                        "(a state_dict); give a Stable Diffusion checkpoint",
                        w->path, sdt_pv_kind_name(sd->kind));
    for (size_t i = 0; i < sdt_pv_len(sd); i++) {
        const char *name = sdt_pv_as_str(sdt_pv_dict_key(sd, i));
        const sdt_pv *v = sdt_pv_dict_value(sd, i);
        char *key = name && sdt_pv_is(v, SDT_PV_TENSOR) ? single_file_key(name) : NULL;
        if (!key) continue; /* bookkeeping (a nested "state_dict", counters) and EMA copies */
        sdt_tensor t;
        sdt_dtype dt;
        if (!sdt_st_dtype_to_tensor(v->u.t.storage->dtype, &dt)) {
            g_hash_table_replace(w->unusable, key, (gpointer)sdt_st_dtype_name(v->u.t.storage->dtype));
            continue;
        }
        if (!sdt_torch_tensor(w->torch, v, name, &t, error)) {
            g_free(key);
            return false;
        }
        if (!add_view(w, key, name, w->path, t, false, error)) return false;
    }
    return true;
}

sdt_weights *sdt_weights_open(const char *path, sdt_error *error)
{
    sdt_weights *w = g_new0(sdt_weights, 1);
    w->path = g_strdup(path);
    w->entries = g_array_new(FALSE, FALSE, sizeof(weight_entry));
    w->index = g_hash_table_new(g_str_hash, g_str_equal);
    w->unusable = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    bool ok;
    if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
        w->is_folder = true;
        ok = open_folder(w, error);
    } else if (sdt_torch_sniff_file(path) != SDT_TORCH_NOT_TORCH) { /* by content: .ckpt, .pt, .bin alike */
        ok = open_torch_single(w, error);
        w->has_unet = w->has_text = w->has_vae = true;
        w->hash_file = g_strdup(path);
    } else {
        sdt_safetensors *st = sdt_st_open(path, error);
        ok = st && add_file(w, st, COMP_LDM, error);
        w->has_unet = w->has_text = w->has_vae = true;
        w->hash_file = g_strdup(path);
    }
    if (!ok) {
        sdt_weights_close(w);
        return NULL;
    }
    return w;
}

sdt_weights *sdt_weights_open_part(const char *path, sdt_weights_part part, sdt_error *error)
{
    static const struct {
        component c;
        const char *probe, *probe2, *option, *what;
    } parts[] = {
        [SDT_PART_CLIP_L] = {COMP_CLIP_L, "text_model.embeddings.token_embedding.weight", NULL, "--clip-l",
                             "a CLIP-L text encoder (clip_l.safetensors)"},
        [SDT_PART_CLIP_G] = {COMP_CLIP_G, "text_model.embeddings.token_embedding.weight", NULL, "--clip-g",
                             "a CLIP-G text encoder (clip_g.safetensors)"},
        [SDT_PART_T5XXL] = {COMP_T5, "shared.weight", "encoder.embed_tokens.weight", "--t5xxl",
                            "a T5-XXL encoder (t5xxl_fp16.safetensors or t5xxl_fp8_e4m3fn.safetensors)"},
        [SDT_PART_VAE] = {COMP_VAE, "decoder.conv_out.weight", NULL, "--vae",
                          "a VAE (Flux's ae.safetensors, or SD3.5's vae/diffusion_pytorch_model.safetensors)"},
    };
    if ((unsigned)part > SDT_PART_VAE) {
        sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "%s: unknown model part %d", path, (int)part);
        return NULL;
    }
    sdt_safetensors *st = sdt_st_open(path, error);
    if (!st) return NULL;
    if (!sdt_st_find(st, parts[part].probe) && !(parts[part].probe2 && sdt_st_find(st, parts[part].probe2))) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: %s FILE takes %s, but the file has no '%s' at its top; give that file",
                 path, parts[part].option, parts[part].what, parts[part].probe);
        sdt_st_close(st);
        return NULL;
    }
    sdt_weights *w = g_new0(sdt_weights, 1);
    w->path = g_strdup(path);
    w->hash_file = g_strdup(path);
    w->entries = g_array_new(FALSE, FALSE, sizeof(weight_entry));
    w->index = g_hash_table_new(g_str_hash, g_str_equal);
    w->unusable = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    bool ldm_vae = part == SDT_PART_VAE && !sdt_st_find(st, "decoder.mid_block.resnets.0.conv1.weight");
    if (!(ldm_vae ? add_file(w, st, COMP_LDM_PART_VAE, error) : add_file(w, st, parts[part].c, error))) {
        sdt_weights_close(w);
        return NULL;
    }
    return w;
}

void sdt_weights_close(sdt_weights *w)
{
    if (!w) return;
    for (guint i = 0; w->entries && i < w->entries->len; i++) g_free(g_array_index(w->entries, weight_entry, i).key);
    if (w->entries) g_array_free(w->entries, TRUE);
    if (w->index) g_hash_table_destroy(w->index);
    if (w->unusable) g_hash_table_destroy(w->unusable);
    for (int i = 0; i < w->n_files; i++) sdt_st_close(w->files[i]);
    sdt_torch_close(w->torch);
    for (guint i = 0; w->owned && i < w->owned->len; i++) w->owner->free(w->owner, g_ptr_array_index(w->owned, i));
    if (w->owned) g_ptr_array_free(w->owned, TRUE);
    if (w->host_owned) g_ptr_array_free(w->host_owned, TRUE);
    g_free(w->hash_file);
    g_free(w->path);
    g_free(w);
}

static const weight_entry *find_entry(const sdt_weights *w, const char *key)
{
    size_t i = GPOINTER_TO_SIZE(g_hash_table_lookup(w->index, key));
    return i ? &g_array_index(w->entries, weight_entry, i - 1) : NULL;
}

const sdt_tensor *sdt_weights_get(const sdt_weights *w, const char *key)
{
    const weight_entry *e = find_entry(w, key);
    return e ? &e->tensor : NULL;
}

static void shape_text(int ndim, const int64_t *shape, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (used < size) snprintf(buf + used, size - used, "]");
}

/* Which diffusers subfolder a canonical key comes from, and whether that part was found. */
static const char *component_of(const sdt_weights *w, const char *key, bool *present)
{
    if (g_str_has_prefix(key, "model.diffusion_model.")) return *present = w->has_unet, "unet/";
    if (g_str_has_prefix(key, "cond_stage_model.")) return *present = w->has_text, "text_encoder/";
    if (g_str_has_prefix(key, "conditioner.embedders.1.")) return *present = w->has_text2, "text_encoder_2/";
    if (g_str_has_prefix(key, "conditioner.")) return *present = w->has_text, "text_encoder/";
    if (g_str_has_prefix(key, "first_stage_model.")) return *present = w->has_vae, "vae/";
    *present = true;
    return "";
}

bool sdt_weights_missing_part(const sdt_weights *w, const char *key_prefix, sdt_error *error)
{
    bool present;
    const char *sub = component_of(w, key_prefix, &present);
    if (!w->is_folder || present) return false;
    const char *file = g_str_has_prefix(sub, "text_encoder") ? "model" : "diffusion_pytorch_model";
    sdt_fail(error, SDT_ERR_NOT_FOUND,
             "%s: the diffusers folder has no %s folder (%s%s.safetensors); copy the complete "
             "model folder (unet/, text_encoder/, vae/, tokenizer/) or pass a single-file checkpoint",
             w->path, sub, sub, file);
    return true;
}

const sdt_tensor *sdt_weights_require(const sdt_weights *w, const char *key, int ndim, const int64_t *shape,
                                      sdt_error *error)
{
    const weight_entry *e = find_entry(w, key);
    if (!e) {
        bool present;
        const char *sub = component_of(w, key, &present);
        const char *dtype = g_hash_table_lookup(w->unusable, key);
        if (dtype)
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: key '%s' is stored as %s, which the models cannot use; convert the checkpoint "
                     "to F32, F16 or BF16",
                     w->path, key, dtype);
        else if (w->is_folder && !present)
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: key '%s' is needed but the folder has no %s weights (.safetensors); add that "
                     "part of the model or use a complete checkpoint",
                     w->path, key, sub);
        else
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: key '%s' is missing; the checkpoint is incomplete or of another model family "
                     "than the configuration detected; use a complete Stable Diffusion checkpoint",
                     w->path, key);
        return NULL;
    }
    bool same = e->tensor.ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = e->tensor.shape[i] == shape[i];
    if (!same) {
        char have[128], want[128];
        shape_text(e->tensor.ndim, e->tensor.shape, have, sizeof(have));
        shape_text(ndim, shape, want, sizeof(want));
        if (strcmp(e->source, key) != 0)
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: key '%s' (stored as '%s' in %s) has shape %s but the model needs %s; the "
                     "checkpoint does not match the configuration (another model family or a damaged file)",
                     w->path, key, e->source, e->file, have, want);
        else
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: key '%s' has shape %s but the model needs %s; the checkpoint does not match the "
                     "configuration (another model family or a damaged file)",
                     w->path, key, have, want);
        return NULL;
    }
    return &e->tensor;
}

size_t sdt_weights_count(const sdt_weights *w)
{
    return w->entries->len;
}

const char *sdt_weights_key(const sdt_weights *w, size_t i)
{
    return i < w->entries->len ? g_array_index(w->entries, weight_entry, i).key : NULL;
}

const char *sdt_weights_source(const sdt_weights *w, const char *key)
{
    const weight_entry *e = find_entry(w, key);
    return e ? e->source : NULL;
}

bool sdt_weights_is_folder(const sdt_weights *w)
{
    return w->is_folder;
}

const char *sdt_weights_path(const sdt_weights *w)
{
    return w->path;
}

const char *sdt_weights_hash_file(const sdt_weights *w)
{
    return w->hash_file;
}

bool sdt_file_short_hash(const char *path, char out[11], sdt_error *error)
{
    int fd = sdt_file_open_regular(path, "checkpoint", NULL, error);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        if (fd >= 0)
            sdt_fail(error, SDT_ERR_IO, "%s: cannot read the file to hash it; check that it still exists", path);
        return false;
    }
    sdt_sha256 sum;
    sdt_sha256_init(&sum, true);
    enum { CHUNK = 8 << 20 };
    guchar *buf = g_malloc(CHUNK);
    size_t n;
    while ((n = fread(buf, 1, CHUNK, f)) > 0) sdt_sha256_update(&sum, buf, n);
    bool failed = ferror(f);
    fclose(f);
    g_free(buf);
    char hex[65];
    sdt_sha256_finish_hex(&sum, hex);
    if (failed) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: reading the file for its hash failed; check the disk", path);
        return false;
    }
    snprintf(out, 11, "%.10s", hex);
    return true;
}

bool sdt_weights_short_hash(sdt_weights *w, char out[11], sdt_error *error)
{
    if (!w->hash[0] && !sdt_file_short_hash(w->hash_file, w->hash, error)) return false;
    memcpy(out, w->hash, 11);
    return true;
}

/* ---- materialized copies ---------------------------------------------------------- */

static bool is_float(sdt_dtype d)
{
    return d == SDT_F32 || d == SDT_F16 || d == SDT_BF16;
}

/* Host memory a converted tensor waits in before its upload: buffers grown to the largest tensor,
 * so gigabytes of weights do not fault in fresh pages tensor by tensor. mem holds a dtype
 * conversion, perm a channels-last permutation (of the file's data or of mem). */
typedef struct staging {
    void *mem, *perm;
    size_t size, perm_size;
} staging;

/* A host buffer of at least bytes in *buf (grown, contents not kept); false when out of memory. */
static bool staging_reserve(void **buf, size_t *size, size_t bytes)
{
    if (*size >= bytes) return true;
    g_free(*buf);
    *buf = g_try_malloc(bytes ? bytes : 1);
    *size = *buf ? bytes : 0;
    return *buf != NULL;
}

static void staging_free(staging *stage)
{
    g_free(stage->mem);
    g_free(stage->perm);
}

/* The UNet's convolution filters (its 4-D tensors) go channels-last on a backend that prefers it
 * (ops.h: prefers_channels_last): converted once here, where the frozen weights reach the device,
 * rather than per call. The shape stays [OC, C, KH, KW] (tensor.h), so lookups and shape checks
 * are unchanged, and every conv2d reads either layout. */
static bool stored_channels_last(const weight_entry *e, const sdt_backend *be)
{
    return be->prefers_channels_last && e->tensor.ndim == 4 && is_float(e->tensor.dtype) &&
           g_str_has_prefix(e->key, "model.diffusion_model.");
}

/* Places one tensor's data on the backend in the wanted dtype (and layout); false + sentence on failure. */
static bool materialize_tensor(sdt_weights *dst, const weight_entry *e, sdt_backend *be, sdt_dtype float_dtype,
                               staging *stage, sdt_tensor *out, sdt_error *error)
{
    *out = e->tensor;
    sdt_dtype want = is_float(e->tensor.dtype) ? float_dtype : e->tensor.dtype;
    bool channels_last = stored_channels_last(e, be);
    out->dtype = want;
    out->device = be->device;
    out->channels_last = channels_last;
    if (be->device == SDT_DEVICE_CPU && want == e->tensor.dtype && !channels_last)
        return true; /* the mapping serves as is */
    size_t bytes = sdt_tensor_nbytes(out);
    void *mem = be->alloc(be, bytes);
    if (!mem) {
        sdt_fail(error, be->error.code,
                 "%s: cannot allocate %zu MiB for '%s' on the %s backend (%s); use a smaller model, fp16/bf16 "
                 "weights, or the CPU",
                 dst->path, bytes >> 20, e->key, be->name, be->error.message);
        return false;
    }
    g_ptr_array_add(dst->owned, mem);
    out->data = mem;
    /* the backend's memory is the host's on the CPU: the last host step writes it directly */
    const bool host_is_backend = be->device == SDT_DEVICE_CPU;
    const void *host = e->tensor.data;
    if (want != e->tensor.dtype) {
        int64_t n = sdt_tensor_numel(&e->tensor);
        void *to = host_is_backend && !channels_last ? mem : NULL;
        if (!to && !staging_reserve(&stage->mem, &stage->size, bytes)) {
            sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of host memory converting '%s' to %s", dst->path, e->key,
                     sdt_dtype_name(want));
            return false;
        }
        if (!to) to = stage->mem;
        sdt_host_convert(e->tensor.data, e->tensor.dtype, to, want, n);
        host = to;
    }
    if (channels_last) {
        void *to = host_is_backend ? mem : NULL;
        if (!to && !staging_reserve(&stage->perm, &stage->perm_size, bytes)) {
            sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of host memory laying '%s' out channels-last", dst->path,
                     e->key);
            return false;
        }
        if (!to) to = stage->perm;
        const sdt_tensor *t = &e->tensor;
        sdt_host_permute_channels(host, to, sdt_dtype_size(want), t->shape[0], t->shape[1], t->shape[2] * t->shape[3],
                                  true);
        host = to;
    }
    if (host_is_backend) return true;
    int rc = be->upload(be, mem, host, bytes);
    if (rc) {
        sdt_fail(error, be->error.code, "%s: copying '%s' to the %s backend failed (%s)", dst->path, e->key, be->name,
                 be->error.message);
        return false;
    }
    return true;
}

sdt_weights *sdt_weights_materialize(const sdt_weights *src, sdt_backend *be, sdt_dtype float_dtype, sdt_error *error)
{
    sdt_weights *w = g_new0(sdt_weights, 1);
    w->path = g_strdup(src->path);
    w->hash_file = g_strdup(src->hash_file);
    w->is_folder = src->is_folder;
    w->has_unet = src->has_unet;
    w->has_text = src->has_text;
    w->has_vae = src->has_vae;
    w->has_text2 = src->has_text2;
    w->sdxl_text = src->sdxl_text;
    memcpy(w->hash, src->hash, sizeof(w->hash));
    w->entries = g_array_new(FALSE, FALSE, sizeof(weight_entry));
    w->index = g_hash_table_new(g_str_hash, g_str_equal);
    w->unusable = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    w->owner = be;
    w->owned = g_ptr_array_new();
    GHashTableIter it;
    gpointer k, v;
    g_hash_table_iter_init(&it, src->unusable);
    while (g_hash_table_iter_next(&it, &k, &v)) g_hash_table_replace(w->unusable, g_strdup(k), v);
    staging stage = {0};
    for (guint i = 0; i < src->entries->len; i++) {
        const weight_entry *e = &g_array_index(src->entries, weight_entry, i);
        weight_entry we = {g_strdup(e->key), e->source, e->file, e->tensor};
        if (!materialize_tensor(w, e, be, float_dtype, &stage, &we.tensor, error)) {
            g_free(we.key);
            staging_free(&stage);
            sdt_weights_close(w);
            return NULL;
        }
        g_array_append_val(w->entries, we);
        g_hash_table_insert(w->index, we.key, GSIZE_TO_POINTER(w->entries->len));
    }
    staging_free(&stage);
    return w;
}

size_t sdt_weights_release_prefix(sdt_weights *w, const char *prefix)
{
    size_t freed = 0, n = strlen(prefix);
    if (!w->owner) return 0;
    for (guint i = 0; i < w->entries->len; i++) {
        weight_entry *e = &g_array_index(w->entries, weight_entry, i);
        if (strncmp(e->key, prefix, n) != 0 || !e->tensor.data) continue;
        if (g_ptr_array_remove_fast(w->owned, e->tensor.data)) { /* else the CPU mapping's: not ours to free */
            w->owner->free(w->owner, e->tensor.data);
            freed += sdt_tensor_nbytes(&e->tensor);
        }
        e->tensor.data = NULL;
    }
    return freed;
}

bool sdt_weights_rematerialize_prefix(sdt_weights *w, const sdt_weights *src, const char *prefix, sdt_dtype float_dtype,
                                      sdt_error *error)
{
    size_t n = strlen(prefix);
    staging stage = {0};
    bool ok = true;
    for (guint i = 0; ok && w->owner && i < w->entries->len; i++) {
        weight_entry *e = &g_array_index(w->entries, weight_entry, i);
        if (strncmp(e->key, prefix, n) != 0 || e->tensor.data || sdt_tensor_numel(&e->tensor) == 0) continue;
        const weight_entry *from = find_entry(src, e->key);
        if (!from) {
            ok =
                sdt_fail(error, SDT_ERR_INTERNAL, "%s: '%s' is not in the opened checkpoint any more", w->path, e->key);
            break;
        }
        ok = materialize_tensor(w, from, w->owner, float_dtype, &stage, &e->tensor, error);
    }
    staging_free(&stage);
    return ok;
}
