/* test_vae.c - AutoencoderKL encode/decode against a float64 reference written here.
 *
 * The reference follows LDM's code literally (including the asymmetric
 * (0, 1, 0, 1) pad + 3x3 stride-2 downsample with the checkpoint's own 3x3
 * kernel), so it also checks the model's 4x4-kernel rewrite of that step.
 */
#include <math.h>

#include "model_test_util.h"
#include "vae.h"
#include "vae_test_run.h"

/* ---------------------------------------------------------------- float64 reference */

typedef struct img {
    int B, C, H, W;
    double *d;
} img;

static img img_new(int B, int C, int H, int W)
{
    img x = {B, C, H, W, mt_alloc((size_t)B * C * H * W * sizeof(double))};
    return x;
}

#define AT(x, b, c, h, w) (x).d[(((size_t)(b) * (x).C + (c)) * (x).H + (h)) * (x).W + (w)]

/* Convolution with explicit (top, bottom, left, right) zero padding, as F.pad + conv2d. */
static img ref_conv(const img *x, const sdt_tensor *wt, const sdt_tensor *bt, int stride, int pt, int pb, int pl,
                    int pr)
{
    double *w = mt_to_double(wt), *b = mt_to_double(bt);
    int OC = (int)wt->shape[0], K = wt->ndim == 4 ? (int)wt->shape[2] : 1;
    int OH = (x->H + pt + pb - K) / stride + 1, OW = (x->W + pl + pr - K) / stride + 1;
    img y = img_new(x->B, OC, OH, OW);
    for (int n = 0; n < x->B; n++)
        for (int o = 0; o < OC; o++)
            for (int i = 0; i < OH; i++)
                for (int j = 0; j < OW; j++) {
                    double s = b[o];
                    for (int c = 0; c < x->C; c++)
                        for (int kh = 0; kh < K; kh++)
                            for (int kw = 0; kw < K; kw++) {
                                int hi = i * stride + kh - pt, wi = j * stride + kw - pl;
                                if (hi < 0 || hi >= x->H || wi < 0 || wi >= x->W) continue;
                                s += w[(((size_t)o * x->C + c) * K + kh) * K + kw] * AT(*x, n, c, hi, wi);
                            }
                    AT(y, n, o, i, j) = s;
                }
    free(w), free(b);
    return y;
}

static img conv_same(const img *x, const sdt_tensor *w, const sdt_tensor *b)
{
    int p = w->ndim == 4 ? (int)w->shape[2] / 2 : 0;
    return ref_conv(x, w, b, 1, p, p, p, p);
}

static img ref_groupnorm_silu(const img *x, const sdt_tensor *gt, const sdt_tensor *bt, int groups, double eps,
                              bool silu)
{
    double *g = mt_to_double(gt), *bb = mt_to_double(bt);
    img y = img_new(x->B, x->C, x->H, x->W);
    int cg = x->C / groups;
    size_t hw = (size_t)x->H * x->W;
    for (int n = 0; n < x->B; n++)
        for (int gi = 0; gi < groups; gi++) {
            double mean = 0, var = 0, cnt = (double)cg * hw;
            for (int c = gi * cg; c < (gi + 1) * cg; c++)
                for (size_t i = 0; i < hw; i++) mean += x->d[((size_t)n * x->C + c) * hw + i];
            mean /= cnt;
            for (int c = gi * cg; c < (gi + 1) * cg; c++)
                for (size_t i = 0; i < hw; i++) {
                    double d = x->d[((size_t)n * x->C + c) * hw + i] - mean;
                    var += d * d;
                }
            double rstd = 1.0 / sqrt(var / cnt + eps);
            for (int c = gi * cg; c < (gi + 1) * cg; c++)
                for (size_t i = 0; i < hw; i++) {
                    size_t k = ((size_t)n * x->C + c) * hw + i;
                    double v = (x->d[k] - mean) * rstd * g[c] + bb[c];
                    y.d[k] = silu ? v / (1.0 + exp(-v)) : v;
                }
        }
    free(g), free(bb);
    return y;
}

static void add_into(img *y, const img *x)
{
    for (size_t i = 0; i < (size_t)y->B * y->C * y->H * y->W; i++) y->d[i] += x->d[i];
}

