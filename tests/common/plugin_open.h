/* plugin_open.h - how a test host loads libsdtrain.so: dlopen (RTLD_LOCAL, as a host would),
 * the one exported entry symbol, and init with this header's version. Header only; needs
 * sdt_test.h first and ${CMAKE_DL_LIBS}. */
#ifndef SDT_TEST_PLUGIN_OPEN_H
#define SDT_TEST_PLUGIN_OPEN_H

#include <dlfcn.h>

#include "sdt_test.h"
#include "sdtrain.h"

/* dlopen + dlsym of the entry; NULL (with a failed CHECK) when either fails. */
static inline const sdt_entry *sdt_test_plugin_open(const char *path, void **lib)
{
    *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK(*lib != NULL, "dlopen %s: %s", path, dlerror());
    if (!*lib) return NULL;
    const sdt_entry *e = (const sdt_entry *)dlsym(*lib, SDTRAIN_ENTRY_SYMBOL);
    CHECK(e != NULL, "no %s symbol in %s", SDTRAIN_ENTRY_SYMBOL, path);
    return e;
}

/* Open and init; the caller deinit()s and dlclose()s. NULL when anything failed. */
static inline const sdt_entry *sdt_test_plugin_load(const char *path, void **lib)
{
    const sdt_entry *e = sdt_test_plugin_open(path, lib);
    if (!e) return NULL;
    char err[512] = "";
    sdt_version v = SDT_ABI_VERSION_INIT;
    sdt_status st = e->init(v, err, sizeof err);
    CHECK(st == SDT_STATUS_OK, "init: %s", err);
    return st == SDT_STATUS_OK ? e : NULL;
}

#endif
