/* scaler_stream.c - replays a gradient stream through the C loss scaler and prints
 * the scale / tracker / skip sequence, for scaler_vs_torch.py to compare with
 * torch.amp.GradScaler. Not a ctest test: it needs a stream file.
 *
 * Stream (whitespace-separated text; inf, -inf and nan are accepted numbers):
 *   sdt-scaler-stream 1
 *   scaler <init_scale> <growth_factor> <backoff_factor> <growth_interval>
 *   adamw <lr> <beta1> <beta2> <eps> <weight_decay>
 *   optimizers <n> <size>
 *   param <k> <size values>                      (n lines: initial parameters)
 *   iters <m>
 *   g <k> <unscale_first 0|1> <size values>      (n lines per iteration, k = 0..n-1)
 * Each iteration: zero_grad; the loss sum_k (p_k * c_k).sum() is scaled, so
 * backward gives grad_k = f32(scale * c_k); unscale the flagged optimizers; step
 * every optimizer; update once. Output, one line per iteration and then the params:
 *   iter <i> scale <%.9g> tracker <T> stepped <0|1 per optimizer>
 *   final <k> <size values %.9g>
 * Usage: scaler_stream STREAM_FILE    (exit 0; 1 on a bad stream or a scaler error)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/optimizer.h"
#include "train/scaler.h"

#define MAX_OPTIMIZERS 8

typedef struct stream_opt {
    sdt_optimizer *opt;
    float *param, *grad, *raw;
    sdt_tensor pt, gt;
} stream_opt;

static int fail(const char *what)
{
    fprintf(stderr, "scaler_stream: %s\n", what);
    return 1;
}

static bool read_word(FILE *f, const char *want)
{
    char word[64];
    return fscanf(f, "%63s", word) == 1 && strcmp(word, want) == 0;
}

/* strtod reads inf, -inf and nan, which fscanf("%f") may not on every libc. */
static bool read_float(FILE *f, float *out)
{
    char word[64], *end;
    if (fscanf(f, "%63s", word) != 1) return false;
    *out = strtof(word, &end);
    return *end == '\0';
}

static bool read_floats(FILE *f, float *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!read_float(f, &out[i])) return false;
    return true;
}

