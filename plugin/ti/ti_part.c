/* ti_part.c - an embedding as a part of a training job (see ti_part.h). */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/host_log.h"
#include "data/state_seal.h"
#include "sd_text_rules.h"
#include "safetensors.h"
#include "ti/embedding_file.h"
#include "ti/ti_part.h"
#include "train/sd_cond.h"

bool ti_part_download_vectors(ti_part *tp, sdt_error *error)
{
    sdt_backend *be = tp->be;
    if (be->download(be, tp->emb.vectors, tp->param.data, sdt_tensor_nbytes(&tp->param)))
        return sdt_fail(error, be->error.code, "reading the embedding back from the %s backend failed: %s", be->name,
                        be->error.message);
    return true;
}

/* The vectors, and the embedding's step, checkpoint and fallback note brought up to date: ready to save. */
static bool part_sync(sdt_train_part *p, sdt_train_job *job, sdt_error *error)
{
    ti_part *tp = p->self;
    if (!ti_part_download_vectors(tp, error)) return false;
    tp->emb.step = job->step;
    sdt_embedding_set_string(&tp->emb.checkpoint_hash, job->checkpoint_hash[0] ? job->checkpoint_hash : NULL);
    sdt_embedding_set_string(&tp->emb.checkpoint_name, job->checkpoint_name[0] ? job->checkpoint_name : NULL);
    char note[160];
    sdt_train_job_fallback_note(job, note, sizeof note);
    if (note[0]) sdt_embedding_set_string(&tp->emb.training_note, note);
    return true;
}

static bool save_embedding_as(ti_part *tp, sdt_train_job *job, const char *path, sdt_file_kind kind, sdt_error *error)
{
    if (!sdt_embedding_save_safetensors(&tp->emb, path, true, error)) return false;
    sdt_host_file_saved(job->host, kind, path, job->step);
    return true;
}

static bool part_save_snapshot(sdt_train_part *p, sdt_train_job *job, int64_t step, sdt_error *error)
{
    ti_part *tp = p->self;
    char folder[4096], path[4096];
    /* <run>/embeddings/: the run's copies folder, or beside it in a hypernetwork's run (joint training) */
    snprintf(folder, sizeof folder, "%.4000s/embeddings", job->outputs.dirs.root);
    if (mkdir(folder, 0777) != 0 && errno != EEXIST)
        return sdt_fail(error, SDT_ERR_IO,
                        "%s: cannot create the folder for the embedding's copies (%s); choose a writable "
                        "log folder",
                        folder, strerror(errno));
    if (!sdt_output_file(path, sizeof path, folder, tp->emb.name, step, ".safetensors"))
        return sdt_fail(error, SDT_ERR_IO, "%s: the snapshot path is too long; choose a shorter log folder", folder);
    return save_embedding_as(tp, job, path, SDT_FILE_EMBEDDING_SNAPSHOT, error);
}

static bool part_save_final(sdt_train_part *p, sdt_train_job *job, sdt_error *error)
{
    return save_embedding_as(p->self, job, p->output_path, SDT_FILE_EMBEDDING, error);
}

/* The vectors on the device now (the average, train_job_average.c) as an embedding file at path. */
static bool part_save_as(sdt_train_part *p, sdt_train_job *job, const char *path, sdt_error *error)
{
    return part_sync(p, job, error) && save_embedding_as(p->self, job, path, SDT_FILE_EMBEDDING, error);
}

/* The A1111 card of the current embedding over a picture (NULL: a generated one). */
static bool part_card(sdt_train_part *p, sdt_train_job *job, int64_t step, const uint8_t *rgb, int w, int h,
                      sdt_error *error)
{
    ti_part *tp = p->self;
    if (!tp->save_cards || !job->outputs.dirs.image_embeddings[0]) return true;
    if (rgb && !part_sync(p, job, error)) return false; /* after a preview: the card shows the vectors of now */
    char path[4096];
    if (!sdt_output_file(path, sizeof path, job->outputs.dirs.image_embeddings, tp->emb.name, step, ".png"))
        return sdt_fail(error, SDT_ERR_IO, "%s: the PNG card's path is too long; choose a shorter log folder",
                        job->outputs.dirs.image_embeddings);
    if (!sdt_embedding_save_png_card(&tp->emb, path, rgb, w, h, true, error))
        return sdt_error_wrap(error, "the PNG card was not saved");
    sdt_host_file_saved(job->host, SDT_FILE_EMBEDDING_CARD, path, step);
    return true;
}

