/* test_threads.c - trainers and threads through the ABI.
 *  1. Two trainers in one process are independent: a job run alone and the same job run on two
 *     trainers at once, each on its own thread, give bit-identical embeddings and losses.
 *  2. interrupt() from another thread while run() trains: run() returns SDT_STATUS_INTERRUPTED
 *     after finishing the step in progress (no more than one step after the request), the state
 *     is saved (embedding and full-state checkpoint at that step), the embedding is finite, and
 *     the run state says INTERRUPTED. */
#include "trainer_fixture.h"

#define STEPS 4

typedef struct job {
    const trainer_env *env;
    char dir[FX_PATH], log[FX_PATH], embedding[FX_PATH];
    sdt_status status;
    fx_recorder rec;
    char error[1024];
} job;

static void job_setup(const trainer_env *env, job *j, const char *tag)
{
    memset(j, 0, sizeof *j);
    j->env = env;
    char buf[64];
    snprintf(buf, sizeof buf, "%s-emb", tag);
    fx_subdir(env, j->dir, buf);
    snprintf(buf, sizeof buf, "%s-log", tag);
    fx_subdir(env, j->log, buf);
    fx_make_embedding(env, j->dir, "twin", 2, "orange", j->embedding);
}

static void *job_train(void *p)
{
    job *j = p;
    sdt_ti_trainer *t = fx_create(j->env, &j->rec);
    if (!t) return NULL;
    sdt_ti_config c;
    fx_config(j->env, &c, j->embedding, NULL, j->log, STEPS);
    c.batch_size = 2;
    c.latent_sampling = SDT_LATENT_RANDOM;
    j->status = fx_prepare_run(j->env, t, &c);
    snprintf(j->error, sizeof j->error, "%s", fx_last_error(j->env, t));
    j->env->ti->destroy(t);
    return NULL;
}

static void check_independent(const trainer_env *env)
{
    job alone, left, right;
    job_setup(env, &alone, "alone");
    job_setup(env, &left, "left");
    job_setup(env, &right, "right");
    job_train(&alone);
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, job_train, &left) == 0 && pthread_create(&b, NULL, job_train, &right) == 0,
          "threads");
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    job *all[3] = {&alone, &left, &right};
    for (int i = 0; i < 3; i++)
        CHECK(all[i]->status == SDT_STATUS_OK && all[i]->rec.n_steps == STEPS, "job %d: status %d, %d steps: %s", i,
              (int)all[i]->status, all[i]->rec.n_steps, all[i]->error);
    int64_t n0, n1, n2;
    float *e0 = fx_read_embedding(alone.embedding, &n0), *e1 = fx_read_embedding(left.embedding, &n1),
          *e2 = fx_read_embedding(right.embedding, &n2);
    CHECK(e0 && e1 && e2 && n0 == n1 && n0 == n2 && memcmp(e0, e1, (size_t)n0 * 4) == 0 &&
              memcmp(e0, e2, (size_t)n0 * 4) == 0,
          "the embedding trained alone equals those trained side by side");
    for (int s = 0; s < STEPS && s < left.rec.n_steps && s < right.rec.n_steps; s++)
        CHECK(alone.rec.steps[s].loss == left.rec.steps[s].loss && alone.rec.steps[s].loss == right.rec.steps[s].loss,
              "step %d: loss %.9g alone, %.9g and %.9g side by side", s + 1, alone.rec.steps[s].loss,
              left.rec.steps[s].loss, right.rec.steps[s].loss);
    printf("independent: %d steps, final loss %.9g in all three runs\n", STEPS, alone.rec.steps[STEPS - 1].loss);
    free(e0);
    free(e1);
    free(e2);
}

/* ---- interrupt ------------------------------------------------------------------------------ */

typedef struct interrupter {
    const trainer_env *env;
    sdt_ti_trainer *t;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool go;
    int64_t before, after; /* published steps just before and after interrupt() */
} interrupter;

/* On the training thread: after step 2, wake the interrupter (and do not wait for it). */
static void wake_after_two(fx_recorder *r, const sdt_metrics *m)
{
    interrupter *in = r->user;
    if (m->step != 2) return;
    pthread_mutex_lock(&in->mu);
    in->go = true;
    pthread_cond_signal(&in->cv);
    pthread_mutex_unlock(&in->mu);
}

