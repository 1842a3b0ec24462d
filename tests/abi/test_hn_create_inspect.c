/* test_hn_create_inspect.c - a host's view of the hypernetwork factory's file calls through
 * dlopen: create_hypernetwork writes <out>/<name>.pt, inspect reads it back (structure,
 * widths, parameter count, JSON), and every bad field is refused with a sentence naming it.
 * The applier (1.4) as a host uses it: a new file applied at strength 0 is the identity and at
 * strength 1 moves the 768-wide rows, an unknown width passes through, misuse is a sentence. */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sdt_test.h"
#include "plugin_open.h"

static const sdt_hn_factory *h;
static sdt_hn_trainer *t;
static char err[1024];

static sdt_hypernetwork_spec base_spec(const char *dir, const char *name)
{
    sdt_hypernetwork_spec s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.name = name;
    s.output_dir = dir;
    return s;
}

/* Params of one module pair per width for structure 1, m, 1 without norms: 2 * (w*mw + mw + mw*w + w). */
static uint64_t params_1m1(const int *widths, int n, double m)
{
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        uint64_t w = (uint64_t)widths[i], hidden = (uint64_t)(widths[i] * m);
        total += 2 * (w * hidden + hidden + hidden * w + w);
    }
    return total;
}

static void refused(sdt_hypernetwork_spec s, sdt_status want, const char *words, const char *what)
{
    char path[256] = "";
    sdt_status st = h->create_hypernetwork(t, &s, path, sizeof path, NULL);
    h->get_last_error(t, err, sizeof err, NULL);
    CHECK(st == want, "%s: status %d, want %d (%s)", what, (int)st, (int)want, err);
    CHECK(strstr(err, words) != NULL, "%s: the sentence names \"%s\": %s", what, words, err);
}

static void check_defaults_round_trip(const char *dir)
{
    sdt_hypernetwork_spec s = base_spec(dir, "plain");
    char path[512] = "";
    uint32_t needed = 0;
    CHECK(h->create_hypernetwork(t, &s, path, sizeof path, &needed) == SDT_STATUS_OK, "create with A1111's defaults");
    char want[512];
    snprintf(want, sizeof want, "%s/plain.pt", dir);
    CHECK(strcmp(path, want) == 0 && needed == strlen(want) + 1, "the file is <out>/<name>.pt: %s", path);
    sdt_hypernetwork_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    CHECK(h->inspect(t, path, &info, NULL, 0, NULL) == SDT_STATUS_OK, "inspect the new file");
    static const int widths[] = {768, 320, 640, 1280};
    CHECK(info.width_count == 4 && info.widths[0] == 768 && info.widths[1] == 320 && info.widths[2] == 640 &&
              info.widths[3] == 1280,
          "widths 768, 320, 640, 1280 (%u)", info.width_count);
    CHECK(info.layer_count == 2 && strcmp(info.layer_structure, "1, 2, 1") == 0, "structure %s", info.layer_structure);
    CHECK(info.parameter_count == params_1m1(widths, 4, 2.0), "parameters %llu",
          (unsigned long long)info.parameter_count);
    CHECK(strcmp(info.name, "plain") == 0 && strcmp(info.activation, "linear") == 0 &&
              strcmp(info.weight_init, "Normal") == 0,
          "name %s, activation %s, init %s", info.name, info.activation, info.weight_init);
    CHECK(!info.layer_norm && !info.use_dropout && !info.activate_output && info.all_finite && info.step == 0,
          "flags off, finite, step 0");
    CHECK(h->inspect(t, path, NULL, NULL, 0, &needed) == SDT_STATUS_BUFFER_TOO_SMALL && needed > 2, "JSON size query");
    char *json = malloc(needed);
    CHECK(json && h->inspect(t, path, NULL, json, needed, NULL) == SDT_STATUS_OK, "JSON fits its size");
    if (json) {
        CHECK(strstr(json, "\"parameter_count\"") && strstr(json, "\"layer_structure\"") &&
                  strstr(json, "\"a1111-pt\""),
              "JSON carries the structure: %.300s", json);
        free(json);
    }
    refused(s, SDT_STATUS_ALREADY_EXISTS, "already exists", "an existing file without overwrite");
    s.overwrite = true;
    CHECK(h->create_hypernetwork(t, &s, NULL, 0, NULL) == SDT_STATUS_OK, "overwrite when asked");
}

