/* entry.c - the plugin's one exported symbol: version, init/deinit, factory lookup.
 *
 * The init reference count is the only mutable global state in the plugin (ABI rule 6):
 * it lets several host components share one loaded copy, each with its own init/deinit.
 * Nothing here can exit or abort; every refusal is a status and a sentence. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "host/copy_out.h"
#include "api/factories.h"
#include "api/runtime_pins.h"
#include "host/status.h"

#ifndef SDT_PLUGIN_VERSION
#define SDT_PLUGIN_VERSION "0.0.0"
#endif

static atomic_int init_count;

static sdt_status write_error(char *err, uint32_t err_size, sdt_status status, const char *sentence)
{
    if (err && err_size) sdt_copy_string_out(sentence, err, err_size, NULL);
    return status;
}

static sdt_status plugin_init(sdt_version host_version, char *err, uint32_t err_size)
{
    if (host_version.major != SDT_ABI_VERSION_MAJOR) {
        char sentence[512];
        snprintf(sentence, sizeof sentence,
                 "libsdtrain.so speaks ABI %u.%u.%u but the host was built for ABI %u.%u.%u: a "
                 "different major version is incompatible; use a plugin release with ABI major %u "
                 "or rebuild the host against this sdtrain.h.",
                 SDT_ABI_VERSION_MAJOR, SDT_ABI_VERSION_MINOR, SDT_ABI_VERSION_PATCH, (unsigned)host_version.major,
                 (unsigned)host_version.minor, (unsigned)host_version.patch, (unsigned)host_version.major);
        return write_error(err, err_size, SDT_STATUS_VERSION_MISMATCH, sentence);
    }
    /* A newer minor on the host side is fine too: it may only use what this plugin's
     * factory tables declare (their struct_size says which functions exist). */
    sdt_pin_unsafe_runtimes();
    atomic_fetch_add(&init_count, 1);
    write_error(err, err_size, SDT_STATUS_OK, "");
    return SDT_STATUS_OK;
}

static void plugin_deinit(void)
{
    /* Extra deinit calls are harmless: never below zero. */
    int count = atomic_load(&init_count);
    while (count > 0 && !atomic_compare_exchange_weak(&init_count, &count, count - 1)) {}
}

static const void *plugin_get_factory(const char *factory_id)
{
    if (!factory_id || atomic_load(&init_count) <= 0) return NULL;
    if (strcmp(factory_id, SDT_FACTORY_TRAINER) == 0) return &sdt_trainer_factory_table;
    if (strcmp(factory_id, SDT_FACTORY_TEXTUAL_INVERSION) == 0) return &sdt_ti_factory_table;
    if (strcmp(factory_id, SDT_FACTORY_HYPERNETWORK) == 0) return &sdt_hn_factory_table;
    if (strcmp(factory_id, SDT_FACTORY_SCALER) == 0) return sdt_loss_scaler_factory_get();
    return NULL;
}

SDT_EXPORT const sdt_entry sdtrain_entry = {
    .abi_version = {SDT_ABI_VERSION_MAJOR, SDT_ABI_VERSION_MINOR, SDT_ABI_VERSION_PATCH},
    .plugin_version = SDT_PLUGIN_VERSION,
    .init = plugin_init,
    .deinit = plugin_deinit,
    .get_factory = plugin_get_factory,
    .status_name = sdt_status_name,
};
