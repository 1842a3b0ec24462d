/* Parameter enumeration, config detection and load errors. */
#include <string.h>

#include "unet_test_util.h"

typedef struct counter {
    int64_t params;
    size_t tensors;
    int attn2_k;
    int label_emb;
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
    if (strstr(p->key, SDT_UNET_KEY_PREFIX "label_emb.")) c->label_emb++;
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
    CHECK(c1.label_emb == 0 && c2.label_emb == 0, "SD 1/2 enumerate a label_emb");
    /* SDXL base 1.0's UNet: 2,567,463,684 parameters as published (diffusers' UNet2DConditionModel of
     * stabilityai/stable-diffusion-xl-base-1.0), 70 transformer blocks (input 2 x 2 + 2 x 10, middle 10,
     * output 3 x 2 + 3 x 10), label_emb's two linears (4 tensors). */
    counter cx = {0};
    sdt_unet_config sdxl = sdt_unet_config_sdxl();
    CHECK(sdt_unet_enumerate_params(&sdxl, count, &cx, &error), "sdxl enumerate: %s", error.message);
    printf("SDXL UNet: %lld parameters in %zu tensors\n", (long long)cx.params, cx.tensors);
    CHECK(cx.params == 2567463684LL, "SDXL UNet has %lld parameters, expected 2567463684", (long long)cx.params);
    CHECK(cx.attn2_k == 70 && cx.label_emb == 4 && cx.saw_linear_proj_in,
          "SDXL: %d cross-attentions (70), %d label_emb "
          "tensors (4)",
          cx.attn2_k, cx.label_emb);
    sdt_unet_config bad_xl = sdxl;
    bad_xl.transformer_depth[2] = 0;
    CHECK(!sdt_unet_config_validate(&bad_xl, &error) && strstr(error.message, "transformer_depth[2]"),
          "depth 0 accepted: %s", error.message);
    bad_xl = sdxl;
    bad_xl.middle_depth = 0;
    CHECK(!sdt_unet_config_validate(&bad_xl, &error) && strstr(error.message, "middle_depth"),
          "middle depth 0 accepted: %s", error.message);
    bad_xl = sdxl;
    bad_xl.addition_time_embed_dim = 470; /* 6 x 470 leaves no room for the pooled embedding in 2816 */
    CHECK(!sdt_unet_config_validate(&bad_xl, &error) && strstr(error.message, "addition_time_embed_dim"),
          "y without room for the pooled embedding accepted: %s", error.message);
    bad_xl = sdxl;
    bad_xl.adm_in_channels = -1;
    CHECK(!sdt_unet_config_validate(&bad_xl, &error) && strstr(error.message, "adm_in_channels"),
          "negative y width accepted: %s", error.message);
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
                a->num_res_blocks == b->num_res_blocks && a->middle_depth == b->middle_depth &&
                a->num_heads == b->num_heads && a->head_dim == b->head_dim && a->context_dim == b->context_dim &&
                a->time_embed_dim == b->time_embed_dim && a->linear_proj == b->linear_proj &&
                a->ff_mult == b->ff_mult && a->adm_in_channels == b->adm_in_channels &&
                a->addition_time_embed_dim == b->addition_time_embed_dim;
    for (int l = 0; same && l < a->num_levels; l++)
        same = a->channel_mult[l] == b->channel_mult[l] && a->attention[l] == b->attention[l] &&
               (!a->attention[l] || a->transformer_depth[l] == b->transformer_depth[l]);
    return same;
}

