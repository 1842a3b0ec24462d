/* install_host_common.h - what the two hosts built against an installed sdtrain (install_host.c on the
 * textual-inversion factory, install_trainer_host.c on the trainer factory) share: the command line, opening
 * the plugin's entry, and the callbacks that print each step. */
#ifndef SDT_TESTS_INSTALL_HOST_COMMON_H
#define SDT_TESTS_INSTALL_HOST_COMMON_H

#include "sdtrain.h"

/* The last step the metrics callback saw (-1 before any). */
extern long long install_host_last_step;

/* The callbacks: warnings and errors to stderr, each step's loss to stdout. */
sdt_host_callbacks install_host_callbacks(void);

/* Checks the command line (PLUGIN MODEL DATASET TEMPLATE OUT_DIR STEPS), opens the plugin and initialises its
 * entry into *entry. Returns 0, or main's exit status after a message on stderr that starts with name. */
int install_host_open(const char *name, int argc, char **argv, const sdt_entry **entry);

#endif