static int run(FILE *f)
{
    sdt_scaler_config cfg = sdt_scaler_config_default();
    sdt_adamw_hparams hp;
    long long interval, iters;
    int version, n;
    int64_t size;
    if (!read_word(f, "sdt-scaler-stream") || fscanf(f, "%d", &version) != 1 || version != 1)
        return fail("not an sdt-scaler-stream version 1 file");
    if (!read_word(f, "scaler") ||
        fscanf(f, "%f %lf %lf %lld", &cfg.init_scale, &cfg.growth_factor, &cfg.backoff_factor, &interval) != 4)
        return fail("bad 'scaler' line");
    cfg.growth_interval = interval;
    if (!read_word(f, "adamw") ||
        fscanf(f, "%f %f %f %f %f", &hp.lr, &hp.beta1, &hp.beta2, &hp.eps, &hp.weight_decay) != 5)
        return fail("bad 'adamw' line");
    long long size_ll;
    if (!read_word(f, "optimizers") || fscanf(f, "%d %lld", &n, &size_ll) != 2 || n < 1 || n > MAX_OPTIMIZERS ||
        size_ll < 1)
        return fail("bad 'optimizers' line (1..8 optimizers, size >= 1)");
    size = size_ll;
    cfg.shared = n > 1; /* several optimizers, one backward pass: torch's multi-optimizer use */

    sdt_backend *be = sdt_backend_cpu_create(1);
    sdt_error error = {0};
    sdt_scaler *sc = be ? sdt_scaler_create(be, &cfg, NULL, NULL, &error) : NULL;
    if (!sc) return fail(be ? error.message : "no CPU backend");
    stream_opt so[MAX_OPTIMIZERS];
    memset(so, 0, sizeof so);
    int status = 0;
    for (int k = 0; k < n && !status; k++) {
        char name[16];
        int index;
        snprintf(name, sizeof name, "opt%d", k);
        so[k].param = calloc((size_t)size, sizeof(float));
        so[k].grad = calloc((size_t)size, sizeof(float));
        so[k].raw = calloc((size_t)size, sizeof(float));
        so[k].pt = sdt_tensor_make(so[k].param, SDT_F32, SDT_DEVICE_CPU, 1, &size);
        so[k].gt = sdt_tensor_make(so[k].grad, SDT_F32, SDT_DEVICE_CPU, 1, &size);
        so[k].opt = sdt_optimizer_create(be, name, &hp, &error);
        if (!so[k].param || !so[k].grad || !so[k].raw || !so[k].opt)
            status = fail(so[k].opt ? "out of memory" : error.message);
        else if (!read_word(f, "param") || fscanf(f, "%d", &index) != 1 || index != k ||
                 !read_floats(f, so[k].param, size))
            status = fail("bad 'param' line");
        else if (sdt_optimizer_add_param(so[k].opt, "p", &so[k].pt, &so[k].gt, true, &error) != SDT_CORE_OK ||
                 sdt_scaler_attach(sc, so[k].opt, &error) != SDT_CORE_OK)
            status = fail(error.message);
    }
    if (!status && (!read_word(f, "iters") || fscanf(f, "%lld", &iters) != 1 || iters < 0))
        status = fail("bad 'iters' line");
    for (long long it = 0; !status && it < iters; it++) {
        int unscale_first[MAX_OPTIMIZERS];
        for (int k = 0; k < n && !status; k++) {
            int index;
            if (!read_word(f, "g") || fscanf(f, "%d %d", &index, &unscale_first[k]) != 2 || index != k ||
                !read_floats(f, so[k].raw, size))
                status = fail("bad 'g' line");
        }
        if (status) break;
        double scaled;
        sdt_core_status st = sdt_scaler_scale_loss(sc, 1.0, 1, &scaled, &error);
        float s = sdt_scaler_get_scale(sc);
        for (int k = 0; k < n && st == SDT_CORE_OK; k++) {
            st = sdt_optimizer_zero_grad(so[k].opt, &error);
            for (int64_t j = 0; j < size; j++) so[k].grad[j] = s * so[k].raw[j]; /* one fp32 multiply, as autograd */
            sdt_optimizer_note_backward(so[k].opt, s);
        }
        for (int k = 0; k < n && st == SDT_CORE_OK; k++)
            if (unscale_first[k]) st = sdt_scaler_unscale(sc, so[k].opt, &error);
        bool stepped[MAX_OPTIMIZERS] = {false};
        for (int k = 0; k < n && st == SDT_CORE_OK; k++) st = sdt_scaler_step(sc, so[k].opt, &stepped[k], &error);
        if (st == SDT_CORE_OK) st = sdt_scaler_update(sc, NULL, &error);
        if (st != SDT_CORE_OK) {
            fprintf(stderr, "scaler_stream: iteration %lld: %s: %s\n", it, sdt_core_status_name(st), error.message);
            status = 1;
            break;
        }
        printf("iter %lld scale %.9g tracker %lld stepped", it, (double)sdt_scaler_get_scale(sc),
               (long long)sdt_scaler_growth_tracker(sc));
        for (int k = 0; k < n; k++) printf(" %d", stepped[k] ? 1 : 0);
        printf("\n");
    }
    for (int k = 0; k < n && !status; k++) {
        printf("final %d", k);
        for (int64_t j = 0; j < size; j++) printf(" %.9g", (double)so[k].param[j]);
        printf("\n");
    }
    sdt_scaler_destroy(sc);
    for (int k = 0; k < n; k++) {
        sdt_optimizer_destroy(so[k].opt);
        free(so[k].param);
        free(so[k].grad);
        free(so[k].raw);
    }
    be->destroy(be);
    return status;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s STREAM_FILE\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    int rc = run(f);
    fclose(f);
    return rc;
}
