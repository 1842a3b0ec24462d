/* test_vae16.c - the 16-channel VAE of SD3/SD3.5 and Flux.1 (vae.h): the configs, detection from the keys
 * of a lone VAE file (Flux's ae.safetensors: LDM names, no prefix) and of first_stage_model.* (SD3.5's
 * all-in-one), loading without quant_conv / post_quant_conv, and the latent shift on both sides:
 * latents = scaling (z - shift), decoded from latents / scaling + shift. The network's numbers against
 * PyTorch are parity_clip_vae_tiny's (tests/parity/clip_vae_parity.py --sizes tiny-vae16). */
#include <math.h>
#include <string.h>

#include "model_test_util.h"
#include "sd_config_detect.h"
#include "vae.h"
#include "vae_gen.h"
#include "vae_test_run.h"

static sdt_backend *shared_be;
static sdt_backend *mt_backend_shared(void)
{
    return shared_be;
}

static void test_configs(void)
{
    sdt_error e = {0};
    vae_config sd = vae_config_sd(), sd3 = vae_config_sd3(), flux = vae_config_flux(), t16 = vae_config_tiny16();
    CHECK(sd.has_quant_conv == 1 && sd.shift == 0.0f && sd.z_channels == 4, "SD's VAE keeps its quant convs");
    CHECK(sd3.z_channels == 16 && !sd3.has_quant_conv && sd3.scaling == 1.5305f && sd3.shift == 0.0609f,
          "SD3's VAE: 16 channels, no quant convs, 1.5305 and 0.0609");
    CHECK(flux.z_channels == 16 && !flux.has_quant_conv && flux.scaling == 0.3611f && flux.shift == 0.1159f,
          "Flux's VAE: 16 channels, no quant convs, 0.3611 and 0.1159");
    CHECK(sd3.ch == sd.ch && sd3.levels == sd.levels && memcmp(sd3.ch_mult, sd.ch_mult, sizeof sd.ch_mult) == 0,
          "SD3's network is SD's widths and levels");
    CHECK(vae_config_check(&sd3, &e) && vae_config_check(&flux, &e) && vae_config_check(&t16, &e), "configs pass: %s",
          e.message);
    t16.shift = NAN;
    CHECK(!vae_config_check(&t16, &e), "a NaN shift is refused");
}

/* One file of the tiny 16-channel VAE under prefix: detect, load, encode, decode with the shift. */
static void test_file(const char *prefix, sdt_backend *be, sdt_test_rng *rng)
{
    char path[512];
    sdt_error error = {0};
    mt_temp_path(path, sizeof(path), "vae16");
    vae_config want = vae_config_tiny16();
    CHECK(vae_generate(path, &want, prefix, SDT_F32, 99, true, &error), "generate: %s", error.message);
    sdt_weights *w = sdt_weights_open(path, &error);
    CHECK(w != NULL, "open: %s", error.message);
    if (!w) return;
    CHECK(strcmp(vae_key_prefix(w), prefix) == 0, "prefix \"%s\" found as \"%s\"", prefix, vae_key_prefix(w));
    CHECK(!sdt_weights_get(w, prefix[0] ? "first_stage_model.quant_conv.weight" : "quant_conv.weight"),
          "the file has no quant_conv");
    vae_config cfg;
    CHECK(vae_config_detect(w, &cfg, &error), "detect: %s", error.message);
    CHECK(memcmp(&cfg, &want, sizeof cfg) == 0,
          "detected (z %d, quant %d, scaling %g, shift %g, ch %d, levels %d) is not the tiny 16-channel config",
          cfg.z_channels, cfg.has_quant_conv, (double)cfg.scaling, (double)cfg.shift, cfg.ch, cfg.levels);
    vae_model m;
    if (!vae_load(&m, &cfg, w, be, &error)) {
        CHECK(false, "load: %s", error.message);
        sdt_weights_close(w);
        g_remove(path);
        return;
    }
    /* An SD config (with quant convs) on this file names the missing tensor. */
    vae_config with_quant = cfg;
    with_quant.has_quant_conv = 1;
    vae_model bad;
    CHECK(!vae_load(&bad, &with_quant, w, be, &error) && strstr(error.message, "quant_conv"),
          "quant convs asked of a file without them: \"%s\"", error.message);

    const int B = 2, H = 16, W = 12, f = vae_factor(&cfg), Z = cfg.z_channels, h = H / f, wl = W / f;
    size_t n_img = (size_t)B * 3 * H * W, n_lat = (size_t)B * Z * h * wl;
    float *image = mt_alloc(n_img * sizeof(float)), *mean = mt_alloc(n_lat * sizeof(float));
    float *logvar = mt_alloc(n_lat * sizeof(float)), *lat = mt_alloc(n_lat * sizeof(float));
    float *noise = mt_alloc(n_lat * sizeof(float)), *direct = mt_alloc(n_lat * sizeof(float));
    float *dec = mt_alloc(n_img * sizeof(float)), *dec_plain = mt_alloc(n_img * sizeof(float));
    sdt_test_fill_normal(rng, image, (int64_t)n_img, 0.5);
    sdt_test_fill_normal(rng, noise, (int64_t)n_lat, 1.0);
    sdt_tensor image_t = mt_tensor(image, SDT_F32, 4, B, 3, H, W), mean_t = mt_tensor(mean, SDT_F32, 4, B, Z, h, wl);
    sdt_tensor logvar_t = mt_tensor(logvar, SDT_F32, 4, B, Z, h, wl), lat_t = mt_tensor(lat, SDT_F32, 4, B, Z, h, wl);
    sdt_tensor noise_t = mt_tensor(noise, SDT_F32, 4, B, Z, h, wl), dec_t = mt_tensor(dec, SDT_F32, 4, B, 3, H, W);
    sdt_tensor direct_t = mt_tensor(direct, SDT_F32, 4, B, Z, h, wl);
    sdt_tensor plain_t = mt_tensor(dec_plain, SDT_F32, 4, B, 3, H, W);
    CHECK(vt_encode(&m, be, &image_t, &mean_t, &logvar_t, NULL, &error), "encode: %s", error.message);

    /* latents = scaling (z - shift), for the mean and for a sample. */
    CHECK(vae_latents_mean_shifted(be, &lat_t, &mean_t, cfg.scaling, cfg.shift, &error), "mean: %s", error.message);
    double dm = 0;
    for (size_t i = 0; i < n_lat; i++) dm = fmax(dm, fabs(lat[i] - cfg.scaling * (mean[i] - cfg.shift)));
    CHECK(dm <= 1e-6, "shifted mean latents are not scaling (mean - shift): %.3g", dm);
    CHECK(vae_latents_sample_shifted(be, &direct_t, &mean_t, &logvar_t, &noise_t, cfg.scaling, cfg.shift, &error),
          "sample: %s", error.message);
    double ds = 0;
    for (size_t i = 0; i < n_lat; i++) {
        double lv = fmin(fmax(logvar[i], -30.0), 20.0);
        ds = fmax(ds, fabs(direct[i] - cfg.scaling * (mean[i] + exp(0.5 * lv) * noise[i] - cfg.shift)));
    }
    CHECK(ds <= 1e-5, "shifted sample latents are not scaling (mean + std noise - shift): %.3g", ds);

    /* Decoding the latents undoes the shift: the same image as the network given mean itself, through a
     * model with scaling 1 and shift 0 (the decoder sees mean in both). */
    CHECK(vt_decode(&m, be, &lat_t, SDT_F32, &dec_t, NULL, &error), "decode: %s", error.message);
    vae_model plain = m;
    plain.cfg.scaling = 1.0f;
    plain.cfg.shift = 0.0f;
    CHECK(vt_decode(&plain, be, &mean_t, SDT_F32, &plain_t, NULL, &error), "decode mean: %s", error.message);
    double err = sdt_rel_err_ff(dec, dec_plain, (int64_t)n_img);
    CHECK(err <= 1e-5, "decode(scaling (mean - shift)) differs from the decoder on mean: %.3g", err);
    /* ... and the shift matters: without it the image differs. */
    plain.cfg.scaling = cfg.scaling;
    CHECK(vt_decode(&plain, be, &lat_t, SDT_F32, &plain_t, NULL, &error), "decode unshifted: %s", error.message);
    CHECK(sdt_rel_err_ff(dec, dec_plain, (int64_t)n_img) > 1e-3, "the shift changes the decoded image");

    free(image), free(mean), free(logvar), free(lat), free(noise), free(direct), free(dec), free(dec_plain);
    vae_free(&m);
    sdt_weights_close(w);
    g_remove(path);
}

