/* serve_trainer.h - one trainer of the plugin's trainer factory for a request that writes or reads
 * a file (the Create tabs, a model's description) through one of the factory's extensions. */
#ifndef SDT_SERVE_TRAINER_H
#define SDT_SERVE_TRAINER_H

#include <glib.h>

#include "plugin_loader.h"

typedef struct serve_trainer {
    const sdt_trainer_factory *factory;
    sdt_trainer *trainer;  /* without callbacks */
    const void *extension; /* the table extension_id names */
} serve_trainer;

/* FALSE with a sentence in *error (g_free) when the factory, the trainer or the extension is
 * missing; nothing then needs closing. */
gboolean serve_trainer_open(serve_trainer *t, const host_plugin *plugin, const char *extension_id, char **error);

/* The trainer's last error: an extension's failure leaves its sentence there. */
void serve_trainer_error(const serve_trainer *t, char *sentence, uint32_t size);

void serve_trainer_close(serve_trainer *t);

#endif
