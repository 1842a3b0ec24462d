/* test_parallel.c - data-parallel training through the plugin (docs/abi.md 3.16, issue 33): ranks
 * as threads of this process, each a whole trainer ("sdtrain.trainer/1") of the test build, with
 * the ranks-as-threads communicator (tests/common/thread_comm.h) handed to the plugin through the
 * test hook sdt_test_comm_provider (plugin/testhooks/test_hooks.h), on the CPU:
 *  1. W = 2 and 3 ranks of batch 1 train what one rank with the global batch W trains (the same
 *     order, shards, per-sample draws and 1/W seed), within the reduction's rounding (1e-6; here the
 *     CPU's sums give the same bytes, which the test prints but does not demand); so do 2 ranks of
 *     joint training with a hypernetwork without dropout (its masks are keyed per micro-batch, so W
 *     ranks draw other masks than one rank of batch W), the hypernetwork within a fraction of the
 *     distance AdamW moves it (HN_ROUNDING_*). One rank of batch 1 with grad_accum_steps W
 *     is no reference: the data order shuffles whole batches, so batch 1 walks other samples than
 *     batch W (the step engine's test proves the sum against accumulation);
 *  2. ranks 1 and 2 write nothing and report no file: their input files keep their bytes, their
 *     folders hold nothing else;
 *  3. a rank failing mid-run (its 6th collective, in step 2) stops every rank: each run fails, rank
 *     0's sentence names rank 1, rank 0 saved the last good state (step 1) and no temp file is left;
 *     a rank whose prepare fails stops the others' prepare at once, naming it, and so does a rank
 *     its host closes without running it;
 *  3c. validation and early stop decide the same on both ranks as on one rank with the global batch;
 *  4. an interrupt asked of rank 1 alone stops both ranks after the same step, rank 0 saving it;
 *  5. rank 0's state of a 2-rank run resumes on one rank with the global batch. */
#include "rank_fixture.h"

#define STEPS 3
/* The hypernetwork's learning rate in the joint runs. */
#define HN_LEARN_RATE 0.001
#define HN_LEARN_RATE_TEXT "0.001"
/* How far W ranks' hypernetwork may be from the global batch's, as fractions of lr * STEPS (AdamW moves
 * each weight by about lr a step whatever its gradient's size): the gradient sums round differently (the
 * global batch's one product against W products summed over the ranks; split GEMM panels differ with the
 * batch, tests/trainer/CMakeLists.txt runs OpenBLAS on one thread), and AdamW normalises each element,
 * so an element whose gradient nearly cancels carries its rounding into a share of a whole step. The
 * worst element is that one: on the first weight 9.6e-7 with libm's erfc in GELU, 1.03e-6 with
 * shared_erfcf (bench/NOTES.md run 37), i.e. 3.4e-4 of lr * STEPS, while the RMS stays 2e-8 (7e-6 of
 * it), and other tensors of the same hypernetwork (LayerNorm biases whose gradient is rounding alone)
 * differ by up to 2e-5 either way. A rank that trains on its own gradient or other samples is off by
 * about lr everywhere: 10x past both bounds at least. */
#define HN_ROUNDING_RMS 1e-4
#define HN_ROUNDING_WORST 1e-2
#define MAX_RANKS 3

typedef struct rank_run {
    const trainer_env *env;
    const sdt_trainer_factory *tr;
    char emb[FX_PATH], log[FX_PATH], hn[FX_PATH]; /* hn "": no hypernetwork trains */
    int rank, world, batch, accum;
    int64_t steps;
    const char *resume;
    int64_t interrupt_at; /* > 0: the host interrupts this rank after that step */
    bool no_run;          /* the host prepares this rank, then destroys it without running it */
    bool validate;        /* a quarter held out, measured every step, early stop after one without gain */
    sdt_trainer *t;
    sdt_status status;
    fx_recorder rec;
    char error[2048];
} rank_run;

static void interrupt_hook(fx_recorder *rec, const sdt_metrics *m)
{
    rank_run *r = rec->user;
    if (m->step == r->interrupt_at) r->tr->interrupt(r->t);
}

