/* core_status_map.h - the numerics core's detailed codes (train/core_status.h) as ABI
 * status codes. The sentence carries the detail; the ABI code says what kind of failure it is. */
#ifndef SDT_PLUGIN_CORE_STATUS_MAP_H
#define SDT_PLUGIN_CORE_STATUS_MAP_H

#include "train/core_status.h"
#include "sdtrain.h"

sdt_status sdt_status_from_core(sdt_core_status status);

#endif
