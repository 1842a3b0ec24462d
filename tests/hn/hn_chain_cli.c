/* hn_chain_cli - a chain of hypernetworks through the applier (ABI 1.4) for hn_chain_parity.py.
 *
 *   hn_chain_cli OUT_DIR SEED
 *
 * Writes three hypernetworks with random weights from SEED (width 8; linear, relu with layer
 * norm, gelu with activate output) as OUT_DIR/hn<i>.safetensors, applies them in that order at
 * strengths 0.8, -0.5 and 1.7 to random rows of width 8 for K and for V, and writes the input
 * and both outputs as OUT_DIR/in.f32, k.f32, v.f32 (raw little-endian f32, ROWS x 8). */
#define sdt_hn_config sdt_hn_abi_train_config
#include "api/hn_applier.h"
#undef sdt_hn_config

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hn/hn_file.h"
#include "train/rng.h"

#define ROWS 6
#define WIDTH 8

static const char *const activations[3] = {"linear", "relu", "gelu"};
static const double strengths[3] = {0.8, -0.5, 1.7};

static bool write_f32(const char *dir, const char *name, const float *v, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(v, sizeof(float), n, f) == n;
    if (f && fclose(f) != 0) ok = false;
    if (!ok) fprintf(stderr, "hn_chain_cli: cannot write %s\n", path);
    return ok;
}

static bool make_member(const char *dir, int i, uint64_t seed, sdt_backend *be, char *path, size_t path_size)
{
    sdt_hn_config c = sdt_hn_config_default();
    snprintf(c.name, sizeof c.name, "hn%d", i);
    c.width_count = 1;
    c.widths[0] = WIDTH;
    snprintf(c.activation, sizeof c.activation, "%s", activations[i]);
    c.layer_norm = i == 1;
    c.activate_output = i == 2;
    sdt_error err;
    sdt_error_clear(&err);
    sdt_hn *hn = sdt_hn_create(&c, be, seed, &err);
    if (!hn) {
        fprintf(stderr, "hn_chain_cli: %s\n", err.message);
        return false;
    }
    int64_t n = sdt_hn_param_numel(hn);
    float *w = malloc(sizeof(float) * (size_t)n);
    sdt_rng_normal_fill(seed, 100 + (uint64_t)i, 0, w, n);
    for (int64_t j = 0; j < n; j++) w[j] *= 0.4f;
    snprintf(path, path_size, "%s/hn%d.safetensors", dir, i);
    bool ok = sdt_hn_upload(hn, w, &err) && sdt_hn_save(hn, path, &err);
    if (!ok) fprintf(stderr, "hn_chain_cli: %s\n", err.message);
    free(w);
    sdt_hn_free(hn);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s OUT_DIR SEED\n", argv[0]);
        return 2;
    }
    uint64_t seed = strtoull(argv[2], NULL, 10);
    sdt_backend *be = sdt_backend_cpu_create(1);
    sdt_hn_applier *a = NULL;
    char err[1024] = "";
    if (!be || sdt_hn_applier_create(&a, err, sizeof err) != SDT_STATUS_OK) {
        fprintf(stderr, "hn_chain_cli: %s\n", err);
        return 1;
    }
    bool ok = true;
    for (int i = 0; i < 3 && ok; i++) {
        char path[512];
        ok = make_member(argv[1], i, seed + (uint64_t)i, be, path, sizeof path) &&
             sdt_hn_applier_add(a, path, strengths[i]) == SDT_STATUS_OK;
    }
    float in[ROWS * WIDTH], k[ROWS * WIDTH], v[ROWS * WIDTH];
    sdt_rng_normal_fill(seed, 7, 0, in, ROWS * WIDTH);
    ok = ok && sdt_hn_applier_apply_kv(a, WIDTH, SDT_KV_K, in, k, ROWS) == SDT_STATUS_OK &&
         sdt_hn_applier_apply_kv(a, WIDTH, SDT_KV_V, in, v, ROWS) == SDT_STATUS_OK;
    if (!ok) {
        sdt_hn_applier_get_last_error(a, err, sizeof err, NULL);
        fprintf(stderr, "hn_chain_cli: %s\n", err);
    }
    ok = ok && write_f32(argv[1], "in.f32", in, ROWS * WIDTH) && write_f32(argv[1], "k.f32", k, ROWS * WIDTH) &&
         write_f32(argv[1], "v.f32", v, ROWS * WIDTH);
    sdt_hn_applier_destroy(a);
    be->destroy(be);
    return ok ? 0 : 1;
}
