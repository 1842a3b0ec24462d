/* transformer_detect.h - which transformer-family model (SD3/SD3.5, Flux.1) a checkpoint holds, which of its
 * parts the file carries, and the one sentence that names the options supplying the missing ones.
 *
 * Read from canonical key names and shapes only (weights.h, transformer_keys.h): SAI's SD3/SD3.5 all-in-one
 * files (with or without text_encoders.t5xxl), SD3.5 Medium (attn2: MMDiT-X), Flux.1 transformer files in
 * BFL's layout or under model.diffusion_model. (ComfyUI, Forge), dev (guidance_in) or schnell, and diffusers
 * folders (transformer/config.json's _class_name). Lone encoder and VAE files (clip_l.safetensors,
 * clip_g.safetensors, t5xxl_fp16.safetensors, Flux's ae.safetensors) are told apart as components. */
#ifndef SDT_MODELS_TRANSFORMER_DETECT_H
#define SDT_MODELS_TRANSFORMER_DETECT_H

#include <stdbool.h>
#include <stdint.h>

#include "weights.h"

typedef enum sdt_tf_family { SDT_TF_NONE = 0, SDT_TF_SD3, SDT_TF_FLUX } sdt_tf_family;

/* The parts of a transformer-family model, each supplied by the checkpoint or by its own option. */
typedef enum sdt_tf_part {
    SDT_TF_TRANSFORMER = 0,
    SDT_TF_CLIP_L,
    SDT_TF_CLIP_G,
    SDT_TF_T5XXL,
    SDT_TF_VAE,
    SDT_TF_PART_COUNT
} sdt_tf_part;

typedef struct sdt_tf_info {
    sdt_tf_family family;
    char variant[64];   /* "SD3.5 Large", "SD3.5 Medium", "SD3 Medium", "Flux.1 dev", "Flux.1 schnell", or sizes */
    const char *layout; /* how the file lays its keys out, in words */
    int blocks;         /* joint (SD3) or double-stream (Flux) blocks */
    int single_blocks;  /* Flux's single-stream blocks */
    int64_t hidden;     /* the transformer's width */
    bool qk_norm;       /* SD3.5 */
    int dual_layers;    /* SD3.5 Medium's MMDiT-X blocks */
    bool guidance;      /* Flux dev's guidance embedder */
    bool has[SDT_TF_PART_COUNT];
    const char *prefix[SDT_TF_PART_COUNT]; /* where each carried part's keys start */
} sdt_tf_info;

/* The family of w's model, its variant and parts; false (info->family SDT_TF_NONE) when w holds no
 * SD3 or Flux transformer. */
bool sdt_tf_detect(const sdt_weights *w, sdt_tf_info *info);
/* A file holding one part alone (a CLIP-L, CLIP-G, T5-XXL or VAE file; keys at the top): that part, else
 * SDT_TF_TRANSFORMER (meaning: not a lone part). */
sdt_tf_part sdt_tf_lone_part(const sdt_weights *w);

/* "sd3" / "flux"; "SD3/SD3.5" / "Flux.1". */
const char *sdt_tf_family_name(sdt_tf_family f);
const char *sdt_tf_family_title(sdt_tf_family f);
/* "clip_l", "clip_g", "t5xxl", "vae", "transformer"; what a person calls it ("CLIP-L", "T5-XXL", ...); the
 * option that supplies it ("--clip-l FILE", "--clip-g FILE", "--t5xxl FILE", "--vae FILE"). */
const char *sdt_tf_part_name(sdt_tf_part p);
const char *sdt_tf_part_title(sdt_tf_part p);
const char *sdt_tf_part_option(sdt_tf_part p);
/* Whether the family's model needs the part (Flux has no CLIP-G). */
bool sdt_tf_family_needs(sdt_tf_family f, sdt_tf_part p);
/* One sentence naming what path carries and, for every part the family needs that it lacks, the option that
 * supplies it and the file people have for it (malloc'd); NULL when nothing is missing. */
char *sdt_tf_missing_sentence(const sdt_tf_info *info, const char *path);
/* The same about the parts whose bit (1 << sdt_tf_part) is in parts_wanted only (creating an embedding needs
 * the text encoders, not the VAE). */
char *sdt_tf_missing_sentence_of(const sdt_tf_info *info, const char *path, unsigned parts_wanted);

#endif
