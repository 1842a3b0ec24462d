/* install_host.c - the smallest real host, built against an installed sdtrain (pkg-config or
 * the CMake package) by test_install.sh: it opens the installed plugin, creates an embedding
 * on a model and trains it a few steps, the way README's "Using the plugin from a host" shows.
 *   install_host PLUGIN MODEL DATASET TEMPLATE OUT_DIR STEPS
 * Prints the steps it saw; exit 0 when the run reached STEPS and saved the embedding. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "install_host_common.h"

static int fail(const sdt_ti_factory *ti, sdt_ti_trainer *t, const char *what)
{
    char err[1024] = "";
    if (ti && t) ti->get_last_error(t, err, sizeof err, NULL);
    fprintf(stderr, "install_host: %s failed: %s\n", what, err);
    return 1;
}

int main(int argc, char **argv)
{
    const sdt_entry *entry = NULL;
    int opened = install_host_open("install_host", argc, argv, &entry);
    if (opened != 0) return opened;
    char err[1024];
    const sdt_ti_factory *ti = entry->get_factory(SDT_FACTORY_TEXTUAL_INVERSION);
    sdt_host_callbacks cb = install_host_callbacks();
    sdt_ti_trainer *t = NULL;
    if (!ti || ti->create(&cb, &t, err, sizeof err) != SDT_STATUS_OK) return fail(NULL, NULL, "create");

    sdt_embedding_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.struct_size = sizeof spec;
    spec.vectors_per_token = 2;
    spec.name = "installed";
    spec.init_text = "ring";
    spec.model_path = argv[2];
    spec.output_dir = argv[5];
    char embedding[4096];
    if (ti->create_embedding(t, &spec, embedding, sizeof embedding, NULL) != SDT_STATUS_OK)
        return fail(ti, t, "create_embedding");

    sdt_ti_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.struct_size = sizeof cfg;
    ti->config_defaults(&cfg);
    cfg.embedding_path = embedding;
    cfg.model_path = argv[2];
    cfg.dataset_dir = argv[3];
    cfg.template_file = argv[4];
    cfg.log_dir = argv[5];
    cfg.width = cfg.height = 64;
    cfg.device = SDT_DEVICE_CHOICE_CPU;
    cfg.cpu_threads = 1;
    cfg.max_steps = atoll(argv[6]);
    cfg.save_every = cfg.preview_every = 0;
    cfg.save_image_with_embedding = false;
    sdt_prepare_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (ti->prepare(t, &cfg, &info) != SDT_STATUS_OK) return fail(ti, t, "prepare");
    if (ti->run(t) != SDT_STATUS_OK) return fail(ti, t, "run");
    ti->destroy(t);
    entry->deinit();
    printf("trained %s to step %lld with plugin %s (ABI %u.%u)\n", embedding, install_host_last_step, argv[1],
           entry->abi_version.major, entry->abi_version.minor);
    return install_host_last_step == atoll(argv[6]) ? 0 : 1;
}