static void *press_interrupt(void *p)
{
    interrupter *in = p;
    pthread_mutex_lock(&in->mu);
    while (!in->go) pthread_cond_wait(&in->cv, &in->mu);
    pthread_mutex_unlock(&in->mu);
    sdt_metrics m;
    memset(&m, 0, sizeof m);
    m.struct_size = sizeof m;
    in->env->ti->get_metrics(in->t, &m);
    in->before = m.step;
    CHECK(in->env->ti->interrupt(in->t) == SDT_STATUS_OK, "interrupt");
    in->env->ti->get_metrics(in->t, &m);
    in->after = m.step;
    sdt_run_state rs = SDT_RUN_IDLE;
    in->env->ti->get_run_state(in->t, &rs);
    CHECK(rs == SDT_RUN_RUNNING || rs == SDT_RUN_INTERRUPTED, "run state while stopping: %d", (int)rs);
    return NULL;
}

static void check_interrupt(const trainer_env *env)
{
    job j;
    job_setup(env, &j, "interrupt");
    interrupter in = {env, NULL, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, -1, -1};
    in.t = fx_create(env, &j.rec);
    if (!in.t) return;
    j.rec.on_step = wake_after_two;
    j.rec.user = &in;
    sdt_ti_config c;
    fx_config(env, &c, j.embedding, NULL, j.log, 100000);
    sdt_prepare_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    CHECK(env->ti->prepare(in.t, &c, &info) == SDT_STATUS_OK, "prepare: %s", fx_last_error(env, in.t));
    pthread_t th;
    pthread_create(&th, NULL, press_interrupt, &in);
    sdt_status st = env->ti->run(in.t);
    pthread_join(th, NULL);
    CHECK(st == SDT_STATUS_INTERRUPTED, "run returns INTERRUPTED, got %d: %s", (int)st, fx_last_error(env, in.t));
    sdt_run_state rs = SDT_RUN_IDLE;
    env->ti->get_run_state(in.t, &rs);
    CHECK(rs == SDT_RUN_INTERRUPTED, "run state INTERRUPTED, got %d", (int)rs);
    int64_t last = j.rec.n_steps ? j.rec.steps[j.rec.n_steps - 1].step : -1;
    printf("interrupt: requested with step %lld..%lld published, run stopped at step %lld of 100000\n",
           (long long)in.before, (long long)in.after, (long long)last);
    CHECK(in.before >= 2 && last >= in.before && last <= in.after + 1,
          "stopped at step %lld: at most the step in progress after the request (%lld..%lld)", (long long)last,
          (long long)in.before, (long long)in.after);
    CHECK(j.rec.saved[SDT_FILE_EMBEDDING] == 1 && j.rec.saved[SDT_FILE_TRAINING_STATE] == 1,
          "one final embedding and one state saved (%d, %d)", j.rec.saved[SDT_FILE_EMBEDDING],
          j.rec.saved[SDT_FILE_TRAINING_STATE]);
    sdt_embedding_info ei;
    memset(&ei, 0, sizeof ei);
    ei.struct_size = sizeof ei;
    CHECK(env->ti->inspect(in.t, j.embedding, &ei, NULL, 0, NULL) == SDT_STATUS_OK, "inspect the saved embedding");
    CHECK(ei.all_finite && ei.step == last, "saved embedding: finite %d, step %lld (want %lld)", ei.all_finite,
          (long long)ei.step, (long long)last);
    char *step = fx_read_metadata(j.rec.last_saved[SDT_FILE_TRAINING_STATE], "step");
    CHECK(step && strtoll(step, NULL, 10) == last, "the state file is at step %s", step ? step : "?");
    free(step);
    /* run() again needs a new prepare; interrupt() with nothing running is harmless. */
    CHECK(env->ti->run(in.t) == SDT_STATUS_BAD_STATE, "a second run() without prepare is refused");
    CHECK(env->ti->interrupt(in.t) == SDT_STATUS_OK, "interrupt with no run");
    env->ti->destroy(in.t);
}

int main(int argc, char **argv)
{
    trainer_env env;
    if (!trainer_env_open(&env, argc, argv, "trainer_threads")) return trainer_env_abandon(&env);
    check_independent(&env);
    check_interrupt(&env);
    trainer_env_close(&env);
    return sdt_test_finish("trainer_threads");
}