static void part_settings(sdt_train_part *p, sdt_train_job *job, cJSON *s)
{
    ti_part *tp = p->self;
    (void)job;
    cJSON_AddStringToObject(s, "embedding_name", tp->emb.name);
    cJSON_AddNumberToObject(s, "num_vectors_per_token", tp->emb.n_vectors);
}

/* A copy of the device rows (the host copy emb.vectors may hold what a save is about to write: left alone). */
static float *device_values(ti_part *tp, sdt_error *error)
{
    size_t bytes = sdt_tensor_nbytes(&tp->param);
    float *all = malloc(bytes ? bytes : 1);
    if (!all) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory hashing the training state");
        return NULL;
    }
    if (tp->be->download(tp->be, all, tp->param.data, bytes)) {
        sdt_fail(error, tp->be->error.code, "reading the embedding back from the %s backend failed: %s", tp->be->name,
                 tp->be->error.message);
        free(all);
        return NULL;
    }
    return all;
}

/* A table embedding's values span a group per trained table and the tables that do not train: all of them. */
static bool part_values_sha256(sdt_train_part *p, char hex[65], sdt_error *error)
{
    ti_part *tp = p->self;
    float *all = device_values(tp, error);
    if (!all) return false;
    sdt_vectors_sha256(all, (size_t)sdt_tensor_numel(&tp->param), hex);
    free(all);
    return true;
}

/* With ema_result the result holds each trained table's average and the other tables' values, in file order. */
static bool part_average_sha256(sdt_train_part *p, sdt_train_job *job, char hex[65], sdt_error *error)
{
    ti_part *tp = p->self;
    float *all = device_values(tp, error); /* the tables that do not train are as on the device */
    if (!all) return false;
    for (int g = 0; g < tp->n_groups; g++) {
        const ti_group *grp = &tp->groups[g];
        if (grp->engine_group < job->ema.n_groups)
            memcpy(all + grp->base, job->ema.values[grp->engine_group],
                   job->ema.count[grp->engine_group] * sizeof(float));
    }
    sdt_vectors_sha256(all, (size_t)sdt_tensor_numel(&tp->param), hex);
    free(all);
    return true;
}

static void part_destroy(sdt_train_part *p)
{
    ti_part *tp = p->self;
    if (!tp) return;
    if (tp->be) {
        if (tp->param.data) tp->be->free(tp->be, tp->param.data);
        if (tp->grad.data) tp->be->free(tp->be, tp->grad.data);
    }
    sdt_embedding_free(&tp->emb);
    for (int g = 0; g < tp->n_groups; g++) free(tp->groups[g].undo);
    free(tp);
}

static const sdt_train_part_ops ti_part_ops = {
    .sync = part_sync,
    .save_snapshot = part_save_snapshot,
    .save_final = part_save_final,
    .after_preview = part_card,
    .save_as = part_save_as,
    .settings = part_settings,
    .values_sha256 = part_values_sha256,
    .average_sha256 = part_average_sha256,
    .destroy = part_destroy,
};

/* The trained embedding goes to the file the user named; a card or another format we do not
 * write goes to <stem>.safetensors beside it, which must not be some other existing file. A
 * training state is not an embedding to train (its own file would be replaced). */
static char *choose_output(const char *path, sdt_embedding_format fmt, sdt_error *error)
{
    if (fmt == SDT_EMBEDDING_FORMAT_SAFETENSORS) {
        sdt_safetensors *st = sdt_st_open(path, error);
        bool is_state = st && sdt_st_metadata_get(st, "sdtrain_state") != NULL;
        sdt_st_close(st);
        if (is_state) {
            sdt_fail(error, SDT_ERR_VALIDATION,
                     "%s is a training state, not an embedding; pass the embedding with --embedding "
                     "(embedding_path) and this file with --resume (resume_state_path)",
                     path);
            return NULL;
        }
        return strdup(path);
    }
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    int stem = (int)(dot && (!slash || dot > slash) ? dot - path : (int)strlen(path));
    char out[4096];
    if (snprintf(out, sizeof out, "%.*s.safetensors", stem, path) >= (int)sizeof out) {
        sdt_fail(error, SDT_ERR_VALIDATION, "%s: the path is too long; move the embedding to a shorter path", path);
        return NULL;
    }
    if (access(out, F_OK) == 0) {
        sdt_fail(error, SDT_ERR_ALREADY_EXISTS,
                 "%s: the trained embedding would be saved as %s, which already exists and is "
                 "not the file you named; train %s itself, or move it away first",
                 path, out, out);
        return NULL;
    }
    return strdup(out);
}

