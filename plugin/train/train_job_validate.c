/* train_job_validate.c - the job's side of validation (train/validation.h): loading the images
 * with the training's image options, the pass that measures one image (forward only, a
 * hypernetwork in eval mode), and at a new lowest loss that step's copy (unless save_every saves
 * it anyway). Measuring draws nothing the training uses, so a run with validation trains exactly
 * as one without. */
#include <stdlib.h>
#include <string.h>

#include "sd_text_rules.h"
#include "train/flow_prompts.h"
#include "train/train_job.h"

bool sdt_train_job_load_validation(sdt_train_job *job, sdt_error *error)
{
    sdt_validation *v = &job->val;
    sdt_validation_reset(v);
    if (!v->on) return true;
    if (!v->dir) return sdt_validation_hold_out(v, &job->data.ds, &job->data.lc, job->opt.seed, job->host, error);
    sdt_dataset_options o = {0};
    sdt_train_job_image_options(job, &o);
    bool ok = sdt_validation_load_folder(v, &o, &job->rt, &job->wa, job->opt.seed, job->host, error);
    job->have_measured = false; /* the encoder used the work arena */
    return ok;
}

/* SD3.5, Flux.1: the validation timestep t (of the DDPM's 1000) as the flow's t' = (t + 1) / 1000 (0.1, 0.3 ... 0.9),
 * x_t' = (1 - t') x0 + t' noise against the velocity noise - x0, unweighted; the prompt through CLIP and T5. */
static bool measure_flow(sdt_train_job *job, const latent_entry *e, int t, const float *noise, const char *prompt,
                         float *noisy, float *target, float *weight, int32_t *tokens, clip_override *overrides,
                         double *loss, sdt_error *error)
{
    int64_t n = (int64_t)e->c * e->h * e->w, hw = (int64_t)e->h * e->w;
    double tf = (double)(t + 1) / 1000.0;
    sdt_flow_noisy(tf, e->value, noise, noisy, n);
    sdt_flow_target(e->value, noise, target, n);
    for (int ch = 0; ch < e->c; ch++)
        for (int64_t i = 0; i < hw; i++) weight[ch * hw + i] = e->weight ? e->weight[i] : 1.0f;
    int32_t *t5_tokens = malloc((size_t)job->t5_len * sizeof(int32_t));
    t5_override *t5_overrides = malloc((size_t)job->t5_len * sizeof(t5_override));
    if (!t5_tokens || !t5_overrides) {
        free(t5_tokens);
        free(t5_overrides);
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory measuring the validation loss");
    }
    sdt_flow_prompt_batch pb = {
        .tokens = tokens, .overrides = overrides, .t5_tokens = t5_tokens, .t5_overrides = t5_overrides};
    float timestep = (float)sdt_flow_model_timestep(tf);
    bool ok = sdt_flow_prompts(job->tok, &job->rules, job->t5_tok, &job->t5_rules, &prompt, 1, job->t5_len, &pb, error);
    if (ok) {
        sdt_pass_inputs in = {.shape = {.batch = 1,
                                        .c = e->c,
                                        .h = e->h,
                                        .w = e->w,
                                        .chunks = 1,
                                        .in_c = e->c,
                                        .weighted = job->data.use_alpha,
                                        .t5_len = job->t5_len},
                              .tokens = tokens,
                              .overrides = overrides,
                              .n_overrides = pb.n_overrides,
                              .noisy = noisy,
                              .target = target,
                              .weight = weight,
                              .timesteps = &timestep,
                              .end_id = sdt_tokenizer_eos(job->tok),
                              .t5_tokens = t5_tokens,
                              .t5_overrides = t5_overrides,
                              .n_t5_overrides = pb.n_t5_overrides,
                              .guidance = job->flow_guidance};
        sdt_pass_options po = sdt_train_job_pass_options(job);
        po.anomaly_check = false;
        sdt_pass_trainables tr = sdt_train_job_trainables(job);
        tr.drows = NULL; /* forward only */
        ok = sdt_train_job_ensure_arena(job, &in.shape, &po, error) &&
             sdt_pass_run(&job->rt, &job->wa, &po, &in, &tr, 1.0f, false, loss, error);
    }
    free(t5_tokens);
    free(t5_overrides);
    return ok;
}

