/* scaler_factory.c - the "sdtrain.scaler/1" factory.
 *
 * The ABI declares the public scaler (abi/sdtrain.h, sdt_loss_scaler_factory). Its implementation
 * wraps the internal per-optimizer scaler of plugin/core/scaler.h (library sdt_plugin_core),
 * which is not on this branch yet; until it is wired in, get_factory returns NULL for the id,
 * which the ABI defines as "this plugin does not provide it". */
#include "factories.h"

const sdt_loss_scaler_factory *sdt_loss_scaler_factory_get(void)
{
    return NULL;
}