/* A diffusers folder whose vae/ holds the 16-channel VAE (diffusers' names through diffusers_names.c, no
 * quant_conv, config.json with shift_factor and use_quant_conv false): read back under first_stage_model.
 * with the config's shift, the same tensors as the generator drew. */
static void test_diffusers_folder(void)
{
    char *dir = g_dir_make_tmp("sdt-vae16-XXXXXX", NULL), *model = g_build_filename(dir, "model", NULL);
    sdt_ckpt_spec spec = mt_ckpt_spec(SD_FAMILY_TINY, 5);
    spec.config.vae = vae_config_tiny16();
    spec.config.vae.scaling = 0.3611f; /* Flux's, so the config file (not the detection default) must say it */
    spec.config.vae.shift = 0.1159f;
    spec.layout = SDT_CKPT_DIFFUSERS;
    sdt_error error = {0};
    CHECK(sdt_ckpt_generate(model, &spec, &error), "generate the folder: %s", error.message);
    sdt_weights *w = sdt_weights_open(model, &error);
    CHECK(w != NULL, "open the folder: %s", error.message);
    if (w) {
        CHECK(strcmp(vae_key_prefix(w), VAE_KEY_PREFIX) == 0, "a folder's VAE is under first_stage_model.");
        vae_config cfg;
        CHECK(vae_config_detect(w, &cfg, &error) && cfg.z_channels == 16 && !cfg.has_quant_conv,
              "detected from diffusers' names: z %d, quant %d (%s)", cfg.z_channels, cfg.has_quant_conv, error.message);
        sd_config sc;
        CHECK(sd_config_detect_weights(w, &sc, &error) && sc.vae.shift == 0.1159f && sc.vae.scaling == 0.3611f,
              "vae/config.json's shift_factor and scaling_factor are taken (%g, %g): %s", (double)sc.vae.shift,
              (double)sc.vae.scaling, error.message);
        vae_model m;
        CHECK(vae_load(&m, &cfg, w, mt_backend_shared(), &error), "load from the folder: %s", error.message);
        if (m.be) vae_free(&m);
        sdt_weights_close(w);
    }
    mt_remove_folder(dir);
    g_free(model);
    g_free(dir);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("models_test_vae16");
    sdt_backend *be = mt_backend();
    test_configs();
    test_file("", be, &rng);             /* Flux's ae.safetensors */
    test_file(VAE_KEY_PREFIX, be, &rng); /* SD3.5's all-in-one file's VAE part */
    shared_be = be;
    test_diffusers_folder();
    be->destroy(be);
    return sdt_test_finish("models_test_vae16");
}
