/* write_fault.c - see write_fault.h. */
#include "write_fault.h"

/* Weak and hidden: resolved when the library is linked, to the test build's definition or, where
 * there is none, to NULL; never looked up in the host's process at load time. */
extern bool sdt_test_hook_disk_full(const char *path) __attribute__((weak, visibility("hidden")));

bool sdt_write_fault_disk_full(const char *path)
{
    return sdt_test_hook_disk_full && sdt_test_hook_disk_full(path);
}