static void *rank_main(void *p)
{
    rank_run *r = p;
    sdt_host_callbacks cb = fx_recorder_init(&r->rec);
    r->rec.on_step = interrupt_hook;
    r->rec.user = r;
    sdt_trainer *t = NULL;
    char err[512] = "";
    r->status = r->tr->create(&cb, &t, err, sizeof err);
    if (r->status != SDT_STATUS_OK) {
        snprintf(r->error, sizeof r->error, "create: %s", err);
        return NULL;
    }
    static _Thread_local char template_path[FX_PATH];
    sdt_train_options o;
    rank_fx_options(r->env, r->tr, &o, template_path, r->log, r->steps, r->batch, r->world, r->rank, r->resume);
    o.grad_accum_steps = (uint32_t)r->accum;
    if (r->validate) {
        o.validation_split = 0.25;
        o.validate_every = 1;
        o.stop_after_no_improvement = 1;
    }
    sdt_embedding_part e;
    rank_fx_embedding_part(r->tr, &e, r->emb);
    sdt_hypernetwork_part h;
    memset(&h, 0, sizeof h);
    h.struct_size = sizeof h;
    r->tr->hypernetwork_part_defaults(&h);
    h.hypernetwork_path = r->hn;
    h.learn_rate = HN_LEARN_RATE_TEXT;
    sdt_trainer_config config = {
        .struct_size = sizeof config, .options = &o, .embedding = &e, .hypernetwork = r->hn[0] ? &h : NULL};
    sdt_prepare_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    r->t = t;
    r->status = r->tr->prepare(t, &config, &info);
    if (r->status == SDT_STATUS_OK && !r->no_run) r->status = r->tr->run(t);
    r->tr->get_last_error(t, r->error, sizeof r->error, NULL);
    r->tr->destroy(t);
    return NULL;
}

/* A run's embedding (a copy of src) and log folder under <tmp>/<tag>. */
static void run_setup(const trainer_env *env, const sdt_trainer_factory *tr, rank_run *r, const char *tag,
                      const char *src, int rank, int world, int batch, int accum)
{
    memset(r, 0, sizeof *r);
    r->env = env, r->tr = tr, r->rank = rank, r->world = world, r->batch = batch, r->accum = accum;
    r->steps = STEPS;
    rank_fx_dirs(env, tag, src, r->emb, r->log);
}

#define FIRST_WEIGHT "128.0.linear.0.weight"

/* A copy of the hypernetwork hn_src beside the run's embedding (NULL: none). */
static void add_hypernetwork(rank_run *r, const char *hn_src)
{
    if (!hn_src) return;
    char dir[FX_PATH];
    snprintf(dir, sizeof dir, "%s", r->emb);
    *strrchr(dir, '/') = '\0';
    fx_path(r->hn, dir, strrchr(hn_src, '/') + 1);
    CHECK(fx_copy_file(hn_src, r->hn), "copy %s", hn_src);
}

/* world ranks as threads; fail_call >= 0: rank 1 fails at that collective. */
static void run_ranks(rank_run *ranks, int world, int fail_call)
{
    void *args[MAX_RANKS];
    for (int r = 0; r < world; r++) args[r] = &ranks[r];
    rank_fx_run_threads(rank_main, args, world, world, fail_call >= 0 ? 1 : -1, fail_call);
}

/* Entries of a folder and its sub-folders (files only), or -1. */
static int count_files(const char *dir)
{
    return rank_fx_count_files(dir, NULL);
}

static double max_abs_diff(const char *a, const char *b, int64_t *n)
{
    return rank_fx_max_abs_diff(a, b, "emb_params", n);
}

/* The largest and the RMS difference of the hypernetwork's first weight between two training states. */
static double first_weight_diff(const char *a, const char *b, double *rms)
{
    int64_t na = 0, nb = 0;
    float *x = fx_read_tensor(a, "hypernetwork." FIRST_WEIGHT, &na);
    float *y = fx_read_tensor(b, "hypernetwork." FIRST_WEIGHT, &nb);
    double worst = (x && y && na == nb && na > 0) ? 0 : INFINITY, sum = 0;
    for (int64_t i = 0; worst < INFINITY && i < na; i++) {
        const double d = fabs((double)x[i] - (double)y[i]);
        worst = isnan(d) ? INFINITY : d > worst ? d : worst;
        sum += d * d;
    }
    *rms = worst < INFINITY ? sqrt(sum / (double)na) : INFINITY;
    free(x), free(y);
    return worst;
}

