/* embedding_file.h - embedding files: write, read back, inspect.
 *
 * Written:
 *   .safetensors  tensor "emb_params" [N, dim] F32 (SDXL: "clip_l" [N, 768] and
 *                 "clip_g" [N, 1280], kohya's layout) plus __metadata__ strings
 *                 name, step, sd_checkpoint, sd_checkpoint_name,
 *                 vectors_per_token, init_text (absent ones omitted). SD3.5 / Flux.1: one
 *                 tensor per encoder, "clip_l" [N, 768], "clip_g" [N, 1280] (SD3.5),
 *                 "t5xxl" [N, 4096], the keys ComfyUI's tokenizers look up (sd1_clip.py
 *                 load_embed's embed_key: SDTokenizer 'clip_l', SDXLClipGTokenizer 'clip_g',
 *                 T5XXLTokenizer 't5xxl' in text_encoders/sd3_clip.py and flux.py).
 *   .png card     A1111's card: a tEXt chunk "sd-ti-embedding" holding base64 of
 *                 the JSON that A1111 makes from its .pt dict (json.dumps default
 *                 separators, ensure_ascii, tensors as {"TORCHTENSOR": nested list};
 *                 SDXL: {clip_l, clip_g} alone, with name and step in a tEXt chunk
 *                 "sdtrain-embedding-info"), over a picture (the caller's preview, or a
 *                 generated card), the same data hidden in its pixels too. None for
 *                 SD3.5 / Flux.1 (refused: A1111 cannot load them).
 * Read: the above, any single-tensor safetensors embedding (diffusers
 * "<token>", kohya "emb_params"), SDXL clip_l/clip_g safetensors, A1111
 * cards whose chunk is tEXt, zTXt or iTXt, and PyTorch files (torch.save,
 * read by models/formats/torch_file.h, which runs no code): A1111 .pt
 * (string_to_param with one term, also the old ParameterDict form), a
 * one-key dict {"<token>": tensor} (diffusers learned_embeds.bin, kohya) and
 * SDXL {clip_l, clip_g}, decided as A1111's create_embedding_from_data does.
 * SD3.5 / Flux.1 tables in either file kind: clip_l, clip_g (optional) and T5's
 * rows under "t5xxl" (ComfyUI) or "t5" (OneTrainer's StableDiffusion3EmbeddingSaver and
 * diffusers' Flux advanced script); every table the same vector count, none as wide as
 * another released encoder (a mislabelled table), both T5 spellings at once refused.
 * F16/BF16/F64 tensors become F32.
 *
 * Saves are atomic (models/formats/atomic_file.h), refuse to replace an existing file
 * unless overwrite is set, and refuse non-finite vectors (a diverged embedding
 * must never replace a good file).
 */
#ifndef SDT_EMBEDDING_FILE_H
#define SDT_EMBEDDING_FILE_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ti/embedding.h"
#include "data/path_util.h"
#include "safetensors.h"

#define SDT_PNG_CARD_KEYWORD "sd-ti-embedding"
/* sdtrain's own tEXt chunk beside an SDXL card's: {"name", "step", "sd_checkpoint", "sd_checkpoint_name"}
 * as JSON (embedding_a1111_json.c says why they cannot sit in the card's data). */
#define SDT_PNG_CARD_INFO_KEYWORD "sdtrain-embedding-info"

typedef enum sdt_embedding_format {
    SDT_EMBEDDING_FORMAT_UNKNOWN = 0,
    SDT_EMBEDDING_FORMAT_SAFETENSORS,
    SDT_EMBEDDING_FORMAT_PNG_CARD,
    SDT_EMBEDDING_FORMAT_A1111_PT,      /* torch.save of A1111's dict (string_to_param) */
    SDT_EMBEDDING_FORMAT_TORCH_CONCEPT, /* torch.save of {"<token>": tensor} or {clip_l, clip_g} (.bin, .pt) */
} sdt_embedding_format;

const char *sdt_embedding_format_name(sdt_embedding_format f);

