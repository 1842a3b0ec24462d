/* runtime_pins.h - keeps runtimes that cannot be unloaded safely resident, so that unloading
 * libsdtrain.so (docs/abi.md rule 1.3) never unloads them under their own threads. */
#ifndef SDT_PLUGIN_RUNTIME_PINS_H
#define SDT_PLUGIN_RUNTIME_PINS_H

/* Pins the OpenMP runtime if it is loaded: libgomp keeps a pool of parked worker threads and
 * state it never frees, so unmapping it while those threads exist would crash the host. */
void sdt_pin_unsafe_runtimes(void);

#endif
