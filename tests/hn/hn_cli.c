/* hn_cli - runs one hypernetwork module for hn_torch_parity.py.
 *
 *   hn_cli OUT_DIR ACTIVATION LAYER_NORM DROPOUT ACTIVATE_OUTPUT KIND SEED
 *
 * Creates a hypernetwork (widths 8 and 12, layer structure "1, 2, 1.5, 1", dropout
 * structure "0, 0.3, 0.25, 0.2" when DROPOUT is 1, random weights from SEED) and
 * saves it as OUT_DIR/hn.safetensors and OUT_DIR/hn.pt; runs the width-8 module KIND (k or v) forward
 * (training when DROPOUT is 1) and backward on random data, and saves inputs, outputs,
 * the dropout masks and every gradient as OUT_DIR/io.safetensors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hn/hn_file.h"
#include "safetensors.h"
#include "train/rng.h"

#define ROWS 10 /* [2, 5, 8] */
#define WIDTH 8
#define MAX_ITEMS 128

static void fill(float *v, int64_t n, uint64_t seed, uint64_t stream, double scale)
{
    sdt_rng_normal_fill(seed, stream, 0, v, n);
    for (int64_t i = 0; i < n; i++) v[i] = (float)(v[i] * scale);
}

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: %s OUT_DIR ACTIVATION LAYER_NORM DROPOUT ACTIVATE_OUTPUT k|v SEED\n", argv[0]);
        return 2;
    }
    const char *out_dir = argv[1];
    bool dropout = atoi(argv[4]) != 0;
    sdt_unet_kv kind = argv[6][0] == 'v' ? SDT_UNET_V : SDT_UNET_K;
    uint64_t seed = strtoull(argv[7], NULL, 10);
    sdt_error err;
    sdt_error_clear(&err);
    char path[512];
    sdt_hn_config c = sdt_hn_config_default();
    snprintf(c.name, sizeof(c.name), "parity");
    c.width_count = 2, c.widths[0] = WIDTH, c.widths[1] = 12;
    c.entry_count = 4;
    c.layer_structure[0] = 1, c.layer_structure[1] = 2, c.layer_structure[2] = 1.5, c.layer_structure[3] = 1;
    snprintf(c.activation, sizeof(c.activation), "%s", argv[2]);
    c.layer_norm = atoi(argv[3]) != 0;
    c.use_dropout = dropout;
    c.dropout_structure[1] = 0.3, c.dropout_structure[2] = 0.25, c.dropout_structure[3] = 0.2;
    c.activate_output = atoi(argv[5]) != 0;
    sdt_backend *be = sdt_backend_cpu_create(1);
    sdt_hn *hn = be ? sdt_hn_create(&c, be, seed, &err) : NULL;
    if (!hn) {
        fprintf(stderr, "hn_cli: %s\n", be ? err.message : "no CPU backend");
        return 1;
    }
    /* random weights of a useful size (A1111's Normal init would make f(x) ~ 0) */
    int64_t numel = sdt_hn_param_numel(hn);
    float *weights = malloc((size_t)numel * sizeof(float));
    fill(weights, numel, seed, 101, 0.5);
    bool ok = sdt_hn_upload(hn, weights, &err) && sdt_hn_enable_grads(hn, &err);
    snprintf(path, sizeof(path), "%s/hn.safetensors", out_dir);
    ok = ok && sdt_hn_save_safetensors(hn, path, &err);
    snprintf(path, sizeof(path), "%s/hn.pt", out_dir);
    ok = ok && sdt_hn_save_pt(hn, path, &err);

    float x[ROWS * WIDTH], y[ROWS * WIDTH], dy[ROWS * WIDTH], dx[ROWS * WIDTH] = {0};
    fill(x, ROWS * WIDTH, seed, 102, 1.0);
    fill(dy, ROWS * WIDTH, seed, 103, 1.0);
    int64_t shape[3] = {2, 5, WIDTH};
    sdt_tensor tx = sdt_tensor_make(x, SDT_F32, SDT_DEVICE_CPU, 3, shape), ty = tx, tdy = tx, tdx = tx;
    ty.data = y, tdy.data = dy, tdx.data = dx;
    sdt_hn_run run = {.training = dropout, .dropout_seed = seed * 7 + 1};
    const float strength = 0.8f;
    void *work = malloc(sdt_hn_module_workspace_bytes(&c, WIDTH, ROWS));
    ok = ok && sdt_hn_module_forward(hn, WIDTH, kind, &run, strength, &tx, &ty, work, &err) &&
         sdt_hn_module_backward(hn, WIDTH, kind, &run, strength, &tx, &tdy, &tdx, true, work, &err);

    sdt_st_write_item items[MAX_ITEMS];
    char names[MAX_ITEMS][96];
    int64_t shapes[MAX_ITEMS][2];
    float *masks[SDT_HN_MAX_ENTRIES] = {0};
    int n = 0;
    items[n++] = (sdt_st_write_item){"x", SDT_ST_F32, 3, shape, x};
    items[n++] = (sdt_st_write_item){"out", SDT_ST_F32, 3, shape, y};
    items[n++] = (sdt_st_write_item){"d_out", SDT_ST_F32, 3, shape, dy};
    items[n++] = (sdt_st_write_item){"d_in", SDT_ST_F32, 3, shape, dx};
    sdt_hn_layer_plan plan[SDT_HN_MAX_ENTRIES];
    int layers = sdt_hn_config_plan(&c, WIDTH, plan);
    for (int i = 0; ok && i < layers; i++) {
        if (plan[i].dropout_position < 0) continue;
        int64_t m = (int64_t)ROWS * plan[i].out_size;
        masks[i] = malloc((size_t)m * sizeof(float));
        float *ones = malloc((size_t)m * sizeof(float)), *tmp = malloc((size_t)m * sizeof(float));
        for (int64_t e = 0; e < m; e++) ones[e] = 1.0f;
        shapes[n][0] = ROWS, shapes[n][1] = plan[i].out_size;
        sdt_tensor t1 = sdt_tensor_make(ones, SDT_F32, SDT_DEVICE_CPU, 2, shapes[n]), tm = t1, tt = t1;
        tm.data = masks[i], tt.data = tmp;
        /* eval (training off) keeps every value: the mask is all ones */
        ok = be->dropout_forward(be, &tt, &tm, &t1, run.training ? (float)plan[i].dropout_p : 0.0f,
                                 sdt_hn_dropout_seed(&run, i)) == 0;
        free(ones), free(tmp);
        snprintf(names[n], sizeof(names[n]), "mask.%d", plan[i].dropout_position);
        items[n] = (sdt_st_write_item){names[n], SDT_ST_F32, 2, shapes[n], masks[i]};
        n++;
    }
    for (int i = 0; ok && i < sdt_hn_param_count(hn) && n < MAX_ITEMS; i++) {
        const sdt_hn_param *p = sdt_hn_param_at(hn, i);
        if (p->width != WIDTH || p->kind != kind) continue;
        snprintf(names[n], sizeof(names[n]), "grad.%s", p->name);
        items[n] = (sdt_st_write_item){names[n], SDT_ST_F32, p->grad.ndim, p->grad.shape, p->grad.data};
        n++;
    }
    char strength_text[32];
    snprintf(strength_text, sizeof(strength_text), "%.9g", (double)strength);
    sdt_st_kv meta[] = {{"width", "8"}, {"kind", kind == SDT_UNET_V ? "1" : "0"}, {"strength", strength_text}};
    snprintf(path, sizeof(path), "%s/io.safetensors", out_dir);
    ok = ok && sdt_st_write(path, items, (size_t)n, meta, 3, &err);
    if (!ok) fprintf(stderr, "hn_cli: %s\n", err.message[0] ? err.message : be->error.message);
    for (int i = 0; i < SDT_HN_MAX_ENTRIES; i++) free(masks[i]);
    free(weights), free(work);
    sdt_hn_free(hn);
    be->destroy(be);
    return ok ? 0 : 1;
}
