/* demo_grid.h - the demo's evidence: runs sdt-demo-eval (host-sim/demo/demo_eval.c, shipped
 * beside sdt-host in demo-tools/) on what a demo trained, and prints the scores of each row and
 * where the labelled comparison grid is. */
#ifndef SDT_HOST_DEMO_GRID_H
#define SDT_HOST_DEMO_GRID_H

#include <stdbool.h>
#include <stdint.h>

typedef struct demo_grid_request {
    const char *model, *grid_path;
    const char *initial;      /* the embedding before training (embedding grid), or NULL */
    const char *learned;      /* the learned embedding, or NULL */
    const char *hypernetwork; /* NULL: the embedding grid (the words, initial, learned, concept score);
                               * else the hypernetwork grid (strength 0, 0.5, 1; style score) with the
                               * learned embedding in the prompt when there is one (the joint demo) */
    int seeds;                /* columns */
    double cfg;               /* classifier-free guidance scale, 1..30 */
    int steps;                /* the sampler's steps, 0: sdt-demo-eval's default (20) */
    uint64_t seed;
    /* A transformer model (the Flux demo): its parts beside the checkpoint (NULL: none) and T5's
     * prompt length (0: the pipeline's) */
    const char *clip_l, *t5xxl, *vae;
    int t5_len;
} demo_grid_request;

/* Renders the grid and prints the scores. false + a printed sentence when the tool is missing or
 * fails; the demo's training result stands either way. */
bool demo_grid_run(const demo_grid_request *rq);

#endif
