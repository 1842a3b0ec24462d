/* serve_fixed_random.c - LD_PRELOADed into `sdt-host serve` by e2e_serve_security: getrandom()
 * answers 0, 1, 2, ..., so the test can tell that a generated token comes from the system's
 * cryptographic source and not from GLib's Mersenne Twister (g_random_*). Visible: the build hides
 * symbols by default. */
#include <sys/random.h>
#include <sys/types.h>

__attribute__((visibility("default"))) ssize_t getrandom(void *buffer, size_t length, unsigned int flags)
{
    (void)flags;
    for (size_t i = 0; i < length; i++) ((unsigned char *)buffer)[i] = (unsigned char)i;
    return (ssize_t)length;
}
