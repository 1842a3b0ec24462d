/* test_inproc.c - in-process data parallelism through the plugin (docs/abi.md 3.16, issue 33): ONE
 * trainer ("sdtrain.trainer/1", the test build) whose options list several devices runs one rank per
 * device on threads of its own. On the CPU the ranks' communicators are the ranks-as-threads double
 * (tests/common/thread_comm.h) that this program hands to the plugin through the test hook
 * sdt_test_comm_provider (plugin/testhooks/test_hooks.h); a GPU runs NCCL's (gpu_inproc).
 *  1. devices {0, 1} and {2, 0, 1} of batch 1 give the bytes of as many processes-as-threads, each a
 *     trainer of one rank (the path test_parallel checks), and train within 1e-6 of one rank with the
 *     global batch; the host hears one stream: every callback on the thread that called prepare/run,
 *     each step's metrics once (the global loss), each file once;
 *  2. two trainers of two devices each form one job of 4 ranks (world_size 4, rank 0 and rank 2): the
 *     bytes of one trainer of devices {0, 1, 2, 3};
 *  3. an interrupt of the one trainer stops every rank after the same step, rank 0 saving it; its state
 *     resumes on two devices and on one device with the global batch to the uninterrupted run's bytes,
 *     and so does the host's load_state into a trainer of two devices (whose save_state then writes
 *     the state its run ended with);
 *  4. a rank failing mid-step (rank 1's 6th collective, in step 2) stops the run with a sentence naming
 *     it; the files hold step 1, no temp file is left, and the state resumes on two devices to the
 *     uninterrupted run's bytes (the failed step's batch goes back to the data order);
 *     a rank failing in prepare fails prepare naming it;
 *  5. the sentences for bad lists: a device twice, devices on the CPU
 *     without a communicator (what a build without the test's provider says).
 * Built with SDT_INPROC_ON_GPU it is gpu_inproc (the plain plugin, CUDA, NCCL's communicators; skips
 * without a GPU or NCCL): devices {0}, one rank through NCCL's group, gives the bytes of the plain
 * one-device path; with a second GPU, devices {1, 0} trains within 1e-4 of one GPU with the global
 * batch (NCCL's sum runs in another order than the kernels' batch sum) and the calling thread's
 * CUDA device is its own again after prepare and run (rank 0 worked on GPU 1). */
#include <dlfcn.h>
#include <stdatomic.h>

#include "rank_fixture.h"

#define STEPS 3
#define MAX_RANKS RANK_FX_MAX_RANKS
static uint32_t g_device = SDT_DEVICE_CHOICE_CPU;
static const char *g_plugin_path; /* argv[1]: the CUDA module lies beside it */

/* The calling thread's current CUDA device, read through the CUDA module's own export; -2 without it. */
static int thread_cuda_device(void)
{
    if (g_device != SDT_DEVICE_CHOICE_CUDA) return -2;
    char path[FX_PATH];
    snprintf(path, sizeof path, "%s", g_plugin_path);
    char *slash = strrchr(path, '/');
    snprintf(slash ? slash + 1 : path, sizeof path - (size_t)(slash ? slash + 1 - path : 0), "libsdtrain_cuda.so");
    void *module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!module) return -2;
    void *symbol = dlsym(module, "sdt_cuda_thread_device");
    int (*query)(int);
    memcpy(&query, &symbol, sizeof query);
    int device = symbol ? query(-2) : -2; /* below -1: a question only */
    dlclose(module);
    return device;
}

typedef struct run {
    const trainer_env *env;
    const sdt_trainer_factory *tr;
    char emb[FX_PATH], log[FX_PATH];
    int32_t devices[MAX_RANKS];
    int device_count;                              /* 0: no list (one device, or one rank of world) */
    int thread_device_before, thread_device_after; /* the caller's CUDA device around the trainer's calls */
    int rank, world, batch;
    int64_t steps;
    const char *resume;
    const char *load_state;   /* the host loads this state between prepare and run */
    char save_state[FX_PATH]; /* "" or: the host saves the state here after the run */
    sdt_status load_status, save_status;
    int64_t interrupt_at;
    sdt_trainer *t;
    sdt_status prepare_status, status;
    fx_recorder rec;
    pthread_t caller;
    atomic_int foreign_callbacks; /* callbacks from another thread than the one that called */
    char error[2048];
} run;

