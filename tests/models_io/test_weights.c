/* test_weights.c - an LDM single file and a diffusers folder with the same
 * tensors must give the same canonical keys with identical data.
 *
 * The test builds both names of every tensor itself, structure by structure
 * (the reverse direction of the loader's parser), for an SD 1.x level layout
 * and a tiny one; literal key pairs copied from diffusers'
 * convert_diffusers_to_original_stable_diffusion.py pin the SD 1.x numbering.
 */
#include "weights.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io_test_util.h"
#include "safetensors.h"
#include "sdt_test.h"

typedef struct pair {
    char *ldm;  /* canonical key */
    char *diff; /* diffusers name (without component folder) */
    int comp;   /* 0 unet, 1 text encoder, 2 vae */
    sdt_st_dtype dtype;
    int ndim_ldm, ndim_diff;
    int64_t shape[4];
    uint8_t *data;
    size_t nbytes;
} pair;

typedef struct layout {
    int levels, res;
    bool down_attn[8], up_attn[8]; /* up_attn indexed by diffusers up level (0 = lowest resolution) */
} layout;

static GArray *pairs;
static sdt_test_rng rng;

static void add_pair_shaped(int comp, const char *ldm, const char *diff, bool conv1x1)
{
    pair p = {0};
    p.comp = comp;
    p.ldm = g_strdup(ldm);
    p.diff = g_strdup(diff);
    const sdt_st_dtype dts[] = {SDT_ST_F32, SDT_ST_F16, SDT_ST_BF16};
    p.dtype = dts[sdt_test_next(&rng) % 3];
    p.shape[0] = 1 + (int64_t)(sdt_test_next(&rng) % 3);
    p.shape[1] = conv1x1 ? p.shape[0] : 1 + (int64_t)(sdt_test_next(&rng) % 3);
    p.shape[2] = p.shape[3] = 1;
    p.ndim_diff = 2;
    p.ndim_ldm = conv1x1 ? 4 : 2;
    p.nbytes = (size_t)(p.shape[0] * p.shape[1]) * sdt_st_dtype_size(p.dtype);
    p.data = malloc(p.nbytes);
    for (size_t i = 0; i < p.nbytes; i++) p.data[i] = (uint8_t)sdt_test_next(&rng);
    g_array_append_val(pairs, p);
}

static void add_pair(int comp, const char *ldm_prefix, const char *ldm, const char *diff_prefix, const char *diff)
{
    char *a = g_strconcat(ldm_prefix, ldm, NULL), *b = g_strconcat(diff_prefix, diff, NULL);
    add_pair_shaped(comp, a, b, false);
    g_free(a);
    g_free(b);
}

/* ---- UNet --------------------------------------------------------------------- */

static void unet_resnet(const char *ldm, const char *diff, bool shortcut)
{
    static const char *names[][2] = {
        {"in_layers.0.weight", "norm1.weight"},          {"in_layers.0.bias", "norm1.bias"},
        {"in_layers.2.weight", "conv1.weight"},          {"in_layers.2.bias", "conv1.bias"},
        {"emb_layers.1.weight", "time_emb_proj.weight"}, {"out_layers.0.weight", "norm2.weight"},
        {"out_layers.3.weight", "conv2.weight"},         {"out_layers.3.bias", "conv2.bias"}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) add_pair(0, ldm, names[i][0], diff, names[i][1]);
    if (shortcut) add_pair(0, ldm, "skip_connection.weight", diff, "conv_shortcut.weight");
}

static void unet_attention(const char *ldm, const char *diff)
{
    /* Inside transformer blocks both layouts spell names the same ("norm1" must stay "norm1"). */
    static const char *names[] = {"norm.weight",
                                  "proj_in.weight",
                                  "transformer_blocks.0.attn1.to_q.weight",
                                  "transformer_blocks.0.attn2.to_k.weight",
                                  "transformer_blocks.0.norm1.weight",
                                  "transformer_blocks.0.ff.net.0.proj.weight",
                                  "transformer_blocks.0.attn1.to_out.0.bias",
                                  "proj_out.weight"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) add_pair(0, ldm, names[i], diff, names[i]);
}

