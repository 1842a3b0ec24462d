/* install_host_common.c - the installed-tree hosts' command line, plugin entry and callbacks (see
 * install_host_common.h). */
#include "install_host_common.h"

#include <dlfcn.h>
#include <stdio.h>

long long install_host_last_step = -1;

static void on_log(void *user, sdt_log_level level, const char *message)
{
    (void)user;
    if (level >= SDT_LOG_WARNING) fprintf(stderr, "plugin: %s\n", message);
}

static void on_metrics(void *user, const sdt_metrics *m)
{
    (void)user;
    install_host_last_step = (long long)m->step;
    printf("step %lld loss %.4f\n", install_host_last_step, m->loss);
}

sdt_host_callbacks install_host_callbacks(void)
{
    sdt_host_callbacks cb = {sizeof cb, NULL, on_log, on_metrics, NULL, NULL};
    return cb;
}

int install_host_open(const char *name, int argc, char **argv, const sdt_entry **entry)
{
    if (argc != 7) {
        fprintf(stderr, "usage: %s PLUGIN MODEL DATASET TEMPLATE OUT_DIR STEPS\n", name);
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "%s: %s\n", name, dlerror());
        return 1;
    }
    *entry = (const sdt_entry *)dlsym(lib, SDTRAIN_ENTRY_SYMBOL);
    char err[1024];
    if (!*entry || (*entry)->init((sdt_version)SDT_ABI_VERSION_INIT, err, sizeof err) != SDT_STATUS_OK) {
        fprintf(stderr, "%s: no usable %s in %s\n", name, SDTRAIN_ENTRY_SYMBOL, argv[1]);
        return 1;
    }
    return 0;
}
