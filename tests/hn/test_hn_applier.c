/* test_hn_applier - the hypernetwork factory's applier (ABI 1.4) against the module code: a
 * chain of two hypernetworks loaded from their files (.pt and .safetensors) gives, for K and
 * V, what applying each member's module in chain order at its strength gives (and, for a
 * linear member, a float64 evaluation of x + (W2 (W1 x + b1) + b2) * s); order matters;
 * strength 0 and unknown widths pass the input through bit for bit; out may be in; every
 * misuse is a status and a sentence naming the argument. */
#define sdt_hn_config sdt_hn_abi_train_config
#include "api/hn_applier.h"
#undef sdt_hn_config

#include <math.h>
#include <string.h>

#include "hn/hn_file.h"
#include "hn/hn_hook.h"
#include "unet_test_util.h"

enum { ROWS = 5, WIDE = 24, NARROW = 16 };

static sdt_hn *make_hn(sdt_backend *be, sdt_test_rng *r, const char *name, const int *widths, int n_widths,
                       const char *activation, bool layer_norm)
{
    sdt_hn_config c = sdt_hn_config_default();
    snprintf(c.name, sizeof(c.name), "%s", name);
    c.width_count = n_widths;
    memcpy(c.widths, widths, sizeof(int) * (size_t)n_widths);
    snprintf(c.activation, sizeof(c.activation), "%s", activation);
    c.layer_norm = layer_norm;
    sdt_error err;
    sdt_error_clear(&err);
    sdt_hn *hn = sdt_hn_create(&c, be, 1, &err);
    CHECK(hn != NULL, "create %s: %s", name, err.message);
    if (!hn) exit(1);
    float *w = kt_randn(r, sdt_hn_param_numel(hn), 0.3); /* large enough that every member moves the rows */
    CHECK(sdt_hn_upload(hn, w, &err), "upload: %s", err.message);
    free(w);
    return hn;
}

/* One member's module on rows (the module code the applier must reproduce). */
static void module_apply(const sdt_hn *hn, int width, sdt_unet_kv kind, float strength, const float *in, float *out)
{
    if (!sdt_hn_has_width(hn, width)) {
        memcpy(out, in, sizeof(float) * ROWS * (size_t)width);
        return;
    }
    sdt_tensor tin = sdt_tensor_4d((void *)in, SDT_F32, 2, ROWS, width, 0, 0);
    sdt_tensor tout = sdt_tensor_4d(out, SDT_F32, 2, ROWS, width, 0, 0);
    void *work = kt_alloc(sdt_hn_module_workspace_bytes(sdt_hn_get_config(hn), width, ROWS) + 16);
    sdt_hn_run run = {.training = false, .dropout_seed = 0};
    sdt_error err;
    sdt_error_clear(&err);
    CHECK(sdt_hn_module_forward(hn, width, kind, &run, strength, &tin, &tout, work, &err), "module: %s", err.message);
    free(work);
}

/* x + (W2 (W1 x + b1) + b2) * s in float64, for a linear 1, 2, 1 member without norms. */
static void linear_reference(sdt_hn *hn, int width, int kind, double s, const float *in, double *out)
{
    char name[64];
    const sdt_hn_param *p[4];
    static const char *parts[4] = {"linear.0.weight", "linear.0.bias", "linear.1.weight", "linear.1.bias"};
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%d.%d.%s", width, kind, parts[i]);
        p[i] = sdt_hn_param_find(hn, name);
        CHECK(p[i] != NULL, "parameter %s", name);
        if (!p[i]) exit(1);
    }
    const float *w1 = p[0]->value.data, *b1 = p[1]->value.data, *w2 = p[2]->value.data, *b2 = p[3]->value.data;
    int hidden = (int)p[0]->value.shape[0];
    for (int r = 0; r < ROWS; r++) {
        double h[2 * WIDE];
        for (int j = 0; j < hidden; j++) {
            h[j] = b1[j];
            for (int i = 0; i < width; i++) h[j] += (double)w1[j * width + i] * in[r * width + i];
        }
        for (int o = 0; o < width; o++) {
            double f = b2[o];
            for (int j = 0; j < hidden; j++) f += (double)w2[o * hidden + j] * h[j];
            out[r * width + o] = in[r * width + o] + f * s;
        }
    }
}

