/* install_trainer_host.c - the smallest host of the trainer factory ("sdtrain.trainer/1", ABI 1.7),
 * built against an installed sdtrain by test_install.sh, as README's "Using the plugin from a host"
 * shows it: it creates an embedding through the embedding files extension and trains it a few steps
 * as the config's one part. (install_host.c is the same host on the deprecated textual-inversion
 * factory: hosts built against earlier 1.x keep working.)
 *   install_trainer_host PLUGIN MODEL DATASET TEMPLATE OUT_DIR STEPS
 * Prints the steps it saw; exit 0 when the run reached STEPS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "install_host_common.h"

static int fail(const sdt_trainer_factory *f, sdt_trainer *t, const char *what)
{
    char err[1024] = "";
    if (f && t) f->get_last_error(t, err, sizeof err, NULL);
    fprintf(stderr, "install_trainer_host: %s failed: %s\n", what, err);
    return 1;
}

int main(int argc, char **argv)
{
    const sdt_entry *entry = NULL;
    int opened = install_host_open("install_trainer_host", argc, argv, &entry);
    if (opened != 0) return opened;
    char err[1024];
    const sdt_trainer_factory *f = entry->get_factory(SDT_FACTORY_TRAINER);
    const sdt_embedding_files_ext *files = f ? f->get_extension(SDT_EXT_EMBEDDING_FILES) : NULL;
    sdt_host_callbacks cb = install_host_callbacks();
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
    printf("trained %s to step %lld through %s with plugin %s\n", embedding, install_host_last_step,
           SDT_FACTORY_TRAINER, argv[1]);
    return install_host_last_step == atoll(argv[6]) ? 0 : 1;
}