/* The embedding file's checks, and where the result goes. */
static char *check_embedding(sdt_train_job *job, ti_part *tp, const char *path, sdt_error *error)
{
    sdt_embedding_format fmt;
    if (!sdt_embedding_load(path, &tp->emb, &fmt, error)) return NULL;
    if (tp->emb.load_note) sdt_host_log(job->host, SDT_LOG_WARNING, "%s", tp->emb.load_note);
    if (!sdt_embedding_name_check(tp->emb.name, error)) return NULL;
    char *output = choose_output(path, fmt, error);
    if (!output) return NULL;
    if (fmt == SDT_EMBEDDING_FORMAT_A1111_PT || fmt == SDT_EMBEDDING_FORMAT_TORCH_CONCEPT)
        sdt_host_log(job->host, SDT_LOG_INFO,
                     "%s is a PyTorch file: the trained embedding is written as %s "
                     "(safetensors, which A1111, Forge, ComfyUI and diffusers load) beside it; the .pt/.bin itself "
                     "is not changed",
                     path, output);
    char folder[4096];
    snprintf(folder, sizeof folder, "%s", output);
    bool ok = true;
    if (access(dirname(folder), W_OK) != 0) /* the trained embedding is saved there: find out now, not after training */
        ok = sdt_fail(error, SDT_ERR_IO,
                      "%s: the embedding's folder is not writable, so the trained embedding could not be saved "
                      "there; make the folder writable or copy the embedding into a writable folder",
                      output);
    else if (!sdt_embedding_is_finite(&tp->emb))
        ok = sdt_fail(error, SDT_ERR_VALIDATION,
                      "%s: the embedding holds NaN or infinite values; train from an earlier copy or "
                      "create it again",
                      path);
    if (!ok) {
        free(output);
        return NULL;
    }
    return output;
}

ti_part *ti_part_open(sdt_train_job *job, const char *embedding_path, const char *state_prefix, bool save_cards,
                      sdt_error *error)
{
    ti_part *tp = calloc(1, sizeof *tp);
    if (!tp) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory");
        return NULL;
    }
    tp->save_cards = save_cards;
    char *output = check_embedding(job, tp, embedding_path, error);
    if (output && save_cards && sdt_embedding_has_tables(&tp->emb)) { /* the default is on: skipped, said once */
        tp->save_cards = false;
        sdt_host_log(job->host, SDT_LOG_INFO,
                     "%s holds a %s embedding's tables (one per text encoder): no PNG cards are written, since no host "
                     "loads these from a card (A1111 runs neither family); ComfyUI loads the .safetensors, and "
                     "`sdt-host convert FILE --for forge` writes the files Forge loads",
                     embedding_path, sdt_embedding_family_title(&tp->emb));
    }
    if (!output) {
        sdt_embedding_free(&tp->emb);
        free(tp);
        return NULL;
    }
    tp->part = sdt_train_job_add_part(job, &ti_part_ops, tp, "embedding", "--embedding (embedding_path)", state_prefix,
                                      embedding_path, output, error);
    free(output);
    if (!tp->part) { /* the job owns tp once the part exists; before that it is ours */
        if (job->n_parts == 0 || job->parts[job->n_parts - 1].self != tp) {
            sdt_embedding_free(&tp->emb);
            free(tp);
        }
        return NULL;
    }
    tp->part->start_step = tp->emb.step;
    sdt_vectors_sha256(tp->emb.vectors, (size_t)tp->emb.n_vectors * (size_t)tp->emb.dim, tp->part->start_sha256);
    return tp;
}

static const char *const table_names[3] = {"clip_l", "clip_g", "t5xxl"};

