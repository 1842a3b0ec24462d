/* test_abi_contract.c - a host's view of libsdtrain.so: loads it with dlopen (path in argv[1])
 * and checks the contract of docs/abi.md: version negotiation, init refcount, factory lookup,
 * struct_size handling for older hosts, independent handles, copy-out buffers, unload+reload. */
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "sdt_test.h"
#include "plugin_open.h"

static void check_version_negotiation(const sdt_entry *e)
{
    CHECK(e->abi_version.major == SDT_ABI_VERSION_MAJOR, "entry major %u", e->abi_version.major);
    char err[512];
    memset(err, 'x', sizeof err);
    sdt_version other = {SDT_ABI_VERSION_MAJOR + 1, 0, 0};
    CHECK(e->init(other, err, sizeof err) == SDT_STATUS_VERSION_MISMATCH, "another major must be refused");
    CHECK(memchr(err, '\0', sizeof err) != NULL && strstr(err, "major") != NULL, "refusal sentence: %.200s", err);
    CHECK(e->get_factory(SDT_FACTORY_TEXTUAL_INVERSION) == NULL, "a refused init must not initialise");
    sdt_version older = {SDT_ABI_VERSION_MAJOR - 1u, 9, 9};
    CHECK(e->init(older, NULL, 0) == SDT_STATUS_VERSION_MISMATCH, "an older major (NULL err) must be refused");
    sdt_version newer_minor = {SDT_ABI_VERSION_MAJOR, SDT_ABI_VERSION_MINOR + 7, 3};
    CHECK(e->init(newer_minor, err, sizeof err) == SDT_STATUS_OK, "same major, other minor must work: %s", err);
    e->deinit();
}

static void check_refcount(const sdt_entry *e)
{
    sdt_version v = SDT_ABI_VERSION_INIT;
    CHECK(e->get_factory(SDT_FACTORY_TEXTUAL_INVERSION) == NULL, "no factory before init");
    CHECK(e->init(v, NULL, 0) == SDT_STATUS_OK && e->init(v, NULL, 0) == SDT_STATUS_OK, "init twice");
    e->deinit();
    CHECK(e->get_factory(SDT_FACTORY_TEXTUAL_INVERSION) != NULL, "one init reference left: factory available");
    e->deinit();
    CHECK(e->get_factory(SDT_FACTORY_TEXTUAL_INVERSION) == NULL, "after the last deinit: no factory");
    e->deinit(); /* extra deinit is harmless */
    CHECK(e->init(v, NULL, 0) == SDT_STATUS_OK, "init after extra deinit");
    CHECK(e->get_factory(SDT_FACTORY_TEXTUAL_INVERSION) != NULL, "a single init still counts after extra deinits");
    CHECK(e->get_factory("sdtrain.nonexistent/1") == NULL && e->get_factory(NULL) == NULL, "unknown ids give NULL");
    CHECK(strcmp(e->status_name(SDT_STATUS_IO), "SDT_STATUS_IO") == 0, "status_name");
    CHECK(strcmp(e->status_name((sdt_status)-999), "SDT_STATUS_UNKNOWN") == 0, "status_name of an unknown code");
    e->deinit();
}

