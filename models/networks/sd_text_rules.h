/* sd_text_rules.h - the rules by which a model's prompts become its conditioning, where SD 2.x and
 * SDXL differ from SD 1.x: the id that pads a chunk after its end token, whether the user's CLIP skip
 * applies, and SDXL's second encoder with its pooled output. One function of the model's config decides
 * them, so training, the text cache, previews and generation never disagree. */
#ifndef SDT_MODELS_SD_TEXT_RULES_H
#define SDT_MODELS_SD_TEXT_RULES_H

#include <stdbool.h>
#include <stdint.h>

#include "sd_model.h"

typedef struct sd_text_rules {
    bool sdxl;              /* SDXL's conditioning: CLIP-L and bigG (both on their penultimate layer) and y */
    bool clip_skip_applies; /* the user's CLIP skip is used (SD 1.x); SD 2.x's OpenCLIP and SDXL keep the layer
                             * they were trained on, as A1111 does */
    bool pad_zero;          /* the first encoder pads a chunk with 0 after its end token (OpenCLIP's tokenizer:
                             * SD 2.x), else with the end token (OpenAI's CLIP: SD 1.x, SDXL's CLIP-L) */
    bool pad_zero_g;        /* the same for SDXL's bigG (OpenCLIP: 0) */
    int width_g;            /* bigG's part of the context (0 unless SDXL) */
    int pooled_width;       /* bigG's pooled output, y's first part (0 unless SDXL) */
} sd_text_rules;

sd_text_rules sd_text_rules_of(const sd_config *cfg);
/* The id after a chunk's first end token: for the first encoder, and for SDXL's bigG. */
int32_t sd_text_pad_id(const sd_text_rules *rules, int32_t end_id);
int32_t sd_text_pad_id_g(const sd_text_rules *rules, int32_t end_id);
/* The CLIP skip the encoders run with: the user's where it applies, else 0 (the model's own layer). */
int sd_text_clip_skip(const sd_text_rules *rules, int user_skip);

#endif
