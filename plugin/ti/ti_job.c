/* ti_job.c - textual inversion's prepare: the shared job (train/train_job.h) with one part, the
 * embedding (ti/ti_part.h), in the order the checks must come: the embedding and the template
 * before the model, the model, the data, the embedding's parameter group, then the rest. */
#include <stdio.h>
#include <stdlib.h>

#include "ti/ti_config.h"
#include "ti/ti_part.h"
#include "ti/ti_trainer.h"
#include "train/train_options.h"

bool ti_job_prepare(const sdt_ti_config *c, const sdt_host_callbacks *host, const sdt_run_control *control,
                    sdt_train_job **out, sdt_prepare_info *info, sdt_error *error)
{
    *out = NULL;
    sdt_train_options o;
    ti_config_shared_options(c, &o);
    sdt_train_job *job = sdt_train_job_new(&o, "embedding", &sdt_output_layout_embedding, host, control, error);
    if (!job) return false;
    bool resume = c->resume_state_path && *c->resume_state_path;
    /* The cheap checks first, identity included, then the expensive work (the README's promise). */
    ti_part *tp = ti_part_open(job, c->embedding_path, "", c->save_image_with_embedding, error);
    bool ok = tp != NULL;
    if (ok) {
        snprintf(job->name, sizeof job->name, "%s", tp->emb.name);
        job->initial_step = job->step = tp->emb.step;
        ok = sdt_train_job_check_template(job, true, error);
    }
    /* Resuming, the state's step decides (at max steps the run writes the trained files from it). */
    if (ok && !resume && c->max_steps <= tp->emb.step)
        ok = sdt_fail(error, SDT_ERR_VALIDATION, "%s: the embedding has already been trained for %lld steps, which reaches max steps "
                      "(%lld); raise max steps to train further", c->embedding_path, (long long)tp->emb.step,
                      (long long)c->max_steps);
    const sdt_schedule_texts schedules = {c->learn_rate, "config.learn_rate", c->clip_mode, c->clip_value, "config.clip_value"};
    ok = ok && sdt_train_job_check_schedule(job, &schedules, error) &&
         sdt_train_job_lock_parts(job, error) &&
         (!resume || sdt_train_job_resolve_resume(job, c->resume_state_path, error)) &&
         sdt_train_job_load_model(job, c->device, c->cpu_threads, error) && ti_part_bind_model(tp, job, error) &&
         (!resume || sdt_train_job_resolve_resume(job, job->resume_path, error)) && /* the model too */
         sdt_train_job_load_data(job, &o, error) &&
         ti_part_add_group(tp, job, &schedules, error) &&
         sdt_train_job_finish(job, &o, info, error);
    if (!ok) {
        sdt_train_job_destroy(job);
        return false;
    }
    info->vectors = (uint32_t)tp->emb.n_vectors;
    info->embedding_dim = (uint32_t)tp->emb.dim;
    *out = job;
    return true;
}