static void check_world(const trainer_env *env, const sdt_trainer_factory *tr, const char *src, const char *hn_src,
                        int world)
{
    printf("-- %d ranks against one rank with the global batch%s\n", world, hn_src ? ", joint training" : "");
    char tag[64];
    rank_run global, ranks[MAX_RANKS];
    const char *kind = hn_src ? "joint" : "emb";
    snprintf(tag, sizeof tag, "w%d-%s-global", world, kind);
    run_setup(env, tr, &global, tag, src, 0, 0, world, 1);
    add_hypernetwork(&global, hn_src);
    rank_main(&global);
    CHECK(global.status == SDT_STATUS_OK, "one rank, batch %d: %s", world, global.error);
    for (int r = 0; r < world; r++) {
        snprintf(tag, sizeof tag, "w%d-%s-rank%d", world, kind, r);
        run_setup(env, tr, &ranks[r], tag, src, r, world, 1, 1);
        add_hypernetwork(&ranks[r], hn_src);
    }
    run_ranks(ranks, world, -1);
    for (int r = 0; r < world; r++)
        CHECK(ranks[r].status == SDT_STATUS_OK && ranks[r].rec.n_steps == STEPS, "rank %d: status %d, %d steps: %s", r,
              (int)ranks[r].status, ranks[r].rec.n_steps, ranks[r].error);
    for (int s = 0; s < STEPS && s < ranks[0].rec.n_steps && s < global.rec.n_steps; s++)
        CHECK(fabs(ranks[0].rec.steps[s].loss - global.rec.steps[s].loss) <= 1e-6 * fabs(global.rec.steps[s].loss),
              "step %d: loss %.9g on %d ranks, %.9g with the global batch", s + 1, ranks[0].rec.steps[s].loss, world,
              global.rec.steps[s].loss);
    int64_t n;
    double diff = max_abs_diff(ranks[0].emb, global.emb, &n);
    CHECK(diff <= 1e-6, "%d ranks: within 1e-6 of one rank with the global batch (%.3g over %lld values)", world, diff,
          (long long)n);
    CHECK(!fx_same_bytes(ranks[0].emb, src), "rank 0's embedding trained");
    if (hn_src) {
        const char *sa = ranks[0].rec.last_saved[SDT_FILE_TRAINING_STATE];
        const char *sb = global.rec.last_saved[SDT_FILE_TRAINING_STATE];
        double rms;
        double worst = first_weight_diff(sa, sb, &rms);
        const double step_scale = HN_LEARN_RATE * STEPS;
        CHECK(rms <= HN_ROUNDING_RMS * step_scale && worst <= HN_ROUNDING_WORST * step_scale,
              "%d ranks: the hypernetwork's first weight within rounding of the global batch's (RMS %.3g, bound %.3g; "
              "worst %.3g, bound %.3g)",
              world, rms, HN_ROUNDING_RMS * step_scale, worst, HN_ROUNDING_WORST * step_scale);
        printf("%d ranks: the hypernetwork's first weight %.3g RMS, %.3g at most from the global batch's\n", world, rms,
               worst);
        CHECK(!fx_same_bytes(ranks[0].hn, hn_src), "the hypernetwork trained");
    }
    size_t size;
    char *settings = (char *)fx_read_file(ranks[0].rec.last_saved[SDT_FILE_SETTINGS], &size);
    CHECK(settings && strstr(settings, "\"world_size\"") && strstr(settings, "\"batch_size\":\t1"),
          "rank 0's settings name the world size beside the per-rank batch: %s", settings ? settings : "(none)");
    free(settings);
    printf("%d ranks: %s the global batch's embedding (largest difference %.3g)\n", world,
           fx_same_bytes(ranks[0].emb, global.emb) ? "the bytes of" : "within rounding of", diff);
    for (int r = 1; r < world; r++) {
        CHECK(fx_same_bytes(ranks[r].emb, src), "rank %d left its embedding file as it was", r);
        CHECK(count_files(ranks[r].log) == 0, "rank %d wrote nothing in its log folder (%d files)", r,
              count_files(ranks[r].log));
        int reported = 0;
        for (int k = 0; k < 16; k++) reported += ranks[r].rec.saved[k];
        CHECK(reported == 0, "rank %d reported no saved file (%d)", r, reported);
        char dir[FX_PATH];
        snprintf(dir, sizeof dir, "%s", ranks[r].emb);
        *strrchr(dir, '/') = '\0';
        CHECK(count_files(dir) == (hn_src ? 2 : 1), "rank %d's folder holds its input file(s) alone (%d files)", r,
              count_files(dir));
        CHECK(!hn_src || fx_same_bytes(ranks[r].hn, hn_src), "rank %d left its hypernetwork as it was", r);
    }
}

