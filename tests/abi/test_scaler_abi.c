/* test_scaler_abi.c - the public loss scaler ("sdtrain.scaler/1") as a host uses it, through
 * dlopen of libsdtrain.so (argv[1]): GradScaler numbers (unscale values, one backoff for an
 * overflow in one of two optimizers, growth after the interval), every misuse as a status with
 * a sentence (naming only the optimizers in use), state round trip, invalid configs, older
 * config structs, the disabled identity. */
#include <dlfcn.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "sdt_test.h"
#include "plugin_open.h"

static const sdt_loss_scaler_factory *f;
static char err[1024];

static const char *last(const sdt_loss_scaler *s)
{
    f->get_last_error(s, err, sizeof err, NULL);
    return err;
}

#define EXPECT_STATUS(call, want, text)                                                                                \
    do {                                                                                                               \
        sdt_status got_ = (call);                                                                                      \
        CHECK(got_ == (want), "%s: got %d, want %d", #call, (int)got_, (int)(want));                                   \
        CHECK(strstr(last(sc), text) != NULL, "%s: sentence lacks '%s': %s", #call, text, err);                        \
        CHECK(strstr(err, "sdt_scaler") == NULL, "%s: the sentence names an internal function: %s", #call, err);       \
    } while (0)

static sdt_loss_scaler *make(double init, int64_t interval, uint32_t optimizers, bool enabled)
{
    sdt_loss_scaler_config c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    f->config_defaults(&c);
    c.init_scale = init;
    c.growth_interval = interval;
    c.optimizer_count = optimizers;
    c.enabled = enabled;
    sdt_loss_scaler *s = NULL;
    CHECK(f->create(&c, &s, err, sizeof err) == SDT_STATUS_OK && s, "create: %s", err);
    return s;
}

/* One iteration over two optimizers with n floats each; inf_in picks the optimizer with an inf
 * (-1 = none). Returns the per-optimizer step decisions in took[]. */
static void iteration(sdt_loss_scaler *sc, sdt_test_rng *rng, int inf_in, bool took[2])
{
    enum { N = 17 };
    float g[2][N], orig[2][N];
    double scale = 0;
    f->get_scale(sc, &scale);
    for (int o = 0; o < 2; o++)
        for (int i = 0; i < N; i++) orig[o][i] = g[o][i] = (float)(sdt_test_normal(rng) * scale);
    if (inf_in >= 0) g[inf_in][(int)(sdt_test_next(rng) % N)] = INFINITY;
    float loss = (float)sdt_test_uniform(rng), scaled = 0;
    CHECK(f->scale_loss(sc, loss, &scaled) == SDT_STATUS_OK && scaled == (float)((double)loss * scale), "scale_loss");
    for (uint32_t o = 0; o < 2; o++) {
        float *bufs[1] = {g[o]};
        uint64_t counts[1] = {N};
        bool inf = false;
        CHECK(f->unscale(sc, o, bufs, counts, 1, &inf) == SDT_STATUS_OK, "unscale %u: %s", o, last(sc));
        CHECK(inf == ((int)o == inf_in), "found_inf of optimizer %u", o);
        if ((int)o != inf_in)
            for (int i = 0; i < N; i++)
                CHECK(g[o][i] == orig[o][i] * (float)(1.0 / scale), "grad %d unscaled exactly", i);
        CHECK(f->should_step(sc, o, &took[o]) == SDT_STATUS_OK, "should_step %u: %s", o, last(sc));
    }
    CHECK(f->update(sc) == SDT_STATUS_OK, "update: %s", last(sc));
}

static void test_update_sequence(sdt_test_rng *rng)
{
    double init = ldexp(1.0, 4 + (int)(sdt_test_next(rng) % 16));
    int64_t interval = 1 + (int64_t)(sdt_test_next(rng) % 4);
    sdt_loss_scaler *sc = make(init, interval, 2, true);
    bool took[2];
    double scale = 0;
    for (int64_t k = 0; k < interval - 1; k++) iteration(sc, rng, -1, took);
    f->get_scale(sc, &scale);
    CHECK(scale == init, "no growth before the interval (%g)", scale);
    int bad = (int)(sdt_test_next(rng) % 2);
    iteration(sc, rng, bad, took);
    f->get_scale(sc, &scale);
    CHECK(took[bad] == false && took[1 - bad] == true, "only the overflowing optimizer skips");
    CHECK(scale == init * 0.5, "one backoff for the iteration (%g)", scale);
    for (int64_t k = 0; k < interval; k++) iteration(sc, rng, -1, took);
    f->get_scale(sc, &scale);
    CHECK(scale == init, "growth after %lld clean iterations (%g)", (long long)interval, scale);
    f->destroy(sc);
}

static void test_misuse(void)
{
    sdt_loss_scaler *sc = make(1024, 2000, 2, true);
    float g[4] = {1, 2, 3, 4}, h[4] = {1, 1, 1, 1};
    float *bufs[1] = {g};
    uint64_t counts[1] = {4};
    float scaled;
    bool step;
    EXPECT_STATUS(f->unscale(sc, 0, bufs, counts, 1, NULL), SDT_STATUS_SCALER_MISUSE, "scale_loss");
    f->scale_loss(sc, 1.0f, &scaled);
    EXPECT_STATUS(f->should_step(sc, 0, &step), SDT_STATUS_SCALER_MISUSE, "No inf checks");
    EXPECT_STATUS(f->update(sc), SDT_STATUS_SCALER_MISUSE, "should_step()"); /* the ABI's calls, by name */
    EXPECT_STATUS(f->unscale(sc, 5, bufs, counts, 1, NULL), SDT_STATUS_INVALID_ARGUMENT, "optimizer_count 2");
    EXPECT_STATUS(f->unscale(sc, 0, bufs, counts, 0, NULL), SDT_STATUS_INVALID_ARGUMENT, "buffer");
    CHECK(f->unscale(sc, 0, bufs, counts, 1, NULL) == SDT_STATUS_OK, "unscale: %s", last(sc));
    EXPECT_STATUS(f->unscale(sc, 0, bufs, counts, 1, NULL), SDT_STATUS_SCALER_MISUSE, "already");
    CHECK(f->should_step(sc, 0, &step) == SDT_STATUS_OK && step, "step decision");
    EXPECT_STATUS(f->should_step(sc, 0, &step), SDT_STATUS_SCALER_MISUSE, "already");
    EXPECT_STATUS(f->unscale(sc, 0, bufs, counts, 1, NULL), SDT_STATUS_SCALER_MISUSE, "after");
    uint8_t blob[128];
    EXPECT_STATUS(f->save_state(sc, blob, sizeof blob, NULL), SDT_STATUS_BAD_STATE, "update()");
    CHECK(f->update(sc) == SDT_STATUS_OK, "update: %s", last(sc));
    float *two[2] = {g, h};
    uint64_t two_counts[2] = {4, 4};
    f->scale_loss(sc, 1.0f, &scaled);
    EXPECT_STATUS(f->unscale(sc, 0, two, two_counts, 2, NULL), SDT_STATUS_INVALID_ARGUMENT, "same buffers");
    bufs[0] = h; /* another buffer of the same size is fine */
    CHECK(f->unscale(sc, 0, bufs, counts, 1, NULL) == SDT_STATUS_OK && h[0] == 1.0f / 1024.0f, "moved buffer unscaled");
    f->destroy(sc);
}

/* A sentence about the whole scaler names the optimizers in use, not every index reserved. */
static void test_misuse_names_used_optimizers(void)
{
    sdt_loss_scaler *sc = make(1024, 2000, 8, true);
    float g[2] = {1, 2}, h[2] = {3, 4};
    uint64_t counts[1] = {2};
    float scaled;
    bool step;
    EXPECT_STATUS(f->update(sc), SDT_STATUS_SCALER_MISUSE, "loss scaler: update before any scale_loss()");
    f->scale_loss(sc, 1.0f, &scaled);
    EXPECT_STATUS(f->update(sc), SDT_STATUS_SCALER_MISUSE, "loss scaler: update with nothing recorded");
    float *bufs[1] = {g};
    CHECK(f->unscale(sc, 2, bufs, counts, 1, NULL) == SDT_STATUS_OK, "unscale 2: %s", last(sc));
    CHECK(f->should_step(sc, 2, &step) == SDT_STATUS_OK && f->update(sc) == SDT_STATUS_OK, "iteration: %s", last(sc));
    EXPECT_STATUS(f->update(sc), SDT_STATUS_SCALER_MISUSE, "optimizer 'optimizer 2': update with nothing recorded");
    CHECK(strstr(err, "optimizer 0") == NULL && strstr(err, "optimizer 7") == NULL, "unused optimizers named: %s", err);
    f->scale_loss(sc, 1.0f, &scaled);
    bufs[0] = h;
    CHECK(f->unscale(sc, 5, bufs, counts, 1, NULL) == SDT_STATUS_OK, "unscale 5: %s", last(sc));
    CHECK(f->should_step(sc, 5, &step) == SDT_STATUS_OK && f->update(sc) == SDT_STATUS_OK, "iteration: %s", last(sc));
    EXPECT_STATUS(f->update(sc), SDT_STATUS_SCALER_MISUSE, "optimizers 'optimizer 2', 'optimizer 5': update with");
    CHECK(strstr(err, "optimizer 0") == NULL && strstr(err, "optimizer 7") == NULL, "unused optimizers named: %s", err);
    f->destroy(sc);
}

static void test_state_round_trip(sdt_test_rng *rng)
{
    sdt_loss_scaler *sc = make(ldexp(1.0, 10), 3, 2, true);
    bool took[2];
    iteration(sc, rng, 0, took);  /* 512, tracker 0 */
    iteration(sc, rng, -1, took); /* tracker 1 */
    uint32_t needed = 0;
    CHECK(f->save_state(sc, NULL, 0, &needed) == SDT_STATUS_BUFFER_TOO_SMALL && needed == 72, "size query %u", needed);
    uint8_t blob[72];
    CHECK(f->save_state(sc, blob, sizeof blob, NULL) == SDT_STATUS_OK, "save: %s", last(sc));
    sdt_loss_scaler *copy = make(1.0, 2000, 2, true);
    /* Every single-bit flip is refused (the blob's CRC-32), never a changed scale. */
    int accepted = 0;
    for (size_t bit = 0; bit < sizeof blob * 8; bit++) {
        blob[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        if (f->load_state(copy, blob, sizeof blob) != SDT_STATUS_BAD_FORMAT) accepted++;
        blob[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    CHECK(accepted == 0, "%d of %zu single-bit flips of the blob were accepted", accepted, sizeof blob * 8);
    CHECK(f->load_state(copy, blob, sizeof blob) == SDT_STATUS_OK, "load");
    double a = 0, b = 0;
    iteration(sc, rng, -1, took);
    iteration(sc, rng, -1, took); /* tracker reaches 3: grows */
    iteration(copy, rng, -1, took);
    iteration(copy, rng, -1, took);
    f->get_scale(sc, &a);
    f->get_scale(copy, &b);
    CHECK(a == 1024.0 && b == a, "the copy continues identically (%g, %g)", a, b);
    blob[0] ^= 0xff;
    sdt_loss_scaler *s2 = copy;
    {
        sdt_loss_scaler *sc = s2; /* EXPECT_STATUS reads sc */
        EXPECT_STATUS(f->load_state(sc, blob, sizeof blob), SDT_STATUS_BAD_FORMAT, "save_state");
        blob[0] ^= 0xff;
        EXPECT_STATUS(f->load_state(sc, blob, 10), SDT_STATUS_BAD_FORMAT, "save_state");
    }
    f->destroy(sc);
    f->destroy(copy);
}

static void test_configs(void)
{
    struct {
        const char *field;
        double init, growth, backoff;
        int64_t interval;
        uint32_t count;
    } bad[] = {
        {"growth", 1024, 1.0, 0.5, 10, 1},  {"backoff", 1024, 2.0, 1.5, 10, 1},         {"scale", 0, 2.0, 0.5, 10, 1},
        {"interval", 1024, 2.0, 0.5, 0, 1}, {"optimizer_count", 1024, 2.0, 0.5, 10, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sdt_loss_scaler_config c = {0};
        c.struct_size = sizeof c;
        f->config_defaults(&c);
        c.init_scale = bad[i].init;
        c.growth_factor = bad[i].growth;
        c.backoff_factor = bad[i].backoff;
        c.growth_interval = bad[i].interval;
        c.optimizer_count = bad[i].count;
        sdt_loss_scaler *s = (sdt_loss_scaler *)&c;
        err[0] = '\0';
        CHECK(f->create(&c, &s, err, sizeof err) == SDT_STATUS_INVALID_ARGUMENT && s == NULL, "bad %s refused",
              bad[i].field);
        CHECK(strstr(err, bad[i].field) != NULL, "sentence names %s: %s", bad[i].field, err);
    }
    /* An older host's config without min_scale and enabled: defaults (enabled, no floor). */
    sdt_loss_scaler_config c;
    memset(&c, 0xff, sizeof c);
    c.struct_size = (uint32_t)offsetof(sdt_loss_scaler_config, min_scale);
    c.optimizer_count = 1;
    c.growth_interval = 2000;
    c.hysteresis = 1;
    c.reserved0 = 0;
    c.init_scale = 256;
    c.growth_factor = 2;
    c.backoff_factor = 0.5;
    sdt_loss_scaler *s = NULL;
    double scale = 0;
    CHECK(f->create(&c, &s, err, sizeof err) == SDT_STATUS_OK && f->get_scale(s, &scale) == SDT_STATUS_OK &&
              scale == 256,
          "older config: %s", err);
    f->destroy(s);
    /* Disabled: the identity. */
    s = make(1024, 10, 1, false);
    float scaled = 0;
    bool step = false;
    CHECK(f->get_scale(s, &scale) == SDT_STATUS_OK && scale == 1.0, "disabled scale is 1");
    CHECK(f->scale_loss(s, 3.5f, &scaled) == SDT_STATUS_OK && scaled == 3.5f, "disabled scale_loss is identity");
    CHECK(f->should_step(s, 0, &step) == SDT_STATUS_OK && step, "disabled: always step");
    f->destroy(s);
    f->destroy(NULL);
}

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    sdt_test_rng rng = sdt_test_rng_from_env("test_scaler_abi");
    void *lib = NULL;
    const sdt_entry *e = sdt_test_plugin_load(argv[1], &lib);
    if (!e) return sdt_test_finish("test_scaler_abi");
    f = (const sdt_loss_scaler_factory *)e->get_factory(SDT_FACTORY_SCALER);
    CHECK(f != NULL, "the plugin provides %s", SDT_FACTORY_SCALER);
    if (f) {
        test_update_sequence(&rng);
        test_misuse();
        test_misuse_names_used_optimizers();
        test_state_round_trip(&rng);
        test_configs();
    }
    e->deinit();
    dlclose(lib);
    return sdt_test_finish("test_scaler_abi");
}
