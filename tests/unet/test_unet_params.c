/* Parameter enumeration, config detection and load errors. */
#include <string.h>

#include "unet_test_util.h"

typedef struct counter {
    int64_t params;
    size_t tensors;
    int attn2_k;
    bool saw_linear_proj_in;
} counter;

static bool count(void *user, const sdt_param_info *p)
{
    counter *c = user;
    int64_t n = 1;
    for (int i = 0; i < p->ndim; i++) n *= p->shape[i];
    c->params += n;
    c->tensors++;
    if (strstr(p->key, "attn2.to_k.weight")) c->attn2_k++;
    if (strstr(p->key, "proj_in.weight") && p->ndim == 2) c->saw_linear_proj_in = true;
    return true;
}

static bool stop_early(void *user, const sdt_param_info *p)
{
    (void)p;
    return --*(int *)user > 0;
}

static void check_published_sizes(void)
{
    sdt_error error = {0};
    counter c1 = {0}, c2 = {0};
    sdt_unet_config sd1 = sdt_unet_config_sd1(), sd2 = sdt_unet_config_sd2(true);
    CHECK(sdt_unet_enumerate_params(&sd1, count, &c1, &error), "sd1 enumerate: %s", error.message);
    CHECK(sdt_unet_enumerate_params(&sd2, count, &c2, &error), "sd2 enumerate: %s", error.message);
    /* The published parameter counts of the SD 1.x and SD 2.x UNets. */
    CHECK(c1.params == 859520964, "SD1 UNet has %lld parameters, expected 859520964", (long long)c1.params);
    CHECK(c2.params == 865910724, "SD2 UNet has %lld parameters, expected 865910724", (long long)c2.params);
    CHECK(c1.tensors == 686, "SD1 UNet has %zu tensors, expected 686", c1.tensors);
    CHECK(c1.attn2_k == 16 && c2.attn2_k == 16, "cross-attentions: %d / %d, expected 16", c1.attn2_k, c2.attn2_k);
    CHECK(!c1.saw_linear_proj_in && c2.saw_linear_proj_in, "proj_in kinds wrong");
    int left = 3;
    CHECK(!sdt_unet_enumerate_params(&sd1, stop_early, &left, &error), "visitor stop not reported");
    sdt_unet_config bad = sd1;
    bad.head_dim = 64;
    CHECK(!sdt_unet_enumerate_params(&bad, count, &c1, &error) && strstr(error.message, "num_heads"),
          "config with both heads and head_dim accepted: %s", error.message);
}

static bool same_config(const sdt_unet_config *a, const sdt_unet_config *b)
{
    bool same = a->in_channels == b->in_channels && a->out_channels == b->out_channels &&
                a->model_channels == b->model_channels && a->num_levels == b->num_levels &&
                a->num_res_blocks == b->num_res_blocks && a->transformer_depth == b->transformer_depth &&
                a->num_heads == b->num_heads && a->head_dim == b->head_dim && a->context_dim == b->context_dim &&
                a->time_embed_dim == b->time_embed_dim && a->linear_proj == b->linear_proj && a->ff_mult == b->ff_mult;
    for (int l = 0; same && l < a->num_levels; l++)
        same = a->channel_mult[l] == b->channel_mult[l] && a->attention[l] == b->attention[l];
    return same;
}

