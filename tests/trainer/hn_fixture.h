/* hn_fixture.h - what the hypernetwork trainer tests share (header only, on top of
 * trainer_fixture.h): the hypernetwork factory, a Train-tab config preset for fast CPU runs,
 * making a hypernetwork (and the joint-training pair), and comparing tensors of two files. */
#ifndef SDT_TEST_TRAINER_HN_FIXTURE_H
#define SDT_TEST_TRAINER_HN_FIXTURE_H

#include "trainer_fixture.h"

typedef struct hn_env {
    trainer_env base;
    const sdt_hn_factory *hn;
} hn_env;

typedef struct hn_run {
    sdt_hn_config config;
    sdt_train_options options;
} hn_run;

static inline const char *hn_error(const hn_env *env, const sdt_hn_trainer *t)
{
    static _Thread_local char buf[2048];
    buf[0] = 0;
    env->hn->get_last_error(t, buf, sizeof buf, NULL);
    return buf;
}

static inline sdt_hn_trainer *hn_create(const hn_env *env, fx_recorder *rec)
{
    sdt_host_callbacks cb = fx_recorder_init(rec);
    sdt_hn_trainer *t = NULL;
    char err[512] = "";
    CHECK(env->hn->create(&cb, &t, err, sizeof err) == SDT_STATUS_OK && t, "create: %s", err);
    return t;
}

/* <tmp>/<tag>-hn for the files and <tmp>/<tag>-log for the run's log folder. */
static inline void run_dirs(const hn_env *env, const char *tag, char *dir, char *log)
{
    char name[64];
    snprintf(name, sizeof name, "%s-hn", tag);
    fx_subdir(&env->base, dir, name);
    snprintf(name, sizeof name, "%s-log", tag);
    fx_subdir(&env->base, log, name);
}

/* A new hypernetwork <dir>/<name>.pt for the demo model's widths; path in out. */
static inline bool make_hn(const hn_env *env, const char *dir, const char *name, const char *widths, bool dropout,
                           char *out)
{
    fx_recorder rec;
    sdt_hn_trainer *t = hn_create(env, &rec);
    if (!t) return false;
    sdt_hypernetwork_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.struct_size = sizeof spec;
    spec.name = name;
    spec.output_dir = dir;
    spec.widths = widths;
    spec.layer_structure = "1, 2, 1";
    spec.activation = "relu";
    spec.weight_init = "Normal";
    spec.use_dropout = dropout;
    spec.dropout_structure = dropout ? "0, 0.1, 0" : "0, 0, 0";
    spec.layer_norm = true;
    sdt_status st = env->hn->create_hypernetwork(t, &spec, out, FX_PATH, NULL);
    CHECK(st == SDT_STATUS_OK, "create_hypernetwork %s: %s", name, hn_error(env, t));
    env->hn->destroy(t);
    return st == SDT_STATUS_OK;
}

/* For joint training: a hypernetwork <dir>/<stem>hn.pt ("128, 64") and an embedding <dir>/<stem>emb.safetensors
 * of `vectors` vectors initialised from "ring"; paths in hn and emb (FX_PATH). */
static inline bool make_joint_pair(const hn_env *env, const char *dir, const char *stem, uint32_t vectors, char *hn,
                                   char *emb)
{
    char hn_name[64], emb_name[64];
    snprintf(hn_name, sizeof hn_name, "%shn", stem);
    snprintf(emb_name, sizeof emb_name, "%semb", stem);
    return make_hn(env, dir, hn_name, "128, 64", false, hn) &&
           fx_make_embedding(&env->base, dir, emb_name, vectors, "ring", emb);
}

/* The fast preset (as fx_config): 64x64, CPU, one thread, fp32, every CSV row, no previews or copies. */
static inline void hn_config(const hn_env *env, hn_run *r, const char *hn_path, const char *log_dir, int64_t max_steps)
{
    static _Thread_local char template_path[FX_PATH];
    memset(r, 0, sizeof *r);
    r->config.struct_size = sizeof r->config;
    env->hn->config_defaults(&r->config);
    r->options.struct_size = sizeof r->options;
    env->hn->train_options_defaults(&r->options);
    r->config.train_options = &r->options;
    r->config.hypernetwork_path = hn_path;
    r->config.learn_rate = "0.002";
    fx_fast_options(&env->base, &r->options, template_path, log_dir, max_steps, 4321);
}

static inline sdt_status hn_prepare_run(const hn_env *env, sdt_hn_trainer *t, hn_run *r)
{
    r->config.train_options = &r->options;
    sdt_prepare_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    sdt_status st = env->hn->prepare(t, &r->config, &info);
    if (st != SDT_STATUS_OK) return st;
    return env->hn->run(t);
}

/* Whether tensor name_a of a and name_b of b (a hypernetwork .safetensors, a state) hold the same f32 bits. */
static inline bool same_floats(const char *a, const char *name_a, const char *b, const char *name_b)
{
    int64_t na, nb;
    float *x = fx_read_tensor(a, name_a, &na), *y = fx_read_tensor(b, name_b, &nb);
    bool same = x && y && na == nb && na > 0 && memcmp(x, y, (size_t)na * sizeof(float)) == 0;
    free(x);
    free(y);
    return same;
}

/* The environment with the hypernetwork factory; false (after a failed check or a skip) when it cannot run. */
static inline bool hn_env_open(hn_env *env, int argc, char **argv, const char *name)
{
    memset(env, 0, sizeof *env);
    if (!trainer_env_open(&env->base, argc, argv, name)) return false;
    env->hn = (const sdt_hn_factory *)env->base.entry->get_factory(SDT_FACTORY_HYPERNETWORK);
    CHECK(env->hn != NULL, "no %s factory", SDT_FACTORY_HYPERNETWORK);
    return env->hn != NULL;
}

#endif