/* An older host: the struct ends at `size` bytes; bytes past it must stay untouched. */
static void check_older_struct_sizes(const sdt_ti_factory *f, sdt_test_rng *rng)
{
    unsigned char raw[sizeof(sdt_ti_config) + 64];
    uint32_t old_size = (uint32_t)offsetof(sdt_ti_config, reserved0);
    memset(raw, 0xA5, sizeof raw);
    memcpy(raw, &old_size, sizeof old_size);
    CHECK(f->config_defaults((sdt_ti_config *)(void *)raw) == SDT_STATUS_OK, "config_defaults with an older size");
    uint32_t batch;
    memcpy(&batch, raw + offsetof(sdt_ti_config, batch_size), sizeof batch);
    CHECK(batch == 1, "default batch size written (%u)", batch);
    int untouched = 1;
    for (size_t i = old_size; i < sizeof raw; i++) untouched &= raw[i] == 0xA5;
    CHECK(untouched, "config_defaults wrote past the host's struct_size");

    /* metrics with a random older size: only that many bytes come back. */
    sdt_ti_trainer *t = NULL;
    CHECK(f->create(NULL, &t, NULL, 0) == SDT_STATUS_OK, "create without callbacks");
    uint32_t msize = (uint32_t)(sizeof(uint32_t) + sdt_test_next(rng) % (sizeof(sdt_metrics) - sizeof(uint32_t)));
    unsigned char mraw[sizeof(sdt_metrics) + 16];
    memset(mraw, 0x5A, sizeof mraw);
    memcpy(mraw, &msize, sizeof msize);
    CHECK(f->get_metrics(t, (sdt_metrics *)(void *)mraw) == SDT_STATUS_OK, "get_metrics with struct_size %u", msize);
    untouched = 1;
    for (size_t i = msize; i < sizeof mraw; i++) untouched &= mraw[i] == 0x5A;
    CHECK(untouched, "get_metrics wrote past struct_size %u", msize);
    uint32_t back;
    memcpy(&back, mraw, sizeof back);
    CHECK(back == msize, "struct_size kept as the host set it");

    /* An older config (without the fields after reserved0) is read with defaults for the rest:
     * prepare gets as far as the first required field, not a struct complaint. */
    sdt_ti_config small;
    memset(&small, 0, sizeof small);
    small.struct_size = sizeof small;
    f->config_defaults(&small);
    small.struct_size = old_size;
    CHECK(f->prepare(t, &small, NULL) == SDT_STATUS_VALIDATION, "older config reaches validation");
    char err[512];
    f->get_last_error(t, err, sizeof err, NULL);
    CHECK(strstr(err, "embedding_path") != NULL, "older config: sentence names the missing field: %s", err);

    /* Older callbacks table (no file_saved): accepted. */
    sdt_host_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.struct_size = (uint32_t)offsetof(sdt_host_callbacks, file_saved);
    sdt_ti_trainer *t2 = NULL;
    CHECK(f->create(&cb, &t2, NULL, 0) == SDT_STATUS_OK, "create with an older callbacks table");
    cb.struct_size = 2;
    sdt_ti_trainer *t3 = (sdt_ti_trainer *)&cb;
    CHECK(f->create(&cb, &t3, err, sizeof err) == SDT_STATUS_INVALID_ARGUMENT && t3 == NULL,
          "a nonsense struct_size is refused");
    CHECK(strstr(err, "struct_size") != NULL, "sentence names struct_size: %s", err);
    f->destroy(t2);
    f->destroy(t);
}

static void check_handles_and_errors(const sdt_ti_factory *f)
{
    sdt_ti_trainer *a = NULL, *b = NULL;
    CHECK(f->create(NULL, &a, NULL, 0) == SDT_STATUS_OK && f->create(NULL, &b, NULL, 0) == SDT_STATUS_OK,
          "two trainers");
    CHECK(a != b, "distinct handles");
    CHECK(f->prepare(a, NULL, NULL) == SDT_STATUS_INVALID_ARGUMENT, "NULL config is an argument error");
    uint32_t needed = 0;
    CHECK(f->get_last_error(a, NULL, 0, &needed) == SDT_STATUS_BUFFER_TOO_SMALL && needed > 20, "size query (%u)",
          needed);
    char tiny[8];
    CHECK(f->get_last_error(a, tiny, sizeof tiny, NULL) == SDT_STATUS_BUFFER_TOO_SMALL && strlen(tiny) == 7,
          "truncated copy");
    char full[1024];
    CHECK(f->get_last_error(a, full, sizeof full, NULL) == SDT_STATUS_OK && strlen(full) + 1 == needed, "full copy");
    char other[64] = "x";
    CHECK(f->get_last_error(b, other, sizeof other, NULL) == SDT_STATUS_OK && other[0] == '\0',
          "b untouched by a's error");
    CHECK(f->interrupt(a) == SDT_STATUS_OK, "interrupt without a run is harmless");
    sdt_run_state sa = SDT_RUN_FAILED, sb = SDT_RUN_FAILED;
    f->get_run_state(a, &sa);
    f->get_run_state(b, &sb);
    CHECK(sa == SDT_RUN_IDLE && sb == SDT_RUN_IDLE, "states %d %d", (int)sa, (int)sb);
    CHECK(f->run(b) == SDT_STATUS_BAD_STATE, "run before prepare is a state error");
    CHECK(f->get_last_error(a, full, sizeof full, NULL) == SDT_STATUS_OK && strstr(full, "config") != NULL,
          "a's sentence survives b's failure: %s", full);
    sdt_embedding_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.struct_size = sizeof spec;
    spec.name = "x";
    spec.vectors_per_token = 0;
    spec.model_path = "m";
    spec.output_dir = ".";
    CHECK(f->create_embedding(a, &spec, NULL, 0, NULL) == SDT_STATUS_INVALID_ARGUMENT, "0 vectors refused");
    CHECK(f->get_metrics(NULL, NULL) == SDT_STATUS_INVALID_ARGUMENT, "NULL handle");
    CHECK(f->inspect(a, "", NULL, NULL, 0, NULL) == SDT_STATUS_INVALID_ARGUMENT, "empty inspect path");
    f->destroy(a);
    f->destroy(b);
    f->destroy(NULL);
}

