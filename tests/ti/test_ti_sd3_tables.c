/* test_ti_sd3_tables.c - an SD3.5 embedding against the model it trains or generates with
 * (ti_embedding_check_model): a table per encoder (encoder_dims clip_l, clip_g, t5xxl, table-major) fits a tiny
 * SD3.5 model whose encoders are that wide; a table of another width is refused naming the table, both widths and
 * the file; a missing table (a Flux.1 embedding on SD3.5) or one the model has no encoder for is named as such; a
 * one-table (SD 1.x/SDXL) embedding on the SD3.5 model and an SD3.5 embedding on an SD 1.x model are
 * refused naming the families; the UNet families' checks are unchanged. */
#include <glib.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_gen.h"
#include "sd3_gen.h"
#include "sdt_test.h"
#include "ti/ti_part.h"

static void table_embedding(sdt_embedding *e, int l, int g, int t5)
{
    sdt_error err = {0};
    CHECK(sdt_embedding_init(e, "sks", 2, l + g + t5, &err), "embedding: %s", err.message);
    e->encoder_dims[0] = l, e->encoder_dims[1] = g, e->encoder_dims[2] = t5;
}

int main(void)
{
    sdt_backend *be = sdt_backend_cpu_create(1);
    char *dir = g_dir_make_tmp("sdt-ti-sd3-XXXXXX", NULL);
    CHECK(be && dir, "backend and temp folder");
    if (!be || !dir) return sdt_test_finish("test_ti_sd3_tables");
    char *sd3 = g_strdup_printf("%s/sd3.5_tiny.safetensors", dir), *sd1 = g_strdup_printf("%s/sd1.safetensors", dir);
    sd_config cfg = sd_config_preset(SD_FAMILY_TINY_SD3);
    const bool all[SD_PART_COUNT] = {true, true, true, true, true};
    sdt_ckpt_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.config = sd_config_preset(SD_FAMILY_TINY);
    spec.dtype = SDT_F32;
    spec.layout = SDT_CKPT_LDM;
    sdt_error err = {0};
    sd_runtime rt3, rt1;
    bool ok = sd3_generate(sd3, &cfg, all, SDT_F32, 3, false, &err) && sdt_ckpt_generate(sd1, &spec, &err) &&
              sd_runtime_open(&rt3, sd3, be, SDT_F32, SD_PREDICTION_AUTO, false, &err) &&
              sd_runtime_open(&rt1, sd1, be, SDT_F32, SD_PREDICTION_AUTO, false, &err);
    CHECK(ok, "the models: %s", err.message);
    if (ok) {
        sdt_embedding e;
        table_embedding(&e, 32, 48, 96);
        CHECK(ti_embedding_check_model(&e, &rt3, "sks.safetensors", &err), "the tables fit: %s", err.message);
        CHECK(!ti_embedding_check_model(&e, &rt1, "sks.safetensors", &err) && err.code == SDT_ERR_VALIDATION &&
                  strstr(err.message, "sks.safetensors") && strstr(err.message, "t5xxl 96") &&
                  strstr(err.message, "SD3.5 or Flux.1") && strstr(err.message, "SD 1.x"),
              "an SD3.5 embedding on an SD 1.x model: \"%s\"", err.message);
        sdt_embedding_free(&e);
        table_embedding(&e, 32, 48, 4096);
        CHECK(!ti_embedding_check_model(&e, &rt3, "big.safetensors", &err) && strstr(err.message, "big.safetensors") &&
                  strstr(err.message, "t5xxl table is [2, 4096]") && strstr(err.message, "takes 96"),
              "a T5 table of another width: \"%s\"", err.message);
        sdt_embedding_free(&e);
        table_embedding(&e, 768, 48, 96);
        CHECK(!ti_embedding_check_model(&e, &rt3, "l.safetensors", &err) && strstr(err.message, "clip_l table"),
              "a CLIP-L table of another width: \"%s\"", err.message);
        sdt_embedding_free(&e);
        /* a Flux.1 embedding (no clip_g) on the SD3.5 model: the missing table by name, not as a [2, 0] shape */
        table_embedding(&e, 32, 0, 96);
        CHECK(!ti_embedding_check_model(&e, &rt3, "flux.safetensors", &err) && err.code == SDT_ERR_VALIDATION &&
                  strstr(err.message, "flux.safetensors") && strstr(err.message, "has no clip_g table") &&
                  strstr(err.message, "a Flux.1 embedding") && !strstr(err.message, "[2, 0]"),
              "a Flux.1 embedding on the SD3.5 model: \"%s\"", err.message);
        sdt_embedding_free(&e);
        /* a table the model has no encoder for (an SD3.5 embedding on a model without CLIP-G) */
        sd_runtime no_g = rt3;
        no_g.cfg.clip2.width = 0;
        table_embedding(&e, 32, 48, 96);
        CHECK(!ti_embedding_check_model(&e, &no_g, "sd35.safetensors", &err) && err.code == SDT_ERR_VALIDATION &&
                  strstr(err.message, "has a clip_g table") && strstr(err.message, "an SD3.5 embedding") &&
                  strstr(err.message, "no clip_g encoder"),
              "an SD3.5 embedding on a model without CLIP-G: \"%s\"", err.message);
        sdt_embedding_free(&e);
        CHECK(sdt_embedding_init(&e, "sks", 2, rt1.cfg.clip.width, &err), "%s", err.message);
        CHECK(ti_embedding_check_model(&e, &rt1, "one.safetensors", &err), "an SD 1.x embedding on its model: %s",
              err.message);
        CHECK(!ti_embedding_check_model(&e, &rt3, "one.safetensors", &err) && strstr(err.message, "one.safetensors") &&
                  strstr(err.message, "a table per text encoder") && strstr(err.message, "t5xxl 96"),
              "a one-table embedding on the SD3.5 model: \"%s\"", err.message);
        sdt_embedding_free(&e);
        sd_runtime_close(&rt3);
        sd_runtime_close(&rt1);
    }
    g_remove(sd3);
    g_remove(sd1);
    g_rmdir(dir);
    g_free(sd3);
    g_free(sd1);
    g_free(dir);
    be->destroy(be);
    return sdt_test_finish("test_ti_sd3_tables");
}
