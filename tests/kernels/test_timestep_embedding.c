/* test_timestep_embedding - diffusers get_timestep_embedding against a float64 reference:
 * both flip_sin_to_cos settings, downscale_freq_shift 0 and 1, several max periods, even
 * and odd dims (odd zero-pads the last column). */
#include "kernel_test.h"

static void ref_embedding(const float *t, int64_t batch, int64_t dim, bool flip, double shift, double period,
                          double *out)
{
    int64_t half = dim / 2;
    for (int64_t b = 0; b < batch; b++) {
        double *row = out + b * dim;
        double sins[4096], coss[4096];
        for (int64_t i = 0; i < half; i++) {
            double arg = t[b] * exp(-log(period) * (double)i / ((double)half - shift));
            sins[i] = sin(arg), coss[i] = cos(arg);
        }
        for (int64_t i = 0; i < half; i++) {
            row[i] = flip ? coss[i] : sins[i];
            row[half + i] = flip ? sins[i] : coss[i];
        }
        if (dim % 2) row[dim - 1] = 0;
    }
}

static void check_case(sdt_backend *be, sdt_test_rng *r, int64_t batch, int64_t dim, bool flip, float shift,
                       float period)
{
    float *t = kt_alloc((size_t)batch * sizeof(float)), *out = kt_alloc((size_t)(batch * dim) * sizeof(float));
    for (int64_t b = 0; b < batch; b++) t[b] = (float)(sdt_test_next(r) % 1000); /* DDPM's integer timesteps */
    t[0] = 0;
    if (batch > 1) t[1] = 999;
    double *ref = kt_alloc((size_t)(batch * dim) * sizeof(double));
    ref_embedding(t, batch, dim, flip, shift, period, ref);
    sdt_tensor tt = kt_f32(t, 1, batch, 0, 0, 0), to = kt_f32(out, 2, batch, dim, 0, 0);
    CHECK(be->timestep_embedding(be, &to, &tt, flip, shift, period) == 0, "timestep_embedding failed: %s",
          be->error.message);
    double err = sdt_rel_err_fd(out, ref, batch * dim);
    CHECK(err < 1e-5, "timestep_embedding B=%lld dim=%lld flip=%d shift=%g period=%g: rel err %.3g", (long long)batch,
          (long long)dim, flip, (double)shift, (double)period, err);
    /* t = 0: every sin is 0 and every cos is 1 */
    int64_t half = dim / 2;
    CHECK(out[flip ? 0 : half] == 1.0f && out[flip ? half : 0] == 0.0f, "t=0 must give cos 1 and sin 0 in place");
    if (dim % 2) CHECK(out[dim - 1] == 0.0f, "odd dim must zero-pad the last column");
    free(t), free(out), free(ref);
}

int main(void)
{
    sdt_test_rng r = sdt_test_rng_from_env("timestep_embedding");
    sdt_backend *be = kt_backend();
    check_case(be, &r, 1, 2, true, 0, 10000);
    check_case(be, &r, 5, 320, true, 0, 10000); /* SD 1.x */
    check_case(be, &r, 3, 320, false, 1, 10000);
    check_case(be, &r, 7, 33, true, 1, 10000);
    check_case(be, &r, 2, 17, false, 0, 100);
    float t = 1, o[8];
    sdt_tensor tt = kt_f32(&t, 1, 1, 0, 0, 0), to = kt_f32(o, 2, 1, 8, 0, 0);
    CHECK(be->timestep_embedding(be, &to, &tt, true, 4.0f, 10000) != 0 && be->error.code == SDT_ERR_INVALID_ARGUMENT,
          "a shift equal to dim/2 must be refused (division by zero)");
    be->destroy(be);
    return sdt_test_finish("timestep_embedding");
}
