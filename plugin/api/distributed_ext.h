/* distributed_ext.h - the extension "sdtrain.distributed/1" (1.8) of the trainer factory. */
#ifndef SDT_API_DISTRIBUTED_EXT_H
#define SDT_API_DISTRIBUTED_EXT_H

#include "sdtrain.h"

extern const sdt_distributed_ext sdt_distributed_ext_table;

#endif
