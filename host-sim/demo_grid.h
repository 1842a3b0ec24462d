/* demo_grid.h - the demo's before/after evidence: runs sdt-demo-eval (host-sim/demo/demo_eval.c,
 * shipped beside sdt-host in demo-tools/) on the initial and the learned embedding, and prints
 * the concept scores and where the comparison grid is. */
#ifndef SDT_HOST_DEMO_GRID_H
#define SDT_HOST_DEMO_GRID_H

#include <stdbool.h>
#include <stdint.h>

/* Renders `seeds` pictures per row (the concept in words, the initial embedding, the learned
 * one) into grid_path and prints the scores. false + a printed sentence when the tool is
 * missing or fails; the demo's training result stands either way. */
bool demo_grid_run(const char *model, const char *initial, const char *learned, const char *grid_path, int seeds,
                   uint64_t seed);

#endif