/* Validation and early stop decide the same on every rank, and as one rank with the global batch. */
static void check_validation(const trainer_env *env, const sdt_trainer_factory *tr, const char *src)
{
    printf("-- 2 ranks with validation and early stop\n");
    rank_run global, ranks[2];
    run_setup(env, tr, &global, "val-global", src, 0, 0, 2, 1);
    global.validate = true;
    global.steps = 6;
    rank_main(&global);
    CHECK(global.status == SDT_STATUS_OK, "one rank, batch 2, validating: %s", global.error);
    for (int r = 0; r < 2; r++) {
        char tag[64];
        snprintf(tag, sizeof tag, "val-rank%d", r);
        run_setup(env, tr, &ranks[r], tag, src, r, 2, 1, 1);
        ranks[r].validate = true;
        ranks[r].steps = 6;
    }
    run_ranks(ranks, 2, -1);
    for (int r = 0; r < 2; r++)
        CHECK(ranks[r].status == SDT_STATUS_OK && ranks[r].rec.n_steps == global.rec.n_steps,
              "rank %d: status %d, %d steps as one rank's %d: %s", r, (int)ranks[r].status, ranks[r].rec.n_steps,
              global.rec.n_steps, ranks[r].error);
    int64_t n;
    double diff = max_abs_diff(ranks[0].emb, global.emb, &n);
    CHECK(diff <= 1e-6, "validating: within 1e-6 of one rank with the global batch (%.3g)", diff);
    CHECK(count_files(ranks[1].log) == 0, "rank 1 wrote no best-step copy nor anything else");
    printf("%d steps on both ranks and on one rank (early stop: %s)\n", ranks[0].rec.n_steps,
           ranks[0].rec.n_steps < 6 ? "yes" : "no");
}

static void check_failure(const trainer_env *env, const sdt_trainer_factory *tr, const char *src)
{
    printf("-- rank 1 fails in step 2\n");
    rank_run ranks[2];
    for (int r = 0; r < 2; r++) {
        char tag[64];
        snprintf(tag, sizeof tag, "fail-rank%d", r);
        run_setup(env, tr, &ranks[r], tag, src, r, 2, 1, 1);
    }
    /* call 0: prepare's barrier; each step: the stop flag, the gradient, the loss, the zero flag */
    run_ranks(ranks, 2, 6);
    for (int r = 0; r < 2; r++)
        CHECK(ranks[r].status != SDT_STATUS_OK && ranks[r].status != SDT_STATUS_INTERRUPTED,
              "rank %d's run failed (status %d)", r, (int)ranks[r].status);
    CHECK(strstr(ranks[0].error, "rank 1") != NULL, "rank 0's sentence names rank 1: %s", ranks[0].error);
    CHECK(fx_file_step(ranks[0].emb) == 1, "rank 0 saved the last good step (1; the file says %lld)",
          (long long)fx_file_step(ranks[0].emb));
    CHECK(rank_fx_count_temp_files(env->tmp) == 0, "no temp file is left");
    CHECK(fx_same_bytes(ranks[1].emb, src) && count_files(ranks[1].log) == 0, "rank 1 wrote nothing");
    printf("rank 0: %s\n", ranks[0].error);
}

static void check_prepare_failure(const trainer_env *env, const sdt_trainer_factory *tr, const char *src)
{
    printf("-- rank 1's prepare fails\n");
    rank_run ranks[2];
    for (int r = 0; r < 2; r++) {
        char tag[64];
        snprintf(tag, sizeof tag, "prep-rank%d", r);
        run_setup(env, tr, &ranks[r], tag, src, r, 2, 1, 1);
    }
    remove(ranks[1].emb); /* rank 1 has no embedding to start from */
    run_ranks(ranks, 2, -1);
    CHECK(ranks[1].status == SDT_STATUS_NOT_FOUND || ranks[1].status == SDT_STATUS_VALIDATION ||
              ranks[1].status == SDT_STATUS_IO,
          "rank 1's prepare failed for its file (status %d): %s", (int)ranks[1].status, ranks[1].error);
    CHECK(ranks[0].status != SDT_STATUS_OK && strstr(ranks[0].error, "rank 1") && strstr(ranks[0].error, "prepare") &&
              !strstr(ranks[0].error, "within"),
          "rank 0 stopped at once with a sentence naming rank 1's prepare (status %d): %s", (int)ranks[0].status,
          ranks[0].error);
    CHECK(fx_same_bytes(ranks[0].emb, src) && rank_fx_count_temp_files(env->tmp) == 0,
          "rank 0's embedding is as it was, and no temp file is left");
    printf("rank 0: %s\n", ranks[0].error);

    /* a host that prepares rank 1 and then closes it without running it */
    for (int r = 0; r < 2; r++) {
        char tag[64];
        snprintf(tag, sizeof tag, "close-rank%d", r);
        run_setup(env, tr, &ranks[r], tag, src, r, 2, 1, 1);
    }
    ranks[1].no_run = true;
    run_ranks(ranks, 2, -1);
    CHECK(ranks[0].status != SDT_STATUS_OK && strstr(ranks[0].error, "rank 1") &&
              strstr(ranks[0].error, "closed before the run ended"),
          "rank 0 stopped at once naming rank 1, closed without a run (status %d): %s", (int)ranks[0].status,
          ranks[0].error);
    int64_t n;
    CHECK(max_abs_diff(ranks[0].emb, src, &n) == 0, "rank 0's embedding holds its starting values (no step was taken)");
}