bool sdt_embedding_save_safetensors(const sdt_embedding *e, const char *path, bool overwrite, sdt_error *error);
bool sdt_embedding_load_safetensors(const char *path, sdt_embedding *e, sdt_error *error);
/* A PyTorch file (zip or legacy layout); *format tells A1111's dict from a one-key concept dict.
 * The name is the file's stem, as A1111 names .pt/.bin embeddings. */
bool sdt_embedding_load_torch(const char *path, sdt_embedding *e, sdt_embedding_format *format, sdt_error *error);
/* Shared by the readers: one [N, dim] (or [dim]) tensor, or an SDXL clip_l + clip_g pair, into e (F32). */
bool sdt_embedding_take_tensor(const char *path, const sdt_st_entry *t, sdt_embedding *e, sdt_error *error);
/* SD3.5 / Flux.1 per-encoder tables (clip_l, clip_g, t5xxl; a NULL is absent) into e's table-major vectors:
 * every table the same vector count, none of another released encoder's width; F32. */
bool sdt_embedding_take_tables(const char *path, const sdt_st_entry *const tables[3], sdt_embedding *e,
                               sdt_error *error);
bool sdt_embedding_take_sdxl(const char *path, const sdt_st_entry *tl, const sdt_st_entry *tg, sdt_embedding *e,
                             sdt_error *error);

/* rgb: the picture (rgb_w x rgb_h, 8-bit RGB interleaved), or NULL for a generated card. */
bool sdt_embedding_save_png_card(const sdt_embedding *e, const char *path, const uint8_t *rgb, int rgb_w, int rgb_h,
                                 bool overwrite, sdt_error *error);
bool sdt_embedding_load_png_card(const char *path, sdt_embedding *e, sdt_error *error);
/* The card reader on a PNG file image in memory (also the fuzz entry). origin names it in errors. */
bool sdt_embedding_png_card_decode(const void *png, size_t size, const char *origin, sdt_embedding *e,
                                   sdt_error *error);
/* The JSON text A1111 stores (before base64): its .pt dict, or for SDXL only {clip_l, clip_g}.
 * Newly allocated; NULL for non-finite vectors. */
char *sdt_embedding_a1111_json(const sdt_embedding *e);
/* Parses that JSON into e (also the older SDXL cards that held the pair in string_to_param).
 * fallback_name is used when it has no "name". */
bool sdt_embedding_from_a1111_json(const char *json, size_t len, const char *origin, const char *fallback_name,
                                   sdt_embedding *e, sdt_error *error);
/* The SDT_PNG_CARD_INFO_KEYWORD text for e: JSON of what its card's data leaves out (SDXL),
 * or NULL when the data holds it all. Newly allocated. */
char *sdt_embedding_card_info_json(const sdt_embedding *e);
/* Takes name, step and checkpoint from that text into a loaded e (a missing name keeps e's);
 * false (e unchanged but for what was read) when it is not such JSON or memory ran out. */
bool sdt_embedding_apply_card_info(const char *json, size_t len, sdt_embedding *e);

/* Reads any supported file, chosen by its first bytes. format may be NULL. */
bool sdt_embedding_load(const char *path, sdt_embedding *e, sdt_embedding_format *format, sdt_error *error);

/* A JSON description (format, name, shape, step, checkpoint, init text,
 * per-vector norms, min/max/mean, finite). Newly allocated text. */
char *sdt_embedding_describe_json(const sdt_embedding *e, sdt_embedding_format format, const char *path);
/* Loads path and describes it; NULL + error when it cannot be read. */
char *sdt_embedding_inspect_file(const char *path, sdt_error *error);

/* Shared by the writers: false + error when path exists and overwrite is off,
 * or the embedding is not fit to save (empty, non-finite). */
bool sdt_embedding_check_save(const sdt_embedding *e, const char *path, bool overwrite, sdt_error *error);
/* Allocates e->vectors for a loaded file (no name rules: the name is data here). */
bool sdt_embedding_alloc_loaded(sdt_embedding *e, int64_t n_vectors, int64_t dim, const char *origin, sdt_error *error);

#endif