bool ti_part_bind_model(ti_part *tp, sdt_train_job *job, sdt_error *error)
{
    if (!ti_embedding_check_model(&tp->emb, &job->rt, tp->part->input_path, error)) return false;
    int32_t id;
    if (!sdt_tokenizer_add_token(job->tok, tp->emb.name, -1, &id, error)) return false;
    snprintf(job->prompt_name, sizeof job->prompt_name, "%s", tp->emb.name);
    job->rules.placeholder_id = id;
    job->placeholder_file = tp->part->input_path;
    job->rules.n_vectors = tp->emb.n_vectors;
    job->rules.slot_token = 0;
    if (job->t5_tok) { /* SD3.5: the name is a token of T5's too, whose slots take the t5xxl table's rows */
        int32_t t5_id;
        if (!sdt_spm_add_token(job->t5_tok, tp->emb.name, &t5_id, error)) return false;
        job->t5_rules = (sdt_t5_slot_rules){.placeholder_id = t5_id, .n_vectors = tp->emb.n_vectors, .slot_token = 0};
    }
    return true;
}

/* The group's optimizer, undo buffer and step-engine group; the optimizer is the engine's once added. */
static bool add_one_group(ti_part *tp, sdt_train_job *job, ti_group *grp, const char *name, const char *state_prefix,
                          const sdt_schedule_texts *texts, sdt_error *error)
{
    sdt_adamw_hparams hp = sdt_adamw_hparams_textual_inversion(0.0f); /* the schedule sets the rate before each step */
    sdt_optimizer *opt = sdt_optimizer_create(tp->be, tp->emb.name, &hp, error);
    if (!opt) return false;
    if (sdt_optimizer_add_param(opt, "emb_params", &grp->param, &grp->grad, true, error) != SDT_CORE_OK) {
        sdt_optimizer_destroy(opt);
        return false;
    }
    grp->tp = tp;
    grp->opt = opt;
    grp->undo = malloc(3 * sdt_tensor_nbytes(&grp->param));
    if (!grp->undo) {
        sdt_optimizer_destroy(opt);
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory for the embedding's undo copy");
    }
    sdt_param_group g = {.name = name,
                         .state_prefix = state_prefix,
                         .opt = opt,
                         .lr_text = (char *)texts->lr,
                         .clip_text = (char *)texts->clip,
                         .lr_field = texts->lr_field,
                         .clip_field = texts->clip_field,
                         .clip_mode = texts->clip_mode,
                         .before_step = ti_part_undo_save,
                         .after_step = ti_part_check_divergence,
                         .guard_user = grp};
    if (!sdt_train_job_add_group(job, tp->part, &g, error)) {
        sdt_optimizer_destroy(opt);
        return false;
    }
    grp->engine_group = job->engine.n_groups - 1;
    return true;
}

/* SD 1.x/2.x/SDXL: one group over the whole rows (SDXL's guarded per encoder's columns). */
static bool add_rows_group(ti_part *tp, sdt_train_job *job, const sdt_schedule_texts *texts, sdt_error *error)
{
    ti_group *grp = &tp->groups[tp->n_groups++];
    grp->param = tp->param;
    grp->grad = tp->grad;
    int l = tp->emb.clip_l_dim ? tp->emb.clip_l_dim : tp->emb.dim;
    grp->tables[0] =
        (ti_guard_table){tp->emb.clip_l_dim ? " (clip_l)" : "", tp->emb.dim, 0, l, ti_part_token_norm(job, 0)};
    grp->tables[1] = (ti_guard_table){" (clip_g)", tp->emb.dim, l, tp->emb.dim - l,
                                      tp->emb.clip_l_dim ? ti_part_token_norm(job, 1) : 0};
    grp->n_tables = tp->emb.clip_l_dim ? 2 : 1;
    return add_one_group(tp, job, grp, "embedding", NULL, texts, error);
}

/* Which tables train: encoders' bits (0: every table the file has), each of which the file must have. */
static bool choose_tables(ti_part *tp, const ti_table_settings *ts, sdt_error *error)
{
    uint32_t have = 0;
    for (int k = 0; k < SDT_EMBEDDING_ENCODERS; k++)
        if (tp->emb.encoder_dims[k] > 0) have |= 1u << k;
    uint32_t want = ts && ts->encoders ? ts->encoders : have;
    for (int k = 0; k < SDT_EMBEDDING_ENCODERS; k++)
        if ((want >> k & 1u) && !(have >> k & 1u))
            return sdt_fail(error, SDT_ERR_VALIDATION,
                            "%s: %s asks to train the %s table, but the embedding (%s) has none; leave %s out of "
                            "%s (0 trains every table it has)",
                            tp->part->input_path, ts->encoders_field, table_names[k],
                            sdt_embedding_family_title(&tp->emb), table_names[k], ts->encoders_field);
    tp->tables = want;
    return true;
}