static void check_interrupt(const trainer_env *env, const sdt_trainer_factory *tr, const char *src)
{
    printf("-- rank 1's host interrupts after step 1\n");
    rank_run ranks[2];
    for (int r = 0; r < 2; r++) {
        char tag[64];
        snprintf(tag, sizeof tag, "stop-rank%d", r);
        run_setup(env, tr, &ranks[r], tag, src, r, 2, 1, 1);
    }
    ranks[1].interrupt_at = 1;
    run_ranks(ranks, 2, -1);
    /* the request is summed before step 2: neither rank takes it */
    for (int r = 0; r < 2; r++)
        CHECK(ranks[r].status == SDT_STATUS_INTERRUPTED && ranks[r].rec.n_steps == 1,
              "rank %d stopped interrupted after step 1: status %d, %d steps: %s", r, (int)ranks[r].status,
              ranks[r].rec.n_steps, ranks[r].error);
    CHECK(fx_file_step(ranks[0].emb) == 1, "rank 0 saved step 1 (the file says %lld)",
          (long long)fx_file_step(ranks[0].emb));
    CHECK(fx_same_bytes(ranks[1].emb, src) && count_files(ranks[1].log) == 0, "rank 1 wrote nothing");
}

static void check_resume(const trainer_env *env, const sdt_trainer_factory *tr, const char *src)
{
    printf("-- a 2-rank state resumes on one rank\n");
    rank_run ranks[2], whole, resumed;
    for (int r = 0; r < 2; r++) {
        char tag[64];
        snprintf(tag, sizeof tag, "res-rank%d", r);
        run_setup(env, tr, &ranks[r], tag, src, r, 2, 1, 1);
        ranks[r].steps = 2;
    }
    run_ranks(ranks, 2, -1);
    CHECK(ranks[0].status == SDT_STATUS_OK && ranks[1].status == SDT_STATUS_OK, "the 2-rank run: %s / %s",
          ranks[0].error, ranks[1].error);
    const char *state = ranks[0].rec.last_saved[SDT_FILE_TRAINING_STATE];
    CHECK(state[0] != '\0', "rank 0 saved a state");
    run_setup(env, tr, &resumed, "res-one", src, 0, 0, 2, 1);
    CHECK(fx_copy_file(ranks[0].emb, resumed.emb), "the 2-rank embedding");
    resumed.steps = 4;
    resumed.resume = state;
    rank_main(&resumed);
    CHECK(resumed.status == SDT_STATUS_OK && resumed.rec.n_steps == 2, "resumed on one rank: status %d, %d steps: %s",
          (int)resumed.status, resumed.rec.n_steps, resumed.error);
    run_setup(env, tr, &whole, "res-whole", src, 0, 0, 2, 1);
    whole.steps = 4;
    rank_main(&whole);
    int64_t n;
    double diff = max_abs_diff(resumed.emb, whole.emb, &n);
    CHECK(fx_file_step(resumed.emb) == 4 && diff < 1e-5,
          "resumed to step %lld within 1e-5 of one rank's whole run (%.3g)", (long long)fx_file_step(resumed.emb),
          diff);
}

int main(int argc, char **argv)
{
    hn_env henv;
    if (!hn_env_open(&henv, argc, argv, "parallel")) return trainer_env_abandon(&henv.base);
    trainer_env env = henv.base;
    const sdt_trainer_factory *tr = (const sdt_trainer_factory *)env.entry->get_factory(SDT_FACTORY_TRAINER);
    CHECK(tr != NULL, "the trainer factory");
    char dir[FX_PATH], src[FX_PATH];
    fx_subdir(&env, dir, "src");
    char hn_src[FX_PATH];
    if (tr && fx_make_embedding(&env, dir, "twin", 2, "orange", src) &&
        make_hn(&henv, dir, "style", "128, 64", false, hn_src)) {
        check_world(&env, tr, src, NULL, 2);
        check_world(&env, tr, src, NULL, 3);
        check_world(&env, tr, src, hn_src, 2);
        check_validation(&env, tr, src);
        check_failure(&env, tr, src);
        check_prepare_failure(&env, tr, src);
        check_interrupt(&env, tr, src);
        check_resume(&env, tr, src);
    }
    trainer_env_close(&env);
    return sdt_test_finish("parallel");
}