/* 1.2: a 1.1 host's config (no train_options member) keeps the inline options; a 1.2 host's
 * train_options replace them. Either way prepare reaches the same checks. */
static void check_train_options(const sdt_ti_factory *f)
{
    sdt_ti_trainer *t = NULL;
    CHECK(f->create(NULL, &t, NULL, 0) == SDT_STATUS_OK && t, "create");
    char err[512];
    sdt_train_options opts;
    memset(&opts, 0, sizeof opts);
    opts.struct_size = sizeof opts;
    CHECK(f->train_options_defaults(&opts) == SDT_STATUS_OK && opts.batch_size == 1 && opts.max_steps == 100000 &&
              strcmp(opts.log_dir, "textual_inversion") == 0,
          "train_options_defaults gives the Train tab's defaults");
    sdt_ti_config c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    f->config_defaults(&c);
    CHECK(c.train_options == NULL, "config_defaults leaves train_options NULL");
    c.embedding_path = "e.safetensors";
    c.model_path = "m.safetensors";
    c.dataset_dir = "d";
    c.template_file = "t.txt";
    opts.batch_size = 0; /* only the options carry the bad value */
    c.train_options = &opts;
    CHECK(f->prepare(t, &c, NULL) == SDT_STATUS_VALIDATION, "a bad value in train_options is found");
    f->get_last_error(t, err, sizeof err, NULL);
    CHECK(strstr(err, "batch_size") != NULL, "the sentence names the option: %s", err);
    /* The same config as a 1.1 host sends it: train_options is past its struct_size, so unread. */
    c.struct_size = (uint32_t)offsetof(sdt_ti_config, train_options);
    CHECK(f->prepare(t, &c, NULL) != SDT_STATUS_OK, "the files do not exist");
    f->get_last_error(t, err, sizeof err, NULL);
    CHECK(strstr(err, "batch_size") == NULL, "a 1.1-sized config ignores the bytes past its struct_size: %s", err);
    c.struct_size = sizeof c;
    opts.struct_size = 0;
    CHECK(f->prepare(t, &c, NULL) == SDT_STATUS_INVALID_ARGUMENT, "train_options without struct_size is refused");
    f->get_last_error(t, err, sizeof err, NULL);
    CHECK(strstr(err, "train_options") != NULL, "the sentence names train_options: %s", err);
    f->destroy(t);
}

/* 1.2: the hypernetwork factory has the TI factory's lifecycle members in the same order, and
 * prepare refuses a hypernetwork file that is not there with a sentence naming it (create_hypernetwork
 * and inspect: test_hn_create_inspect.c; training: tests/trainer/test_hn_train.c). */