static void check_thread(run *r)
{
    if (!pthread_equal(pthread_self(), r->caller)) atomic_fetch_add(&r->foreign_callbacks, 1);
}
static void on_log(void *u, sdt_log_level level, const char *msg)
{
    run *r = u;
    check_thread(r);
    fx_on_log(&r->rec, level, msg);
}
static void on_metrics(void *u, const sdt_metrics *m)
{
    run *r = u;
    check_thread(r);
    fx_on_metrics(&r->rec, m);
    if (m->step == r->interrupt_at) r->tr->interrupt(r->t);
}
static void on_file(void *u, const sdt_saved_file *f)
{
    run *r = u;
    check_thread(r);
    fx_on_file(&r->rec, f);
}

static void *run_main(void *p)
{
    run *r = p;
    fx_recorder_init(&r->rec);
    r->caller = pthread_self();
    r->thread_device_before = thread_cuda_device();
    sdt_host_callbacks cb = {
        .struct_size = sizeof cb, .user_data = r, .log = on_log, .metrics = on_metrics, .file_saved = on_file};
    sdt_trainer *t = NULL;
    char err[512] = "";
    r->prepare_status = r->status = r->tr->create(&cb, &t, err, sizeof err);
    if (r->status != SDT_STATUS_OK) {
        snprintf(r->error, sizeof r->error, "create: %s", err);
        return NULL;
    }
    static _Thread_local char template_path[FX_PATH];
    sdt_train_options o;
    rank_fx_options(r->env, r->tr, &o, template_path, r->log, r->steps, r->batch, r->world, r->rank, r->resume);
    o.device = g_device;
    o.devices = r->device_count ? r->devices : NULL;
    o.device_count = r->device_count;
    sdt_embedding_part e;
    rank_fx_embedding_part(r->tr, &e, r->emb);
    sdt_trainer_config config = {.struct_size = sizeof config, .options = &o, .embedding = &e};
    sdt_prepare_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    r->t = t;
    r->prepare_status = r->status = r->tr->prepare(t, &config, &info);
    if (r->status == SDT_STATUS_OK) {
        CHECK(info.batch_size == (uint32_t)r->batch, "prepare_info says the per-rank batch (%u)",
              (unsigned)info.batch_size);
        if (r->load_state) r->load_status = r->tr->load_state(t, r->load_state);
        if (r->load_status == SDT_STATUS_OK) r->status = r->tr->run(t);
        if (r->save_state[0]) r->save_status = r->tr->save_state(t, r->save_state);
    }
    r->tr->get_last_error(t, r->error, sizeof r->error, NULL);
    r->tr->destroy(t);
    r->thread_device_after = thread_cuda_device();
    return NULL;
}

static void setup(const trainer_env *env, const sdt_trainer_factory *tr, run *r, const char *tag, const char *src,
                  int device_count, int batch)
{
    memset(r, 0, sizeof *r);
    r->env = env, r->tr = tr, r->batch = batch, r->device_count = device_count;
    for (int i = 0; i < device_count; i++) r->devices[i] = i;
    r->steps = STEPS;
    rank_fx_dirs(env, tag, src, r->emb, r->log);
}

/* Runs the trainers (each on its own thread) over a job of world ranks as threads; fail_rank >= 0
 * fails at its collective fail_call. */
static void run_job(run **runs, int n, int world, int fail_rank, int fail_call)
{
    void *args[MAX_RANKS];
    for (int i = 0; i < n; i++) args[i] = runs[i];
    rank_fx_run_threads(run_main, args, n, world, fail_rank, fail_call);
}