/* One image at one timestep: its pass, forward only (sdt_validation_measure). */
static bool measure_one(void *user, int item, int t, const float *noise, double *loss, sdt_error *error)
{
    sdt_train_job *job = user;
    const latent_entry *e = &job->val.lc.items[item];
    int64_t n = (int64_t)e->c * e->h * e->w, hw = (int64_t)e->h * e->w;
    int extra = inpaint_extra_channels(&job->rt);
    int64_t n_in = n + (int64_t)extra * hw;
    float *noisy = malloc((size_t)n_in * sizeof(float));
    float *target = malloc((size_t)n * sizeof(float)), *weight = malloc((size_t)n * sizeof(float));
    int32_t *tokens = malloc(SDT_PROMPT_MAX_CHUNKS * SDT_PROMPT_TOKENS * sizeof(int32_t));
    clip_override *overrides = malloc(SDT_PROMPT_MAX_CHUNKS * SDT_PROMPT_TOKENS * sizeof(clip_override));
    sdt_prompt_encoded *enc = malloc(sizeof *enc);
    char *prompt = sdt_template_fill(job->tmpl.lines[0], job->prompt_name, job->val.ds.items[item].caption);
    bool ok = noisy && target && weight && tokens && overrides && enc && prompt;
    if (!ok) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory measuring the validation loss");
    const float *cond = NULL;
    if (ok && extra) ok = (cond = inpaint_cond_get(&job->inpaint, &job->rt, &job->wa, e->h, e->w, error)) != NULL;
    if (ok && job->flow) {
        ok = measure_flow(job, e, t, noise, prompt, noisy, target, weight, tokens, overrides, loss, error);
    } else if (ok) {
        sdt_q_sample(&job->sched, t, e->value, noise, noisy, n);
        if (extra) memcpy(noisy + n, cond, (size_t)(n_in - n) * sizeof(float));
        sdt_training_target(&job->sched, t, job->rt.cfg.unet.v_prediction, e->value, noise, target, n);
        for (int ch = 0; ch < e->c; ch++)
            for (int64_t i = 0; i < hw; i++) weight[ch * hw + i] = e->weight ? e->weight[i] : 1.0f;
        sdt_prompt_encode(job->tok, &job->rules, prompt, enc);
        float timestep = (float)t;
        sdt_pass_inputs in = {.shape = {.batch = 1,
                                        .c = e->c,
                                        .h = e->h,
                                        .w = e->w,
                                        .chunks = 1,
                                        .in_c = e->c + extra,
                                        .weighted = job->data.use_alpha},
                              .tokens = tokens,
                              .overrides = overrides,
                              .noisy = noisy,
                              .target = target,
                              .weight = weight,
                              .timesteps = &timestep,
                              .end_id = sdt_tokenizer_eos(job->tok)};
        sdt_sdxl_sizes sizes = sdt_train_job_sample_sizes(job, &job->val.ds.items[item], e, false);
        if (sd_text_rules_of(&job->rt.cfg).sdxl) in.sizes = &sizes;
        in.shape.chunks = sdt_prompt_batch(job->tok, &job->rules, enc, 1, tokens, overrides, &in.n_overrides);
        sdt_pass_options po = sdt_train_job_pass_options(job); /* the training loss, without min-SNR's weights */
        po.anomaly_check = false;
        sdt_pass_trainables tr = sdt_train_job_trainables(job);
        tr.drows = NULL; /* forward only */
        ok = sdt_train_job_ensure_arena(job, &in.shape, &po, error) &&
             sdt_pass_run(&job->rt, &job->wa, &po, &in, &tr, 1.0f, false, loss, error);
    }
    free(noisy);
    free(target);
    free(weight);
    free(tokens);
    free(overrides);
    free(enc);
    free(prompt);
    return ok;
}

bool sdt_train_job_validation_loss(sdt_train_job *job, double *loss, sdt_error *error)
{
    for (int p = 0; p < job->n_parts; p++)
        if (job->parts[p].ops->begin_validation) job->parts[p].ops->begin_validation(&job->parts[p], job);
    return sdt_validation_loss(&job->val, job->opt.seed, measure_one, job, loss, error);
}

/* A new lowest loss: its copy now, unless the snapshot of this step will be written anyway. */
static bool save_best_copy(sdt_train_job *job, sdt_error *error)
{
    if (job->opt.save_every > 0 && job->step % job->opt.save_every == 0) return true;
    for (int p = 0; p < job->n_parts; p++)
        if (!job->parts[p].ops->sync(&job->parts[p], job, error) ||
            !job->parts[p].ops->save_snapshot(&job->parts[p], job, job->step, error))
            return sdt_error_wrap(error, "saving the copy of step %lld (the lowest validation loss so far) failed",
                                  (long long)job->step);
    return true;
}

bool sdt_train_job_validate_if_due(sdt_train_job *job, sdt_error *error)
{
    if (!sdt_validation_due(&job->val, job->step)) return true;
    double loss;
    /* every rank measures; rank 0's number decides, so the best step and early stop agree everywhere */
    if (!sdt_train_job_validation_loss(job, &loss, error) || !sdt_run_comm_from_rank0(&job->par, &loss, error))
        return false;
    bool better = sdt_validation_record(&job->val, job->step, loss);
    if (better && sdt_run_comm_writes(&job->par) && !save_best_copy(job, error)) return false;
    sdt_validation_report(&job->val, job->step, better, job->host);
    return true;
}
