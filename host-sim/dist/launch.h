/* launch.h - `sdt-host train --gpus 0,1,2,3`: starts one rank process per GPU (this binary with the
 * same arguments plus torchrun's variables), shows rank 0's output as the main stream and the others'
 * prefixed with their rank, and stops them all together: one rank failing stops the others (SIGTERM,
 * SIGKILL after a grace period) with one sentence naming it; Ctrl-C reaches every rank as its
 * Interrupt button (each finishes its step; rank 0 saves). */
#ifndef SDT_HOST_DIST_LAUNCH_H
#define SDT_HOST_DIST_LAUNCH_H

#include <glib.h>
#include <stdint.h>

/* Seconds between the SIGTERM that stops the ranks left after one failed and the SIGKILL. */
#define LAUNCH_STOP_GRACE_SECONDS 30

/* argv: the rank's command line without the program (what each rank runs, e.g. "train" and its
 * options); each rank gets "--gpus=" (it is a rank, not a launcher) and "--device=cuda:<its GPU>"
 * appended. Returns sdt-host's exit status: 0 when every rank finished, 128 + the signal after a stop
 * signal, 1 after a rank failed (the sentence printed). */
int launch_ranks(const char *const *argv, const int32_t *gpus, int32_t count);

#endif
