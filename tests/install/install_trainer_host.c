/* install_trainer_host.c - the smallest host of the trainer factory ("sdtrain.trainer/1", ABI 1.7),
 * built against an installed sdtrain by test_install.sh, as README's "Using the plugin from a host"
 * shows it: it creates an embedding through the embedding files extension and trains it a few steps
 * as the config's one part. (install_host.c is the same host on the deprecated textual-inversion
 * factory: hosts built against earlier 1.x keep working.)
 *   install_trainer_host PLUGIN MODEL DATASET TEMPLATE OUT_DIR STEPS
 * Prints the steps it saw; exit 0 when the run reached STEPS. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sdtrain.h"

static long long last_step = -1;

static void on_log(void *user, sdt_log_level level, const char *message)
{
    (void)user;
    if (level >= SDT_LOG_WARNING) fprintf(stderr, "plugin: %s\n", message);
}

static void on_metrics(void *user, const sdt_metrics *m)
{
    (void)user;
    last_step = (long long)m->step;
    printf("step %lld loss %.4f\n", last_step, m->loss);
}

static int fail(const sdt_trainer_factory *f, sdt_trainer *t, const char *what)
{
    char err[1024] = "";
    if (f && t) f->get_last_error(t, err, sizeof err, NULL);
    fprintf(stderr, "install_trainer_host: %s failed: %s\n", what, err);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: install_trainer_host PLUGIN MODEL DATASET TEMPLATE OUT_DIR STEPS\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "install_trainer_host: %s\n", dlerror());
        return 1;
    }
    const sdt_entry *entry = (const sdt_entry *)dlsym(lib, SDTRAIN_ENTRY_SYMBOL);
    char err[1024];
    if (!entry || entry->init((sdt_version)SDT_ABI_VERSION_INIT, err, sizeof err) != SDT_STATUS_OK) {
        fprintf(stderr, "install_trainer_host: no usable %s in %s\n", SDTRAIN_ENTRY_SYMBOL, argv[1]);
        return 1;
    }
    const sdt_trainer_factory *f = entry->get_factory(SDT_FACTORY_TRAINER);
    const sdt_embedding_files_ext *files = f ? f->get_extension(SDT_EXT_EMBEDDING_FILES) : NULL;
    sdt_host_callbacks cb = {sizeof cb, NULL, on_log, on_metrics, NULL, NULL};
    sdt_trainer *t = NULL;
    if (!files || f->create(&cb, &t, err, sizeof err) != SDT_STATUS_OK) return fail(NULL, NULL, "create");

    sdt_embedding_spec spec = {.struct_size = sizeof spec,
                               .vectors_per_token = 1,
                               .name = "installed-trainer",
                               .init_text = "ring",
                               .model_path = argv[2],
                               .output_dir = argv[5]};
    char embedding[4096];
    if (files->create_embedding(t, &spec, embedding, sizeof embedding, NULL) != SDT_STATUS_OK)
        return fail(f, t, "create_embedding");

    sdt_train_options o = {.struct_size = sizeof o};
    sdt_embedding_part e = {.struct_size = sizeof e};
    if (f->train_options_defaults(&o) != SDT_STATUS_OK || f->embedding_part_defaults(&e) != SDT_STATUS_OK)
        return fail(f, t, "defaults");
    o.model_path = argv[2];
    o.dataset_dir = argv[3];
    o.template_file = argv[4];
    o.log_dir = argv[5];
    o.width = o.height = 64;
    o.device = SDT_DEVICE_CHOICE_CPU;
    o.cpu_threads = 1;
    o.max_steps = atoll(argv[6]);
    o.save_every = o.preview_every = 0;
    e.embedding_path = embedding;
    e.save_image_with_embedding = false;
    sdt_trainer_config cfg = {.struct_size = sizeof cfg, .options = &o, .embedding = &e};
    sdt_prepare_info info = {.struct_size = sizeof info};
    if (f->prepare(t, &cfg, &info) != SDT_STATUS_OK) return fail(f, t, "prepare");
    if (f->run(t) != SDT_STATUS_OK) return fail(f, t, "run");
    f->destroy(t);
    entry->deinit();
    printf("trained %s to step %lld through %s with plugin %s\n", embedding, last_step, SDT_FACTORY_TRAINER, argv[1]);
    return last_step == atoll(argv[6]) ? 0 : 1;
}
