/* t5_cli.c - drives the C T5 encoder from files, for t5_parity.py. Raw little-endian files: int32 for
 * tokens, lengths and overrides (batch, position, row triples), float32 for the rest, row-major. CPU backend.
 *
 *   sdt-t5-io gen --out P [--seed N] [--dtype f32|bf16] [--config tiny|xxl] [--layers N]
 *       a T5 (default t5_config_tiny), every parameter perturbed; --layers: fewer layers at the config's width
 *   sdt-t5-io run --ckpt P --tokens F --batch B --seq T [--lengths F] [--max-distance M (default 128; 20 puts
 *                 short sequences into the capped buckets)]
 *                 [--rows F --nrows R --overrides F --noverrides N --dout F --drows F] --out F
 *       (out [B, T, d_model]; with dout [B, T, d_model] in, d(rows) [R, d_model] out)
 *   sdt-t5-io buckets --seq T --max-distance M --out F    int32 [T, T] of t5_relative_buckets
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "t5_encoder.h"
#include "t5_gen.h"
#include "param_cli_common.h"
#include "weights.h"

const char *const param_cli_name = "sdt-t5-io";

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: sdt-t5-io gen|run|buckets ... (see t5_cli.c)\n");
        return 2;
    }
    sdt_error err = {0};
    const char *md = cli_arg(argc, argv, "--max-distance");
    if (!strcmp(argv[1], "gen")) {
        const char *name = cli_arg(argc, argv, "--config"), *layers = cli_arg(argc, argv, "--layers");
        if (name && strcmp(name, "xxl") && strcmp(name, "tiny")) {
            fprintf(stderr, "sdt-t5-io: --config %s is not tiny or xxl\n", name);
            return 2;
        }
        t5_config cfg = name && !strcmp(name, "xxl") ? t5_config_xxl() : t5_config_tiny();
        if (layers) cfg.layers = atoi(layers);
        const char *seed = cli_arg(argc, argv, "--seed"), *dt = cli_arg(argc, argv, "--dtype");
        sdt_dtype dtype = dt && !strcmp(dt, "bf16") ? SDT_BF16 : SDT_F32;
        return t5_generate(cli_arg(argc, argv, "--out"), &cfg, dtype, seed ? strtoull(seed, NULL, 10) : 1, true, &err)
                   ? 0
                   : cli_fail(&err);
    }
    if (!strcmp(argv[1], "buckets")) {
        t5_config cfg = t5_config_tiny();
        int T = atoi(cli_arg(argc, argv, "--seq"));
        cfg.rel_max_distance = md ? atoi(md) : 128;
        int32_t *b = malloc(sizeof(int32_t) * (size_t)T * T);
        t5_relative_buckets(&cfg, T, b);
        cli_write_all(cli_arg(argc, argv, "--out"), b, sizeof(int32_t) * (size_t)T * T);
        free(b);
        return 0;
    }
    if (strcmp(argv[1], "run")) {
        fprintf(stderr, "sdt-t5-io: unknown command %s\n", argv[1]);
        return 2;
    }
    sdt_weights *w = sdt_weights_open(cli_arg(argc, argv, "--ckpt"), &err);
    if (!w) return cli_fail(&err);
    t5_config cfg;
    t5_encoder m;
    if (!t5_config_detect(w, "", &cfg, &err)) return cli_fail(&err);
    if (md) cfg.rel_max_distance = atoi(md);
    if (!t5_encoder_load(&m, &cfg, w, &err)) return cli_fail(&err);
    const long B = atol(cli_arg(argc, argv, "--batch")), T = atol(cli_arg(argc, argv, "--seq"));
    const char *nr = cli_arg(argc, argv, "--nrows"), *no = cli_arg(argc, argv, "--noverrides");
    const long R = nr ? atol(nr) : 0, N = no ? atol(no) : 0, D = cfg.d_model;
    int32_t *tokens = cli_read_all(cli_arg(argc, argv, "--tokens"), (size_t)(B * T) * 4);
    int32_t *lengths =
        cli_arg(argc, argv, "--lengths") ? cli_read_all(cli_arg(argc, argv, "--lengths"), (size_t)B * 4) : NULL;
    float *rows = R ? cli_read_all(cli_arg(argc, argv, "--rows"), (size_t)(R * D) * 4) : NULL;
    t5_override *ov = N ? cli_read_all(cli_arg(argc, argv, "--overrides"), (size_t)N * sizeof(t5_override)) : NULL;
    sdt_backend *be = sdt_backend_cpu_create(0);
    sdt_tensor ttok = sdt_tensor_4d(tokens, SDT_I32, 2, B, T, 0, 0),
               trows = sdt_tensor_4d(rows, SDT_F32, 2, R, D, 0, 0);
    t5_inputs in = {&ttok, lengths, R ? &trows : NULL, ov, (int)N, SDT_F32};
    sdt_arena measure, arena;
    t5_acts acts;
    sdt_arena_init_measure(&measure, be);
    float *dout =
        cli_arg(argc, argv, "--dout") ? cli_read_all(cli_arg(argc, argv, "--dout"), (size_t)(B * T * D) * 4) : NULL;
    float *drows = calloc((size_t)(R ? R : 1) * D, sizeof(float));
    sdt_tensor tdout = sdt_tensor_4d(dout, SDT_F32, 3, B, T, D, 0),
               tdrows = sdt_tensor_4d(drows, SDT_F32, 2, R, D, 0, 0);
    if (!t5_encoder_forward(&m, be, &measure, &in, &acts, &err) ||
        (dout && !t5_encoder_backward(&m, be, &measure, &acts, &tdout, &tdrows, &err)))
        return cli_fail(&err);
    if (!sdt_arena_init(&arena, be, measure.peak)) return cli_fail(&arena.error);
    if (!t5_encoder_forward(&m, be, &arena, &in, &acts, &err)) return cli_fail(&err);
    cli_write_all(cli_arg(argc, argv, "--out"), acts.out.data, (size_t)(B * T * D) * 4);
    if (dout) {
        if (!t5_encoder_backward(&m, be, &arena, &acts, &tdout, &tdrows, &err)) return cli_fail(&err);
        cli_write_all(cli_arg(argc, argv, "--drows"), drows, (size_t)(R * D) * 4);
    }
    sdt_arena_release(&arena);
    be->destroy(be);
    sdt_weights_close(w);
    free(tokens), free(lengths), free(rows), free(ov), free(dout), free(drows);
    return 0;
}
