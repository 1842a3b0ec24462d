/* fuzz_panel.c - libFuzzer target: any bytes as the panel file of `sdt-host train --config`
 * (host-sim/panel_options.c: a GKeyFile, group [train], keys named like the options). It is
 * either applied (to the method it asks for) or refused with a sentence; the plugin's defaults
 * stand in stubs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "panel_options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static sdt_status stub_train_options(sdt_train_options *o)
{
    o->batch_size = 1;
    o->max_steps = 100;
    return SDT_STATUS_OK;
}

static sdt_status stub_embedding_part(sdt_embedding_part *p)
{
    p->learn_rate = "0.005";
    return SDT_STATUS_OK;
}

static sdt_status stub_hypernetwork_part(sdt_hypernetwork_part *p)
{
    p->learn_rate = "0.00001";
    p->weight_decay = 0.01;
    return SDT_STATUS_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *path = fuzz_write("panel.ini", data, size);
    panel_values *v = panel_values_new();
    GOptionContext *ctx = g_option_context_new(NULL);
    g_option_context_add_main_entries(ctx, panel_option_entries(v), NULL);
    char *args[] = {"sdt-host", "--config", path, NULL};
    char **argv = args;
    int argc = 3;
    if (!g_option_context_parse(ctx, &argc, &argv, NULL)) abort();
    panel_defaults defaults = {stub_train_options, stub_embedding_part, stub_hypernetwork_part};
    panel_config config;
    char *error = NULL;
    gboolean usage_error = FALSE;
    /* The method the file asks for (hypernetwork= or not), as `train` picks it. */
    panel_method method = panel_load_file(v, &error) ? panel_method_chosen(v) : PANEL_EMBEDDING;
    g_free(error);
    error = NULL;
    if (panel_build_config(v, method, &defaults, &config, &error, &usage_error)) {
        if (error || usage_error) abort();
        if (!panel_check_required(&config, &error)) {
            if (!error) abort();
            g_free(error);
        } else {
            panel_finish_config(&config);
            if (!config.trainer.options || (!config.trainer.embedding && !config.trainer.hypernetwork)) abort();
        }
    } else {
        if (!error || !error[0] || usage_error) abort(); /* a file's fault, with a sentence */
        char *explained = panel_explain(method, error);
        g_free(explained);
        g_free(error);
    }
    g_option_context_free(ctx);
    panel_values_free(v);
    g_free(path);
    return 0;
}