static void build_unet(const layout *l)
{
    const char *P = "model.diffusion_model.";
    char a[160], b[160];
    static const char *fixed[][2] = {{"time_embed.0.weight", "time_embedding.linear_1.weight"},
                                     {"time_embed.0.bias", "time_embedding.linear_1.bias"},
                                     {"time_embed.2.weight", "time_embedding.linear_2.weight"},
                                     {"time_embed.2.bias", "time_embedding.linear_2.bias"},
                                     {"input_blocks.0.0.weight", "conv_in.weight"},
                                     {"input_blocks.0.0.bias", "conv_in.bias"},
                                     {"out.0.weight", "conv_norm_out.weight"},
                                     {"out.0.bias", "conv_norm_out.bias"},
                                     {"out.2.weight", "conv_out.weight"},
                                     {"out.2.bias", "conv_out.bias"}};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) add_pair(0, P, fixed[i][0], "", fixed[i][1]);
    int block = 1; /* LDM input_blocks are numbered consecutively after conv_in */
    for (int i = 0; i < l->levels; i++) {
        for (int j = 0; j < l->res; j++, block++) {
            snprintf(a, sizeof(a), "%sinput_blocks.%d.0.", P, block);
            snprintf(b, sizeof(b), "down_blocks.%d.resnets.%d.", i, j);
            unet_resnet(a, b, i > 0 && j == 0);
            if (l->down_attn[i]) {
                snprintf(a, sizeof(a), "%sinput_blocks.%d.1.", P, block);
                snprintf(b, sizeof(b), "down_blocks.%d.attentions.%d.", i, j);
                unet_attention(a, b);
            }
        }
        if (i < l->levels - 1) {
            snprintf(a, sizeof(a), "%sinput_blocks.%d.0.op.", P, block++);
            snprintf(b, sizeof(b), "down_blocks.%d.downsamplers.0.conv.", i);
            add_pair(0, a, "weight", b, "weight");
            add_pair(0, a, "bias", b, "bias");
        }
    }
    unet_resnet("model.diffusion_model.middle_block.0.", "mid_block.resnets.0.", false);
    unet_attention("model.diffusion_model.middle_block.1.", "mid_block.attentions.0.");
    unet_resnet("model.diffusion_model.middle_block.2.", "mid_block.resnets.1.", false);
    block = 0; /* output_blocks are numbered consecutively from the lowest resolution */
    for (int i = 0; i < l->levels; i++) {
        for (int j = 0; j < l->res + 1; j++, block++) {
            snprintf(a, sizeof(a), "%soutput_blocks.%d.0.", P, block);
            snprintf(b, sizeof(b), "up_blocks.%d.resnets.%d.", i, j);
            unet_resnet(a, b, true);
            if (l->up_attn[i]) {
                snprintf(a, sizeof(a), "%soutput_blocks.%d.1.", P, block);
                snprintf(b, sizeof(b), "up_blocks.%d.attentions.%d.", i, j);
                unet_attention(a, b);
            }
        }
        if (i < l->levels - 1) { /* the upsampler sits after the resnet (and attention) of the level's last block */
            snprintf(a, sizeof(a), "%soutput_blocks.%d.%d.conv.", P, block - 1, l->up_attn[i] ? 2 : 1);
            snprintf(b, sizeof(b), "up_blocks.%d.upsamplers.0.conv.", i);
            add_pair(0, a, "weight", b, "weight");
        }
    }
}

/* ---- VAE and text encoder ------------------------------------------------------------ */

static void vae_resnet(const char *ldm, const char *diff, bool shortcut)
{
    static const char *names[] = {"norm1.weight", "conv1.weight", "norm2.bias", "conv2.weight"};
    for (size_t i = 0; i < 4; i++) add_pair(2, ldm, names[i], diff, names[i]);
    if (shortcut) add_pair(2, ldm, "nin_shortcut.weight", diff, "conv_shortcut.weight");
}

