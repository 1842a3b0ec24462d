/* sd_text_rules.c - see sd_text_rules.h. */
#include "sd_text_rules.h"

sd_text_rules sd_text_rules_of(const sd_config *cfg)
{
    bool sdxl = cfg->clip2.width > 0 && !sd_config_is_transformer(cfg); /* SD3 has its own rules (sd3_text.h) */
    return (sd_text_rules){.sdxl = sdxl,
                           .clip_skip_applies = !sdxl && !cfg->clip.pad_zero,
                           .pad_zero = cfg->clip.pad_zero,
                           .pad_zero_g = sdxl && cfg->clip2.pad_zero,
                           .width_g = sdxl ? cfg->clip2.width : 0,
                           .pooled_width = sdxl ? cfg->clip2.projection_dim : 0};
}

int32_t sd_text_pad_id(const sd_text_rules *rules, int32_t end_id)
{
    return rules->pad_zero ? 0 : end_id;
}

int32_t sd_text_pad_id_g(const sd_text_rules *rules, int32_t end_id)
{
    return rules->pad_zero_g ? 0 : end_id;
}

int sd_text_clip_skip(const sd_text_rules *rules, int user_skip)
{
    return rules->clip_skip_applies ? user_skip : 0;
}