static img ref_resblock(const img *x, const vae_resblock *r, const vae_config *c)
{
    img h1 = ref_groupnorm_silu(x, &r->n1_w, &r->n1_b, c->groups, c->eps, true);
    img h2 = conv_same(&h1, &r->c1_w, &r->c1_b);
    img h3 = ref_groupnorm_silu(&h2, &r->n2_w, &r->n2_b, c->groups, c->eps, true);
    img y = conv_same(&h3, &r->c2_w, &r->c2_b);
    if (r->cin != r->cout) {
        img s = conv_same(x, &r->sc_w, &r->sc_b);
        add_into(&y, &s);
        free(s.d);
    } else {
        add_into(&y, x);
    }
    free(h1.d), free(h2.d), free(h3.d);
    return y;
}

/* LDM AttnBlock: q, k, v 1x1 convs; w = softmax(q^T k / sqrt(C)); h = v w^T; proj_out; residual. */
static img ref_attn(const img *x, const vae_attn *a, const vae_config *c)
{
    img hn = ref_groupnorm_silu(x, &a->n_w, &a->n_b, c->groups, c->eps, false);
    img q = conv_same(&hn, &a->q_w, &a->q_b), k = conv_same(&hn, &a->k_w, &a->k_b),
        v = conv_same(&hn, &a->v_w, &a->v_b);
    int C = x->C, L = x->H * x->W;
    img o = img_new(x->B, C, x->H, x->W);
    double *p = mt_alloc((size_t)L * sizeof(double));
    for (int n = 0; n < x->B; n++)
        for (int i = 0; i < L; i++) {
            double mx = -1e300, sum = 0;
            for (int j = 0; j < L; j++) {
                double s = 0;
                for (int ch = 0; ch < C; ch++)
                    s += q.d[((size_t)n * C + ch) * L + i] * k.d[((size_t)n * C + ch) * L + j];
                p[j] = s / sqrt((double)C);
                mx = fmax(mx, p[j]);
            }
            for (int j = 0; j < L; j++) sum += (p[j] = exp(p[j] - mx));
            for (int ch = 0; ch < C; ch++) {
                double s = 0;
                for (int j = 0; j < L; j++) s += v.d[((size_t)n * C + ch) * L + j] * p[j] / sum;
                o.d[((size_t)n * C + ch) * L + i] = s;
            }
        }
    img y = conv_same(&o, &a->o_w, &a->o_b);
    add_into(&y, x);
    free(p), free(hn.d), free(q.d), free(k.d), free(v.d), free(o.d);
    return y;
}

static void step(img *x, img y)
{
    free(x->d);
    *x = y;
}

static img ref_mid(img x, const vae_mid *m, const vae_config *c)
{
    step(&x, ref_resblock(&x, &m->b1, c));
    step(&x, ref_attn(&x, &m->attn, c));
    step(&x, ref_resblock(&x, &m->b2, c));
    return x;
}

/* Returns moments [B, 2z, h, w]. */
static img ref_encode(const img *image, const vae_model *m)
{
    const vae_config *c = &m->cfg;
    img x = conv_same(image, &m->enc_in_w, &m->enc_in_b);
    for (int i = 0; i < c->levels; i++) {
        for (int j = 0; j < c->res_blocks; j++) step(&x, ref_resblock(&x, &m->enc_block[i][j], c));
        if (i != c->levels - 1) step(&x, ref_conv(&x, &m->down_w3[i], &m->down_b[i], 2, 0, 1, 0, 1));
    }
    x = ref_mid(x, &m->enc_mid, c);
    step(&x, ref_groupnorm_silu(&x, &m->enc_norm_w, &m->enc_norm_b, c->groups, c->eps, true));
    step(&x, conv_same(&x, &m->enc_out_w, &m->enc_out_b));
    step(&x, conv_same(&x, &m->quant_w, &m->quant_b));
    return x;
}