static void vae_attention(const char *part, bool old_names)
{
    const char *diff_names[][5] = {{"group_norm", "to_q", "to_k", "to_v", "to_out.0"},
                                   {"group_norm", "query", "key", "value", "proj_attn"}};
    const char *ldm_names[] = {"norm", "q", "k", "v", "proj_out"};
    for (int i = 0; i < 5; i++) {
        char a[160], b[160];
        snprintf(a, sizeof(a), "first_stage_model.%s.mid.attn_1.%s.weight", part, ldm_names[i]);
        snprintf(b, sizeof(b), "%s.mid_block.attentions.0.%s.weight", part, diff_names[old_names][i]);
        add_pair_shaped(2, a, b, i > 0); /* projections: linear [C,C] in diffusers, conv [C,C,1,1] in LDM */
        snprintf(a, sizeof(a), "first_stage_model.%s.mid.attn_1.%s.bias", part, ldm_names[i]);
        snprintf(b, sizeof(b), "%s.mid_block.attentions.0.%s.bias", part, diff_names[old_names][i]);
        add_pair_shaped(2, a, b, false);
    }
}

static void build_vae(const layout *l)
{
    const char *P = "first_stage_model.";
    char a[160], b[160];
    static const char *same[] = {"encoder.conv_in.weight", "encoder.conv_out.weight", "quant_conv.weight",
                                 "post_quant_conv.bias",   "decoder.conv_in.weight",  "decoder.conv_out.bias"};
    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) add_pair(2, P, same[i], "", same[i]);
    for (int i = 0; i < l->levels; i++) {
        for (int j = 0; j < l->res; j++) {
            snprintf(a, sizeof(a), "%sencoder.down.%d.block.%d.", P, i, j);
            snprintf(b, sizeof(b), "encoder.down_blocks.%d.resnets.%d.", i, j);
            vae_resnet(a, b, i > 0 && j == 0);
        }
        if (i < l->levels - 1) {
            snprintf(a, sizeof(a), "%sencoder.down.%d.downsample.conv.", P, i);
            snprintf(b, sizeof(b), "encoder.down_blocks.%d.downsamplers.0.conv.", i);
            add_pair(2, a, "weight", b, "weight");
        }
    }
    for (int i = 0; i < l->levels; i++) { /* decoder: diffusers level i is LDM level levels-1-i */
        int ldm_level = l->levels - 1 - i;
        for (int j = 0; j < l->res + 1; j++) {
            snprintf(a, sizeof(a), "%sdecoder.up.%d.block.%d.", P, ldm_level, j);
            snprintf(b, sizeof(b), "decoder.up_blocks.%d.resnets.%d.", i, j);
            vae_resnet(a, b, j == 0 && i > 0);
        }
        if (i < l->levels - 1) {
            snprintf(a, sizeof(a), "%sdecoder.up.%d.upsample.conv.", P, ldm_level);
            snprintf(b, sizeof(b), "decoder.up_blocks.%d.upsamplers.0.conv.", i);
            add_pair(2, a, "bias", b, "bias");
        }
    }
    for (int e = 0; e < 2; e++) {
        const char *part = e ? "decoder" : "encoder";
        for (int j = 0; j < 2; j++) {
            snprintf(a, sizeof(a), "%s%s.mid.block_%d.", P, part, j + 1);
            snprintf(b, sizeof(b), "%s.mid_block.resnets.%d.", part, j);
            vae_resnet(a, b, false);
        }
        vae_attention(part, e == 1);
        snprintf(a, sizeof(a), "%s%s.norm_out.", P, part);
        snprintf(b, sizeof(b), "%s.conv_norm_out.", part);
        add_pair(2, a, "weight", b, "weight");
    }
}

static void build_text(void)
{
    static const char *names[] = {"embeddings.token_embedding.weight", "embeddings.position_embedding.weight",
                                  "encoder.layers.0.self_attn.q_proj.weight", "encoder.layers.0.mlp.fc1.bias",
                                  "final_layer_norm.weight"};
    for (size_t i = 0; i < 5; i++)
        add_pair(1, "cond_stage_model.transformer.text_model.", names[i], "text_model.", names[i]);
}

/* ---- writing both layouts --------------------------------------------------------------- */

static const int64_t position_ids_shape[2] = {1, 4};
static const int64_t position_ids[4] = {0, 1, 2, 3};

