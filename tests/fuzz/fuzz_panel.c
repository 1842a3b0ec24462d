/* fuzz_panel.c - libFuzzer target: any bytes as the panel file of `sdt-host train --config`
 * (host-sim/panel_options.c: a GKeyFile, group [train], keys named like the options). It is
 * either applied or refused with a sentence; the plugin's defaults stand in a stub factory. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "panel_options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static sdt_status stub_defaults(sdt_ti_config *c)
{
    c->batch_size = 1;
    c->max_steps = 100;
    c->learn_rate = "0.005";
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
    sdt_ti_factory factory;
    memset(&factory, 0, sizeof factory);
    factory.config_defaults = stub_defaults;
    sdt_ti_config config;
    char *error = NULL;
    gboolean usage_error = FALSE;
    if (panel_build_config(v, &factory, &config, &error, &usage_error)) {
        if (error || usage_error) abort();
        if (!panel_check_required(&config, &error)) {
            if (!error) abort();
            g_free(error);
        }
    } else {
        if (!error || !error[0] || usage_error) abort(); /* a file's fault, with a sentence */
        char *explained = panel_explain(error);
        g_free(explained);
        g_free(error);
    }
    g_option_context_free(ctx);
    panel_values_free(v);
    g_free(path);
    return 0;
}
