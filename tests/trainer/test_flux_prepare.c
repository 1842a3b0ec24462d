/* test_flux_prepare - a tiny Flux.1 model and the 1.9 options through "sdtrain.trainer/1", as a host drives it
 * (issue 30):
 *  - BFL's transformer-only file (sdt-make-checkpoint --config tiny-flux-dev --without clip_l,t5xxl,vae) is refused
 *    by one sentence naming --clip-l, --t5xxl, --vae and their fields, and no clip_g;
 *  - a CLIP-G file given for Flux (which has none) is refused by SDT_STATUS_VALIDATION naming clip_g_path;
 *  - guidance on Flux schnell (no guidance embedder) is refused naming guidance and schnell;
 *  - a hypernetwork on Flux is refused ("no host applies A1111 hypernetworks");
 *  - the transformer with its part files reads and binds; the job then asks for T5's tokenizer (none beside these
 *    files). Training itself: tests/e2e/test_flux_train.sh. */
#include "flow_prepare_fixture.h"

int main(int argc, char **argv)
{
    ctx c;
    if (!ctx_open(&c, argc, argv, "trainer_flux_prepare")) return trainer_env_abandon(&c.hn.base);
    char dir[FX_PATH], log[FX_PATH], emb[FX_PATH], dev[FX_PATH], bare[FX_PATH], schnell[FX_PATH], clip_l[FX_PATH],
        t5[FX_PATH], vae[FX_PATH], clip_g[FX_PATH], error[2048];
    fx_subdir(&c.env, dir, "emb");
    fx_subdir(&c.env, log, "log");
    if (c.tr && fx_make_embedding(&c.env, dir, "fluxprep", 2, "ring", emb)) {
        sd_config cfg = sd_config_preset(SD_FAMILY_TINY_FLUX), sc = cfg, sd3 = sd_config_preset(SD_FAMILY_TINY_SD3);
        sc.flux.guidance = false;
        const bool all[SD_PART_COUNT] = {true, true, false, true, true},
                   alone[SD_PART_COUNT] = {true, false, false, false, false};
        sdt_error err = {0};
        fx_path(dev, c.env.tmp, "flux_tiny.safetensors");
        fx_path(bare, c.env.tmp, "flux_tiny_transformer.safetensors");
        fx_path(schnell, c.env.tmp, "flux_tiny_schnell.safetensors");
        fx_path(clip_l, c.env.tmp, "clip_l.safetensors");
        fx_path(t5, c.env.tmp, "t5xxl_tiny.safetensors");
        fx_path(vae, c.env.tmp, "ae.safetensors");
        fx_path(clip_g, c.env.tmp, "clip_g.safetensors");
        CHECK(sd3_generate(dev, &cfg, all, SDT_F32, 5, true, &err) &&
                  sd3_generate(bare, &cfg, alone, SDT_F32, 5, true, &err) &&
                  sd3_generate(schnell, &sc, all, SDT_F32, 5, true, &err) &&
                  sd3_generate_part(clip_l, &cfg, SD_PART_CLIP_L, SDT_F32, 5, true, &err) &&
                  sd3_generate_part(t5, &cfg, SD_PART_T5XXL, SDT_F32, 5, true, &err) &&
                  sd3_generate_part(vae, &cfg, SD_PART_VAE, SDT_F32, 5, true, &err) &&
                  sd3_generate_part(clip_g, &sd3, SD_PART_CLIP_G, SDT_F32, 5, true, &err),
              "tiny Flux files: %s", err.message);

        printf("-- BFL's transformer-only file alone\n");
        sdt_train_options o;
        options(&c, &o, log);
        o.model_path = bare;
        sdt_status st = try_prepare(&c, &o, emb, error, sizeof error);
        CHECK(st == SDT_STATUS_VALIDATION && strstr(error, "--clip-l FILE") && strstr(error, "--t5xxl FILE") &&
                  strstr(error, "--vae FILE") && strstr(error, "clip_l_path") && strstr(error, "t5xxl_path") &&
                  strstr(error, "vae_path") && !strstr(error, "clip_g") && strstr(error, bare),
              "the missing parts are named with their options and fields, no CLIP-G (%d): %s", (int)st, error);

        printf("-- a CLIP-G file for Flux\n");
        options(&c, &o, log);
        o.model_path = dev;
        o.clip_g_path = clip_g;
        st = try_prepare(&c, &o, emb, error, sizeof error);
        CHECK(st == SDT_STATUS_VALIDATION && strstr(error, "clip_g_path") && strstr(error, "no CLIP-G") &&
                  strstr(error, clip_g),
              "a CLIP-G for Flux is refused naming the field (%d): %s", (int)st, error);

        printf("-- guidance on Flux schnell\n");
        options(&c, &o, log);
        o.model_path = schnell;
        o.guidance = 4.0;
        st = try_prepare(&c, &o, emb, error, sizeof error);
        CHECK(st == SDT_STATUS_VALIDATION && strstr(error, "guidance") && strstr(error, "schnell") &&
                  strstr(error, "no guidance embedder"),
              "guidance on schnell is refused by name (%d): %s", (int)st, error);

        printf("-- a hypernetwork on Flux\n");
        char hn[FX_PATH];
        CHECK(make_hn(&c.hn, dir, "fluxhn", "768", false, hn), "a hypernetwork");
        options(&c, &o, log);
        o.model_path = dev;
        st = try_prepare_parts(&c, &o, NULL, hn, error, sizeof error);
        CHECK(st == SDT_STATUS_VALIDATION && strstr(error, "no host applies A1111 hypernetworks") && strstr(error, dev),
              "a hypernetwork on Flux (%d): %s", (int)st, error);

        printf("-- the transformer with its part files (and guidance on dev)\n");
        options(&c, &o, log);
        o.model_path = bare;
        o.clip_l_path = clip_l;
        o.t5xxl_path = t5;
        o.vae_path = vae;
        o.guidance = 4.0;
        st = try_prepare(&c, &o, emb, error, sizeof error);
        CHECK(st != SDT_STATUS_OK && strstr(error, "no T5 tokenizer found") && !strstr(error, "_path"),
              "the model reads; the job asks for T5's tokenizer, which no model ships here (%d): %s", (int)st, error);
    }
    trainer_env_close(&c.hn.base);
    return sdt_test_finish("trainer_flux_prepare");
}