static bool write_layout(const char *path, int comp, bool ldm, bool with_position_ids)
{
    sdt_st_write_item *items = g_new0(sdt_st_write_item, pairs->len + 1);
    size_t n = 0;
    for (guint i = 0; i < pairs->len; i++) {
        pair *p = &g_array_index(pairs, pair, i);
        if (comp >= 0 && p->comp != comp) continue;
        items[n++] =
            (sdt_st_write_item){ldm ? p->ldm : p->diff, p->dtype, ldm ? p->ndim_ldm : p->ndim_diff, p->shape, p->data};
    }
    if (with_position_ids) /* an integer buffer both layouts carry; not a parameter */
        items[n++] = (sdt_st_write_item){ldm ? "cond_stage_model.transformer.text_model.embeddings.position_ids"
                                             : "text_model.embeddings.position_ids",
                                         SDT_ST_I64, 2, position_ids_shape, position_ids};
    sdt_error error = {0};
    bool ok = sdt_st_write(path, items, n, NULL, 0, &error);
    CHECK(ok, "writing %s: %s", path, error.message);
    g_free(items);
    return ok;
}

static void write_diffusers(const char *dir, bool with_vae)
{
    const char *subs[] = {"unet", "text_encoder", "vae"};
    const char *files[] = {"diffusion_pytorch_model.safetensors", "model.fp16.safetensors",
                           "diffusion_pytorch_model.safetensors"};
    for (int c = 0; c < (with_vae ? 3 : 2); c++) {
        char *sub = g_build_filename(dir, subs[c], NULL);
        g_mkdir_with_parents(sub, 0700);
        char *file = g_build_filename(sub, files[c], NULL);
        write_layout(file, c, false, c == 1);
        g_free(file);
        g_free(sub);
    }
}

static void compare(const sdt_weights *ldm, const sdt_weights *diff)
{
    CHECK(sdt_weights_count(ldm) == pairs->len, "LDM file: %zu keys, expected %u", sdt_weights_count(ldm), pairs->len);
    CHECK(sdt_weights_count(diff) == pairs->len, "diffusers folder: %zu keys, expected %u", sdt_weights_count(diff),
          pairs->len);
    for (guint i = 0; i < pairs->len; i++) {
        const pair *p = &g_array_index(pairs, pair, i);
        const sdt_tensor *a = sdt_weights_get(ldm, p->ldm), *b = sdt_weights_get(diff, p->ldm);
        CHECK(a != NULL, "LDM file lacks %s", p->ldm);
        CHECK(b != NULL, "diffusers '%s' did not map to %s", p->diff, p->ldm);
        if (!a || !b) continue;
        CHECK(a->dtype == b->dtype && a->ndim == b->ndim && a->ndim == p->ndim_ldm, "%s: dtype/ndim differ", p->ldm);
        for (int d = 0; d < a->ndim && d < b->ndim; d++)
            CHECK(a->shape[d] == b->shape[d] && a->shape[d] == p->shape[d], "%s: shape[%d] differs", p->ldm, d);
        CHECK(memcmp(a->data, p->data, p->nbytes) == 0 && memcmp(b->data, p->data, p->nbytes) == 0, "%s: data differs",
              p->ldm);
    }
    for (size_t i = 0; i < sdt_weights_count(diff); i++) /* nothing extra (e.g. an unconverted name) */
        CHECK(sdt_weights_get(ldm, sdt_weights_key(diff, i)) != NULL, "diffusers produced unexpected key %s",
              sdt_weights_key(diff, i));
    CHECK(sdt_weights_get(diff, "cond_stage_model.transformer.text_model.embeddings.position_ids") == NULL,
          "an I64 buffer entered the key space");
}

static char *expected_hash(const char *file)
{
    gchar *bytes;
    gsize size;
    if (!g_file_get_contents(file, &bytes, &size, NULL)) return g_strdup("?");
    char *sum = g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)bytes, size);
    sum[10] = 0;
    g_free(bytes);
    return sum;
}

