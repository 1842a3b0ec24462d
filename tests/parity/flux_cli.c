/* flux_cli.c - drives the C Flux.1 transformer from files, for flux_parity.py. Raw little-endian float32 files,
 * row-major. CPU backend.
 *
 *   sdt-flux-io gen --out P [--seed N] [--config tiny|dev] [--double N] [--single N] [--schnell]
 *       a Flux (default flux_config_tiny), every parameter perturbed; --double / --single: fewer blocks at the
 *       config's width (library_parity.py's full-width check); --schnell: without the guidance embedder
 *   sdt-flux-io run --ckpt P --batch B --height h --width w --ctx-tokens T --latent F --timesteps F
 *                   [--guidance F] --context F --pooled F --out F [--dout F --dcontext F --dpooled F]
 *       (timesteps and guidance [B] as sigma and scale; the latent unpacked [B, C, h, w])
 *       (out [B, C, h, w]; with dout [B, C, h, w] in: d(context) [B, T, context_dim], d(pooled) [B, pooled_dim])
 *   sdt-flux-io measure --config dev|schnell --height h --width w --ctx-tokens T [--batch B] [--checkpointing]
 *                       [--bf16]
 *       prints forward's activation peak and forward + backward's (a measuring arena, no weights)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flux.h"
#include "flux_gen.h"
#include "param_cli_common.h"
#include "weights.h"

const char *const param_cli_name = "sdt-flux-io";

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: sdt-flux-io gen|run ... (see flux_cli.c)\n");
        return 2;
    }
    sdt_error err = {0};
    if (!strcmp(argv[1], "gen")) {
        const char *name = cli_arg(argc, argv, "--config");
        flux_config cfg = name && !strcmp(name, "dev") ? flux_config_dev() : flux_config_tiny();
        if (name && strcmp(name, "dev") && strcmp(name, "tiny")) {
            fprintf(stderr, "sdt-flux-io: --config %s is not tiny or dev\n", name);
            return 2;
        }
        cfg.guidance = !cli_flag(argc, argv, "--schnell");
        const char *dbl = cli_arg(argc, argv, "--double"), *sgl = cli_arg(argc, argv, "--single");
        if (dbl) cfg.double_layers = atoi(dbl);
        if (sgl) cfg.single_layers = atoi(sgl);
        const char *seed = cli_arg(argc, argv, "--seed");
        return flux_generate(cli_arg(argc, argv, "--out"), &cfg, SDT_F32, seed ? strtoull(seed, NULL, 10) : 1, true,
                             &err)
                   ? 0
                   : cli_fail(&err);
    }
    if (!strcmp(argv[1], "measure")) {
        const char *name = cli_arg(argc, argv, "--config");
        static flux_model m;
        m.cfg = name && !strcmp(name, "schnell") ? flux_config_schnell() : flux_config_dev();
        const long B = cli_arg(argc, argv, "--batch") ? cli_num(argc, argv, "--batch") : 1,
                   h = cli_num(argc, argv, "--height"), wd = cli_num(argc, argv, "--width"),
                   T = cli_num(argc, argv, "--ctx-tokens");
        const flux_config *c = &m.cfg;
        const sdt_dtype act = cli_flag(argc, argv, "--bf16") ? SDT_BF16 : SDT_F32; /* a bf16 run's activations */
        float ts[64] = {0};
        sdt_tensor tl = sdt_tensor_4d(NULL, act, 4, B, c->in_channels, h, wd),
                   tc = sdt_tensor_4d(NULL, act, 3, B, T, c->context_dim, 0),
                   tp = sdt_tensor_4d(NULL, act, 2, B, c->pooled_dim, 0, 0),
                   td = sdt_tensor_4d(NULL, SDT_F32, 4, B, c->in_channels, h, wd);
        flux_inputs in = {&tl, ts, ts, &tc, &tp, cli_flag(argc, argv, "--checkpointing"), act};
        static flux_acts acts;
        sdt_backend *be = sdt_backend_cpu_create(1);
        sdt_arena measure;
        sdt_arena_init_measure(&measure, be);
        if (B > 64 || !flux_forward(&m, be, &measure, &in, &acts, &err)) return cli_fail(&err);
        size_t kept = measure.peak;
        if (!flux_backward(&m, be, &measure, &acts, &td, &tc, &tp, &err)) return cli_fail(&err);
        printf("%s, batch %ld, latent %ldx%ld, %ld text tokens: forward peak %.2f GiB, with backward %.2f GiB "
               "(%s activations)\n",
               name ? name : "dev", B, h, wd, T, kept / 1073741824.0, measure.peak / 1073741824.0, sdt_dtype_name(act));
        be->destroy(be);
        return 0;
    }
    if (strcmp(argv[1], "run")) {
        fprintf(stderr, "sdt-flux-io: unknown command %s\n", argv[1]);
        return 2;
    }
    sdt_weights *w = sdt_weights_open(cli_arg(argc, argv, "--ckpt"), &err);
    if (!w) return cli_fail(&err);
    flux_config cfg;
    static flux_model m;
    if (!flux_config_detect(w, "", &cfg, &err) || !flux_load(&m, &cfg, w, &err)) return cli_fail(&err);
    const long B = cli_num(argc, argv, "--batch"), h = cli_num(argc, argv, "--height"),
               wd = cli_num(argc, argv, "--width"), T = cli_num(argc, argv, "--ctx-tokens"), C = cfg.in_channels,
               CD = cfg.context_dim, PD = cfg.pooled_dim;
    const size_t n_lat = (size_t)(B * C * h * wd);
    float *latent = cli_read_all(cli_arg(argc, argv, "--latent"), n_lat * 4);
    float *ts = cli_read_all(cli_arg(argc, argv, "--timesteps"), (size_t)B * 4);
    float *gs =
        cli_arg(argc, argv, "--guidance") ? cli_read_all(cli_arg(argc, argv, "--guidance"), (size_t)B * 4) : NULL;
    float *ctx = cli_read_all(cli_arg(argc, argv, "--context"), (size_t)(B * T * CD) * 4);
    float *pooled = cli_read_all(cli_arg(argc, argv, "--pooled"), (size_t)(B * PD) * 4);
    float *dout = cli_arg(argc, argv, "--dout") ? cli_read_all(cli_arg(argc, argv, "--dout"), n_lat * 4) : NULL;
    float *dctx = calloc((size_t)(B * T * CD), sizeof(float)), *dpooled = calloc((size_t)(B * PD), sizeof(float));
    sdt_backend *be = sdt_backend_cpu_create(0);
    sdt_tensor tl = sdt_tensor_4d(latent, SDT_F32, 4, B, C, h, wd), tc = sdt_tensor_4d(ctx, SDT_F32, 3, B, T, CD, 0),
               tp = sdt_tensor_4d(pooled, SDT_F32, 2, B, PD, 0, 0), td = sdt_tensor_4d(dout, SDT_F32, 4, B, C, h, wd),
               tdc = sdt_tensor_4d(dctx, SDT_F32, 3, B, T, CD, 0),
               tdp = sdt_tensor_4d(dpooled, SDT_F32, 2, B, PD, 0, 0);
    flux_inputs in = {&tl, ts, gs, &tc, &tp, false, SDT_F32};
    static flux_acts acts;
    sdt_arena measure, arena;
    sdt_arena_init_measure(&measure, be);
    if (!flux_forward(&m, be, &measure, &in, &acts, &err) ||
        (dout && !flux_backward(&m, be, &measure, &acts, &td, &tdc, &tdp, &err)))
        return cli_fail(&err);
    if (!sdt_arena_init(&arena, be, measure.peak)) return cli_fail(&arena.error);
    if (!flux_forward(&m, be, &arena, &in, &acts, &err)) return cli_fail(&err);
    cli_write_all(cli_arg(argc, argv, "--out"), acts.out.data, n_lat * 4);
    if (dout) {
        if (!flux_backward(&m, be, &arena, &acts, &td, &tdc, &tdp, &err)) return cli_fail(&err);
        cli_write_all(cli_arg(argc, argv, "--dcontext"), dctx, (size_t)(B * T * CD) * 4);
        cli_write_all(cli_arg(argc, argv, "--dpooled"), dpooled, (size_t)(B * PD) * 4);
    }
    sdt_arena_release(&arena);
    flux_free(&m);
    be->destroy(be);
    sdt_weights_close(w);
    free(latent), free(ts), free(gs), free(ctx), free(pooled), free(dout), free(dctx), free(dpooled);
    return 0;
}
