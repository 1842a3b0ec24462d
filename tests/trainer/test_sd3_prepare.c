/* test_sd3_prepare - an SD3.5 checkpoint and the 1.9 options through "sdtrain.trainer/1", as a host drives it:
 *  - a rectified-flow option (timestep_sampling) on a UNet model (the demo's SD 1.x model) is refused by
 *    SDT_STATUS_VALIDATION naming the field;
 *  - a tiny SD3.5 all-in-one file without T5 (sdt-make-checkpoint --config tiny-sd3 --without t5xxl) is refused
 *    by one sentence naming --t5xxl and t5xxl_path; a T5 file beside a UNet model is refused naming t5xxl_path;
 *  - on the SD3.5 model, a hypernetwork ("no host applies A1111 hypernetworks") and the UNet models' options
 *    (min_snr_gamma, clip_skip, prediction_type) are refused by SDT_STATUS_VALIDATION naming them;
 *  - with the T5 file given, the model reads and binds; the job then asks for T5's tokenizer (none beside these
 *    files) in one sentence naming the files to put there. Training itself: tests/e2e/test_sd3_train.sh. */
#include "flow_prepare_fixture.h"

int main(int argc, char **argv)
{
    ctx c;
    if (!ctx_open(&c, argc, argv, "trainer_sd3_prepare")) return trainer_env_abandon(&c.hn.base);
    char dir[FX_PATH], log[FX_PATH], emb[FX_PATH], sd3[FX_PATH], no_t5[FX_PATH], t5[FX_PATH], error[2048];
    fx_subdir(&c.env, dir, "emb");
    fx_subdir(&c.env, log, "log");
    if (c.tr && fx_make_embedding(&c.env, dir, "sd3prep", 2, "ring", emb)) {
        sd_config cfg = sd_config_preset(SD_FAMILY_TINY_SD3);
        const bool all[SD_PART_COUNT] = {true, true, true, true, true},
                   without_t5[SD_PART_COUNT] = {true, true, true, false, true};
        sdt_error err = {0};
        fx_path(sd3, c.env.tmp, "sd3.5_tiny.safetensors");
        fx_path(no_t5, c.env.tmp, "sd3.5_tiny_no_t5.safetensors");
        fx_path(t5, c.env.tmp, "t5xxl_tiny.safetensors");
        CHECK(sd3_generate(sd3, &cfg, all, SDT_F32, 5, true, &err) &&
                  sd3_generate(no_t5, &cfg, without_t5, SDT_F32, 5, true, &err) &&
                  sd3_generate_part(t5, &cfg, SD_PART_T5XXL, SDT_F32, 5, true, &err),
              "tiny SD3.5 files: %s", err.message);

        printf("-- a rectified-flow option on a UNet model\n");
        sdt_train_options o;
        options(&c, &o, log);
        o.timestep_sampling = "uniform";
        sdt_status st = try_prepare(&c, &o, emb, error, sizeof error);
        CHECK(st == SDT_STATUS_VALIDATION && strstr(error, "timestep_sampling") && strstr(error, "SD3.5"),
              "refused naming the field (%d): %s", (int)st, error);

        printf("-- a T5 file beside a UNet model\n");
        options(&c, &o, log);
        o.t5xxl_path = t5;
        st = try_prepare(&c, &o, emb, error, sizeof error);
        CHECK(st == SDT_STATUS_VALIDATION && strstr(error, "t5xxl_path") && strstr(error, t5),
              "refused naming the field (%d): %s", (int)st, error);

        printf("-- an SD3.5 file without T5\n");
        options(&c, &o, log);
        o.model_path = no_t5;
        st = try_prepare(&c, &o, emb, error, sizeof error);
        CHECK(st == SDT_STATUS_VALIDATION && strstr(error, "--t5xxl FILE") && strstr(error, "t5xxl_path") &&
                  strstr(error, no_t5),
              "the missing T5 is named with its option and field (%d): %s", (int)st, error);

        printf("-- what does not apply to SD3.5, refused by name\n");
        char hn[FX_PATH];
        CHECK(make_hn(&c.hn, dir, "sd3hn", "768", false, hn), "a hypernetwork");
        options(&c, &o, log);
        o.model_path = sd3;
        st = try_prepare_parts(&c, &o, NULL, hn, error, sizeof error);
        CHECK(st == SDT_STATUS_VALIDATION && strstr(error, "no host applies A1111 hypernetworks") && strstr(error, sd3),
              "a hypernetwork on SD3.5 (%d): %s", (int)st, error);
        options(&c, &o, log);
        o.model_path = sd3;
        o.min_snr_gamma = 5.0;
        st = try_prepare(&c, &o, emb, error, sizeof error);
        CHECK(st == SDT_STATUS_VALIDATION && strstr(error, "min_snr_gamma") && strstr(error, "flow_weighting"),
              "min_snr_gamma on SD3.5 (%d): %s", (int)st, error);
        options(&c, &o, log);
        o.model_path = sd3;
        o.clip_skip = 2;
        st = try_prepare(&c, &o, emb, error, sizeof error);
        CHECK(st == SDT_STATUS_VALIDATION && strstr(error, "clip_skip") && strstr(error, "penultimate"),
              "clip_skip on SD3.5 (%d): %s", (int)st, error);
        options(&c, &o, log);
        o.model_path = sd3;
        o.prediction_type = SDT_PREDICTION_V;
        st = try_prepare(&c, &o, emb, error, sizeof error);
        CHECK(st == SDT_STATUS_VALIDATION && strstr(error, "prediction_type") && strstr(error, "velocity"),
              "prediction_type on SD3.5 (%d): %s", (int)st, error);

        printf("-- the SD3.5 file with its T5 file\n");
        options(&c, &o, log);
        o.model_path = no_t5;
        o.t5xxl_path = t5;
        st = try_prepare(&c, &o, emb, error, sizeof error);
        CHECK(st != SDT_STATUS_OK && strstr(error, "no T5 tokenizer found") && strstr(error, "tokenizer.json") &&
                  !strstr(error, "t5xxl_path"),
              "the model reads; the job asks for T5's tokenizer, which no model ships here (%d): %s", (int)st, error);
    }
    trainer_env_close(&c.hn.base);
    return sdt_test_finish("trainer_sd3_prepare");
}
