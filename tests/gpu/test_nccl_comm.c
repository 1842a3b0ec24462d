/* test_nccl_comm.c - the NCCL communicator of the CUDA module (kernels/cuda/nccl_comm.cu) on real
 * GPUs: world size 1 leaves every value's bytes as they were (the one-GPU path is today's path),
 * the small vectors, broadcast and barrier work, abort fails the next call with the rank's
 * sentence; with 2+ GPUs visible, 2 ranks in one process (one thread each) sum to what one rank
 * sums on the host, within f32 rounding. Skips (77) without a GPU, without the module's NCCL entry
 * or without libnccl.so.2. */
#include <pthread.h>
#include <string.h>

#include "comm.h"
#include "gpu_module.h"
#include "sdt_test.h"

#define N 1000

static const sdt_comm_nccl_api *nccl_api(void)
{
    const char *path = getenv("SDT_CUDA_MODULE") ? getenv("SDT_CUDA_MODULE") : SDT_CUDA_MODULE_PATH;
    void *module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    sdt_comm_nccl_api_fn get = module ? (sdt_comm_nccl_api_fn)dlsym(module, SDT_COMM_NCCL_API_SYMBOL) : NULL;
    return get ? get() : NULL;
}

static void fill(float *x, int rank)
{
    for (int i = 0; i < N; i++) x[i] = (float)((i % 17) - 8) * 0.37f + (float)rank * 1e-3f * (float)i;
}

static void test_world_one(const sdt_comm_nccl_api *api, sdt_backend *be)
{
    sdt_error e = {0};
    uint8_t id[SDT_COMM_ID_BYTES];
    CHECK(api->new_id(id, &e), "a new id: %s", e.message);
    sdt_comm *c = api->open_rank(be, id, 1, 0, 30, &e);
    CHECK(c != NULL, "world size 1 opens: %s", e.message);
    if (!c) return;
    float host[N], back[N];
    fill(host, 0);
    float *dev = be->alloc(be, sizeof host);
    CHECK(dev && be->upload(be, dev, host, sizeof host) == 0, "upload");
    CHECK(c->all_reduce_f32(c, dev, N, &e), "all-reduce: %s", e.message);
    CHECK(be->download(be, back, dev, sizeof back) == 0 && memcmp(back, host, sizeof host) == 0,
          "world size 1: the gradients keep their bytes");
    int64_t flags[2] = {1, 7};
    double loss[1] = {0.25};
    CHECK(c->all_reduce_i64(c, flags, 2, &e) && flags[0] == 1 && flags[1] == 7, "flags: %s", e.message);
    CHECK(c->all_reduce_f64(c, loss, 1, &e) && loss[0] == 0.25, "loss: %s", e.message);
    CHECK(c->broadcast(c, dev, sizeof host, 0, &e) && c->barrier(c, &e), "broadcast, barrier: %s", e.message);
    c->abort(c, "the host interrupted");
    CHECK(!c->barrier(c, &e) && strstr(e.message, "rank 0 failed: the host interrupted"), "after abort: %s", e.message);
    c->destroy(c);
    be->free(be, dev);
}

typedef struct two_rank {
    sdt_comm *comm;
    sdt_backend *be;
    float host[N];
    bool ok;
    sdt_error e;
} two_rank;

static void *two_rank_main(void *arg)
{
    two_rank *r = arg;
    float *dev = r->be->alloc(r->be, sizeof r->host);
    r->ok = dev && r->be->upload(r->be, dev, r->host, sizeof r->host) == 0 &&
            r->comm->all_reduce_f32(r->comm, dev, N, &r->e) &&
            r->be->download(r->be, r->host, dev, sizeof r->host) == 0;
    if (dev) r->be->free(r->be, dev);
    return NULL;
}

static void test_two_gpus(const sdt_comm_nccl_api *api, sdt_backend *be0)
{
    char why[256] = "";
    sdt_backend_cuda_create_fn create = NULL;
    const char *path = getenv("SDT_CUDA_MODULE") ? getenv("SDT_CUDA_MODULE") : SDT_CUDA_MODULE_PATH;
    void *module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (module) create = (sdt_backend_cuda_create_fn)dlsym(module, SDT_CUDA_CREATE_SYMBOL);
    sdt_backend *be1 = create ? create(1, why, sizeof why) : NULL;
    if (!be1) {
        printf("gpu_nccl_comm: one GPU only (%s): the two-rank check waits for a multi-GPU machine\n", why);
        return;
    }
    sdt_error e = {0};
    uint8_t id[SDT_COMM_ID_BYTES];
    sdt_comm *comms[2];
    sdt_backend *const bes[2] = {be0, be1};
    CHECK(api->new_id(id, &e) && api->open_group(bes, 2, id, 2, 0, 60, comms, &e), "two ranks: %s", e.message);
    two_rank r[2];
    float want[N];
    for (int k = 0; k < 2; k++) {
        memset(&r[k], 0, sizeof r[k]);
        r[k].comm = comms[k], r[k].be = bes[k];
        fill(r[k].host, k);
    }
    for (int i = 0; i < N; i++) want[i] = r[0].host[i] + r[1].host[i];
    pthread_t t[2];
    for (int k = 0; k < 2; k++) pthread_create(&t[k], NULL, two_rank_main, &r[k]);
    for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
    for (int k = 0; k < 2; k++) {
        CHECK(r[k].ok, "rank %d: %s", k, r[k].e.message);
        CHECK(gpu_test_rel(r[k].host, want, N) < 1e-6, "rank %d: the sum within f32 rounding", k);
    }
    CHECK(memcmp(r[0].host, r[1].host, sizeof want) == 0, "both ranks hold the same bytes");
    for (int k = 0; k < 2; k++) comms[k]->destroy(comms[k]);
    be1->destroy(be1);
}

int main(void)
{
    sdt_backend *be = gpu_test_backend("gpu_nccl_comm");
    if (!be) return SDT_TEST_SKIP;
    const sdt_comm_nccl_api *api = nccl_api();
    sdt_error e = {0};
    if (!api || !api->available(&e)) {
        printf("gpu_nccl_comm: SKIP, %s\n", api ? e.message : "the module has no NCCL entry");
        be->destroy(be);
        return SDT_TEST_SKIP;
    }
    test_world_one(api, be);
    test_two_gpus(api, be);
    be->destroy(be);
    return sdt_test_finish("nccl_comm");
}
