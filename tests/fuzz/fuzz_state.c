/* fuzz_state.c - libFuzzer target: any bytes as a training state (<name>.state.safetensors)
 * loaded into a prepared trainer through the ABI (load_state, the same path as --resume):
 * the safetensors container, the `training` JSON, and how it is applied (identity checks,
 * tensors, step, schedule, scaler, data order, fallback record). A state is either refused
 * with a sentence or applied; one that was applied must save and load again.
 *
 * The trainer is prepared once, on the demo model and one demo image, for the embedding
 * tests/fuzz/state/fuzzstate.safetensors with the seed and sizes its seed states were
 * trained with (tests/fuzz/make_seeds.py), so the seeds pass the identity checks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "sdtrain.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* The plugin's one export, linked in from its objects (the header declares it for plugin builds). */
extern const sdt_entry sdtrain_entry;

#define STATE_SEED 7 /* as make_seeds.py trains the seeds */

static const sdt_ti_factory *ti;
static sdt_ti_trainer *trainer;

static void fail(const char *what)
{
    char err[1024] = "";
    if (trainer) ti->get_last_error(trainer, err, sizeof err, NULL);
    fprintf(stderr, "fuzz_state: %s: %s\n", what, err);
    abort();
}

static void copy_file(const char *from, const char *relative)
{
    gchar *data;
    gsize len;
    if (!g_file_get_contents(from, &data, &len, NULL)) {
        fprintf(stderr, "fuzz_state: cannot read %s\n", from);
        abort();
    }
    g_free(fuzz_write(relative, (const uint8_t *)data, len));
    g_free(data);
}

static void prepare_once(void)
{
    char err[512];
    if (sdtrain_entry.init((sdt_version)SDT_ABI_VERSION_INIT, err, sizeof err) != SDT_STATUS_OK) {
        fprintf(stderr, "fuzz_state: init: %s\n", err);
        abort();
    }
    ti = sdtrain_entry.get_factory(SDT_FACTORY_TEXTUAL_INVERSION);
    if (!ti || ti->create(NULL, &trainer, err, sizeof err) != SDT_STATUS_OK) abort();
    copy_file(SDT_FUZZ_DEMO_DIR "/dataset/demo_000.png", "dataset/demo_000.png");
    copy_file(SDT_FUZZ_DEMO_DIR "/dataset/demo_000.txt", "dataset/demo_000.txt");
    copy_file(SDT_FUZZ_STATE_DIR "/fuzzstate.safetensors", "fuzzstate.safetensors");
    char *embedding = fuzz_path("fuzzstate.safetensors"), *dataset = fuzz_path("dataset"), *logs = fuzz_path("logs");
    sdt_ti_config c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    ti->config_defaults(&c);
    c.embedding_path = embedding;
    c.model_path = SDT_FUZZ_DEMO_DIR "/model";
    c.dataset_dir = dataset;
    c.template_file = SDT_FUZZ_TEMPLATES_DIR "/subject_filewords.txt";
    c.log_dir = logs;
    c.width = c.height = 64;
    c.device = SDT_DEVICE_CHOICE_CPU;
    c.cpu_threads = 1;
    c.max_steps = 100;
    c.save_every = c.preview_every = 0;
    c.save_image_with_embedding = false;
    c.seed = STATE_SEED;
    c.precision = SDT_PRECISION_FP16; /* a scaler to restore */
    sdt_prepare_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (ti->prepare(trainer, &c, &info) != SDT_STATUS_OK) fail("prepare");
    g_free(embedding);
    g_free(dataset);
    g_free(logs);
}

/* Replaying seeds (ctest) shows how far each one gets. */
#ifdef SDT_FUZZ_SEEDS
#define REPLAY_NOTE(...) printf(__VA_ARGS__)
#else
#define REPLAY_NOTE(...) ((void)0)
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!trainer) prepare_once();
    char *path = fuzz_write("input.state.safetensors", data, size);
    char err[1024] = "";
    if (ti->load_state(trainer, path) != SDT_STATUS_OK) {
        ti->get_last_error(trainer, err, sizeof err, NULL);
        if (!err[0]) abort(); /* a refusal explains itself */
        REPLAY_NOTE("refused: %s\n", err);
    } else {
        REPLAY_NOTE("applied\n");
        char *again = fuzz_path("again.state.safetensors");
        if (ti->save_state(trainer, again) != SDT_STATUS_OK) fail("save_state after a load");
        if (ti->load_state(trainer, again) != SDT_STATUS_OK) fail("load_state of what save_state wrote");
        g_free(again);
    }
    g_free(path);
    return 0;
}