static void check_detect_and_load(sdt_test_rng *rng)
{
    sdt_error error = {0};
    char path[1100];
    char *dir = ut_tmpdir();
    sdt_unet_config variants[3] = {sdt_unet_config_tiny(), ut_config_tiny_linear(), sdt_unet_config_tiny()};
    variants[1].context_dim = 24;
    variants[2].num_levels = 3;
    variants[2].channel_mult[2] = 2;
    variants[2].attention[1] = true;
    variants[2].attention[2] = false;
    variants[2].num_res_blocks = 2;
    for (int v = 0; v < 3; v++) {
        char name[32];
        snprintf(name, sizeof name, "variant%d", v);
        sdt_weights *w = ut_random_unet(&variants[v], rng, dir, name, NULL, NULL, NULL, 0);
        sdt_unet_config got;
        CHECK(sdt_unet_config_detect(w, &got, &error), "detect variant %d: %s", v, error.message);
        CHECK(same_config(&got, &variants[v]), "detect variant %d gave a different config", v);
        sdt_unet *u = sdt_unet_load(&got, w, &error);
        CHECK(u != NULL, "load variant %d: %s", v, error.message);
        if (u) {
            int expect = 0;
            for (int l = 0; l < variants[v].num_levels; l++)
                expect += variants[v].attention[l] ? (2 * variants[v].num_res_blocks + 1) : 0;
            expect = 2 * variants[v].transformer_depth * (expect + 1);
            CHECK(sdt_unet_attention_count(u) == expect, "variant %d: %d attention layers, expected %d", v,
                  sdt_unet_attention_count(u), expect);
        }
        sdt_unet_free(u);
        /* A different config than the file holds is refused, naming a key. */
        sdt_unet_config other = variants[v];
        other.context_dim += 8;
        CHECK(sdt_unet_load(&other, w, &error) == NULL && strstr(error.message, "model.diffusion_model."),
              "mismatched config accepted or error without key: %s", error.message);
        sdt_weights_close(w);
    }
    const char *missing = SDT_UNET_KEY_PREFIX "output_blocks.2.1.transformer_blocks.0.attn2.to_v.weight";
    sdt_unet_config tiny = sdt_unet_config_tiny();
    sdt_weights *w = ut_random_unet(&tiny, rng, dir, "missing", missing, NULL, path, sizeof path);
    CHECK(sdt_unet_load(&tiny, w, &error) == NULL && strstr(error.message, missing), "missing key: %s", error.message);
    sdt_weights_close(w);
    const char *misshapen = SDT_UNET_KEY_PREFIX "middle_block.0.emb_layers.1.weight";
    w = ut_random_unet(&tiny, rng, dir, "misshapen", NULL, misshapen, path, sizeof path);
    CHECK(sdt_unet_load(&tiny, w, &error) == NULL && strstr(error.message, misshapen), "misshapen key: %s", error.message);
    sdt_weights_close(w);
    ut_cleanup(dir);
}

/* Memory planning without weights: the SD 1.5 UNet measured at 512 px. */
static void check_unbound_measure(void)
{
    sdt_error error = {0};
    sdt_backend *be = kt_backend();
    sdt_unet_config sd1 = sdt_unet_config_sd1();
    sdt_unet *u = sdt_unet_create_unbound(&sd1, &error);
    CHECK(u != NULL, "unbound: %s", error.message);
    if (!u) return;
    sdt_unet_options opt = sdt_unet_options_default(), ck = opt, inf = opt;
    ck.checkpointing = true;
    inf.for_backward = false;
    size_t full = 0, light = 0, infer = 0, fwd = 0;
    CHECK(sdt_unet_measure(u, be, &opt, 1, 64, 64, 77, true, &full, &error), "measure: %s", error.message);
    CHECK(sdt_unet_measure(u, be, &opt, 1, 64, 64, 77, false, &fwd, &error), "measure: %s", error.message);
    CHECK(sdt_unet_measure(u, be, &ck, 1, 64, 64, 77, true, &light, &error), "measure: %s", error.message);
    CHECK(sdt_unet_measure(u, be, &inf, 1, 64, 64, 77, false, &infer, &error), "measure: %s", error.message);
    printf("SD 1.5 UNet, batch 1, 512 px, f32 activations: forward+backward %.0f MiB (%.0f MiB with checkpointing), "
           "forward for backward %.0f MiB, inference %.0f MiB\n",
           full / 1048576.0, light / 1048576.0, fwd / 1048576.0, infer / 1048576.0);
    CHECK(light < full / 2 && infer < fwd && fwd < full, "implausible SD 1.5 memory plan");
    size_t b2 = 0;
    CHECK(sdt_unet_measure(u, be, &opt, 2, 64, 64, 77, true, &b2, &error) && b2 > full * 19 / 10,
          "batch 2 does not need about twice the memory (%zu vs %zu)", b2, full);
    sdt_arena a;
    CHECK(sdt_arena_init(&a, be, 1 << 20), "arena");
    int64_t shape[4] = {1, 4, 8, 8}, cs[3] = {1, 77, 768};
    float lat[256] = {0}, t = 1;
    static float ctx[77 * 768];
    sdt_tensor tl = sdt_tensor_make(lat, SDT_F32, SDT_DEVICE_CPU, 4, shape);
    sdt_tensor tt = sdt_tensor_make(&t, SDT_F32, SDT_DEVICE_CPU, 1, shape);
    sdt_tensor tc = sdt_tensor_make(ctx, SDT_F32, SDT_DEVICE_CPU, 3, cs), out;
    CHECK(!sdt_unet_forward(u, be, &a, &opt, &tl, &tt, &tc, &out, &error) && strstr(error.message, "without weights"),
          "running an unbound UNet was not refused: %s", error.message);
    sdt_arena_release(&a);
    sdt_unet_free(u);
    be->destroy(be);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("unet_params");
    check_published_sizes();
    check_detect_and_load(&rng);
    check_unbound_measure();
    return sdt_test_finish("unet_params");
}
