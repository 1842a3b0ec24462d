/* write_fault.h - a full disk that the tests can cause.
 *
 * A full disk cannot be had on demand in a test, so the plugin's test build
 * (plugin/testhooks/test_hooks_env.c, SDTRAIN_FAULT_ENOSPC) defines the hook behind this, and
 * every save (models/atomic_file.c, the loss CSV's append) asks it before writing: when it says
 * so, the bytes go to /dev/full, whose writes fail with ENOSPC exactly as a full disk's do, at the
 * same calls (a buffered fwrite, fflush, write). In every other build nothing defines the hook:
 * the answer is always false and nothing is read from anywhere.
 */
#ifndef SDT_MODELS_WRITE_FAULT_H
#define SDT_MODELS_WRITE_FAULT_H

#include <stdbool.h>

#define SDT_WRITE_FAULT_DEVICE "/dev/full"

/* true: the writes to path are to fail as on a full disk (write them to SDT_WRITE_FAULT_DEVICE). */
bool sdt_write_fault_disk_full(const char *path);

#endif