static double max_abs_diff(const char *a, const char *b)
{
    return rank_fx_max_abs_diff(a, b, "emb_params", NULL);
}

#ifndef SDT_INPROC_ON_GPU

static int files_reported(const run *r)
{
    int n = 0;
    for (int k = 0; k < 16; k++) n += r->rec.saved[k];
    return n;
}

static void check_devices(const trainer_env *env, const sdt_trainer_factory *tr, const char *src, int world)
{
    printf("-- one trainer of %d devices against %d trainers of one rank and one rank with the global batch\n", world,
           world);
    char tag[64];
    run one, global, ranks[MAX_RANKS];
    snprintf(tag, sizeof tag, "d%d-one", world);
    setup(env, tr, &one, tag, src, world, 1);
    if (world == 3) one.devices[0] = 2, one.devices[2] = 0; /* any order of ordinals: {2, 1, 0} */
    run *list[MAX_RANKS] = {&one};
    run_job(list, 1, world, -1, -1);
    CHECK(one.status == SDT_STATUS_OK && one.rec.n_steps == STEPS, "%d devices: status %d, %d steps: %s", world,
          (int)one.status, one.rec.n_steps, one.error);
    CHECK(atomic_load(&one.foreign_callbacks) == 0, "every callback came on the caller's thread (%d did not)",
          atomic_load(&one.foreign_callbacks));
    for (int r = 0; r < world; r++) {
        snprintf(tag, sizeof tag, "d%d-rank%d", world, r);
        setup(env, tr, &ranks[r], tag, src, 0, 1);
        ranks[r].rank = r, ranks[r].world = world;
        list[r] = &ranks[r];
    }
    run_job(list, world, world, -1, -1);
    CHECK(ranks[0].status == SDT_STATUS_OK, "%d trainers of one rank: %s", world, ranks[0].error);
    CHECK(fx_same_bytes(one.emb, ranks[0].emb), "%d devices: the bytes of %d trainers of one rank each", world, world);
    CHECK(files_reported(&one) == files_reported(&ranks[0]) && files_reported(&one) > 0,
          "one report per file: %d, as rank 0 of the processes (%d)", files_reported(&one), files_reported(&ranks[0]));
    for (int s = 0; s < STEPS && s < one.rec.n_steps && s < ranks[0].rec.n_steps; s++)
        CHECK(one.rec.steps[s].loss == ranks[0].rec.steps[s].loss, "step %d: the global loss %.9g, as rank 0's %.9g",
              s + 1, one.rec.steps[s].loss, ranks[0].rec.steps[s].loss);
    snprintf(tag, sizeof tag, "d%d-global", world);
    setup(env, tr, &global, tag, src, 0, world);
    run_main(&global);
    CHECK(global.status == SDT_STATUS_OK, "one rank, batch %d: %s", world, global.error);
    double diff = max_abs_diff(one.emb, global.emb);
    CHECK(diff <= 1e-6, "%d devices: within 1e-6 of one rank with the global batch (%.3g)", world, diff);
    CHECK(!fx_same_bytes(one.emb, src), "the embedding trained");
    printf("%d devices: the bytes of %d processes; %s one rank with the global batch (%.3g)\n", world, world,
           fx_same_bytes(one.emb, global.emb) ? "the bytes of" : "within rounding of", diff);
}

/* Two trainers of two devices each: one job of 4 ranks. */
static void check_mixed(const trainer_env *env, const sdt_trainer_factory *tr, const char *src)
{
    printf("-- two trainers of two devices each, one job of 4 ranks\n");
    run a, b, whole;
    setup(env, tr, &a, "mix-a", src, 2, 1);
    setup(env, tr, &b, "mix-b", src, 2, 1);
    a.world = b.world = 4;
    b.rank = 2;
    b.devices[0] = 2, b.devices[1] = 3;
    run *list[2] = {&a, &b};
    run_job(list, 2, 4, -1, -1);
    CHECK(a.status == SDT_STATUS_OK && b.status == SDT_STATUS_OK, "ranks 0-1: %s / ranks 2-3: %s", a.error, b.error);
    CHECK(fx_same_bytes(b.emb, src) && files_reported(&b) == 0, "the trainer of ranks 2 and 3 wrote nothing");
    setup(env, tr, &whole, "mix-whole", src, 4, 1);
    run *one[1] = {&whole};
    run_job(one, 1, 4, -1, -1);
    CHECK(whole.status == SDT_STATUS_OK, "devices {0, 1, 2, 3}: %s", whole.error);
    CHECK(fx_same_bytes(a.emb, whole.emb), "2 + 2 devices: the bytes of one trainer of 4");
}

