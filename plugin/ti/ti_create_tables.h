/* ti_create_tables.h - a new SD3.5 or Flux.1 embedding: one table per text encoder of the family (clip_l
 * [n, 768], clip_g [n, 1280] for SD3.5, t5xxl [n, 4096]), each initialised from the spec's init text through
 * that encoder's own tokenizer (CLIP's BPE for clip_l and clip_g, T5's SentencePiece for t5xxl): vector i =
 * the token embedding row of token floor(i * n / N) of the text's first N tokens, as the CLIP families'
 * create does; an empty init text gives zeros.
 *
 * The rows are read straight from the token embeddings (transformer_keys.h's canonical keys: the
 * checkpoint's own encoders, or the spec's clip_l_path / clip_g_path / t5xxl_path files, which win when
 * given), upcast from F16, BF16 or fp8 storage. A missing encoder is transformer_detect's sentence, naming
 * sdt-host's option and the spec's field.
 *
 * T5's vocabulary is found where training finds it (train/tokenizer_open.h's sdt_open_t5_tokenizer: a
 * diffusers folder's tokenizer_3/ or tokenizer_2/; beside a single-file model, t5_tokenizer/ or the folder;
 * the T5 file's folder or its t5_tokenizer/). None found with a non-empty init text: its sentence naming
 * them, and that an empty init text needs none. */
#ifndef SDT_TI_CREATE_TABLES_H
#define SDT_TI_CREATE_TABLES_H

#include "sdt_error.h"

#include "sdtrain.h"
#include "ti/embedding.h"
#include "transformer_detect.h"
#include "weights.h"

/* e: a new embedding named spec->name with the family's tables, initialised as above. w is the opened
 * spec->model_path and info what sdt_tf_detect found in it (family not SDT_TF_NONE). */
bool ti_create_tables(const sdt_embedding_spec *spec, const sdt_host_callbacks *host, const sdt_weights *w,
                      const sdt_tf_info *info, sdt_embedding *e, sdt_error *error);

#endif