static void check_require(const sdt_weights *w, const char *what)
{
    const pair *p = &g_array_index(pairs, pair, 0); /* time_embed.0.weight <- time_embedding.linear_1.weight */
    sdt_error error = {0};
    const sdt_tensor *t = sdt_weights_require(w, p->ldm, p->ndim_ldm, p->shape, &error);
    CHECK(t != NULL, "%s: require with the right shape failed: %s", what, error.message);
    int64_t wrong[2] = {p->shape[0] + 1, p->shape[1]};
    t = sdt_weights_require(w, p->ldm, 2, wrong, &error);
    CHECK(t == NULL, "%s: require accepted a wrong shape", what);
    CHECK(io_contains(error.message, sdt_weights_path(w)) && io_contains(error.message, p->ldm),
          "%s: shape error lacks file/key: %s", what, error.message);
    printf("  %s: %s\n", what, error.message);
    t = sdt_weights_require(w, "model.diffusion_model.no.such.weight", 1, wrong, &error);
    CHECK(t == NULL && io_contains(error.message, "model.diffusion_model.no.such.weight") &&
              io_contains(error.message, sdt_weights_path(w)),
          "%s: missing-key error lacks file/key: %s", what, error.message);
}

/* Key pairs copied from diffusers' conversion script for the SD 1.x layout. */
static void check_sd1_literals(const sdt_weights *diff)
{
    static const char *keys[] = {"model.diffusion_model.input_blocks.1.0.in_layers.0.weight",
                                 "model.diffusion_model.input_blocks.5.1.proj_in.weight",
                                 "model.diffusion_model.input_blocks.9.0.op.weight",
                                 "model.diffusion_model.input_blocks.11.0.out_layers.3.weight",
                                 "model.diffusion_model.output_blocks.2.1.conv.weight",
                                 "model.diffusion_model.output_blocks.5.2.conv.weight",
                                 "model.diffusion_model.output_blocks.8.2.conv.weight",
                                 "model.diffusion_model.output_blocks.11.1.proj_out.weight",
                                 "model.diffusion_model.output_blocks.3.0.skip_connection.weight",
                                 "model.diffusion_model.middle_block.2.emb_layers.1.weight",
                                 "first_stage_model.decoder.up.3.block.2.conv2.weight",
                                 "first_stage_model.decoder.up.1.upsample.conv.bias",
                                 "first_stage_model.encoder.down.2.downsample.conv.weight",
                                 "first_stage_model.encoder.mid.attn_1.proj_out.weight",
                                 "first_stage_model.decoder.mid.attn_1.q.weight",
                                 "first_stage_model.encoder.down.1.block.0.nin_shortcut.weight"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        CHECK(sdt_weights_get(diff, keys[i]) != NULL, "SD 1.x key %s missing from the mapped diffusers folder",
              keys[i]);
    const sdt_tensor *q = sdt_weights_get(diff, "first_stage_model.decoder.mid.attn_1.q.weight");
    CHECK(q && q->ndim == 4 && q->shape[2] == 1 && q->shape[3] == 1, "VAE attention q not reshaped to a 1x1 conv");
}

static void run_layout(const char *root, const layout *l, bool sd1)
{
    pairs = g_array_new(FALSE, TRUE, sizeof(pair));
    build_unet(l);
    build_text();
    build_vae(l);
    char *dir = g_build_filename(root, sd1 ? "sd1" : "tiny", NULL);
    g_mkdir_with_parents(dir, 0700);
    char *ldm_path = g_build_filename(dir, "model.safetensors", NULL);
    char *diff_dir = g_build_filename(dir, "diffusers", NULL);
    write_layout(ldm_path, -1, true, true);
    write_diffusers(diff_dir, true);
    sdt_error error = {0};
    sdt_weights *ldm = sdt_weights_open(ldm_path, &error);
    CHECK(ldm != NULL, "opening the LDM file: %s", error.message);
    sdt_weights *diff = sdt_weights_open(diff_dir, &error);
    CHECK(diff != NULL, "opening the diffusers folder: %s", error.message);
    if (ldm && diff) {
        compare(ldm, diff);
        if (sd1) check_sd1_literals(diff);
        check_require(ldm, "LDM");
        check_require(diff, "diffusers");
        char h[11];
        char *want = expected_hash(ldm_path);
        CHECK(sdt_weights_short_hash(ldm, h, &error) && strcmp(h, want) == 0, "LDM short hash %s, expected %s", h,
              want);
        g_free(want);
        char *unet_file = g_build_filename(diff_dir, "unet", "diffusion_pytorch_model.safetensors", NULL);
        want = expected_hash(unet_file);
        CHECK(sdt_weights_short_hash(diff, h, &error) && strcmp(h, want) == 0,
              "folder short hash %s, expected %s (UNet file)", h, want);
        g_free(want);
        g_free(unet_file);
    }
    sdt_weights_close(ldm);
    sdt_weights_close(diff);
    /* A folder without vae/: opens, and asking for a VAE key says the vae/ part is missing. */
    char *partial = g_build_filename(dir, "partial", NULL);
    write_diffusers(partial, false);
    sdt_weights *pw = sdt_weights_open(partial, &error);
    CHECK(pw != NULL, "partial folder: %s", error.message);
    if (pw) {
        int64_t s[4] = {1, 1, 1, 1};
        CHECK(!sdt_weights_require(pw, "first_stage_model.encoder.conv_in.weight", 4, s, &error) &&
                  io_contains(error.message, "vae/") &&
                  io_contains(error.message, "first_stage_model.encoder.conv_in.weight"),
              "missing vae/ not explained: %s", error.message);
        sdt_weights_close(pw);
    }
    for (guint i = 0; i < pairs->len; i++) {
        pair *p = &g_array_index(pairs, pair, i);
        g_free(p->ldm);
        g_free(p->diff);
        free(p->data);
    }
    g_array_free(pairs, TRUE);
    g_free(partial);
    g_free(ldm_path);
    g_free(diff_dir);
    g_free(dir);
}

static void check_bad_inputs(const char *root)
{
    sdt_error error = {0};
    char *empty = g_build_filename(root, "empty-folder", NULL);
    g_mkdir(empty, 0700);
    CHECK(sdt_weights_open(empty, &error) == NULL && io_contains(error.message, empty) &&
              io_contains(error.message, "unet/"),
          "an empty folder was accepted or not explained: %s", error.message);
    /* A damaged component file is reported with its own path. */
    char *unet = g_build_filename(empty, "unet", NULL);
    g_mkdir(unet, 0700);
    char *bad = g_build_filename(unet, "diffusion_pytorch_model.safetensors", NULL);
    io_write_bytes(bad, "\x10\0\0\0\0\0\0\0{not json", 17);
    CHECK(sdt_weights_open(empty, &error) == NULL && io_contains(error.message, bad), "damaged unet file not named: %s",
          error.message);
    CHECK(sdt_weights_open(bad, &error) == NULL && io_contains(error.message, bad), "damaged single file not named: %s",
          error.message);
    /* A parameter stored as F64 is left out of the key space, and asking for it says why. */
    char *f64 = g_build_filename(root, "f64.safetensors", NULL);
    int64_t shape[1] = {2};
    double vals[2] = {1, 2};
    sdt_st_write_item item = {"model.diffusion_model.out.2.bias", SDT_ST_F64, 1, shape, vals};
    CHECK(sdt_st_write(f64, &item, 1, NULL, 0, &error), "write: %s", error.message);
    sdt_weights *w = sdt_weights_open(f64, &error);
    CHECK(w && sdt_weights_count(w) == 0, "F64 tensor entered the key space");
    if (w) {
        CHECK(!sdt_weights_require(w, item.name, 1, shape, &error) && io_contains(error.message, "F64") &&
                  io_contains(error.message, item.name) && io_contains(error.message, f64),
              "F64 key not explained: %s", error.message);
        sdt_weights_close(w);
    }
    g_free(f64);
    g_free(bad);
    g_free(unet);
    g_free(empty);
}

int main(void)
{
    rng = sdt_test_rng_from_env("test_weights");
    char *root = io_make_tmpdir();
    layout sd1 = {.levels = 4, .res = 2, .down_attn = {1, 1, 1, 0}, .up_attn = {0, 1, 1, 1}};
    layout tiny = {.levels = 2, .res = 1, .down_attn = {1, 0}, .up_attn = {0, 1}};
    run_layout(root, &sd1, true);
    run_layout(root, &tiny, false);
    check_bad_inputs(root);
    io_rm_tree(root);
    g_free(root);
    return sdt_test_finish("test_weights");
}
