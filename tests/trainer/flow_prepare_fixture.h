/* flow_prepare_fixture.h - what the prepare tests of the rectified-flow transformers share (header only:
 * test_sd3_prepare, test_flux_prepare): the trainer factory on hn_fixture's environment, prepare with an embedding
 * and/or a hypernetwork part (its status and sentence), and fast options on the fixture's template. */
#ifndef SDT_TEST_TRAINER_FLOW_PREPARE_FIXTURE_H
#define SDT_TEST_TRAINER_FLOW_PREPARE_FIXTURE_H

#include "hn_fixture.h"

#include "sd3_gen.h"

typedef struct ctx {
    hn_env hn;
    trainer_env env;
    const sdt_trainer_factory *tr;
} ctx;

static inline sdt_status try_prepare_parts(const ctx *c, sdt_train_options *o, const char *emb, const char *hn,
                                           char *error, size_t size)
{
    fx_recorder rec;
    sdt_host_callbacks cb = fx_recorder_init(&rec);
    sdt_trainer *t = NULL;
    char err[512] = "";
    CHECK(c->tr->create(&cb, &t, err, sizeof err) == SDT_STATUS_OK && t, "create: %s", err);
    if (!t) return SDT_STATUS_INTERNAL;
    sdt_embedding_part e;
    e.struct_size = sizeof e;
    c->tr->embedding_part_defaults(&e);
    e.embedding_path = emb;
    sdt_hypernetwork_part h;
    memset(&h, 0, sizeof h);
    h.struct_size = sizeof h;
    c->tr->hypernetwork_part_defaults(&h);
    h.hypernetwork_path = hn;
    sdt_trainer_config config = {
        .struct_size = sizeof config, .options = o, .embedding = emb ? &e : NULL, .hypernetwork = hn ? &h : NULL};
    sdt_prepare_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    sdt_status st = c->tr->prepare(t, &config, &info);
    error[0] = 0;
    c->tr->get_last_error(t, error, size, NULL);
    c->tr->destroy(t);
    printf("   status %d: %s\n", (int)st, error);
    return st;
}

static inline sdt_status try_prepare(const ctx *c, sdt_train_options *o, const char *emb, char *error, size_t size)
{
    return try_prepare_parts(c, o, emb, NULL, error, size);
}

static inline void options(const ctx *c, sdt_train_options *o, const char *log)
{
    static char template_path[FX_PATH];
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    CHECK(c->tr->train_options_defaults(o) == SDT_STATUS_OK, "train_options_defaults");
    fx_fast_options(&c->env, o, template_path, log, 2, 77);
}

/* The environment of the test named name and its trainer factory; false (c->hn.base abandoned by the caller) when
 * none. */
static inline bool ctx_open(ctx *c, int argc, char **argv, const char *name)
{
    memset(c, 0, sizeof *c);
    if (!hn_env_open(&c->hn, argc, argv, name)) return false;
    c->env = c->hn.base;
    c->tr = (const sdt_trainer_factory *)c->env.entry->get_factory(SDT_FACTORY_TRAINER);
    CHECK(c->tr != NULL, "no %s factory", SDT_FACTORY_TRAINER);
    return true;
}

#endif
