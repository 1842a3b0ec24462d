/* test_sd_text_rules.c - the SD 2.x/SDXL text rules, decided from the model's config alone: the pad id
 * after a chunk's end token, whether the user's CLIP skip applies, SDXL's second encoder and pooled
 * output. Every family's preset, and SD 2.x's encoder as a diffusers folder keeps it (transformers'
 * names, 23 layers, its own layer already the last), which must follow SD 2.x's rules too. */
#include "sd_text_rules.h"
#include "sdt_test.h"

enum { END = 49407 };

static void check_family(sd_family family, bool sdxl, bool skip_applies, int32_t pad, int pooled)
{
    sd_config cfg = sd_config_preset(family);
    sd_text_rules r = sd_text_rules_of(&cfg);
    const char *name = sd_family_name(family);
    CHECK(r.sdxl == sdxl, "%s: sdxl %d, expected %d", name, r.sdxl, sdxl);
    CHECK(r.clip_skip_applies == skip_applies, "%s: CLIP skip applies %d, expected %d", name, r.clip_skip_applies,
          skip_applies);
    CHECK(sd_text_clip_skip(&r, 2) == (skip_applies ? 2 : 0), "%s: CLIP skip 2 runs as %d", name,
          sd_text_clip_skip(&r, 2));
    CHECK(sd_text_pad_id(&r, END) == pad, "%s: pads with %d, expected %d", name, sd_text_pad_id(&r, END), pad);
    CHECK(r.pooled_width == pooled, "%s: pooled width %d, expected %d", name, r.pooled_width, pooled);
    CHECK(r.width_g == (sdxl ? cfg.clip2.width : 0), "%s: bigG's width %d", name, r.width_g);
    if (sdxl)
        CHECK(sd_text_pad_id_g(&r, END) == 0, "%s: bigG pads with %d, expected 0", name, sd_text_pad_id_g(&r, END));
}

/* diffusers keeps SD 2.x's OpenCLIP-H as an HF CLIPTextModel (clip_config_detect: width 1024 in the HF layout). */
static void check_sd2_as_diffusers(void)
{
    sd_config cfg = sd_config_preset(SD_FAMILY_SD2);
    cfg.clip.layout = CLIP_LAYOUT_HF;
    cfg.clip.layers = 23;
    cfg.clip.default_skip = 1;
    sd_text_rules r = sd_text_rules_of(&cfg);
    CHECK(!r.clip_skip_applies && sd_text_pad_id(&r, END) == 0,
          "SD 2.x from a diffusers folder: CLIP skip applies %d, "
          "pads with %d (expected SD 2.x's rules: no CLIP skip, pad 0)",
          r.clip_skip_applies, sd_text_pad_id(&r, END));
}

int main(void)
{
    check_family(SD_FAMILY_SD1, false, true, END, 0);
    check_family(SD_FAMILY_TINY, false, true, END, 0);
    check_family(SD_FAMILY_SD2, false, false, 0, 0);
    check_family(SD_FAMILY_SDXL, true, false, END, 1280);
    check_family(SD_FAMILY_TINY_SDXL, true, false, END, 48);
    check_sd2_as_diffusers();
    return sdt_test_finish("test_sd_text_rules");
}
