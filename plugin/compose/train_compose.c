/* train_compose.c - a training job from a request's parts (see train_compose.h). */
#include "compose/train_compose.h"

#include <stdio.h>

#include "hn/hn_part.h"
#include "host/host_log.h"
#include "ti/ti_part.h"
#include "train/train_options.h"

static sdt_schedule_texts texts_of(const sdt_part_schedules *s)
{
    return (sdt_schedule_texts){s->learn_rate, s->learn_rate_field, s->clip_mode, s->clip_value, s->clip_value_field};
}

/* An SD3.5/Flux.1 embedding's tables and their schedules, with the fields users name them by. */
static ti_table_settings table_settings(const sdt_embedding_settings *s)
{
    return (ti_table_settings){s->encoders,
                               {s->encoder_learn_rates[0], s->encoder_learn_rates[1], s->encoder_learn_rates[2]},
                               {"learn_rate_clip_l", "learn_rate_clip_g", "learn_rate_t5xxl"},
                               "encoders"};
}

/* A hypernetwork run's first part: the file, then its name (A1111's [name] is the hypernetwork's) and step. */
static bool open_hypernetwork(sdt_train_job *job, const sdt_hypernetwork_settings *s, hn_part **out, sdt_error *error)
{
    hn_part *hp = *out = hn_part_open(job, s->path, s->strength, s->preview_hypernetworks,
                                      s->preview_hypernetworks_field, s->preview_strength, error);
    if (!hp) return false;
    snprintf(job->name, sizeof job->name, "%s", hn_part_name(hp));
    snprintf(job->prompt_name, sizeof job->prompt_name, "%s", hn_part_name(hp));
    job->initial_step = job->step = hn_part_step(hp);
    return hn_part_check_name(hp, error);
}

/* An embedding run's only part: the file, its name and step are the run's. */
static bool open_embedding_alone(sdt_train_job *job, const sdt_embedding_settings *s, ti_part **out, sdt_error *error)
{
    ti_part *tp = *out = ti_part_open(job, s->path, "", s->save_cards, error);
    if (!tp) return false;
    snprintf(job->name, sizeof job->name, "%s", tp->emb.name);
    job->initial_step = job->step = tp->emb.step;
    return true;
}

/* Joint training's embedding: its state keys under "embedding."; the run counts the hypernetwork's steps. */
static bool open_joint_embedding(sdt_train_job *job, const sdt_embedding_settings *s, ti_part **out, sdt_error *error)
{
    ti_part *tp = *out = ti_part_open(job, s->path, "embedding.", s->save_cards, error);
    if (!tp) return false;
    if (tp->emb.step != job->step)
        sdt_host_log(job->host, SDT_LOG_INFO,
                     "the embedding %s is at step %lld and the hypernetwork at %lld; the run counts "
                     "from the hypernetwork's",
                     s->path, (long long)tp->emb.step, (long long)job->step);
    return true;
}

static bool already_trained(const sdt_train_request *rq, const sdt_train_job *job, sdt_error *error)
{
    const char *what = rq->has_hypernetwork ? "hypernetwork" : "embedding";
    const char *path = rq->has_hypernetwork ? rq->hypernetwork.path : rq->embedding.path;
    return sdt_fail(error, SDT_ERR_VALIDATION,
                    "%s: the %s has already been trained for %lld steps, which reaches max steps "
                    "(%lld); raise max steps to train further",
                    path, what, (long long)job->step, (long long)rq->options.max_steps);
}

bool sdt_compose_job(const sdt_train_request *rq, const sdt_host_callbacks *host, const sdt_run_control *control,
                     sdt_train_job **out, sdt_prepare_info *info, sdt_error *error)
{
    *out = NULL;
    const sdt_train_options *o = &rq->options;
    bool hn = rq->has_hypernetwork, emb = rq->has_embedding;
    if (!hn && !emb) return sdt_fail(error, SDT_ERR_VALIDATION, "nothing to train: the request has no part");
    const sdt_output_layout *layout = !hn                               ? &sdt_output_layout_embedding
                                      : emb && rq->embedding.save_cards ? &sdt_output_layout_hypernetwork_cards
                                                                        : &sdt_output_layout_hypernetwork;
    sdt_train_job *job = sdt_train_job_new(o, hn ? "hypernetwork" : "embedding", layout, host, control, error);
    if (!job) return false;
    if (rq->rank_group) sdt_run_comm_join(&job->par, rq->rank_group, rq->rank_index);
    sdt_train_job_name_options(job, rq->train_options_prefix);
    bool resume = o->resume_state_path && *o->resume_state_path;
    hn_part *hp = NULL;
    ti_part *tp = NULL;
    /* The cheap checks first (the part's file, the shared paths, the template, the schedules), identity
     * included, then the expensive work (the README's promise). */
    bool ok = hn ? open_hypernetwork(job, &rq->hypernetwork, &hp, error)
                 : open_embedding_alone(job, &rq->embedding, &tp, error);
    ok = ok && sdt_train_options_check_required(o, rq->options_prefix, error);
    if (ok && hn && emb) ok = open_joint_embedding(job, &rq->embedding, &tp, error);
    ok = ok && sdt_train_job_check_template(job, emb, error);
    /* Resuming, the state's step decides (at max steps the run writes the trained files from it). */
    if (ok && !resume && o->max_steps <= job->step) ok = already_trained(rq, job, error);
    const sdt_schedule_texts hn_texts = texts_of(&rq->hypernetwork.schedules),
                             emb_texts = texts_of(&rq->embedding.schedules);
    const ti_table_settings tables = table_settings(&rq->embedding);
    for (int k = 0; ok && emb && k < 3; k++)
        if (tables.learn_rates[k]) {
            sdt_schedule_texts own = emb_texts;
            own.lr = tables.learn_rates[k];
            own.lr_field = tables.learn_rate_fields[k];
            ok = sdt_train_job_check_schedule(job, &own, error);
        }
    job->tables = emb ? tables.encoders : 0; /* for load_data's prompt check (0: every table); add_group
                                              * resolves it against the file's tables */
    ok = ok && (!hn || sdt_train_job_check_schedule(job, &hn_texts, error)) &&
         (!emb || sdt_train_job_check_schedule(job, &emb_texts, error)) && sdt_train_job_lock_parts(job, error) &&
         (!resume || sdt_train_job_resolve_resume(job, o->resume_state_path, error)) &&
         sdt_train_job_load_model(job, o->device, o->cpu_threads, error) &&
         (!hn || hn_part_bind_model(hp, job, error)) && (!emb || ti_part_bind_model(tp, job, error)) &&
         (!resume || sdt_train_job_resolve_resume(job, job->resume_path, error)) && /* the model too */
         (!hn || (hn_part_pick_twin(hp, job), true)) && sdt_train_job_load_data(job, o, error) &&
         (!hn || hn_part_place_twin(hp, job, error)) &&
         (!hn || hn_part_add_group(hp, job, &hn_texts, rq->hypernetwork.weight_decay, error)) &&
         (!emb || ti_part_add_group(tp, job, &emb_texts, &tables, error)) && sdt_train_job_finish(job, o, info, error);
    if (!ok) {
        sdt_train_job_destroy(job);
        return false;
    }
    if (tp) {
        info->vectors = (uint32_t)tp->emb.n_vectors;
        info->embedding_dim = (uint32_t)tp->emb.dim;
    }
    *out = job;
    return true;
}
