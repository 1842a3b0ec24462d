/* factories.h - the factory tables the entry hands out, one file per factory. */
#ifndef SDT_PLUGIN_FACTORIES_H
#define SDT_PLUGIN_FACTORIES_H

#include "sdtrain.h"

extern const sdt_trainer_factory sdt_trainer_factory_table;
/* deprecated since 1.7: adapters over the trainer factory */
extern const sdt_ti_factory sdt_ti_factory_table;
extern const sdt_hn_factory sdt_hn_factory_table;

/* The scaler factory, or NULL while this build has no internal scaler wired in. */
const sdt_loss_scaler_factory *sdt_loss_scaler_factory_get(void);

#endif
