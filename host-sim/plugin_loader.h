/* plugin_loader.h - finds, opens and version-checks libsdtrain.so the way a host application
 * should: GModule with local binding, one entry symbol, init with our ABI version. */
#ifndef SDT_HOST_PLUGIN_LOADER_H
#define SDT_HOST_PLUGIN_LOADER_H

#include <glib.h>
#include <gmodule.h>

#include "sdtrain.h"

typedef struct host_plugin {
    GModule *module;
    const sdt_entry *entry;
    char *path; /* the file actually opened */
} host_plugin;

/* Opens the plugin: explicit_path (--plugin) if given, else $SDTRAIN_PLUGIN, else
 * libsdtrain.so next to this executable, in ../lib, or in ../plugin (the build tree).
 * On failure returns FALSE and *error is one sentence naming what was tried and the fix. */
gboolean host_plugin_open(host_plugin *p, const char *explicit_path, char **error);

/* The factory for id, or NULL with a sentence in *error (error may be NULL). */
const void *host_plugin_factory(const host_plugin *p, const char *id, char **error);

/* deinit and close; safe on a plugin that failed to open. */
void host_plugin_close(host_plugin *p);

#endif
