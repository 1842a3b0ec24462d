/* runtime_pins.c - see runtime_pins.h. */
#include <dlfcn.h>

#include "api/runtime_pins.h"

void sdt_pin_unsafe_runtimes(void)
{
    /* RTLD_NOLOAD: only if it is already there (a CPU build links it); RTLD_NODELETE makes the
     * loader keep it mapped for the life of the process. The handle is deliberately not closed. */
    (void)dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}
