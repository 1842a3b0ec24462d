/* cudnn_plan.cu - see cudnn_plan.cuh. */
#include "cudnn_plan.cuh"

cudnnStatus_t dnn_pool_new(dnn_pool *p, cudnnBackendDescriptorType_t type, dnn_desc *out)
{
    if (p->n == DNN_POOL_MAX) return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    cudnnStatus_t s = cudnnBackendCreateDescriptor(type, out);
    if (s == CUDNN_STATUS_SUCCESS) p->d[p->n++] = *out;
    return s;
}

void dnn_pool_free(dnn_pool *p)
{
    while (p->n > 0) cudnnBackendDestroyDescriptor(p->d[--p->n]);
}

cudnnStatus_t dnn_tensor(dnn_pool *p, dnn_desc *out, int64_t uid, cudnnDataType_t dt, int ndim, const int64_t *dims,
                         const int64_t *strides, int64_t align, bool is_virtual, bool by_value)
{
    if (uid == 0) uid = 1000 + p->next_virtual++;
    cudnnStatus_t s = dnn_pool_new(p, CUDNN_BACKEND_TENSOR_DESCRIPTOR, out);
    dnn_desc t = *out;
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, ndim, dims);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, ndim, strides);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    if (s == CUDNN_STATUS_SUCCESS && is_virtual)
        s = cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
    if (s == CUDNN_STATUS_SUCCESS && by_value)
        s = cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(t);
    return s;
}

/* Whether an engine config's numerics are allowed (cudnn_plan.cuh). */
static bool engine_allowed(dnn_desc cfg, bool exact_f32)
{
    dnn_desc engine;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) != CUDNN_STATUS_SUCCESS) return false;
    int64_t n = 0;
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    bool ok = cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                       &engine) == CUDNN_STATUS_SUCCESS &&
              cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                       CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes) == CUDNN_STATUS_SUCCESS;
    for (int64_t i = 0; ok && i < n; i++) {
        cudnnBackendNumericalNote_t note = notes[i];
        if (note == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC || note == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)
            ok = false;
        if (exact_f32 && (note == CUDNN_NUMERICAL_NOTE_TENSOR_CORE || note == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS))
            ok = false;
    }
    cudnnBackendDestroyDescriptor(engine);
    return ok;
}

cudnnStatus_t dnn_choose_plan(cudnnHandle_t h, dnn_desc graph, bool exact_f32, size_t cap, dnn_desc *plan_out,
                              size_t *workspace)
{
    static const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    cudnnStatus_t last = CUDNN_STATUS_NOT_SUPPORTED;
    for (int m = 0; m < 2; m++) {
        dnn_desc heur;
        cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur);
        if (s != CUDNN_STATUS_SUCCESS) return s;
        s = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                     &graph);
        if (s == CUDNN_STATUS_SUCCESS)
            s = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[m]);
        if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(heur);
        int64_t count = 0;
        if (s == CUDNN_STATUS_SUCCESS)
            s = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                         NULL);
        dnn_desc cfgs[64];
        int64_t made = 0, got = 0;
        if (count > 64) count = 64;
        while (s == CUDNN_STATUS_SUCCESS && made < count) {
            s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[made]);
            if (s == CUDNN_STATUS_SUCCESS) made++;
        }
        if (s == CUDNN_STATUS_SUCCESS && count > 0)
            s = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                         &got, cfgs);
        bool found = false;
        for (int64_t i = 0; s == CUDNN_STATUS_SUCCESS && i < got && !found; i++) {
            if (!engine_allowed(cfgs[i], exact_f32)) continue;
            dnn_desc plan;
            if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) != CUDNN_STATUS_SUCCESS)
                continue;
            int64_t ws = 0, n = 0;
            cudnnStatus_t ps =
                cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
            if (ps == CUDNN_STATUS_SUCCESS)
                ps = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                              CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]);
            if (ps == CUDNN_STATUS_SUCCESS) ps = cudnnBackendFinalize(plan);
            if (ps == CUDNN_STATUS_SUCCESS)
                ps = cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                              &ws);
            if (ps == CUDNN_STATUS_SUCCESS && ws >= 0 && (size_t)ws <= cap) {
                *plan_out = plan;
                *workspace = (size_t)ws;
                found = true;
            } else {
                last = ps == CUDNN_STATUS_SUCCESS ? CUDNN_STATUS_NOT_SUPPORTED : ps;
                cudnnBackendDestroyDescriptor(plan);
            }
        }
        for (int64_t i = 0; i < made; i++) cudnnBackendDestroyDescriptor(cfgs[i]);
        cudnnBackendDestroyDescriptor(heur);
        if (found) return CUDNN_STATUS_SUCCESS;
        if (s != CUDNN_STATUS_SUCCESS) last = s;
    }
    return last;
}

cudnnStatus_t dnn_plan_for_ops(dnn_pool *p, cudnnHandle_t h, dnn_desc *ops, int n, bool exact_f32, size_t cap,
                               dnn_desc *plan, size_t *workspace)
{
    dnn_desc graph;
    cudnnStatus_t s = dnn_pool_new(p, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, ops);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(graph);
    if (s == CUDNN_STATUS_SUCCESS) s = dnn_choose_plan(h, graph, exact_f32, cap, plan, workspace);
    return s;
}

cudnnStatus_t dnn_execute(cudnnHandle_t h, dnn_desc plan, int n, const int64_t *uids, void *const *ptrs,
                          void *workspace)
{
    dnn_desc pack;
    cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
    if (s != CUDNN_STATUS_SUCCESS) return s;
    s = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(pack);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendExecute(h, plan, pack);
    cudnnBackendDestroyDescriptor(pack);
    return s;
}