static img ref_decode(const img *latents, const vae_model *m)
{
    const vae_config *c = &m->cfg;
    img z = img_new(latents->B, latents->C, latents->H, latents->W);
    for (size_t i = 0; i < (size_t)z.B * z.C * z.H * z.W; i++) z.d[i] = latents->d[i] / c->scaling;
    img x = conv_same(&z, &m->post_quant_w, &m->post_quant_b);
    free(z.d);
    step(&x, conv_same(&x, &m->dec_in_w, &m->dec_in_b));
    x = ref_mid(x, &m->dec_mid, c);
    for (int i = c->levels - 1; i >= 0; i--) {
        for (int j = 0; j <= c->res_blocks; j++) step(&x, ref_resblock(&x, &m->dec_block[i][j], c));
        if (i != 0) {
            img up = img_new(x.B, x.C, 2 * x.H, 2 * x.W);
            for (int n = 0; n < x.B; n++)
                for (int ch = 0; ch < x.C; ch++)
                    for (int h = 0; h < up.H; h++)
                        for (int w = 0; w < up.W; w++) AT(up, n, ch, h, w) = AT(x, n, ch, h / 2, w / 2);
            step(&x, up);
            step(&x, conv_same(&x, &m->up_w[i], &m->up_b[i]));
        }
    }
    step(&x, ref_groupnorm_silu(&x, &m->dec_norm_w, &m->dec_norm_b, c->groups, c->eps, true));
    step(&x, conv_same(&x, &m->dec_out_w, &m->dec_out_b));
    return x;
}

/* ---------------------------------------------------------------- tests */

/* vae_test_run.h's, saying the arena's size. */
static bool encode(const vae_model *m, sdt_backend *be, sdt_tensor *image, sdt_tensor *mean, sdt_tensor *logvar,
                   sdt_error *error)
{
    size_t peak = 0;
    bool ok = vt_encode(m, be, image, mean, logvar, &peak, error);
    printf("encode arena %zu bytes\n", peak);
    return ok;
}

