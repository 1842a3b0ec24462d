/* flux_cli.c - drives the C Flux.1 transformer from files, for flux_parity.py. Raw little-endian float32 files,
 * row-major. CPU backend.
 *
 *   sdt-flux-io gen --out P [--seed N] [--schnell]
 *       a tiny Flux (flux_config_tiny), every parameter perturbed; --schnell: without the guidance embedder
 *   sdt-flux-io run --ckpt P --batch B --height h --width w --ctx-tokens T --latent F --timesteps F
 *                   [--guidance F] --context F --pooled F --out F [--dout F --dcontext F --dpooled F]
 *       (timesteps and guidance [B] as sigma and scale; the latent unpacked [B, C, h, w])
 *       (out [B, C, h, w]; with dout [B, C, h, w] in: d(context) [B, T, context_dim], d(pooled) [B, pooled_dim])
 *   sdt-flux-io measure --config dev|schnell --height h --width w --ctx-tokens T [--batch B]
 *       prints forward's activation peak and forward + backward's (a measuring arena, no weights)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flux.h"
#include "flux_gen.h"
#include "weights.h"

static const char *arg(int argc, char **argv, const char *key)
{
    for (int i = 2; i + 1 < argc; i++)
        if (!strcmp(argv[i], key)) return argv[i + 1];
    return NULL;
}

static bool flag(int argc, char **argv, const char *key)
{
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], key)) return true;
    return false;
}

static void *read_all(const char *path, size_t bytes)
{
    FILE *f = path ? fopen(path, "rb") : NULL;
    void *buf = malloc(bytes ? bytes : 1);
    if (!f || !buf || fread(buf, 1, bytes, f) != bytes) {
        fprintf(stderr, "sdt-flux-io: cannot read %zu bytes from %s\n", bytes, path ? path : "(no file given)");
        exit(1);
    }
    fclose(f);
    return buf;
}

static void write_all(const char *path, const void *data, size_t bytes)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, bytes, f) != bytes || fclose(f) != 0) {
        fprintf(stderr, "sdt-flux-io: cannot write %s\n", path);
        exit(1);
    }
}

static int fail(const sdt_error *e)
{
    fprintf(stderr, "sdt-flux-io: %s\n", e->message);
    return 1;
}

static long num(int argc, char **argv, const char *key)
{
    const char *v = arg(argc, argv, key);
    if (!v) {
        fprintf(stderr, "sdt-flux-io: %s is required\n", key);
        exit(2);
    }
    return atol(v);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: sdt-flux-io gen|run ... (see flux_cli.c)\n");
        return 2;
    }
    sdt_error err = {0};
    if (!strcmp(argv[1], "gen")) {
        flux_config cfg = flux_config_tiny();
        cfg.guidance = !flag(argc, argv, "--schnell");
        const char *seed = arg(argc, argv, "--seed");
        return flux_generate(arg(argc, argv, "--out"), &cfg, SDT_F32, seed ? strtoull(seed, NULL, 10) : 1, true, &err)
                   ? 0
                   : fail(&err);
    }
    if (!strcmp(argv[1], "measure")) {
        const char *name = arg(argc, argv, "--config");
        static flux_model m;
        m.cfg = name && !strcmp(name, "schnell") ? flux_config_schnell() : flux_config_dev();
        const long B = arg(argc, argv, "--batch") ? num(argc, argv, "--batch") : 1, h = num(argc, argv, "--height"),
                   wd = num(argc, argv, "--width"), T = num(argc, argv, "--ctx-tokens");
        const flux_config *c = &m.cfg;
        float ts[64] = {0};
        sdt_tensor tl = sdt_tensor_4d(NULL, SDT_F32, 4, B, c->in_channels, h, wd),
                   tc = sdt_tensor_4d(NULL, SDT_F32, 3, B, T, c->context_dim, 0),
                   tp = sdt_tensor_4d(NULL, SDT_F32, 2, B, c->pooled_dim, 0, 0),
                   td = sdt_tensor_4d(NULL, SDT_F32, 4, B, c->in_channels, h, wd);
        flux_inputs in = {&tl, ts, ts, &tc, &tp};
        static flux_acts acts;
        sdt_backend *be = sdt_backend_cpu_create(1);
        sdt_arena measure;
        sdt_arena_init_measure(&measure, be);
        if (B > 64 || !flux_forward(&m, be, &measure, &in, &acts, &err)) return fail(&err);
        size_t kept = measure.peak;
        if (!flux_backward(&m, be, &measure, &acts, &td, &tc, &tp, &err)) return fail(&err);
        printf("%s, batch %ld, latent %ldx%ld, %ld text tokens: forward peak %.2f GiB, with backward %.2f GiB "
               "(f32 activations)\n",
               name ? name : "dev", B, h, wd, T, kept / 1073741824.0, measure.peak / 1073741824.0);
        be->destroy(be);
        return 0;
    }
    if (strcmp(argv[1], "run")) {
        fprintf(stderr, "sdt-flux-io: unknown command %s\n", argv[1]);
        return 2;
    }
    sdt_weights *w = sdt_weights_open(arg(argc, argv, "--ckpt"), &err);
    if (!w) return fail(&err);
    flux_config cfg;
    static flux_model m;
    if (!flux_config_detect(w, "", &cfg, &err) || !flux_load(&m, &cfg, w, &err)) return fail(&err);
    const long B = num(argc, argv, "--batch"), h = num(argc, argv, "--height"), wd = num(argc, argv, "--width"),
               T = num(argc, argv, "--ctx-tokens"), C = cfg.in_channels, CD = cfg.context_dim, PD = cfg.pooled_dim;
    const size_t n_lat = (size_t)(B * C * h * wd);
    float *latent = read_all(arg(argc, argv, "--latent"), n_lat * 4);
    float *ts = read_all(arg(argc, argv, "--timesteps"), (size_t)B * 4);
    float *gs = arg(argc, argv, "--guidance") ? read_all(arg(argc, argv, "--guidance"), (size_t)B * 4) : NULL;
    float *ctx = read_all(arg(argc, argv, "--context"), (size_t)(B * T * CD) * 4);
    float *pooled = read_all(arg(argc, argv, "--pooled"), (size_t)(B * PD) * 4);
    float *dout = arg(argc, argv, "--dout") ? read_all(arg(argc, argv, "--dout"), n_lat * 4) : NULL;
    float *dctx = calloc((size_t)(B * T * CD), sizeof(float)), *dpooled = calloc((size_t)(B * PD), sizeof(float));
    sdt_backend *be = sdt_backend_cpu_create(0);
    sdt_tensor tl = sdt_tensor_4d(latent, SDT_F32, 4, B, C, h, wd), tc = sdt_tensor_4d(ctx, SDT_F32, 3, B, T, CD, 0),
               tp = sdt_tensor_4d(pooled, SDT_F32, 2, B, PD, 0, 0), td = sdt_tensor_4d(dout, SDT_F32, 4, B, C, h, wd),
               tdc = sdt_tensor_4d(dctx, SDT_F32, 3, B, T, CD, 0),
               tdp = sdt_tensor_4d(dpooled, SDT_F32, 2, B, PD, 0, 0);
    flux_inputs in = {&tl, ts, gs, &tc, &tp};
    static flux_acts acts;
    sdt_arena measure, arena;
    sdt_arena_init_measure(&measure, be);
    if (!flux_forward(&m, be, &measure, &in, &acts, &err) ||
        (dout && !flux_backward(&m, be, &measure, &acts, &td, &tdc, &tdp, &err)))
        return fail(&err);
    if (!sdt_arena_init(&arena, be, measure.peak)) return fail(&arena.error);
    if (!flux_forward(&m, be, &arena, &in, &acts, &err)) return fail(&err);
    write_all(arg(argc, argv, "--out"), acts.out.data, n_lat * 4);
    if (dout) {
        if (!flux_backward(&m, be, &arena, &acts, &td, &tdc, &tdp, &err)) return fail(&err);
        write_all(arg(argc, argv, "--dcontext"), dctx, (size_t)(B * T * CD) * 4);
        write_all(arg(argc, argv, "--dpooled"), dpooled, (size_t)(B * PD) * 4);
    }
    sdt_arena_release(&arena);
    be->destroy(be);
    sdt_weights_close(w);
    free(latent), free(ts), free(gs), free(ctx), free(pooled), free(dout), free(dctx), free(dpooled);
    return 0;
}
