/* mmdit_cli.c - drives the C SD3 MMDiT from files, for mmdit_parity.py. Raw little-endian float32 files,
 * row-major. CPU backend.
 *
 *   sdt-mmdit-io gen --out P [--seed N] [--config tiny|sd3|sd35-medium|sd35-large] [--layers N] [--no-qk-norm]
 *                    [--dual N]
 *       an MMDiT (default mmdit_config_tiny), every parameter perturbed; --layers: fewer blocks at the config's
 *       width (library_parity.py's full-width check); --no-qk-norm: SD3.0-like, 2 heads of 64 for the tiny one;
 *       --dual N: MMDiT-X (attn2) in blocks 0..N-1
 *   sdt-mmdit-io run --ckpt P --batch B --height h --width w --ctx-tokens T --latent F --timesteps F --context F
 *                    --pooled F --out F [--dout F --dcontext F --dpooled F]
 *       (out [B, C, h, w]; with dout [B, C, h, w] in: d(context) [B, T, context_dim], d(pooled) [B, pooled_dim])
 *   sdt-mmdit-io measure --config sd3|sd35-medium|sd35-large --height h --width w --ctx-tokens T [--batch B]
 *                        [--checkpointing] [--bf16]
 *       prints forward's activation peak and forward + backward's (a measuring arena, no weights)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mmdit.h"
#include "mmdit_gen.h"
#include "param_cli_common.h"
#include "weights.h"

const char *const param_cli_name = "sdt-mmdit-io";

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: sdt-mmdit-io gen|run ... (see mmdit_cli.c)\n");
        return 2;
    }
    sdt_error err = {0};
    if (!strcmp(argv[1], "gen")) {
        const char *name = cli_arg(argc, argv, "--config");
        if (name && strcmp(name, "tiny") && strcmp(name, "sd3") && strcmp(name, "sd35-medium") &&
            strcmp(name, "sd35-large")) {
            fprintf(stderr, "sdt-mmdit-io: --config %s is not tiny, sd3, sd35-medium or sd35-large\n", name);
            return 2;
        }
        mmdit_config cfg = !name || !strcmp(name, "tiny") ? mmdit_config_tiny()
                           : !strcmp(name, "sd3")         ? mmdit_config_sd3_medium()
                           : !strcmp(name, "sd35-medium") ? mmdit_config_sd35_medium()
                                                          : mmdit_config_sd35_large();
        if (cli_flag(argc, argv, "--no-qk-norm")) {
            /* without norm_q the file does not store the head width: SD3's 64, as detection reads it */
            cfg.qk_norm = false;
            cfg.head_dim = 64;
        }
        const char *layers = cli_arg(argc, argv, "--layers"), *dual = cli_arg(argc, argv, "--dual");
        if (layers) cfg.layers = atoi(layers);
        if (dual) cfg.dual_layers = atoi(dual);
        if (cfg.dual_layers > cfg.layers) cfg.dual_layers = cfg.layers;
        const char *seed = cli_arg(argc, argv, "--seed");
        return mmdit_generate(cli_arg(argc, argv, "--out"), &cfg, SDT_F32, seed ? strtoull(seed, NULL, 10) : 1, true,
                              &err)
                   ? 0
                   : cli_fail(&err);
    }
    if (!strcmp(argv[1], "measure")) {
        const char *name = cli_arg(argc, argv, "--config");
        static mmdit_model m;
        m.cfg = name && !strcmp(name, "sd3")           ? mmdit_config_sd3_medium()
                : name && !strcmp(name, "sd35-medium") ? mmdit_config_sd35_medium()
                                                       : mmdit_config_sd35_large();
        const long B = cli_arg(argc, argv, "--batch") ? cli_num(argc, argv, "--batch") : 1,
                   h = cli_num(argc, argv, "--height"), wd = cli_num(argc, argv, "--width"),
                   T = cli_num(argc, argv, "--ctx-tokens");
        const mmdit_config *c = &m.cfg;
        const sdt_dtype act = cli_flag(argc, argv, "--bf16") ? SDT_BF16 : SDT_F32; /* a bf16 run's activations */
        float ts[64] = {0};
        sdt_tensor tl = sdt_tensor_4d(NULL, act, 4, B, c->in_channels, h, wd),
                   tc = sdt_tensor_4d(NULL, act, 3, B, T, c->context_dim, 0),
                   tp = sdt_tensor_4d(NULL, act, 2, B, c->pooled_dim, 0, 0),
                   td = sdt_tensor_4d(NULL, SDT_F32, 4, B, c->in_channels, h, wd);
        mmdit_inputs in = {&tl, ts, &tc, &tp, cli_flag(argc, argv, "--checkpointing"), act};
        static mmdit_acts acts;
        sdt_backend *be = sdt_backend_cpu_create(1);
        sdt_arena measure;
        sdt_arena_init_measure(&measure, be);
        if (B > 64 || !mmdit_forward(&m, be, &measure, &in, &acts, &err)) return cli_fail(&err);
        size_t kept = measure.peak;
        if (!mmdit_backward(&m, be, &measure, &acts, &td, &tc, &tp, &err)) return cli_fail(&err);
        printf("%s, batch %ld, latent %ldx%ld, %ld text tokens: forward peak %.2f GiB, with backward %.2f GiB "
               "(%s activations)\n",
               name ? name : "sd35-large", B, h, wd, T, kept / 1073741824.0, measure.peak / 1073741824.0,
               sdt_dtype_name(act));
        be->destroy(be);
        return 0;
    }
    if (strcmp(argv[1], "run")) {
        fprintf(stderr, "sdt-mmdit-io: unknown command %s\n", argv[1]);
        return 2;
    }
    sdt_weights *w = sdt_weights_open(cli_arg(argc, argv, "--ckpt"), &err);
    if (!w) return cli_fail(&err);
    mmdit_config cfg;
    static mmdit_model m;
    if (!mmdit_config_detect(w, "", &cfg, &err) || !mmdit_load(&m, &cfg, w, &err)) return cli_fail(&err);
    const long B = cli_num(argc, argv, "--batch"), h = cli_num(argc, argv, "--height"),
               wd = cli_num(argc, argv, "--width"), T = cli_num(argc, argv, "--ctx-tokens"), C = cfg.in_channels,
               CD = cfg.context_dim, PD = cfg.pooled_dim;
    const size_t n_lat = (size_t)(B * C * h * wd);
    float *latent = cli_read_all(cli_arg(argc, argv, "--latent"), n_lat * 4);
    float *ts = cli_read_all(cli_arg(argc, argv, "--timesteps"), (size_t)B * 4);
    float *ctx = cli_read_all(cli_arg(argc, argv, "--context"), (size_t)(B * T * CD) * 4);
    float *pooled = cli_read_all(cli_arg(argc, argv, "--pooled"), (size_t)(B * PD) * 4);
    float *dout = cli_arg(argc, argv, "--dout") ? cli_read_all(cli_arg(argc, argv, "--dout"), n_lat * 4) : NULL;
    float *dctx = calloc((size_t)(B * T * CD), sizeof(float)), *dpooled = calloc((size_t)(B * PD), sizeof(float));
    sdt_backend *be = sdt_backend_cpu_create(0);
    sdt_tensor tl = sdt_tensor_4d(latent, SDT_F32, 4, B, C, h, wd), tc = sdt_tensor_4d(ctx, SDT_F32, 3, B, T, CD, 0),
               tp = sdt_tensor_4d(pooled, SDT_F32, 2, B, PD, 0, 0), td = sdt_tensor_4d(dout, SDT_F32, 4, B, C, h, wd),
               tdc = sdt_tensor_4d(dctx, SDT_F32, 3, B, T, CD, 0),
               tdp = sdt_tensor_4d(dpooled, SDT_F32, 2, B, PD, 0, 0);
    mmdit_inputs in = {&tl, ts, &tc, &tp, false, SDT_F32};
    static mmdit_acts acts;
    sdt_arena measure, arena;
    sdt_arena_init_measure(&measure, be);
    if (!mmdit_forward(&m, be, &measure, &in, &acts, &err) ||
        (dout && !mmdit_backward(&m, be, &measure, &acts, &td, &tdc, &tdp, &err)))
        return cli_fail(&err);
    if (!sdt_arena_init(&arena, be, measure.peak)) return cli_fail(&arena.error);
    if (!mmdit_forward(&m, be, &arena, &in, &acts, &err)) return cli_fail(&err);
    cli_write_all(cli_arg(argc, argv, "--out"), acts.out.data, n_lat * 4);
    if (dout) {
        if (!mmdit_backward(&m, be, &arena, &acts, &td, &tdc, &tdp, &err)) return cli_fail(&err);
        cli_write_all(cli_arg(argc, argv, "--dcontext"), dctx, (size_t)(B * T * CD) * 4);
        cli_write_all(cli_arg(argc, argv, "--dpooled"), dpooled, (size_t)(B * PD) * 4);
    }
    sdt_arena_release(&arena);
    be->destroy(be);
    sdt_weights_close(w);
    free(latent), free(ts), free(ctx), free(pooled), free(dout), free(dctx), free(dpooled);
    return 0;
}
