/* step_graph.cu - the backend's captured steps (CUDA graphs), one per slot. Each is recorded on the
 * backend's own stream in thread-local capture mode, so no other thread of the host and none of its
 * streams is touched; it is kept until dropped or replaced and replayed on the same stream. Semantics:
 * kernels/ops.h (capture_begin .. drop_capture); what the training step keeps out of a capture:
 * docs/gpu-notes.md "What a captured step needs". */
#include "cuda_ops.h"

bool cuda_capture_refuses(sdt_backend *be, const char *what)
{
    cuda_ctx *c = ctx_of(be);
    if (!c->graph.capturing) return false;
    c->graph.spoiled = true;
    cuda_fail(be, SDT_ERR_DEVICE,
              "%s cannot be recorded in a captured step (it needs the host); the step runs uncaptured", what);
    return true;
}

static void slot_free(cuda_ctx *c, int slot)
{
    if (!c->graph.exec[slot]) return;
    if (!c->graph.capturing) cudaStreamSynchronize(c->stream); /* a replay may still be running */
    cudaGraphExecDestroy(c->graph.exec[slot]);
    c->graph.exec[slot] = NULL;
}

void cuda_step_graph_forget(cuda_ctx *c)
{
    for (int i = 0; i < SDT_CAPTURE_SLOTS; i++) slot_free(c, i);
}

void cuda_step_graph_free(cuda_ctx *c)
{
    if (c->graph.capturing) {
        cudaGraph_t unfinished = NULL;
        if (cudaStreamEndCapture(c->stream, &unfinished) == cudaSuccess && unfinished) cudaGraphDestroy(unfinished);
        cudaGetLastError();
        c->graph.capturing = false;
    }
    cuda_step_graph_forget(c);
}

static bool slot_ok(int slot)
{
    return slot >= 0 && slot < SDT_CAPTURE_SLOTS;
}

int cuda_capture_begin(sdt_backend *be)
{
    cuda_ctx *c = ctx_of(be);
    if (c->graph.capturing)
        return cuda_fail(be, SDT_ERR_INTERNAL, "a step capture is already running (a bug: please report)");
    /* thread-local: a call that is unsafe during a capture fails on this thread only; the host's other
     * threads, which may be using CUDA themselves, are not affected */
    CUDA_TRY(be, cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal));
    c->graph.capturing = true;
    c->graph.spoiled = false;
    return 0;
}

int cuda_capture_end(sdt_backend *be, int slot, bool *captured)
{
    cuda_ctx *c = ctx_of(be);
    *captured = false;
    if (!c->graph.capturing)
        return cuda_fail(be, SDT_ERR_INTERNAL, "no step capture is running (a bug: please report)");
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(c->stream, &graph);
    bool spoiled = c->graph.spoiled || e != cudaSuccess || !graph || !slot_ok(slot);
    c->graph.capturing = false;
    c->graph.spoiled = false;
    cudaGraphExec_t exec = NULL;
    if (!spoiled && cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
        exec = NULL;
        spoiled = true; /* too large to instantiate, say: the same work runs uncaptured */
    }
    if (graph) cudaGraphDestroy(graph); /* the executable graph holds what it needs */
    if (spoiled) {
        cudaGetLastError(); /* an invalidated capture's error is not sticky: the stream works on */
        sdt_error_clear(&be->error);
        return slot_ok(slot) ? 0 : cuda_fail(be, SDT_ERR_INTERNAL, "capture slot %d does not exist (a bug)", slot);
    }
    slot_free(c, slot);
    c->graph.exec[slot] = exec;
    *captured = true;
    return 0;
}

int cuda_replay(sdt_backend *be, int slot)
{
    cuda_ctx *c = ctx_of(be);
    if (c->graph.capturing)
        return cuda_fail(be, SDT_ERR_INTERNAL,
                         "a captured step cannot be replayed during a capture (a bug: please report)");
    if (!slot_ok(slot) || !c->graph.exec[slot])
        return cuda_fail(be, SDT_ERR_INTERNAL, "no captured step is kept in slot %d to replay (a bug: please report)",
                         slot);
    CUDA_TRY(be, cudaGraphLaunch(c->graph.exec[slot], c->stream));
    return 0;
}

void cuda_drop_capture(sdt_backend *be, int slot)
{
    cuda_ctx *c = ctx_of(be);
    if (slot < 0)
        cuda_step_graph_forget(c);
    else if (slot_ok(slot))
        slot_free(c, slot);
}
