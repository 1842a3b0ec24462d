/* test_anomaly.c - anomaly mode (config anomaly_mode) through the ABI. A frozen weight of 1e5 is
 * finite in the f32 checkpoint (prepare's finite check passes) but overflows f16 storage, so an
 * fp16 run computes Inf/NaN in that layer:
 *  1. UNet conv_in (input_blocks.0.0), fp16 with anomaly mode: the run stops at step 1 with
 *     SDT_STATUS_NUMERICAL and a sentence naming that layer; the embedding file keeps its vectors.
 *  2. The same checkpoint in fp16 without anomaly mode: the loss is NaN at step 1, the fallback
 *     switches to fp32 (where 1e5 is an ordinary number) and training proceeds with finite
 *     losses and a finite embedding.
 *  3. The same checkpoint in fp32 with anomaly mode: nothing is non-finite, the run finishes.
 *  4. The text encoder's layers.0.mlp.fc1, fp16 with anomaly mode: the sentence names it.
 *  5. The VAE encoder's conv_in, fp16: every image encodes to NaN latents at prepare (a warning
 *     names them), step 1 has a NaN loss, the fallback switches to fp32 and encodes those images
 *     again (finite now), and training proceeds with finite losses. */
#include "trainer_fixture.h"

typedef struct outcome {
    sdt_status status;
    char error[2048];
    fx_recorder rec;
    bool vectors_kept, finite;
} outcome;

static outcome train(const trainer_env *env, const char *model, const char *tag, sdt_precision precision, bool anomaly,
                     int64_t steps)
{
    outcome o;
    memset(&o, 0, sizeof o);
    char dir[FX_PATH], log[FX_PATH], emb[FX_PATH], buf[64];
    snprintf(buf, sizeof buf, "%s-emb", tag);
    fx_subdir(env, dir, buf);
    snprintf(buf, sizeof buf, "%s-log", tag);
    fx_subdir(env, log, buf);
    if (!fx_make_embedding(env, dir, tag, 1, "ring", emb)) return o;
    int64_t n0, n;
    float *initial = fx_read_embedding(emb, &n0);
    sdt_ti_trainer *t = fx_create(env, &o.rec);
    sdt_ti_config c;
    fx_config(env, &c, emb, NULL, log, steps);
    c.model_path = model;
    c.precision = precision;
    c.anomaly_mode = anomaly;
    o.status = fx_prepare_run(env, t, &c);
    snprintf(o.error, sizeof o.error, "%s", fx_last_error(env, t));
    env->ti->destroy(t);
    float *final = fx_read_embedding(emb, &n);
    o.vectors_kept = final && initial && n == n0 && memcmp(final, initial, (size_t)n * 4) == 0;
    o.finite = final && fx_all_finite(final, n);
    free(final);
    free(initial);
    printf("-- %s: status %d after %d steps%s%s\n", tag, (int)o.status, o.rec.n_steps, o.error[0] ? ": " : "", o.error);
    return o;
}

int main(int argc, char **argv)
{
    trainer_env env;
    if (!trainer_env_open(&env, argc, argv, "trainer_anomaly")) return trainer_env_abandon(&env);
    char unet_model[FX_PATH], text_model[FX_PATH], vae_model[FX_PATH], file[FX_PATH];
    fx_copy_model(&env, fx_path(unet_model, env.tmp, "model-unet"));
    fx_copy_model(&env, fx_path(text_model, env.tmp, "model-text"));
    fx_copy_model(&env, fx_path(vae_model, env.tmp, "model-vae"));
    snprintf(file, sizeof file, "%.4000s/vae/diffusion_pytorch_model.safetensors", vae_model);
    CHECK(fx_poke_f32(file, "encoder.conv_in.weight", 13, 1e5f), "poke encoder.conv_in.weight");
    /* conv_in.weight [32, 4, 3, 3]: the centre tap of output 0 from latent channel 0 */
    snprintf(file, sizeof file, "%.4000s/unet/diffusion_pytorch_model.safetensors", unet_model);
    CHECK(fx_poke_f32(file, "conv_in.weight", 4, 1e5f), "poke conv_in.weight");
    snprintf(file, sizeof file, "%.4000s/text_encoder/model.safetensors", text_model);
    CHECK(fx_poke_f32(file, "text_model.encoder.layers.0.mlp.fc1.weight", 7, 1e5f), "poke fc1.weight");

    outcome o = train(&env, unet_model, "unet-fp16-anomaly", SDT_PRECISION_FP16, true, 4);
    CHECK(o.status == SDT_STATUS_NUMERICAL && o.rec.n_steps == 0, "stops at step 1 with NUMERICAL (%d)", (int)o.status);
    CHECK(strstr(o.error, "anomaly") && strstr(o.error, "input_blocks.0.0") && strstr(o.error, "fp32"),
          "the sentence names the UNet layer and the fix: %s", o.error);
    CHECK(o.vectors_kept && o.finite, "the embedding file keeps its vectors");

    o = train(&env, unet_model, "unet-fp16-fallback", SDT_PRECISION_FP16, false, 4);
    CHECK(o.status == SDT_STATUS_OK && o.rec.n_steps == 4, "without anomaly mode the run survives (%d): %s",
          (int)o.status, o.error);
    CHECK(o.rec.n_steps == 4 && !isfinite(o.rec.steps[0].loss) && o.rec.steps[0].fallback &&
              o.rec.steps[3].precision == SDT_PRECISION_FP32 && isfinite(o.rec.steps[1].loss) &&
              isfinite(o.rec.steps[3].loss),
          "NaN at step 1, then fp32 with finite losses");
    CHECK(!o.vectors_kept && o.finite, "the embedding trained and is finite");

    o = train(&env, unet_model, "unet-fp32-anomaly", SDT_PRECISION_FP32, true, 2);
    CHECK(o.status == SDT_STATUS_OK && o.rec.n_steps == 2 && !o.vectors_kept && o.finite,
          "in fp32 the same weight is no anomaly (%d): %s", (int)o.status, o.error);

    o = train(&env, text_model, "text-fp16-anomaly", SDT_PRECISION_FP16, true, 4);
    CHECK(o.status == SDT_STATUS_NUMERICAL && strstr(o.error, "text_model.encoder.layers.0.mlp.fc1"),
          "the text encoder's layer is named: %s", o.error);
    CHECK(o.vectors_kept && o.finite, "the embedding file keeps its vectors");

    o = train(&env, vae_model, "vae-fp16-fallback", SDT_PRECISION_FP16, false, 4);
    CHECK(o.status == SDT_STATUS_OK && o.rec.n_steps == 4, "the run survives (%d): %s", (int)o.status, o.error);
    CHECK(strstr(o.rec.log, "the VAE encodes this image to NaN/Inf latents") &&
              strstr(o.rec.log, "encoded again in fp32: its latents are finite now"),
          "prepare warns, the fallback encodes again:\n%s", o.rec.log);
    CHECK(o.rec.n_steps == 4 && !isfinite(o.rec.steps[0].loss) && o.rec.steps[0].fallback &&
              isfinite(o.rec.steps[1].loss) && isfinite(o.rec.steps[3].loss) && o.rec.steps[3].skipped == 1,
          "NaN at step 1 only, then finite fp32 steps");
    CHECK(!o.vectors_kept && o.finite, "the embedding trained and is finite");
    trainer_env_close(&env);
    return sdt_test_finish("trainer_anomaly");
}