static void check_interrupt(const trainer_env *env, const sdt_trainer_factory *tr, const char *src)
{
    printf("-- the host interrupts after step 1\n");
    run r;
    setup(env, tr, &r, "stop", src, 2, 1);
    r.interrupt_at = 1;
    run *list[1] = {&r};
    run_job(list, 1, 2, -1, -1);
    CHECK(r.status == SDT_STATUS_INTERRUPTED && r.rec.n_steps == 1, "interrupted after step 1: status %d, %d steps: %s",
          (int)r.status, r.rec.n_steps, r.error);
    CHECK(fx_file_step(r.emb) == 1, "step 1 saved (the file says %lld)", (long long)fx_file_step(r.emb));
    /* the state resumes on two devices and on one with the global batch, to the uninterrupted bytes */
    run whole, resumed, one;
    setup(env, tr, &whole, "stop-whole", src, 2, 1);
    list[0] = &whole;
    run_job(list, 1, 2, -1, -1);
    setup(env, tr, &resumed, "stop-resumed", src, 2, 1);
    CHECK(fx_copy_file(r.emb, resumed.emb), "the embedding at step 1");
    resumed.resume = r.rec.last_saved[SDT_FILE_TRAINING_STATE];
    list[0] = &resumed;
    run_job(list, 1, 2, -1, -1);
    CHECK(resumed.status == SDT_STATUS_OK && fx_same_bytes(resumed.emb, whole.emb),
          "resumed on two devices: the uninterrupted bytes (%.3g): %s", max_abs_diff(resumed.emb, whole.emb),
          resumed.error);
    setup(env, tr, &one, "stop-one", src, 0, 2);
    CHECK(fx_copy_file(r.emb, one.emb), "the embedding at step 1");
    one.resume = r.rec.last_saved[SDT_FILE_TRAINING_STATE];
    run_main(&one);
    CHECK(one.status == SDT_STATUS_OK && fx_same_bytes(one.emb, whole.emb),
          "resumed on one device with the global batch: the uninterrupted bytes (%.3g): %s",
          max_abs_diff(one.emb, whole.emb), one.error);
    /* the host's load_state and save_state on the trainer of two devices */
    run loaded;
    setup(env, tr, &loaded, "stop-loaded", src, 2, 1);
    CHECK(fx_copy_file(r.emb, loaded.emb), "the embedding at step 1");
    loaded.load_state = r.rec.last_saved[SDT_FILE_TRAINING_STATE];
    fx_path(loaded.save_state, loaded.log, "saved.state.safetensors");
    list[0] = &loaded;
    run_job(list, 1, 2, -1, -1);
    CHECK(loaded.load_status == SDT_STATUS_OK && loaded.status == SDT_STATUS_OK && loaded.rec.n_steps == STEPS - 1 &&
              fx_same_bytes(loaded.emb, whole.emb),
          "load_state on two devices, then run: the uninterrupted bytes (load %d, run %d, %d steps): %s",
          (int)loaded.load_status, (int)loaded.status, loaded.rec.n_steps, loaded.error);
    CHECK(loaded.save_status == SDT_STATUS_OK &&
              fx_same_bytes(loaded.save_state, loaded.rec.last_saved[SDT_FILE_TRAINING_STATE]),
          "save_state after the run writes the state the run ended with (status %d)", (int)loaded.save_status);
}