static double max_diff(const float *a, const float *b, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static void misuse(sdt_hn_applier *a, sdt_status st, sdt_status want, const char *words, const char *what)
{
    char sentence[1024] = "";
    sdt_hn_applier_get_last_error(a, sentence, sizeof sentence, NULL);
    CHECK(st == want, "%s: status %d, want %d (%s)", what, (int)st, (int)want, sentence);
    CHECK(strstr(sentence, words) != NULL, "%s: the sentence names \"%s\": %s", what, words, sentence);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("hn_applier");
    sdt_backend *be = kt_backend();
    char *dir = ut_tmpdir();
    sdt_error err;
    sdt_error_clear(&err);
    int widths_a[2] = {WIDE, NARROW}, widths_b[1] = {WIDE};
    sdt_hn *a = make_hn(be, &rng, "first", widths_a, 2, "linear", false);
    sdt_hn *b = make_hn(be, &rng, "second", widths_b, 1, "relu", true);
    char path_a[512], path_b[512];
    snprintf(path_a, sizeof path_a, "%s/first.pt", dir);
    snprintf(path_b, sizeof path_b, "%s/second.safetensors", dir);
    CHECK(sdt_hn_save(a, path_a, &err) && sdt_hn_save(b, path_b, &err), "save: %s", err.message);

    sdt_hn_applier *ap = NULL;
    char cerr[256] = "x";
    CHECK(sdt_hn_applier_create(&ap, cerr, sizeof cerr) == SDT_STATUS_OK && ap && cerr[0] == '\0', "create: %s", cerr);
    if (!ap) return sdt_test_finish("hn_applier");
    const float sa = 0.7f, sb = 1.3f;
    CHECK(sdt_hn_applier_add(ap, path_a, sa) == SDT_STATUS_OK, "add the .pt");
    CHECK(sdt_hn_applier_add(ap, path_b, sb) == SDT_STATUS_OK, "add the .safetensors");

    float x[ROWS * WIDE], got[ROWS * WIDE], mid[ROWS * WIDE], want[ROWS * WIDE], swapped[ROWS * WIDE];
    double ref[ROWS * WIDE];
    sdt_test_fill_normal(&rng, x, ROWS * WIDE, 1.0);
    for (int kind = 0; kind < 2; kind++) {
        /* the chain: a's module, then b's, each at its strength */
        CHECK(sdt_hn_applier_apply_kv(ap, WIDE, (uint32_t)kind, x, got, ROWS) == SDT_STATUS_OK, "apply kind %d", kind);
        module_apply(a, WIDE, (sdt_unet_kv)kind, sa, x, mid);
        module_apply(b, WIDE, (sdt_unet_kv)kind, sb, mid, want);
        CHECK(memcmp(got, want, sizeof got) == 0, "kind %d: the chain equals a then b bit for bit (max diff %g)", kind,
              max_diff(got, want, ROWS * WIDE));
        module_apply(b, WIDE, (sdt_unet_kv)kind, sb, x, mid);
        module_apply(a, WIDE, (sdt_unet_kv)kind, sa, mid, swapped);
        CHECK(max_diff(got, swapped, ROWS * WIDE) > 1e-3, "kind %d: the order matters (b then a differs by %g)", kind,
              max_diff(got, swapped, ROWS * WIDE));
        /* the linear member alone against float64 */
        linear_reference(a, WIDE, kind, sa, x, ref);
        module_apply(a, WIDE, (sdt_unet_kv)kind, sa, x, mid);
        double m = 0;
        for (int i = 0; i < ROWS * WIDE; i++) m = fmax(m, fabs(mid[i] - ref[i]));
        CHECK(m < 1e-4, "kind %d: the linear member matches float64 (max diff %g)", kind, m);
    }
    /* K and V are different modules */
    float k[ROWS * WIDE];
    sdt_hn_applier_apply_kv(ap, WIDE, SDT_KV_K, x, k, ROWS);
    sdt_hn_applier_apply_kv(ap, WIDE, SDT_KV_V, x, got, ROWS);
    CHECK(max_diff(k, got, ROWS * WIDE) > 1e-3, "K and V differ");

    /* a width only the first member has; in place */
    float n[ROWS * NARROW];
    memcpy(n, x, sizeof n);
    CHECK(sdt_hn_applier_apply_kv(ap, NARROW, SDT_KV_V, n, n, ROWS) == SDT_STATUS_OK, "in place");
    module_apply(a, NARROW, SDT_UNET_V, sa, x, want);
    CHECK(memcmp(n, want, sizeof n) == 0, "width %d: only the first member applies, in place", NARROW);
    /* a width nobody has passes through */
    CHECK(sdt_hn_applier_apply_kv(ap, 7, SDT_KV_K, x, got, ROWS) == SDT_STATUS_OK && memcmp(got, x, ROWS * 7 * 4) == 0,
          "an unknown width passes through");
    /* strength 0 everywhere is the identity bit for bit; set_strength back restores the chain */
    CHECK(sdt_hn_applier_set_strength(ap, 0, 0.0) == SDT_STATUS_OK &&
              sdt_hn_applier_set_strength(ap, 1, 0.0) == SDT_STATUS_OK,
          "set strengths 0");
    sdt_hn_applier_apply_kv(ap, WIDE, SDT_KV_K, x, got, ROWS);
    CHECK(memcmp(got, x, sizeof got) == 0, "strength 0 is the identity");
    sdt_hn_applier_set_strength(ap, 0, sa);
    sdt_hn_applier_set_strength(ap, 1, sb);
    sdt_hn_applier_apply_kv(ap, WIDE, SDT_KV_K, x, got, ROWS);
    CHECK(memcmp(got, k, sizeof got) == 0, "strengths restored give the chain again");

    /* misuse */
    misuse(ap, sdt_hn_applier_apply_kv(ap, WIDE, 2, x, got, ROWS), SDT_STATUS_INVALID_ARGUMENT, "kind 2", "bad kind");
    misuse(ap, sdt_hn_applier_apply_kv(ap, 0, SDT_KV_K, x, got, ROWS), SDT_STATUS_INVALID_ARGUMENT, "width 0",
           "width 0");
    misuse(ap, sdt_hn_applier_apply_kv(ap, WIDE, SDT_KV_K, NULL, got, ROWS), SDT_STATUS_INVALID_ARGUMENT, "in is NULL",
           "NULL in");
    misuse(ap, sdt_hn_applier_set_strength(ap, 2, 1.0), SDT_STATUS_INVALID_ARGUMENT, "index 2", "index past the chain");
    misuse(ap, sdt_hn_applier_set_strength(ap, 0, NAN), SDT_STATUS_INVALID_ARGUMENT, "not a finite", "NaN strength");
    misuse(ap, sdt_hn_applier_add(ap, path_a, INFINITY), SDT_STATUS_INVALID_ARGUMENT, "not a finite", "inf strength");
    char missing[600];
    snprintf(missing, sizeof missing, "%s/absent.pt", dir);
    sdt_status st = sdt_hn_applier_add(ap, missing, 1.0);
    CHECK(st < 0, "a missing file is refused (%d)", (int)st);
    misuse(ap, st, st, "absent.pt", "a missing file names itself");
    misuse(ap, sdt_hn_applier_add(ap, "", 1.0), SDT_STATUS_INVALID_ARGUMENT, "path is empty", "empty path");
    for (int i = 2; i < SDT_HN_MAX_CHAIN; i++) CHECK(sdt_hn_applier_add(ap, path_a, 0.0) == SDT_STATUS_OK, "fill");
    misuse(ap, sdt_hn_applier_add(ap, path_a, 1.0), SDT_STATUS_INVALID_ARGUMENT, "the most it takes", "a full chain");
    CHECK(sdt_hn_applier_apply_kv(ap, WIDE, SDT_KV_K, x, got, ROWS) == SDT_STATUS_OK && memcmp(got, k, sizeof got) == 0,
          "members at strength 0 change nothing, and a failed call leaves the chain as it was");
    char last[64] = "x";
    CHECK(sdt_hn_applier_get_last_error(ap, last, sizeof last, NULL) == SDT_STATUS_OK && last[0] == '\0',
          "a successful call clears the sentence");
    CHECK(sdt_hn_applier_create(NULL, cerr, sizeof cerr) == SDT_STATUS_INVALID_ARGUMENT && strstr(cerr, "out is NULL"),
          "create without out: %s", cerr);
    CHECK(sdt_hn_applier_apply_kv(NULL, WIDE, 0, x, got, ROWS) == SDT_STATUS_INVALID_ARGUMENT, "NULL applier");
    sdt_hn_applier_destroy(ap);
    sdt_hn_applier_destroy(NULL);
    sdt_hn_free(a);
    sdt_hn_free(b);
    be->destroy(be);
    ut_cleanup(dir);
    return sdt_test_finish("hn_applier");
}
