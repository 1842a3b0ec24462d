/* serve_trainer.c - see serve_trainer.h. */
#include <string.h>

#include "serve_trainer.h"

gboolean serve_trainer_open(serve_trainer *t, const host_plugin *plugin, const char *extension_id, char **error)
{
    memset(t, 0, sizeof *t);
    char sentence[1024] = "";
    t->factory = host_plugin_factory(plugin, SDT_FACTORY_TRAINER, error);
    if (!t->factory) return FALSE;
    t->extension = t->factory->get_extension(extension_id);
    if (!t->extension) {
        *error = g_strdup_printf("The plugin %s (version %s) does not provide '%s'; use a newer plugin.", plugin->path,
                                 plugin->entry->plugin_version, extension_id);
        return FALSE;
    }
    if (t->factory->create(NULL, &t->trainer, sentence, sizeof sentence) != SDT_STATUS_OK) {
        *error = g_strdup(sentence[0] ? sentence : "The plugin could not create a trainer.");
        return FALSE;
    }
    return TRUE;
}

void serve_trainer_error(const serve_trainer *t, char *sentence, uint32_t size)
{
    t->factory->get_last_error(t->trainer, sentence, size, NULL);
}

void serve_trainer_close(serve_trainer *t)
{
    if (t->trainer) t->factory->destroy(t->trainer);
    memset(t, 0, sizeof *t);
}
