/* hn_step_cli - one whole hypernetwork training step in C, for hn_step_parity.py.
 *
 *   hn_step_cli CHECKPOINT INPUTS OUT_DIR --widths 32,64 [--activation relu] [--layer-norm]
 *               [--seed N] [--lr X] [--weight-decay X] [--strength S] [--threads N] [--checkpointing]
 *
 * CHECKPOINT: a UNet safetensors (model.diffusion_model.* keys, config detected from it).
 * INPUTS: f32 "noisy" [B,C,H,W] (x_t), "timesteps" [B], "context" [B,T,D], "target" [B,C,H,W], and for
 * a UNet with a label_emb (SDXL) "y" [B,ADM] (the vector conditioning; required there, refused otherwise).
 * Creates a hypernetwork for the widths (layer structure "1, 2, 1", no dropout, every weight
 * random N(0, 1/fan_in), biases and norms random too, from SEED: the init's tiny weights would
 * hide errors) and saves it as OUT_DIR/hn.safetensors; then, as the trainer does: the UNet forward
 * with the hypernetwork on its K/V hook (training mode, strength S), the MSE loss (mean), the
 * backward (the hook accumulates every module gradient), one AdamW step (torch's betas and eps,
 * lr X, weight decay X). Writes OUT_DIR/step.safetensors: "loss" [1], "grad.<param>" and
 * "after.<param>" for every hypernetwork parameter. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hn/hn_file.h"
#include "hn/hn_hook.h"
#include "safetensors.h"
#include "train/optimizer.h"
#include "train/rng.h"
#include "unet.h"

#define MAX_OUT 1024

static bool input(const sdt_safetensors *st, const char *name, int ndim, sdt_tensor *out)
{
    const sdt_st_entry *e = sdt_st_find(st, name);
    sdt_error error = {0};
    if (!e || e->dtype != SDT_ST_F32 || e->ndim != ndim || !sdt_st_entry_tensor(st, e, out, &error)) {
        fprintf(stderr, "%s: tensor \"%s\" must be F32 with %d dims\n", sdt_st_path(st), name, ndim);
        return false;
    }
    return true;
}

static bool fail(const sdt_error *e)
{
    fprintf(stderr, "%s\n", e->message);
    return false;
}

/* Every parameter random, larger than the init, so each one matters. */
static bool randomize(sdt_hn *hn, uint64_t seed, sdt_error *error)
{
    int64_t n = sdt_hn_param_numel(hn);
    float *v = malloc((size_t)n * sizeof(float)), *at = v;
    if (!v) return false;
    sdt_rng_normal_fill(seed, 77, 0, v, n);
    for (int i = 0; i < sdt_hn_param_count(hn); i++) {
        const sdt_hn_param *p = sdt_hn_param_at(hn, i);
        int64_t k = sdt_tensor_numel(&p->value);
        double scale = p->value.ndim == 2 ? 1.0 / sqrt((double)p->value.shape[1]) : 0.1;
        for (int64_t j = 0; j < k; j++) at[j] = (float)(p->is_norm && !p->is_bias ? 1.0 + 0.2 * at[j] : scale * at[j]);
        at += k;
    }
    bool ok = sdt_hn_upload(hn, v, error);
    free(v);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr,
                "usage: %s CHECKPOINT INPUTS OUT_DIR --widths W1,W2 [--activation A] [--layer-norm] [--seed N] "
                "[--lr X] [--weight-decay X] [--strength S] [--threads N] [--checkpointing]\n",
                argv[0]);
        return 2;
    }
    const char *widths = "32, 64", *activation = "relu";
    bool layer_norm = false, checkpointing = false;
    uint64_t seed = 1;
    double lr = 1e-3, wd = 0.01, strength = 1.0;
    int threads = 0;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--widths") && i + 1 < argc)
            widths = argv[++i];
        else if (!strcmp(argv[i], "--activation") && i + 1 < argc)
            activation = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--lr") && i + 1 < argc)
            lr = atof(argv[++i]);
        else if (!strcmp(argv[i], "--weight-decay") && i + 1 < argc)
            wd = atof(argv[++i]);
        else if (!strcmp(argv[i], "--strength") && i + 1 < argc)
            strength = atof(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layer-norm"))
            layer_norm = true;
        else if (!strcmp(argv[i], "--checkpointing"))
            checkpointing = true;
        else {
            fprintf(stderr, "unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    sdt_error error = {0};
    sdt_backend *be = sdt_backend_cpu_create(threads);
    sdt_weights *w = sdt_weights_open(argv[1], &error);
    sdt_unet_config cfg;
    if (!be || !w || !sdt_unet_config_detect(w, &cfg, &error)) return fail(&error), 1;
    sdt_unet *u = sdt_unet_load(&cfg, w, &error);
    sdt_safetensors *in = u ? sdt_st_open(argv[2], &error) : NULL;
    if (!in) return fail(&error), 1;
    sdt_tensor noisy, ts, ctx, target;
    if (!input(in, "noisy", 4, &noisy) || !input(in, "timesteps", 1, &ts) || !input(in, "context", 3, &ctx) ||
        !input(in, "target", 4, &target))
        return 1;
    /* SDXL's y: a UNet with a label_emb needs it, one without must not be given one (the check would
     * silently pass without the vector conditioning otherwise). */
    sdt_tensor y;
    const sdt_tensor *y_in = NULL;
    if (cfg.adm_in_channels > 0) {
        if (!input(in, "y", 2, &y)) return 1;
        if (y.shape[0] != noisy.shape[0] || y.shape[1] != cfg.adm_in_channels) {
            fprintf(stderr, "%s: \"y\" must be [%lld, %d] for this UNet's label_emb\n", argv[2],
                    (long long)noisy.shape[0], cfg.adm_in_channels);
            return 1;
        }
        y_in = &y;
    } else if (sdt_st_find(in, "y")) {
        fprintf(stderr, "%s: \"y\" given, but this UNet has no label_emb (not SDXL)\n", argv[2]);
        return 1;
    }

    /* the hypernetwork */
    sdt_hn_config hc = sdt_hn_config_default();
    snprintf(hc.name, sizeof hc.name, "parity");
    snprintf(hc.activation, sizeof hc.activation, "%s", activation);
    hc.layer_norm = layer_norm;
    if (!sdt_hn_parse_widths(widths, hc.widths, SDT_HN_MAX_WIDTHS, &hc.width_count, &error)) return fail(&error), 1;
    sdt_hn *hn = sdt_hn_create(&hc, be, seed, &error);
    char path[4096];
    snprintf(path, sizeof path, "%s/hn.safetensors", argv[3]);
    if (!hn || !randomize(hn, seed, &error) || !sdt_hn_save(hn, path, &error) || !sdt_hn_enable_grads(hn, &error))
        return fail(&error), 1;
    sdt_hn_binding *b = sdt_hn_binding_create(be, &error);
    int64_t B = noisy.shape[0],
            rows =
                B * (noisy.shape[2] * noisy.shape[3] > ctx.shape[1] ? noisy.shape[2] * noisy.shape[3] : ctx.shape[1]);
    if (!b || !sdt_hn_binding_add(b, hn, (float)strength, true, &error) || !sdt_hn_binding_reserve(b, rows, &error))
        return fail(&error), 1;
    sdt_hn_binding_set_step(b, seed, 0);

    /* the step: forward, loss, backward (measured first, as the trainer sizes its arena) */
    sdt_unet_options opt = sdt_unet_options_default();
    opt.checkpointing = checkpointing;
    opt.hook = sdt_hn_binding_hook(b);
    float *dpred_data =
        calloc((size_t)sdt_tensor_numel(&noisy), sizeof(float)); /* UNet output: noisy's shape (4 -> 4 channels) */
    float *dctx_data = calloc((size_t)sdt_tensor_numel(&ctx), sizeof(float));
    sdt_tensor dpred = sdt_tensor_make(dpred_data, SDT_F32, SDT_DEVICE_CPU, 4, target.shape);
    sdt_tensor dctx = sdt_tensor_make(dctx_data, SDT_F32, SDT_DEVICE_CPU, 3, ctx.shape);
    sdt_arena arena;
    sdt_arena_init_measure(&arena, be);
    sdt_tensor pred;
    bool ok = dpred_data && dctx_data &&
              sdt_unet_forward(u, be, &arena, &opt, &noisy, &ts, &ctx, y_in, &pred, &error) &&
              sdt_unet_backward(u, be, &arena, &dpred, &dctx, NULL, &error);
    ok = ok && sdt_arena_init(&arena, be, arena.peak);
    double loss = 0;
    ok = ok && sdt_unet_forward(u, be, &arena, &opt, &noisy, &ts, &ctx, y_in, &pred, &error);
    if (ok && (be->mse_loss_forward(be, &loss, &pred, &target, NULL) ||
               be->mse_loss_backward(be, &dpred, 1.0f, &pred, &target, NULL))) {
        sdt_fail(&error, SDT_ERR_DEVICE, "the loss failed: %s", be->error.message);
        ok = false;
    }
    ok = ok && sdt_unet_backward(u, be, &arena, &dpred, &dctx, NULL, &error);
    if (!ok) return fail(&error), 1;

    /* the gradients, then one AdamW step */
    int n = sdt_hn_param_count(hn);
    if (2 * n + 1 > MAX_OUT) return fprintf(stderr, "too many parameters\n"), 1;
    sdt_st_write_item items[MAX_OUT];
    char names[MAX_OUT][96];
    float *copies[MAX_OUT];
    sdt_tensor views[MAX_OUT];
    int k = 0;
    for (int i = 0; i < n; i++) {
        const sdt_hn_param *p = sdt_hn_param_at(hn, i);
        copies[k] = malloc(sdt_tensor_nbytes(&p->grad));
        memcpy(copies[k], p->grad.data, sdt_tensor_nbytes(&p->grad));
        views[k] = sdt_tensor_make(copies[k], SDT_F32, SDT_DEVICE_CPU, p->grad.ndim, p->grad.shape);
        snprintf(names[k], sizeof names[k], "grad.%s", p->name);
        items[k] = sdt_st_item_from_tensor(names[k], &views[k]);
        k++;
    }
    sdt_adamw_hparams hp = sdt_adamw_hparams_torch_default();
    hp.lr = (float)lr;
    hp.weight_decay = (float)wd;
    sdt_optimizer *adam = sdt_optimizer_create(be, "hypernetwork", &hp, &error);
    for (int i = 0; adam && i < n; i++) {
        sdt_hn_param *p = sdt_hn_param_at(hn, i);
        if (sdt_optimizer_add_param(adam, p->name, &p->value, &p->grad, true, &error) != SDT_CORE_OK)
            return fail(&error), 1;
    }
    if (!adam) return fail(&error), 1;
    sdt_optimizer_note_backward(adam, 1.0f);
    if (sdt_optimizer_step(adam, &error) != SDT_CORE_OK) return fail(&error), 1;
    for (int i = 0; i < n; i++) {
        sdt_hn_param *p = sdt_hn_param_at(hn, i);
        snprintf(names[k], sizeof names[k], "after.%s", p->name);
        items[k] = sdt_st_item_from_tensor(names[k], &p->value);
        k++;
    }
    float loss32 = (float)loss;
    int64_t one = 1;
    sdt_tensor tl = sdt_tensor_make(&loss32, SDT_F32, SDT_DEVICE_CPU, 1, &one);
    items[k++] = sdt_st_item_from_tensor("loss", &tl);
    snprintf(path, sizeof path, "%s/step.safetensors", argv[3]);
    if (!sdt_st_write(path, items, (size_t)k, NULL, 0, &error)) return fail(&error), 1;
    printf("loss %.7g, %d hypernetwork parameters (%lld values)\n", loss, n, (long long)sdt_hn_param_numel(hn));
    for (int i = 0; i < n; i++) free(copies[i]);
    sdt_optimizer_destroy(adam);
    sdt_hn_binding_free(b);
    sdt_hn_free(hn);
    sdt_arena_release(&arena);
    free(dpred_data);
    free(dctx_data);
    sdt_st_close(in);
    sdt_unet_free(u);
    sdt_weights_close(w);
    be->destroy(be);
    return 0;
}