static void check_detect_and_load(sdt_test_rng *rng)
{
    sdt_error error = {0};
    char path[1100];
    char *dir = ut_tmpdir();
    sdt_unet_config variants[4] = {sdt_unet_config_tiny(), ut_config_tiny_linear(), sdt_unet_config_tiny(),
                                   sdt_unet_config_tiny_sdxl()};
    variants[1].context_dim = 24;
    variants[2].num_levels = 3;
    variants[2].channel_mult[2] = 2;
    variants[2].attention[1] = true;
    variants[2].attention[2] = false;
    variants[2].num_res_blocks = 2;
    for (int v = 0; v < 4; v++) {
        char name[32];
        snprintf(name, sizeof name, "variant%d", v);
        sdt_weights *w = ut_random_unet(&variants[v], rng, dir, name, NULL, NULL, NULL, 0);
        sdt_unet_config got;
        CHECK(sdt_unet_config_detect(w, &got, &error), "detect variant %d: %s", v, error.message);
        CHECK(same_config(&got, &variants[v]), "detect variant %d gave a different config", v);
        sdt_unet *u = sdt_unet_load(&got, w, &error);
        CHECK(u != NULL, "load variant %d: %s", v, error.message);
        if (u) {
            const sdt_unet_config *c = &variants[v];
            int expect = c->middle_depth;
            for (int l = 0; l < c->num_levels; l++)
                expect += c->attention[l] ? (2 * c->num_res_blocks + 1) * c->transformer_depth[l] : 0;
            expect *= 2;
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
    CHECK(sdt_unet_load(&tiny, w, &error) == NULL && strstr(error.message, misshapen), "misshapen key: %s",
          error.message);
    sdt_weights_close(w);
    ut_cleanup(dir);
}

/* Detection at SDXL's full size from a skeleton file: only the keys detection reads, shaped in the dims it
 * reads (a whole SDXL UNet is 10 GB), which gives SDXL's config with its 64-wide heads. */
typedef struct skeleton {
    sdt_st_write_item items[64];
    char names[64][160];
    int64_t shapes[64][4];
    size_t n;
} skeleton;

static void skeleton_add(skeleton *k, const void *zeros, const char *name, int ndim, int64_t d0, int64_t d1)
{
    size_t i = k->n++;
    snprintf(k->names[i], sizeof k->names[i], "%s%s", SDT_UNET_KEY_PREFIX, name);
    int64_t dims[4] = {d0, d1, 1, 1};
    memcpy(k->shapes[i], dims, sizeof dims);
    k->items[i] = (sdt_st_write_item){k->names[i], SDT_ST_F16, ndim, k->shapes[i], zeros};
}

static void check_detect_sdxl_full_size(void)
{
    static skeleton k;
    char *dir = ut_tmpdir();
    void *zeros = calloc((size_t)1280 * 2816, 2);
    char key[128], path[1100];
    skeleton_add(&k, zeros, "input_blocks.0.0.weight", 4, 320, 4);
    skeleton_add(&k, zeros, "out.2.weight", 4, 4, 320);
    skeleton_add(&k, zeros, "time_embed.0.weight", 2, 1280, 1);
    const int mult[3] = {1, 2, 4}, depth[3] = {0, 2, 10};
    for (int l = 0; l < 3; l++) {
        for (int r = 0; r < 2; r++) {
            int block = 1 + 3 * l + r;
            snprintf(key, sizeof key, "input_blocks.%d.0.in_layers.0.weight", block);
            skeleton_add(&k, zeros, key, 1, 1, 1);
            snprintf(key, sizeof key, "input_blocks.%d.0.in_layers.2.weight", block);
            skeleton_add(&k, zeros, key, 4, 320 * mult[l], 1);
            if (!depth[l]) continue;
            snprintf(key, sizeof key, "input_blocks.%d.1.proj_in.weight", block);
            skeleton_add(&k, zeros, key, 2, 1, 1);
            for (int d = 0; d < depth[l] && r == 0; d++) {
                snprintf(key, sizeof key, "input_blocks.%d.1.transformer_blocks.%d.norm1.weight", block, d);
                skeleton_add(&k, zeros, key, 1, 1, 1);
            }
        }
        if (l < 2) {
            snprintf(key, sizeof key, "input_blocks.%d.0.op.weight", 3 + 3 * l);
            skeleton_add(&k, zeros, key, 4, 1, 1);
        }
    }
    skeleton_add(&k, zeros, "middle_block.1.proj_in.weight", 2, 1, 1);
    skeleton_add(&k, zeros, "middle_block.1.transformer_blocks.0.attn2.to_k.weight", 2, 1, 2048);
    skeleton_add(&k, zeros, "middle_block.1.transformer_blocks.0.ff.net.2.weight", 2, 1, 4);
    for (int d = 0; d < 10; d++) {
        snprintf(key, sizeof key, "middle_block.1.transformer_blocks.%d.norm1.weight", d);
        skeleton_add(&k, zeros, key, 1, 1, 1);
    }
    skeleton_add(&k, zeros, "label_emb.0.0.weight", 2, 1280, 2816);
    skeleton_add(&k, zeros, "label_emb.0.2.weight", 2, 1, 1);
    snprintf(path, sizeof path, "%s/sdxl_skeleton.safetensors", dir);
    sdt_error error = {0};
    CHECK(sdt_st_write(path, k.items, k.n, NULL, 0, &error), "skeleton write: %s", error.message);
    sdt_weights *w = sdt_weights_open(path, &error);
    CHECK(w != NULL, "skeleton open: %s", error.message);
    sdt_unet_config got, want = sdt_unet_config_sdxl();
    CHECK(w && sdt_unet_config_detect(w, &got, &error), "detect SDXL: %s", error.message);
    CHECK(w && same_config(&got, &want), "SDXL detected as something else (head_dim %d, depths %d %d, middle %d, y %d)",
          got.head_dim, got.transformer_depth[1], got.transformer_depth[2], got.middle_depth, got.adm_in_channels);
    sdt_weights_close(w);
    /* label_emb.0.2 without label_emb.0.0 is a damaged file, named. */
    k.n--;
    k.items[k.n - 1] = (sdt_st_write_item){k.names[k.n], SDT_ST_F16, 2, k.shapes[k.n], zeros};
    CHECK(sdt_st_write(path, k.items, k.n, NULL, 0, &error), "skeleton write: %s", error.message);
    w = sdt_weights_open(path, &error);
    CHECK(w && !sdt_unet_config_detect(w, &got, &error) && strstr(error.message, "label_emb.0.0"),
          "half a label_emb accepted: %s", error.message);
    sdt_weights_close(w);
    free(zeros);
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
    CHECK(!sdt_unet_forward(u, be, &a, &opt, &tl, &tt, &tc, NULL, &out, &error) &&
              strstr(error.message, "without weights"),
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
    check_detect_sdxl_full_size();
    check_unbound_measure();
    return sdt_test_finish("unet_params");
}
