/* sd3_gen.c - see sd3_gen.h. */
#include "sd3_gen.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "param_file_gen.h"
#include "transformer_keys.h"
#include "transformer_pack.h"

static bool sd3_enumerate(const void *cfg, sdt_param_visitor visit, void *user)
{
    sdt_error ignored; /* the config was checked before (generate_canonical) */
    return sd_params(cfg, visit, user, &ignored);
}

static bool count_one(void *user, const sdt_param_info *p)
{
    (void)user, (void)p;
    return true;
}

/* Every tensor in canonical names, in a file beside path that the caller removes. */
static char *generate_canonical(const char *path, const sd_config *cfg, sdt_dtype dtype, uint64_t seed,
                                bool perturb_all, sdt_error *error)
{
    if (!sd_config_is_transformer(cfg)) {
        sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "sd3_generate: the config is not an SD3 or Flux family's");
        return NULL;
    }
    if (!sd_params(cfg, count_one, NULL, error)) return NULL;
    char *tmp = g_strdup_printf("%s.canonical-tmp.safetensors", path);
    if (!sdt_param_file_generate(tmp, "SD3", "sd3_generate", sd3_enumerate, cfg, dtype, seed, perturb_all, error)) {
        g_free(tmp);
        return NULL;
    }
    return tmp;
}

/* The canonical prefix of each part: where the all-in-one file keeps it, what a lone file drops. */
static const char *const part_prefix[SD_PART_COUNT] = {SDT_TK_TRANSFORMER_PREFIX, SDT_TK_CLIP_L_PREFIX,
                                                       SDT_TK_CLIP_G_PREFIX, SDT_TK_T5XXL_PREFIX, VAE_KEY_PREFIX};

/* Packs the canonical file tmp into path, then removes tmp: SAI's all-in-one layout (SD3; ComfyUI's for Flux: BFL's
 * transformer under model.diffusion_model., the VAE under vae.) with the transformer and the parts in[p] under
 * their prefixes, or the one part in[p] alone with its keys at the top. */
static bool pack_from(const char *path, const char *tmp, bool flux, bool all_in_one, const bool in[SD_PART_COUNT],
                      sdt_error *error)
{
    sdt_weights *w = sdt_weights_open(tmp, error);
    bool ok = w != NULL;
    if (ok) {
        sdt_pack_part parts[SD_PART_COUNT];
        int n = 0;
        /* alone, the transformer keeps diffusers' names at the top (transformer/diffusion_pytorch_model) */
        for (int p = all_in_one ? SD_PART_CLIP_L : SD_PART_DENOISER; p < SD_PART_COUNT; p++) {
            const char *to = !all_in_one ? "" : flux && p == SD_PART_VAE ? "vae." : part_prefix[p];
            if (in[p] && !(flux && p == SD_PART_CLIP_G)) /* Flux has no CLIP-G */
                parts[n++] = (sdt_pack_part){w, part_prefix[p], to};
        }
        sdt_tk_layout layout = !all_in_one ? SDT_TK_NONE : flux ? SDT_TK_BFL_FLUX : SDT_TK_SAI_SD3;
        ok = sdt_pack_write(path, layout, all_in_one ? w : NULL, SDT_TK_TRANSFORMER_PREFIX,
                            all_in_one && flux ? SDT_TK_TRANSFORMER_PREFIX : "", parts, n, SDT_PACK_AS_IS, error);
        sdt_weights_close(w);
    }
    g_remove(tmp);
    return ok;
}

bool sd3_generate(const char *path, const sd_config *cfg, const bool in[SD_PART_COUNT], sdt_dtype dtype, uint64_t seed,
                  bool perturb_all, sdt_error *error)
{
    char *tmp = generate_canonical(path, cfg, dtype, seed, perturb_all, error);
    bool ok = tmp && pack_from(path, tmp, sd_config_is_flux(cfg), true, in, error);
    g_free(tmp);
    return ok;
}

bool sd3_generate_part(const char *path, const sd_config *cfg, sd_part part, sdt_dtype dtype, uint64_t seed,
                       bool perturb_all, sdt_error *error)
{
    if (part >= SD_PART_COUNT)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "sd3_generate_part: a part is the transformer, CLIP-L, CLIP-G, T5 or the VAE");
    if (part == SD_PART_CLIP_G && cfg->clip2.width <= 0)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "sd3_generate_part: Flux.1 has no CLIP-G");
    bool in[SD_PART_COUNT] = {false};
    in[part] = true;
    char *tmp = generate_canonical(path, cfg, dtype, seed, perturb_all, error);
    bool ok = tmp && pack_from(path, tmp, sd_config_is_flux(cfg), false, in, error);
    g_free(tmp);
    return ok;
}