static void check_hypernetwork_factory(const sdt_hn_factory *h)
{
    CHECK(offsetof(sdt_hn_factory, create) == offsetof(sdt_ti_factory, create) &&
              offsetof(sdt_hn_factory, get_last_error) == offsetof(sdt_ti_factory, get_last_error) &&
              offsetof(sdt_hn_factory, prepare) == offsetof(sdt_ti_factory, prepare) &&
              offsetof(sdt_hn_factory, load_state) == offsetof(sdt_ti_factory, load_state) &&
              offsetof(sdt_hn_factory, inspect) == offsetof(sdt_ti_factory, inspect),
          "lifecycle members sit where the TI factory has them");
    sdt_hn_config c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    CHECK(h->config_defaults(&c) == SDT_STATUS_OK && c.weight_decay == 0.01 && c.train_options == NULL,
          "hypernetwork defaults: AdamW weight decay 0.01");
    sdt_train_options opts;
    memset(&opts, 0, sizeof opts);
    opts.struct_size = sizeof opts;
    CHECK(h->train_options_defaults(&opts) == SDT_STATUS_OK && strcmp(opts.log_dir, "hypernetworks") == 0,
          "hypernetwork options default to the hypernetworks log folder");
    sdt_hn_trainer *t = NULL;
    CHECK(h->create(NULL, &t, NULL, 0) == SDT_STATUS_OK && t, "create a hypernetwork trainer");
    char err[512];
    CHECK(h->prepare(t, &c, NULL) == SDT_STATUS_INVALID_ARGUMENT, "prepare without train_options is refused");
    h->get_last_error(t, err, sizeof err, NULL);
    CHECK(strstr(err, "train_options") != NULL, "the sentence names train_options: %s", err);
    c.train_options = &opts;
    CHECK(h->prepare(t, &c, NULL) == SDT_STATUS_VALIDATION, "a missing hypernetwork file is a validation error");
    h->get_last_error(t, err, sizeof err, NULL);
    CHECK(strstr(err, "hypernetwork_path") != NULL, "the sentence names hypernetwork_path: %s", err);
    c.hypernetwork_path = "no-such-dir/h.pt";
    CHECK(h->prepare(t, &c, NULL) == SDT_STATUS_NOT_FOUND, "a hypernetwork file that is not there is NOT_FOUND");
    h->get_last_error(t, err, sizeof err, NULL);
    CHECK(strstr(err, "no-such-dir/h.pt") != NULL, "the sentence names the file: %s", err);
    CHECK(h->run(t) == SDT_STATUS_BAD_STATE, "run without a prepared job is BAD_STATE");
    sdt_run_state state;
    CHECK(h->get_run_state(t, &state) == SDT_STATUS_OK && state == SDT_RUN_IDLE, "idle after a refused prepare");
    CHECK(h->get_run_state((const sdt_hn_trainer *)(const void *)&c, &state) == SDT_STATUS_INVALID_ARGUMENT,
          "a pointer that is no hypernetwork trainer is refused");
    h->destroy(t);
}

static void one_session(const char *path, sdt_test_rng *rng, int full)
{
    void *lib = NULL;
    const sdt_entry *e = sdt_test_plugin_open(path, &lib);
    if (!e) return;
    if (full) {
        check_version_negotiation(e);
        check_refcount(e);
    }
    sdt_version v = SDT_ABI_VERSION_INIT;
    CHECK(e->init(v, NULL, 0) == SDT_STATUS_OK, "init");
    const sdt_ti_factory *f = (const sdt_ti_factory *)e->get_factory(SDT_FACTORY_TEXTUAL_INVERSION);
    CHECK(f != NULL && f->struct_size >= offsetof(sdt_ti_factory, inspect) + sizeof f->inspect, "TI factory complete");
    if (f) {
        check_older_struct_sizes(f, rng);
        check_handles_and_errors(f);
        check_train_options(f);
    }
    const sdt_hn_factory *h = (const sdt_hn_factory *)e->get_factory(SDT_FACTORY_HYPERNETWORK);
    CHECK(h != NULL && h->struct_size == sizeof(sdt_hn_factory), "hypernetwork factory complete");
    if (h) check_hypernetwork_factory(h);
    e->deinit();
    CHECK(dlclose(lib) == 0, "dlclose: %s", dlerror());
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s path/to/libsdtrain.so\n", argv[0]);
        return 2;
    }
    sdt_test_rng rng = sdt_test_rng_from_env("test_abi_contract");
    one_session(argv[1], &rng, 1);
    /* Unload and reload in one process: a second session must work from a clean state. */
    one_session(argv[1], &rng, 1);
    void *still = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
    printf("after dlclose the plugin is %s\n", still ? "still mapped (kept by the loader)" : "unmapped");
    if (still) dlclose(still);
    return sdt_test_finish("test_abi_contract");
}