/* SD3.5/Flux.1: a group per trained table, a view of the table in the part's buffers, with its own schedule. */
static bool add_table_groups(ti_part *tp, sdt_train_job *job, const sdt_schedule_texts *texts,
                             const ti_table_settings *ts, sdt_error *error)
{
    static const char *const group_names[3] = {"embedding.clip_l", "embedding.clip_g", "embedding.t5xxl"};
    static const char *const alone_prefix[3] = {"clip_l.", "clip_g.", "t5xxl."};
    static const char *const joint_prefix[3] = {"embedding.clip_l.", "embedding.clip_g.", "embedding.t5xxl."};
    if (!choose_tables(tp, ts, error)) return false;
    size_t base = 0;
    for (int k = 0; k < SDT_EMBEDDING_ENCODERS; k++) {
        int width = tp->emb.encoder_dims[k];
        size_t numel = (size_t)tp->emb.n_vectors * (size_t)(width > 0 ? width : 0);
        if (width > 0 && (tp->tables >> k & 1u)) {
            ti_group *grp = &tp->groups[tp->n_groups++];
            int64_t shape[2] = {tp->emb.n_vectors, width};
            grp->param = sdt_tensor_make((float *)tp->param.data + base, SDT_F32, tp->be->device, 2, shape);
            grp->grad = sdt_tensor_make((float *)tp->grad.data + base, SDT_F32, tp->be->device, 2, shape);
            grp->base = base;
            grp->tables[0] = (ti_guard_table){k == 0   ? " (clip_l)"
                                              : k == 1 ? " (clip_g)"
                                                       : " (t5xxl)",
                                              width, 0, width, ti_part_token_norm(job, k)};
            grp->n_tables = 1;
            sdt_schedule_texts own = *texts;
            if (ts && ts->learn_rates[k]) {
                own.lr = ts->learn_rates[k];
                own.lr_field = ts->learn_rate_fields[k];
            }
            /* a lone embedding's keys: clip_l.emb_params, clip_l.adamw_m ...; joint training's under "embedding." */
            const char *prefix = tp->part->state_prefix[0] ? joint_prefix[k] : alone_prefix[k];
            if (!add_one_group(tp, job, grp, group_names[k], prefix, &own, error)) return false;
        }
        base += numel;
    }
    return true;
}

bool ti_part_add_group(ti_part *tp, sdt_train_job *job, const sdt_schedule_texts *texts,
                       const ti_table_settings *tables, sdt_error *error)
{
    sdt_backend *be = tp->be = job->pb.be;
    int64_t shape[2] = {tp->emb.n_vectors, tp->emb.dim};
    tp->param = sdt_tensor_make(NULL, SDT_F32, be->device, 2, shape);
    tp->grad = sdt_tensor_make(NULL, SDT_F32, be->device, 2, shape);
    size_t bytes = sdt_tensor_nbytes(&tp->param);
    tp->param.data = be->alloc(be, bytes);
    tp->grad.data = be->alloc(be, bytes);
    if (!tp->param.data || !tp->grad.data || be->upload(be, tp->param.data, tp->emb.vectors, bytes) ||
        be->zero(be, &tp->grad))
        return sdt_fail(error, be->error.code, "cannot place the embedding on the %s backend: %s", be->name,
                        be->error.message);
    bool has_tables = sdt_embedding_has_tables(&tp->emb);
    if (!has_tables && tables)
        for (int k = 0; k < SDT_EMBEDDING_ENCODERS; k++)
            if ((tables->encoders >> k & 1u) || tables->learn_rates[k])
                return sdt_fail(
                    error, SDT_ERR_VALIDATION,
                    "%s: %s is set, but the model (%s) is not SD3.5 or Flux.1 and the embedding's rows are one table; %s and "
                    "the per-table learning rates are for SD3.5/Flux.1 embeddings: leave them unset",
                    tp->part->input_path,
                    tables->learn_rates[k] ? tables->learn_rate_fields[k] : tables->encoders_field,
                    sd_family_title(job->rt.cfg.family), tables->encoders_field);
    bool ok = has_tables ? add_table_groups(tp, job, texts, tables, error) : add_rows_group(tp, job, texts, error);
    if (!ok) return false;
    job->rows = &tp->param;
    job->drows = &tp->grad;
    job->tables = tp->tables;
    return true;
}