static void check_options_round_trip(const char *dir)
{
    sdt_hypernetwork_spec s = base_spec(dir, "shaped");
    s.widths = "1024, 320";
    s.layer_structure = "1, 1.5, 1";
    s.activation = "relu";
    s.weight_init = "KaimingNormal";
    s.layer_norm = true;
    s.use_dropout = true;
    s.dropout_structure = "0, 0.1, 0";
    s.activate_output = true;
    char path[512] = "";
    CHECK(h->create_hypernetwork(t, &s, path, sizeof path, NULL) == SDT_STATUS_OK, "create with every option");
    h->get_last_error(t, err, sizeof err, NULL);
    sdt_hypernetwork_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    CHECK(h->inspect(t, path, &info, NULL, 0, NULL) == SDT_STATUS_OK, "inspect it: %s", err);
    /* + LayerNorm weight and bias after each Linear (hidden, then w) */
    static const int widths[] = {1024, 320};
    uint64_t norms = 2 * (2 * (1536 + 1024) + 2 * (480 + 320));
    CHECK(info.width_count == 2 && info.widths[0] == 1024 && info.widths[1] == 320, "widths 1024, 320");
    CHECK(info.parameter_count == params_1m1(widths, 2, 1.5) + norms, "parameters %llu",
          (unsigned long long)info.parameter_count);
    CHECK(strcmp(info.layer_structure, "1, 1.5, 1") == 0 && strcmp(info.activation, "relu") == 0 &&
              strcmp(info.weight_init, "KaimingNormal") == 0,
          "structure %s, %s, %s", info.layer_structure, info.activation, info.weight_init);
    CHECK(info.layer_norm && info.use_dropout && info.activate_output, "layer norm, dropout, output activation kept");
}

static void check_refusals(const char *dir)
{
    sdt_hypernetwork_spec s = base_spec(dir, "bad");
    s.activation = "foo";
    refused(s, SDT_STATUS_VALIDATION, "activation", "an unknown activation");
    s = base_spec(dir, "bad");
    s.weight_init = "Uniform";
    refused(s, SDT_STATUS_VALIDATION, "weight initialization", "an unknown init");
    s = base_spec(dir, "bad");
    s.layer_structure = "2, 2, 1";
    refused(s, SDT_STATUS_VALIDATION, "layer structure", "a structure not starting at 1");
    s = base_spec(dir, "bad");
    s.widths = "768, x";
    refused(s, SDT_STATUS_VALIDATION, "modules", "a width that is no number");
    s = base_spec(dir, "bad");
    s.use_dropout = true;
    s.dropout_structure = "0, 0.1";
    refused(s, SDT_STATUS_VALIDATION, "dropout structure", "a dropout structure of the wrong length");
    s = base_spec(dir, "");
    refused(s, SDT_STATUS_VALIDATION, "spec.name", "an empty name");
    s = base_spec("/nonexistent/sdtrain-folder", "x");
    refused(s, SDT_STATUS_NOT_FOUND, "output folder", "a missing output folder");
    CHECK(h->create_hypernetwork(t, NULL, NULL, 0, NULL) == SDT_STATUS_INVALID_ARGUMENT, "NULL spec");
    char path[512];
    snprintf(path, sizeof path, "%s/bad.pt", dir);
    CHECK(access(path, F_OK) != 0, "no file left by a refused create");
    sdt_hypernetwork_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    CHECK(h->inspect(t, "/nonexistent/x.pt", &info, NULL, 0, NULL) != SDT_STATUS_OK, "inspect of a missing file fails");
    h->get_last_error(t, err, sizeof err, NULL);
    CHECK(strstr(err, "/nonexistent/x.pt") != NULL, "the sentence names the file: %s", err);
}

/* The T5 length (1.10): a value past 512 and a reserved field are refused naming the field; a 1.9 request, whose
 * struct_size ends before the field, is read without it (the plugin reads struct_size bytes, docs/abi.md 3.2), so
 * the bytes past it are not looked at. The image needs 512 x 512 x 3 bytes: a request that gets past its own checks
 * stops at the small buffer. */
static void check_generate_t5_length(sdt_hn_applier *a, sdt_generate_request *rq)
{
    static uint8_t small[16];
    rq->t5_max_length = 513;
    CHECK(h->applier_generate(a, rq, small, sizeof small) == SDT_STATUS_VALIDATION, "a T5 length of 513 refused");
    h->applier_get_last_error(a, err, sizeof err, NULL);
    CHECK(strstr(err, "request.t5_max_length 513") != NULL && strstr(err, "1..512") != NULL,
          "the sentence names request.t5_max_length and the range: %s", err);
    rq->t5_max_length = 512;
    CHECK(h->applier_generate(a, rq, small, sizeof small) == SDT_STATUS_BUFFER_TOO_SMALL, "a T5 length of 512 taken");
    rq->t5_max_length = 0;
    rq->reserved1 = 1;
    CHECK(h->applier_generate(a, rq, small, sizeof small) == SDT_STATUS_VALIDATION, "reserved1 not 0 refused");
    h->applier_get_last_error(a, err, sizeof err, NULL);
    CHECK(strstr(err, "request.reserved1") != NULL, "the sentence names request.reserved1: %s", err);
    /* a 1.9 host's request: what lies past its struct_size (here values that would be refused) is not read */
    rq->t5_max_length = 9999;
    rq->struct_size = (uint32_t)offsetof(sdt_generate_request, t5_max_length);
    CHECK(h->applier_generate(a, rq, small, sizeof small) == SDT_STATUS_BUFFER_TOO_SMALL,
          "a 1.9 request (struct_size %u) is read without the T5 length", (unsigned)rq->struct_size);
    h->applier_get_last_error(a, err, sizeof err, NULL);
    CHECK(strstr(err, "t5_max_length") == NULL && strstr(err, "786432 bytes") != NULL,
          "the 1.9 request stops at the buffer, not at the field past it: %s", err);
    rq->struct_size = sizeof *rq;
    rq->t5_max_length = 0;
    rq->reserved1 = 0;
}