static void check_failure(const trainer_env *env, const sdt_trainer_factory *tr, const char *src)
{
    printf("-- rank 1 fails in step 2, then the run resumes\n");
    run r, resumed;
    setup(env, tr, &r, "fail", src, 2, 1);
    run *list[1] = {&r};
    /* call 0: prepare's barrier; each step: the stop flag, the gradient, the loss, the zero flag */
    run_job(list, 1, 2, 1, 6);
    CHECK(r.status < 0, "the run failed (status %d)", (int)r.status);
    CHECK(strstr(r.error, "rank 1") != NULL, "the sentence names rank 1: %s", r.error);
    CHECK(fx_file_step(r.emb) == 1, "the last good step (1) was saved (the file says %lld)",
          (long long)fx_file_step(r.emb));
    CHECK(rank_fx_count_temp_files(env->tmp) == 0, "no temp file is left");
    const char *state = r.rec.last_saved[SDT_FILE_TRAINING_STATE];
    CHECK(state[0] != '\0', "a state was saved");
    printf("the run: %s\n", r.error);

    setup(env, tr, &resumed, "fail-resumed", src, 2, 1);
    CHECK(fx_copy_file(r.emb, resumed.emb), "the embedding at step 1");
    resumed.resume = state;
    list[0] = &resumed;
    run_job(list, 1, 2, -1, -1);
    CHECK(resumed.status == SDT_STATUS_OK && resumed.rec.n_steps == STEPS - 1,
          "resumed on two devices: status %d, %d steps: %s", (int)resumed.status, resumed.rec.n_steps, resumed.error);
    CHECK(fx_file_step(resumed.emb) == STEPS, "resumed to step %lld", (long long)fx_file_step(resumed.emb));
    /* the failed step gave its batch back to the data order (train_job_step.c's job_step), so the
     * state saved after the failure resumes to the uninterrupted bytes, as an interrupt's does */
    run whole;
    setup(env, tr, &whole, "fail-whole", src, 2, 1);
    list[0] = &whole;
    run_job(list, 1, 2, -1, -1);
    CHECK(whole.status == SDT_STATUS_OK, "the uninterrupted run: %s", whole.error);
    CHECK(fx_same_bytes(resumed.emb, whole.emb), "resumed after the failure: the uninterrupted bytes (%.3g)",
          max_abs_diff(resumed.emb, whole.emb));

    printf("-- rank 1 fails in prepare\n");
    run p;
    setup(env, tr, &p, "fail-prepare", src, 2, 1);
    list[0] = &p;
    run_job(list, 1, 2, 1, 0);
    CHECK(p.prepare_status < 0 && strstr(p.error, "rank 1"), "prepare failed naming rank 1 (status %d): %s",
          (int)p.prepare_status, p.error);
    CHECK(fx_same_bytes(p.emb, src) && rank_fx_count_temp_files(env->tmp) == 0, "nothing written");
}

static void check_refusals(const trainer_env *env, const sdt_trainer_factory *tr, const char *src)
{
    printf("-- bad device lists\n");
    run r;
    setup(env, tr, &r, "bad-twice", src, 2, 1);
    r.devices[1] = 0;
    run *list[1] = {&r};
    run_job(list, 1, 2, -1, -1);
    CHECK(r.prepare_status == SDT_STATUS_VALIDATION && strstr(r.error, "options->devices[0] and options->devices[1]"),
          "a device twice (status %d): %s", (int)r.prepare_status, r.error);
    setup(env, tr, &r, "bad-cpu", src, 2, 1);
    run_job(list, 1, 0, -1, -1); /* no communicator provided: what the plugin itself says on the CPU */
    CHECK(r.prepare_status == SDT_STATUS_UNSUPPORTED && strstr(r.error, "options->device to cuda"),
          "devices on the CPU (status %d): %s", (int)r.prepare_status, r.error);
    CHECK(fx_same_bytes(r.emb, src), "nothing written");
}

#endif

