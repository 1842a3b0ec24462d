/* unet_cli.c - drives the C UNet for the PyTorch parity script.
 *
 *   sdt-unet-cli CHECKPOINT INPUTS OUTPUT [--threads N] [--checkpointing] [--heads N | --head-dim N]
 *
 * CHECKPOINT: a safetensors file with model.diffusion_model.* keys (config detected from it).
 * INPUTS: safetensors with f32 "latents" [B,C,H,W], "timesteps" [B], "context" [B,T,D],
 *         "y" [B,ADM] (SDXL's vector conditioning; only for a UNet with label_emb) and
 *         "d_out" [B,C,H,W] (the upstream gradient; optional: without it no backward runs).
 * OUTPUT: safetensors with "out" [B,C,H,W], "d_context" [B,T,D] and, with a y, "d_y" [B,ADM],
 *         written atomically.
 * Prints the detected config, the arena size and the timings. Exit status 0 on success.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "safetensors.h"
#include "unet.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static bool input(const sdt_safetensors *st, const char *name, int ndim, bool required, sdt_tensor *out)
{
    const sdt_st_entry *e = sdt_st_find(st, name);
    sdt_error error = {0};
    if (!e) {
        if (required) fprintf(stderr, "%s: tensor \"%s\" is missing\n", sdt_st_path(st), name);
        return false;
    }
    if (e->dtype != SDT_ST_F32 || e->ndim != ndim) {
        fprintf(stderr, "%s: tensor \"%s\" must be F32 with %d dims\n", sdt_st_path(st), name, ndim);
        return false;
    }
    if (!sdt_st_entry_tensor(st, e, out, &error)) {
        fprintf(stderr, "%s\n", error.message);
        return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr,
                "usage: %s CHECKPOINT INPUTS OUTPUT [--threads N] [--checkpointing] [--heads N | --head-dim N]\n",
                argv[0]);
        return 2;
    }
    int threads = 0, heads = 0, head_dim = 0;
    bool checkpointing = false;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--heads") && i + 1 < argc)
            heads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--head-dim") && i + 1 < argc)
            head_dim = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--checkpointing"))
            checkpointing = true;
        else {
            fprintf(stderr, "unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    sdt_error error = {0};
    sdt_weights *w = sdt_weights_open(argv[1], &error);
    if (!w) {
        fprintf(stderr, "%s\n", error.message);
        return 1;
    }
    sdt_unet_config cfg;
    if (!sdt_unet_config_detect(w, &cfg, &error)) {
        fprintf(stderr, "%s\n", error.message);
        return 1;
    }
    if (heads > 0 || head_dim > 0) {
        cfg.num_heads = heads;
        cfg.head_dim = heads > 0 ? 0 : head_dim;
    }
    char depths[64] = "";
    for (int l = 0; l < cfg.num_levels; l++)
        snprintf(depths + strlen(depths), sizeof depths - strlen(depths), "%s%d", l ? "," : "",
                 cfg.attention[l] ? cfg.transformer_depth[l] : 0);
    printf("config: model_channels %d, levels %d, res blocks %d, depths %s, middle %d, heads %d, head_dim %d, "
           "context %d, linear_proj %d, y %d\n",
           cfg.model_channels, cfg.num_levels, cfg.num_res_blocks, depths, cfg.middle_depth, cfg.num_heads,
           cfg.head_dim, cfg.context_dim, (int)cfg.linear_proj, cfg.adm_in_channels);
    sdt_unet *u = sdt_unet_load(&cfg, w, &error);
    sdt_safetensors *in = u ? sdt_st_open(argv[2], &error) : NULL;
    if (!in) {
        fprintf(stderr, "%s\n", error.message);
        return 1;
    }
    sdt_tensor lat, ts, ctx, dy, y;
    if (!input(in, "latents", 4, true, &lat) || !input(in, "timesteps", 1, true, &ts) ||
        !input(in, "context", 3, true, &ctx))
        return 1;
    const sdt_tensor *y_in = input(in, "y", 2, false, &y) ? &y : NULL;
    bool backward = input(in, "d_out", 4, false, &dy);

    sdt_backend *be = sdt_backend_cpu_create(threads);
    sdt_unet_options opt = sdt_unet_options_default();
    opt.for_backward = backward;
    opt.checkpointing = checkpointing;
    sdt_arena arena;
    sdt_arena_init_measure(&arena, be);
    sdt_tensor out;
    float *dctx = calloc((size_t)sdt_tensor_numel(&ctx), sizeof *dctx);
    sdt_tensor d_ctx = sdt_tensor_make(dctx, SDT_F32, SDT_DEVICE_CPU, 3, ctx.shape);
    float *dy_host = y_in ? calloc((size_t)sdt_tensor_numel(y_in), sizeof *dy_host) : NULL;
    sdt_tensor d_y = y_in ? sdt_tensor_make(dy_host, SDT_F32, SDT_DEVICE_CPU, 2, y_in->shape) : ctx;
    sdt_tensor *d_y_out = y_in ? &d_y : NULL;
    bool ok = dctx && (!y_in || dy_host) &&
              sdt_unet_forward(u, be, &arena, &opt, &lat, &ts, &ctx, y_in, &out, &error) &&
              (!backward || sdt_unet_backward(u, be, &arena, &out, &d_ctx, d_y_out, &error));
    size_t need = arena.peak;
    ok = ok && sdt_arena_init(&arena, be, need);
    if (!ok) {
        fprintf(stderr, "%s\n", dctx ? error.message : "out of memory");
        return 1;
    }
    printf("arena: %.1f MiB\n", (double)need / (1 << 20));
    double t0 = now();
    ok = sdt_unet_forward(u, be, &arena, &opt, &lat, &ts, &ctx, y_in, &out, &error);
    double t1 = now();
    ok = ok && (!backward || sdt_unet_backward(u, be, &arena, &dy, &d_ctx, d_y_out, &error));
    double t2 = now();
    if (!ok) {
        fprintf(stderr, "%s\n", error.message);
        return 1;
    }
    printf("forward %.3f s, backward %.3f s\n", t1 - t0, backward ? t2 - t1 : 0.0);
    sdt_st_write_item items[3] = {sdt_st_item_from_tensor("out", &out), sdt_st_item_from_tensor("d_context", &d_ctx),
                                  sdt_st_item_from_tensor("d_y", &d_y)};
    if (!sdt_st_write(argv[3], items, backward ? (y_in ? 3 : 2) : 1, NULL, 0, &error)) {
        fprintf(stderr, "%s\n", error.message);
        return 1;
    }
    sdt_arena_release(&arena);
    free(dctx);
    free(dy_host);
    be->destroy(be);
    sdt_st_close(in);
    sdt_unet_free(u);
    sdt_weights_close(w);
    return 0;
}