static bool decode(const vae_model *m, sdt_backend *be, sdt_tensor *latents, sdt_tensor *image, sdt_dtype dt,
                   sdt_error *error)
{
    size_t peak = 0;
    bool ok = vt_decode(m, be, latents, dt, image, &peak, error);
    printf("decode arena %zu bytes\n", peak);
    return ok;
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("models_test_vae");
    sdt_backend *be = mt_backend();
    char path[512];
    sdt_error error = {0};
    mt_temp_path(path, sizeof(path), "vae");
    sdt_weights *w = mt_make_weights(path, SD_FAMILY_TINY, sdt_test_next(&rng), false, true);

    vae_config cfg, tiny = vae_config_tiny();
    CHECK(vae_config_detect(w, &cfg, &error), "detect: %s", error.message);
    CHECK(cfg.ch == tiny.ch && cfg.levels == tiny.levels && cfg.res_blocks == tiny.res_blocks &&
              cfg.z_channels == tiny.z_channels && cfg.ch_mult[0] == tiny.ch_mult[0] &&
              cfg.ch_mult[1] == tiny.ch_mult[1],
          "detected VAE config differs from the tiny preset (ch %d levels %d res %d z %d)", cfg.ch, cfg.levels,
          cfg.res_blocks, cfg.z_channels);
    vae_model m;
    if (!vae_load(&m, &cfg, w, be, &error)) {
        CHECK(false, "load: %s", error.message);
        return sdt_test_finish("models_test_vae");
    }

    const int B = 2, H = 16, W = 12, f = vae_factor(&cfg), Z = cfg.z_channels, h = H / f, wl = W / f;
    size_t n_img = (size_t)B * 3 * H * W, n_lat = (size_t)B * Z * h * wl;
    float *image = mt_alloc(n_img * sizeof(float)), *mean = mt_alloc(n_lat * sizeof(float));
    float *logvar = mt_alloc(n_lat * sizeof(float));
    sdt_test_fill_normal(&rng, image, (int64_t)n_img, 0.5);
    sdt_tensor image_t = mt_tensor(image, SDT_F32, 4, B, 3, H, W);
    sdt_tensor mean_t = mt_tensor(mean, SDT_F32, 4, B, Z, h, wl), logvar_t = mt_tensor(logvar, SDT_F32, 4, B, Z, h, wl);

    /* Encoder vs reference. */
    if (encode(&m, be, &image_t, &mean_t, &logvar_t, &error)) {
        img x = img_new(B, 3, H, W);
        for (size_t i = 0; i < n_img; i++) x.d[i] = image[i];
        img mom = ref_encode(&x, &m);
        double *ref_mean = mt_alloc(n_lat * sizeof(double)), *ref_logvar = mt_alloc(n_lat * sizeof(double));
        size_t per = (size_t)Z * h * wl;
        for (int b = 0; b < B; b++) {
            memcpy(ref_mean + b * per, mom.d + (size_t)b * 2 * per, per * sizeof(double));
            memcpy(ref_logvar + b * per, mom.d + (size_t)b * 2 * per + per, per * sizeof(double));
        }
        double em = sdt_rel_err_fd(mean, ref_mean, (int64_t)n_lat),
               ev = sdt_rel_err_fd(logvar, ref_logvar, (int64_t)n_lat);
        printf("encode rel error.message: mean %.3g logvar %.3g\n", em, ev);
        CHECK(em <= 1e-4 && ev <= 1e-4, "encoder differs from the float64 reference: mean %.3g logvar %.3g", em, ev);

        /* Latents: scaled mean, and a sample with supplied noise. */
        float *noise = mt_alloc(n_lat * sizeof(float)), *lat = mt_alloc(n_lat * sizeof(float));
        sdt_test_fill_normal(&rng, noise, (int64_t)n_lat, 1.0);
        sdt_tensor noise_t = mt_tensor(noise, SDT_F32, 4, B, Z, h, wl), lat_t = mt_tensor(lat, SDT_F32, 4, B, Z, h, wl);
        CHECK(vae_latents_mean(be, &lat_t, &mean_t, cfg.scaling, &error), "latents mean: %s", error.message);
        double dm = 0;
        for (size_t i = 0; i < n_lat; i++) dm = fmax(dm, fabs(lat[i] - cfg.scaling * mean[i]));
        CHECK(dm <= 1e-6, "latents mean is not scaling * mean (%.3g)", dm);
        CHECK(vae_latents_sample(be, &lat_t, &mean_t, &logvar_t, &noise_t, cfg.scaling, &error), "latents sample: %s",
              error.message);
        double ds = 0;
        for (size_t i = 0; i < n_lat; i++) {
            double lv = fmin(fmax(logvar[i], -30.0), 20.0);
            ds = fmax(ds, fabs(lat[i] - cfg.scaling * (mean[i] + exp(0.5 * lv) * noise[i])));
        }
        CHECK(ds <= 1e-5, "latents sample differs from scaling * (mean + std * noise) by %.3g", ds);

        /* Decoder vs reference, on the sampled latents. */
        float *dec = mt_alloc(n_img * sizeof(float));
        sdt_tensor dec_t = mt_tensor(dec, SDT_F32, 4, B, 3, H, W);
        if (decode(&m, be, &lat_t, &dec_t, SDT_F32, &error)) {
            img li = img_new(B, Z, h, wl);
            for (size_t i = 0; i < n_lat; i++) li.d[i] = lat[i];
            img ref = ref_decode(&li, &m);
            double ed = sdt_rel_err_fd(dec, ref.d, (int64_t)n_img);
            printf("decode rel error.message %.3g\n", ed);
            CHECK(ed <= 1e-4, "decoder differs from the float64 reference: %.3g", ed);
            /* f16 activations (preview decoding in half precision), f32 output. */
            CHECK(decode(&m, be, &lat_t, &dec_t, SDT_F16, &error), "f16 decode: %s", error.message);
            double eh = sdt_rel_err_fd(dec, ref.d, (int64_t)n_img);
            printf("decode with f16 activations rel error.message %.3g\n", eh);
            CHECK(eh <= 1e-2, "f16-activation decoder rel error.message %.3g", eh);
            free(li.d), free(ref.d);
        } else {
            CHECK(false, "decode: %s", error.message);
        }
        free(x.d), free(mom.d), free(ref_mean), free(ref_logvar), free(noise), free(lat), free(dec);
    } else {
        CHECK(false, "encode: %s", error.message);
    }

    /* Bad shapes are errors, not crashes. */
    sdt_arena meas;
    sdt_arena_init_measure(&meas, be);
    sdt_tensor odd = mt_tensor(image, SDT_F32, 4, 1, 3, 15, 12);
    error.message[0] = 0;
    CHECK(!vae_encode(&m, be, &meas, &odd, SDT_F32, &mean_t, &logvar_t, &error) && strstr(error.message, "multiples"),
          "an image size that is not a multiple of the factor was accepted (%s)", error.message);
    sdt_tensor wrong_mean = mt_tensor(mean, SDT_F32, 4, B, Z + 1, h, wl);
    error.message[0] = 0;
    CHECK(!vae_encode(&m, be, &meas, &image_t, SDT_F32, &wrong_mean, &logvar_t, &error) && error.message[0],
          "a misshapen mean tensor was accepted");

    vae_free(&m);
    free(image), free(mean), free(logvar);
    sdt_weights_close(w);
    unlink(path);
    be->destroy(be);
    return sdt_test_finish("models_test_vae");
}
