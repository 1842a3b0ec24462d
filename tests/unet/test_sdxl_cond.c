/* SDXL's vector conditioning y (sdxl_cond.h) against float64 references: the tiny layout against
 * diffusers' get_timestep_embedding(time_ids, 8, flip_sin_to_cos=True, downscale_freq_shift=0)
 * evaluated in float64 by torch (the constants below), SDXL's 256-wide one against the formula in
 * double; the pooled embedding first, then the six numbers in diffusers' and sgm's order. */
#include <math.h>
#include <string.h>

#include "sdt_test.h"
#include "sdxl_cond.h"

/* torch float64: get_timestep_embedding([1536, 1152, 37, 64, 1024, 1024], 8, True, 0), row by row. */
static const double tiny_sizes_reference[48] = {
    -0.97162071958446283, -0.94340648037845076, -0.94006915493055054, 0.034789305411944381, 0.23654423957088996,
    0.33163867805179753,  0.34098384704874285,  0.99939466890160789,  -0.5698246514372669,  -0.50714430594973603,
    0.50071597727078654,  0.40666109724604582,  0.82176630900420666,  0.86186115641834127,  -0.86561163930816065,
    0.91357908907036722,  0.7654140519453434,   -0.84810003171040849, 0.93232734560603447,  0.99931557808647831,
    -0.6435381333569995,  -0.52983614090849263, 0.36161543196496182,  0.036991558411180785, 0.39185723042955001,
    0.99318491875819281,  0.80209575788429277,  0.99795269895522987,  0.92002603819679063,  0.11654920485049187,
    0.59719544136239178,  0.063956318280309246, 0.98735361821984824,  -0.29383717075171001, -0.68570679291891024,
    0.51995334133097015,  -0.15853338004399595, 0.95585548964507727,  -0.72787787034973295, 0.85419466331671701,
    0.98735361821984824,  -0.29383717075171001, -0.68570679291891024, 0.51995334133097015,  -0.15853338004399595,
    0.95585548964507727,  -0.72787787034973295, 0.85419466331671701,
};

static void check_tiny(void)
{
    sdt_unet_config c = sdt_unet_config_tiny_sdxl();
    sdt_error error = {0};
    CHECK(sdt_sdxl_pooled_width(&c) == 48, "tiny pooled width %d, expected 48", sdt_sdxl_pooled_width(&c));
    float pooled[48], y[96];
    for (int i = 0; i < 48; i++) pooled[i] = 0.25f * (float)i - 3.0f;
    sdt_sdxl_sizes s = {1536, 1152, 37, 64, 1024, 1024};
    CHECK(sdt_sdxl_vector_cond(&c, pooled, &s, y, &error), "tiny y: %s", error.message);
    CHECK(!memcmp(y, pooled, sizeof pooled), "y does not start with the pooled text embedding");
    double worst = 0;
    for (int i = 0; i < 48; i++) worst = fmax(worst, fabs(y[48 + i] - tiny_sizes_reference[i]));
    printf("tiny: size embedding max |error| %.2e against torch float64\n", worst);
    CHECK(worst < 1e-6, "tiny size embedding off by %g", worst);
}

static void check_sdxl(void)
{
    sdt_unet_config c = sdt_unet_config_sdxl();
    sdt_error error = {0};
    CHECK(sdt_sdxl_pooled_width(&c) == 1280, "SDXL pooled width %d, expected 1280", sdt_sdxl_pooled_width(&c));
    static float pooled[1280], y[2816];
    for (int i = 0; i < 1280; i++) pooled[i] = (float)sin(0.1 * i);
    const double numbers[6] = {1024, 768, 128, 0, 1024, 1024};
    sdt_sdxl_sizes s = {numbers[0], numbers[1], numbers[2], numbers[3], numbers[4], numbers[5]};
    CHECK(sdt_sdxl_vector_cond(&c, pooled, &s, y, &error), "SDXL y: %s", error.message);
    CHECK(!memcmp(y, pooled, sizeof pooled), "y does not start with the pooled text embedding");
    double worst = 0;
    for (int k = 0; k < 6; k++)
        for (int i = 0; i < 128; i++) {
            double arg = numbers[k] * pow(10000.0, -(double)i / 128.0);
            worst = fmax(worst, fabs(y[1280 + 256 * k + i] - cos(arg)));
            worst = fmax(worst, fabs(y[1280 + 256 * k + 128 + i] - sin(arg)));
        }
    printf("SDXL: size embedding max |error| %.2e against float64\n", worst);
    CHECK(worst < 1e-6, "SDXL size embedding off by %g", worst);
    s.crop_left = NAN;
    CHECK(!sdt_sdxl_vector_cond(&c, pooled, &s, y, &error) && strstr(error.message, "not finite"),
          "a NaN size accepted: %s", error.message);
    sdt_unet_config sd = sdt_unet_config_sd1();
    CHECK(!sdt_sdxl_vector_cond(&sd, pooled, &s, y, &error) && strstr(error.message, "no label_emb"),
          "a y for SD 1 built: %s", error.message);
}

int main(void)
{
    check_tiny();
    check_sdxl();
    return sdt_test_finish("sdxl_cond");
}
