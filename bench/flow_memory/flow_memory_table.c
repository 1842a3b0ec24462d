/* flow_memory_table.c - sdt-flow-memory: the GPU memory an SD3.5 / Flux.1 embedding run needs at full size
 * (train/flow_memory.h: the frozen weights, the pass's measured arena, the trained rows), for SD3.5 Medium and
 * Large and Flux dev and schnell at 512 and 1024 pixels, batch 1, bf16, with and without gradient checkpointing,
 * T5's rows trained (T5 on the GPU, its backward run) or its output cached (T5 off the GPU). Nothing is allocated:
 * the sizes come from measuring arenas.
 *
 *   sdt-flow-memory [--markdown]
 */
#include <stdio.h>
#include <string.h>

#include "ops.h"
#include "train/flow_memory.h"

static double gib(size_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0 * 1024.0);
}

int main(int argc, char **argv)
{
    const bool md = argc > 1 && !strcmp(argv[1], "--markdown");
    sdt_backend *be = sdt_backend_cpu_create(1);
    if (!be) {
        fprintf(stderr, "sdt-flow-memory: no CPU backend\n");
        return 1;
    }
    const char *names[4] = {"SD3.5 Medium", "SD3.5 Large", "Flux.1 dev", "Flux.1 schnell"};
    const int sides[2] = {512, 1024};
    if (md) {
        printf("| model | image | T5 | checkpointing | weights | activations | total |\n");
        printf("|---|---|---|---|---:|---:|---:|\n");
    } else {
        printf("%-15s %5s %-8s %-5s %9s %12s %9s  (GiB; batch 1, bf16; plus the CUDA context)\n", "model", "image",
               "T5", "ckpt", "weights", "activations", "total");
    }
    for (int m = 0; m < 4; m++)
        for (int s = 0; s < 2; s++)
            for (int t5 = 1; t5 >= 0; t5--)
                for (int ck = 0; ck < 2; ck++) {
                    sdt_flow_memory_config c =
                        m < 2 ? sdt_flow_memory_sd35(m == 1, sides[s]) : sdt_flow_memory_flux(m == 2, sides[s]);
                    c.t5_trained = t5, c.checkpointing = ck;
                    sdt_flow_memory r;
                    sdt_error error = {0};
                    if (!sdt_flow_memory_estimate(&c, be, &r, &error)) {
                        fprintf(stderr, "sdt-flow-memory: %s: %s\n", names[m], error.message);
                        be->destroy(be);
                        return 1;
                    }
                    const char *t5s = t5 ? "trained" : "cached";
                    if (md)
                        printf("| %s | %d² | %s | %s | %.1f | %.1f | %.1f |\n", names[m], sides[s], t5s,
                               ck ? "on" : "off", gib(r.weights), gib(r.activations + r.trained), gib(r.total));
                    else
                        printf("%-15s %5d %-8s %-5s %9.1f %12.1f %9.1f\n", names[m], sides[s], t5s, ck ? "on" : "off",
                               gib(r.weights), gib(r.activations + r.trained), gib(r.total));
                }
    be->destroy(be);
    return 0;
}
