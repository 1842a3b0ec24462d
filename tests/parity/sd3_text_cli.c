/* sd3_text_cli.c - drives the C SD3 / Flux text conditioning from files, for sd3_text_parity.py. Raw
 * little-endian files: int32 for tokens and overrides ((batch, position, row) triples), float32 for the
 * rest, row-major. CPU backend, f32. The encoders are tests/models/text3_test_models.h's tiny ones.
 *
 *   sdt-sd3-text-io gen --dir D [--seed N] [--flux]   writes D/clip_l, D/clip_g (not --flux), D/t5 .safetensors
 *   sdt-sd3-text-io run --dir D [--flux] [--no-t5] --batch B --t5-len L --tokens-l F [--tokens-g F] --tokens-t5 F
 *                  --nrows R --rows-l F [--rows-g F] --rows-t5 F --ov F --nov N --ov5 F --nov5 M [--clip-skip S]
 *                  --dcontext F --dpooled F --out-context F --out-pooled F --drows-l F [--drows-g F] --drows-t5 F
 *       SD3: context [B, 77 + L (77 with --no-t5), D], pooled [B, Pl + Pg]; Flux: context [B, L, D], pooled
 *       [B, width_l]; d(rows) of every table from d(context) and d(pooled).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../models/text3_test_models.h"
#include "flux_text.h"
#include "param_cli_common.h"
#include "sd3_text.h"

const char *const param_cli_name = "sdt-sd3-text-io";

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "gen") && strcmp(argv[1], "run"))) {
        fprintf(stderr, "usage: sdt-sd3-text-io gen|run ... (see sd3_text_cli.c)\n");
        return 2;
    }
    sdt_error err = {0};
    bool flux = cli_flag(argc, argv, "--flux");
    text3_models m;
    if (!strcmp(argv[1], "gen")) {
        const char *seed = cli_arg(argc, argv, "--seed");
        bool ok = text3_make(cli_arg(argc, argv, "--dir"), flux, seed ? strtoull(seed, NULL, 10) : 1, &m, &err);
        if (ok) printf("l_heads %d g_heads %d\n", m.l.cfg.heads, flux ? 0 : m.g.cfg.heads);
        text3_close(&m);
        return ok ? 0 : cli_fail(&err);
    }
    if (!text3_open(cli_arg(argc, argv, "--dir"), flux, &m, &err)) return cli_fail(&err);
    bool no_t5 = cli_flag(argc, argv, "--no-t5");
    const char *cs = cli_arg(argc, argv, "--clip-skip");
    const long B = atol(cli_arg(argc, argv, "--batch")), L5 = atol(cli_arg(argc, argv, "--t5-len"));
    const long R = atol(cli_arg(argc, argv, "--nrows")), N = atol(cli_arg(argc, argv, "--nov")),
               N5 = atol(cli_arg(argc, argv, "--nov5"));
    const long Cl = m.l.cfg.width, Cg = flux ? 0 : m.g.cfg.width, D = m.t5.cfg.d_model;
    const long P = flux ? Cl : m.l.cfg.projection_dim + m.g.cfg.projection_dim;
    const long rows = flux ? L5 : 77 + (no_t5 ? 77 : L5);
    int32_t *tl = cli_read_all(cli_arg(argc, argv, "--tokens-l"), (size_t)B * 77 * 4);
    int32_t *tg = flux ? NULL : cli_read_all(cli_arg(argc, argv, "--tokens-g"), (size_t)B * 77 * 4);
    int32_t *t5t = cli_read_all(cli_arg(argc, argv, "--tokens-t5"), (size_t)(B * L5) * 4);
    float *rl = cli_read_all(cli_arg(argc, argv, "--rows-l"), (size_t)(R * Cl) * 4);
    float *rg = flux ? NULL : cli_read_all(cli_arg(argc, argv, "--rows-g"), (size_t)(R * Cg) * 4);
    float *rt = cli_read_all(cli_arg(argc, argv, "--rows-t5"), (size_t)(R * D) * 4);
    clip_override *ov = cli_read_all(cli_arg(argc, argv, "--ov"), (size_t)N * sizeof(clip_override));
    t5_override *ov5 = cli_read_all(cli_arg(argc, argv, "--ov5"), (size_t)N5 * sizeof(t5_override));
    float *dctx = cli_read_all(cli_arg(argc, argv, "--dcontext"), (size_t)(B * rows * D) * 4);
    float *dpool = cli_read_all(cli_arg(argc, argv, "--dpooled"), (size_t)(B * P) * 4);
    float *drl = calloc((size_t)(R * Cl), 4), *drg = calloc((size_t)(R * (Cg ? Cg : 1)), 4),
          *drt = calloc((size_t)(R * D), 4);
    sdt_backend *be = sdt_backend_cpu_create(0);
    sdt_tensor ttl = sdt_tensor_4d(tl, SDT_I32, 2, B, 77, 0, 0), ttg = sdt_tensor_4d(tg, SDT_I32, 2, B, 77, 0, 0);
    sdt_tensor tt5 = sdt_tensor_4d(t5t, SDT_I32, 2, B, L5, 0, 0);
    sdt_tensor trl = sdt_tensor_4d(rl, SDT_F32, 2, R, Cl, 0, 0),
               trg = sdt_tensor_4d(rg, SDT_F32, 2, R, Cg ? Cg : 1, 0, 0),
               trt = sdt_tensor_4d(rt, SDT_F32, 2, R, D, 0, 0);
    sdt_tensor tdc = sdt_tensor_4d(dctx, SDT_F32, 3, B, rows, D, 0), tdp = sdt_tensor_4d(dpool, SDT_F32, 2, B, P, 0, 0);
    sdt_tensor tdl = sdt_tensor_4d(drl, SDT_F32, 2, R, Cl, 0, 0),
               tdg = sdt_tensor_4d(drg, SDT_F32, 2, R, Cg ? Cg : 1, 0, 0),
               tdt = sdt_tensor_4d(drt, SDT_F32, 2, R, D, 0, 0);
    t5_context_inputs t5in = {.tokens = &tt5, .rows = &trt, .overrides = ov5, .n_overrides = (int)N5};
    sdt_sd3_text_inputs sin = {.tokens_l = &ttl,
                               .tokens_g = &ttg,
                               .rows_l = &trl,
                               .rows_g = &trg,
                               .overrides = ov,
                               .n_overrides = (int)N,
                               .t5 = no_t5 ? (t5_context_inputs){0} : t5in,
                               .joint_dim = (int)D,
                               .clip_skip = cs ? atoi(cs) : 0,
                               .act_dtype = SDT_F32};
    sdt_flux_text_inputs fin = {
        .tokens_l = &ttl, .rows_l = &trl, .overrides = ov, .n_overrides = (int)N, .t5 = t5in, .act_dtype = SDT_F32};
    const t5_encoder *t5 = no_t5 ? NULL : &m.t5;
    sdt_sd3_text_acts sa;
    sdt_flux_text_acts fa;
    sdt_arena measure, arena;
    sdt_arena_init_measure(&measure, be);
    for (int pass = 0; pass < 2; pass++) { /* measure, then run in an arena of exactly the measured size */
        sdt_arena *a = pass ? &arena : &measure;
        if (pass && !sdt_arena_init(&arena, be, measure.peak)) return cli_fail(&arena.error);
        bool ok = flux ? sdt_flux_text_forward(&m.l, t5, be, a, &fin, &fa, &err)
                       : sdt_sd3_text_forward(&m.l, &m.g, t5, be, a, &sin, &sa, &err);
        if (ok && pass) {
            cli_write_all(cli_arg(argc, argv, "--out-context"), flux ? fa.context.data : sa.context.data,
                          (size_t)(B * rows * D) * 4);
            cli_write_all(cli_arg(argc, argv, "--out-pooled"), flux ? fa.pooled.data : sa.pooled.data,
                          (size_t)(B * P) * 4);
        }
        ok = ok && (flux ? sdt_flux_text_backward(&m.l, t5, be, a, &fa, &tdc, &tdp, &tdl, &tdt, &err)
                         : sdt_sd3_text_backward(&m.l, &m.g, t5, be, a, &sa, &tdc, &tdp, &tdl, &tdg,
                                                 no_t5 ? NULL : &tdt, &err));
        if (!ok) return cli_fail(&err);
    }
    cli_write_all(cli_arg(argc, argv, "--drows-l"), drl, (size_t)(R * Cl) * 4);
    if (!flux) cli_write_all(cli_arg(argc, argv, "--drows-g"), drg, (size_t)(R * Cg) * 4);
    cli_write_all(cli_arg(argc, argv, "--drows-t5"), drt, (size_t)(R * D) * 4);
    sdt_arena_release(&arena);
    be->destroy(be);
    text3_close(&m);
    free(tl), free(tg), free(t5t), free(rl), free(rg), free(rt), free(ov), free(ov5), free(dctx), free(dpool);
    free(drl), free(drg), free(drt);
    return 0;
}