#ifdef SDT_INPROC_ON_GPU
/* gpu_inproc: the real communicators on the GPU (see the top). */
static int check_gpu(const trainer_env *env, const sdt_trainer_factory *tr, const char *src)
{
    const sdt_distributed_ext *ext =
        tr->get_extension ? (const sdt_distributed_ext *)tr->get_extension(SDT_EXT_DISTRIBUTED) : NULL;
    char why[1024] = "";
    if (!ext || ext->available(why, sizeof why) != SDT_STATUS_OK) {
        printf("SKIP: no GPU data parallelism here: %s\n", why);
        return 77;
    }
    g_device = SDT_DEVICE_CHOICE_CUDA;
    printf("-- devices {0} through NCCL against the plain path\n");
    run plain, one;
    setup(env, tr, &plain, "gpu-plain", src, 0, 1);
    run_main(&plain);
    CHECK(plain.status == SDT_STATUS_OK, "the plain path: %s", plain.error);
    setup(env, tr, &one, "gpu-one", src, 1, 1);
    run *list[1] = {&one};
    run_job(list, 1, 0, -1, -1);
    CHECK(one.status == SDT_STATUS_OK && one.rec.n_steps == STEPS, "devices {0}: status %d: %s", (int)one.status,
          one.error);
    CHECK(fx_same_bytes(one.emb, plain.emb), "devices {0}: the plain path's bytes (%.3g)",
          max_abs_diff(one.emb, plain.emb));
    CHECK(atomic_load(&one.foreign_callbacks) == 0, "every callback on the caller's thread");
    printf("-- devices {1, 0} against one GPU with the global batch\n");
    run two, global;
    setup(env, tr, &two, "gpu-two", src, 2, 1);
    two.devices[0] = 1, two.devices[1] = 0; /* rank 0 on GPU 1: the calling thread's device must come back */
    list[0] = &two;
    run_job(list, 1, 0, -1, -1);
    if (two.prepare_status != SDT_STATUS_OK && strstr(two.error, "does not exist")) {
        printf("one GPU only: %s\n", two.error);
        return 0;
    }
    CHECK(two.status == SDT_STATUS_OK && two.rec.n_steps == STEPS, "devices {1, 0}: status %d: %s", (int)two.status,
          two.error);
    setup(env, tr, &global, "gpu-global", src, 0, 2);
    run_main(&global);
    double diff = max_abs_diff(two.emb, global.emb);
    CHECK(diff <= 1e-4, "devices {1, 0}: within 1e-4 of one GPU with the global batch (%.3g)", diff);
    CHECK(two.thread_device_after == two.thread_device_before,
          "the calling thread's CUDA device is its own again (%d before, %d after)", two.thread_device_before,
          two.thread_device_after);
    return 0;
}
#endif

int main(int argc, char **argv)
{
    hn_env henv;
    if (!hn_env_open(&henv, argc, argv, "inproc")) return trainer_env_abandon(&henv.base);
    trainer_env env = henv.base;
    g_plugin_path = argv[1];
    const sdt_trainer_factory *tr = (const sdt_trainer_factory *)env.entry->get_factory(SDT_FACTORY_TRAINER);
    CHECK(tr != NULL, "the trainer factory");
    char dir[FX_PATH], src[FX_PATH];
    fx_subdir(&env, dir, "src");
#ifdef SDT_INPROC_ON_GPU
    if (tr && fx_make_embedding(&env, dir, "twin", 2, "orange", src) && check_gpu(&env, tr, src) == 77) {
        trainer_env_close(&env);
        return 77;
    }
#else
    if (tr && fx_make_embedding(&env, dir, "twin", 2, "orange", src)) {
        check_devices(&env, tr, src, 2);
        check_devices(&env, tr, src, 3);
        check_mixed(&env, tr, src);
        check_interrupt(&env, tr, src);
        check_failure(&env, tr, src);
        check_refusals(&env, tr, src);
    }
#endif
    trainer_env_close(&env);
    return sdt_test_finish("inproc");
}