static void check_applier(const char *dir)
{
    CHECK(h->struct_size > offsetof(sdt_hn_factory, applier_apply_kv), "the 1.4 factory has the applier");
    sdt_hypernetwork_spec s = base_spec(dir, "applied");
    char path[512] = "";
    CHECK(h->create_hypernetwork(t, &s, path, sizeof path, NULL) == SDT_STATUS_OK, "create the file to apply");
    sdt_hn_applier *a = NULL;
    CHECK(h->applier_create(&a, err, sizeof err) == SDT_STATUS_OK && a, "applier_create: %s", err);
    if (!a) return;
    CHECK(h->applier_add(a, path, 0.0) == SDT_STATUS_OK, "add at strength 0");
    enum { ROWS = 3, W = 768 };
    static float x[ROWS * W], y[ROWS * W];
    for (int i = 0; i < ROWS * W; i++) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    CHECK(h->applier_apply_kv(a, W, SDT_KV_K, x, y, ROWS) == SDT_STATUS_OK && memcmp(x, y, sizeof x) == 0,
          "strength 0 is the identity");
    CHECK(h->applier_set_strength(a, 0, 1.0) == SDT_STATUS_OK, "strength 1");
    CHECK(h->applier_apply_kv(a, W, SDT_KV_V, x, y, ROWS) == SDT_STATUS_OK && memcmp(x, y, sizeof x) != 0,
          "strength 1 moves the rows");
    CHECK(h->applier_apply_kv(a, 1024, SDT_KV_V, x, y, 2) == SDT_STATUS_OK && memcmp(x, y, 2 * 1024 * 4) == 0,
          "an SD 2.x width the file lacks passes through");
    CHECK(h->applier_apply_kv(a, W, 5, x, y, ROWS) == SDT_STATUS_INVALID_ARGUMENT, "kind 5 refused");
    h->applier_get_last_error(a, err, sizeof err, NULL);
    CHECK(strstr(err, "kind 5") != NULL, "the sentence names the kind: %s", err);
    CHECK(h->applier_add(a, "/nonexistent/x.pt", 1.0) < 0, "a missing file refused");
    h->applier_get_last_error(a, err, sizeof err, NULL);
    CHECK(strstr(err, "/nonexistent/x.pt") != NULL, "the sentence names the file: %s", err);
    /* generate's own checks come before any model is opened */
    CHECK(h->applier_generate(a, NULL, NULL, 0) == SDT_STATUS_INVALID_ARGUMENT, "generate without a request");
    h->applier_get_last_error(a, err, sizeof err, NULL);
    CHECK(strstr(err, "request") != NULL, "the sentence names the request: %s", err);
    sdt_generate_request rq;
    memset(&rq, 0, sizeof rq);
    rq.struct_size = sizeof rq;
    rq.model_path = "/nonexistent/model.safetensors";
    rq.prompt = "x";
    static uint8_t small[16];
    CHECK(h->applier_generate(a, &rq, small, sizeof small) == SDT_STATUS_BUFFER_TOO_SMALL, "a small image buffer");
    h->applier_get_last_error(a, err, sizeof err, NULL);
    CHECK(strstr(err, "786432 bytes") != NULL, "the sentence names the bytes 512 x 512 x 3 needs: %s", err);
    rq.steps = 5000;
    CHECK(h->applier_generate(a, &rq, small, sizeof small) == SDT_STATUS_VALIDATION, "5000 steps refused");
    h->applier_get_last_error(a, err, sizeof err, NULL);
    CHECK(strstr(err, "request.steps") != NULL, "the sentence names request.steps: %s", err);
    rq.steps = 0;
    check_generate_t5_length(a, &rq);
    h->applier_destroy(a);
    h->applier_destroy(NULL);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s path/to/libsdtrain.so\n", argv[0]);
        return 2;
    }
    void *lib = NULL;
    const sdt_entry *e = sdt_test_plugin_open(argv[1], &lib);
    if (!e) return SDT_TEST_SKIP;
    sdt_version v = SDT_ABI_VERSION_INIT;
    CHECK(e->init(v, NULL, 0) == SDT_STATUS_OK, "init");
    h = (const sdt_hn_factory *)e->get_factory(SDT_FACTORY_HYPERNETWORK);
    CHECK(h != NULL, "hypernetwork factory");
    char dir[] = "/tmp/sdt_hn_abi_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "temp folder");
    if (h && h->create(NULL, &t, NULL, 0) == SDT_STATUS_OK) {
        check_defaults_round_trip(dir);
        check_options_round_trip(dir);
        check_refusals(dir);
        check_applier(dir);
        h->destroy(t);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "clean up %s", dir);
    e->deinit();
    dlclose(lib);
    return sdt_test_finish("test_hn_create_inspect");
}
