/* hn_part.c - a hypernetwork as a part of a training job (see hn_part.h).
 *
 * A1111's semantics (reference section 4.9): every Linear and LayerNorm weight and bias of every
 * module trains, AdamW with weight decay 0.01 by default, the template's [name] is the
 * hypernetwork's name, copies go to <log>/hypernetworks/<name>-<step>.pt holding the un-suffixed
 * name, the loss CSV is hypernetwork_loss.csv, previews run the hypernetwork in eval mode (no
 * dropout) at the config's preview strength, with any preview-only hypernetworks chained after it
 * (hn/hn_preview_chain.h), and leave the training's random streams alone (every draw is
 * counter-based). The text encoder runs without backward unless an embedding trains too. */
/* The ABI's Train-tab struct shares its name with the module's shape struct (hn/hn_config.h). */
#define sdt_hn_config sdt_hn_abi_train_config
#include "sdtrain.h"
#undef sdt_hn_config

#include "hn/hn_part.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/host_log.h"
#include "c_numeric.h"
#include "data/file_name.h"
#include "data/state_seal.h"
#include "hn/hn_file.h"
#include "hn/hn_hook.h"
#include "hn/hn_preview_chain.h"

struct hn_part {
    sdt_train_part *part;
    sdt_hn *hn;       /* on the job's backend from phase 2 (on a private CPU backend before) */
    sdt_backend *cpu; /* phase 1's backend, freed once the hypernetwork moved */
    sdt_hn_binding *binding;
    float strength;
    sdt_hn_preview_chain preview; /* other hypernetworks in previews only, and the preview strength */
    char *twin_path;              /* the other format, or NULL (see choose_twin) */
    bool twin_in_run_folder;      /* a .pt's .safetensors twin, placed once the run folder is known */
    sdt_run_lock twin_lock;       /* on that twin: a run training it by name is refused */
};

static bool part_sync(sdt_train_part *p, sdt_train_job *job, sdt_error *error)
{
    hn_part *hp = p->self;
    (void)error; /* the values stay on the device: the savers read them there */
    sdt_hn_info *info = sdt_hn_get_info(hp->hn);
    info->step = job->step;
    snprintf(info->sd_checkpoint, sizeof info->sd_checkpoint, "%s", job->checkpoint_hash);
    snprintf(info->sd_checkpoint_name, sizeof info->sd_checkpoint_name, "%s", job->checkpoint_name);
    return true;
}

static bool part_save_snapshot(sdt_train_part *p, sdt_train_job *job, int64_t step, sdt_error *error)
{
    hn_part *hp = p->self;
    char path[4096];
    if (!sdt_output_file(path, sizeof path, job->outputs.dirs.copies, job->name, step, ".pt"))
        return sdt_fail(error, SDT_ERR_IO, "%s: the copy's path is too long; choose a shorter log folder",
                        job->outputs.dirs.copies);
    if (!sdt_hn_save(hp->hn, path, error)) return false;
    sdt_host_file_saved(job->host, SDT_FILE_HYPERNETWORK_SNAPSHOT, path, step);
    return true;
}

static bool part_save_final(sdt_train_part *p, sdt_train_job *job, sdt_error *error)
{
    hn_part *hp = p->self;
    if (!sdt_hn_save(hp->hn, p->output_path, error)) return false;
    sdt_host_file_saved(job->host, SDT_FILE_HYPERNETWORK, p->output_path, job->step);
    if (!hp->twin_path) return true;
    sdt_error why;
    sdt_error_clear(&why);
    if (sdt_hn_save(hp->hn, hp->twin_path, &why)) /* the twin is a convenience: its failure is a warning */
        sdt_host_file_saved(job->host, SDT_FILE_HYPERNETWORK, hp->twin_path, job->step);
    else
        sdt_host_log(job->host, SDT_LOG_WARNING, "the %s twin was not written: %s", hp->twin_path, why.message);
    return true;
}

/* The values on the device now (the average, train_job_average.c) as a hypernetwork file at path
 * (its format by the extension, as the result's). */
static bool part_save_as(sdt_train_part *p, sdt_train_job *job, const char *path, sdt_error *error)
{
    hn_part *hp = p->self;
    if (!part_sync(p, job, error) || !sdt_hn_save(hp->hn, path, error)) return false;
    sdt_host_file_saved(job->host, SDT_FILE_HYPERNETWORK, path, job->step);
    return true;
}

/* Validation measures what trains: eval mode (no dropout) at the training strength, nothing chained. */
static void part_begin_validation(sdt_train_part *p, sdt_train_job *job)
{
    hn_part *hp = p->self;
    (void)job;
    sdt_hn_binding_set_eval(hp->binding);
}

static void part_begin_micro(sdt_train_part *p, sdt_train_job *job, uint64_t counter)
{
    hn_part *hp = p->self;
    sdt_hn_binding_set_step(hp->binding, job->opt.seed, counter);
}

/* A preview sees the hypernetwork as a user will: eval mode (no dropout), at its preview strength,
 * with the preview-only hypernetworks chained after it. */
static void part_begin_preview(sdt_train_part *p, sdt_train_job *job)
{
    hn_part *hp = p->self;
    (void)job;
    sdt_hn_binding_set_eval(hp->binding);
    sdt_hn_preview_chain_begin(&hp->preview, hp->binding);
}

static void part_end_preview(sdt_train_part *p, sdt_train_job *job)
{
    hn_part *hp = p->self;
    (void)job;
    sdt_hn_preview_chain_end(&hp->preview, hp->binding);
}

static void part_settings(sdt_train_part *p, sdt_train_job *job, cJSON *s)
{
    hn_part *hp = p->self;
    const sdt_hn_config *c = sdt_hn_get_config(hp->hn);
    char structure[256] = "";
    for (int i = 0; i < c->entry_count; i++)
        sdt_c_snprintf(structure + strlen(structure), sizeof structure - strlen(structure), "%s%g", i ? ", " : "",
                       c->layer_structure[i]);
    cJSON_AddStringToObject(s, "hypernetwork_name", c->name);
    cJSON_AddStringToObject(s, "activation_func", c->activation);
    cJSON_AddBoolToObject(s, "add_layer_norm", c->layer_norm);
    cJSON_AddStringToObject(s, "layer_structure", structure);
    cJSON_AddBoolToObject(s, "use_dropout", c->use_dropout);
    cJSON_AddStringToObject(s, "weight_init", sdt_hn_init_name(c->init));
    cJSON_AddNumberToObject(s, "save_hypernetwork_every", (double)job->opt.save_every);
    cJSON_AddNumberToObject(s, "hypernetwork_strength", hp->strength);
    if (hp->preview.count > 0 || hp->preview.trained_preview_strength != hp->strength) {
        cJSON_AddNumberToObject(s, "preview_hypernetwork_strength", hp->preview.trained_preview_strength);
        cJSON *chain = cJSON_AddArrayToObject(s, "preview_hypernetworks");
        for (int k = 0; chain && k < hp->preview.count; k++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "path", hp->preview.paths[k]);
            cJSON_AddNumberToObject(e, "strength", hp->preview.strengths[k]);
            cJSON_AddItemToArray(chain, e);
        }
    }
}

static void part_destroy(sdt_train_part *p)
{
    hn_part *hp = p->self;
    if (!hp) return;
    sdt_hn_binding_free(hp->binding);
    sdt_hn_preview_chain_free(&hp->preview);
    sdt_hn_free(hp->hn);
    if (hp->cpu) hp->cpu->destroy(hp->cpu);
    sdt_run_lock_release(&hp->twin_lock);
    free(hp->twin_path);
    free(hp);
}

static const sdt_train_part_ops hn_part_ops = {
    .sync = part_sync,
    .save_snapshot = part_save_snapshot,
    .save_final = part_save_final,
    .begin_micro = part_begin_micro,
    .begin_preview = part_begin_preview,
    .end_preview = part_end_preview,
    .begin_validation = part_begin_validation,
    .save_as = part_save_as,
    .settings = part_settings,
    .destroy = part_destroy,
};

static bool has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static bool values_sha256(const sdt_hn *hn, char hex[SDT_SHA256_HEX], sdt_error *error)
{
    int64_t n = sdt_hn_param_numel(hn);
    float *host = malloc(n ? (size_t)n * sizeof(float) : 1);
    if (!host) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory");
    bool ok = sdt_hn_download(hn, host, error);
    if (ok) sdt_vectors_sha256(host, (size_t)n, hex);
    free(host);
    return ok;
}

/* The twin's name beside path (.pt <-> .safetensors), whether a file is there or not; NULL for another
 * extension. */
static char *twin_name(const char *path)
{
    const char *ext = has_suffix(path, ".pt") ? ".pt" : has_suffix(path, ".safetensors") ? ".safetensors" : NULL;
    if (!ext) return NULL;
    char twin[4096];
    size_t stem = strlen(path) - strlen(ext);
    if (snprintf(twin, sizeof twin, "%.*s%s", (int)stem, path, strcmp(ext, ".pt") == 0 ? ".safetensors" : ".pt") >=
        (int)sizeof twin)
        return NULL;
    return strdup(twin);
}

/* The file named in the other format, the twin. A .pt's .safetensors twin goes into the run folder
 * (<run folder>/<stem>.safetensors): ComfyUI lists every .safetensors under models/hypernetworks but
 * builds no module from this layout, and A1111 lists only .pt, so beside the .pt it would be a
 * file that does nothing in a host's list. A .safetensors file's .pt twin, which the hosts load,
 * goes beside it. Beside the file a twin replaces only a file that is already this hypernetwork's
 * twin (the same values), so no file the user did not name is replaced; on --resume also one
 * holding the values the state records (saved with, or started from): a run killed between the
 * file named and its twin left it one save behind, and the resume brings it along. Such a
 * .safetensors twin beside a .pt (written before the twin moved) is kept up to date there. */
static char *choose_twin(const sdt_train_job *job, hn_part *hp, const char *path, const char *start_sha)
{
    const char *twin = hp->part->also_locks; /* the name beside, locked with the file since the part opened */
    if (!twin) return NULL;
    bool pt = has_suffix(path, ".pt");
    bool same = false;
    if (access(twin, F_OK) == 0) {
        char saved[SDT_SHA256_HEX], started[SDT_SHA256_HEX]; /* read from the state only when a file is there */
        sdt_train_job_resume_hashes(job, hp->part, saved, started);
        sdt_error why;
        sdt_error_clear(&why);
        sdt_hn *other = sdt_hn_load(twin, hp->cpu, &why);
        char sha[SDT_SHA256_HEX] = "";
        same = other && values_sha256(other, sha, &why) &&
               (strcmp(sha, start_sha) == 0 || strcmp(sha, saved) == 0 || strcmp(sha, started) == 0);
        sdt_hn_free(other);
        if (same && pt)
            sdt_host_log(job->host, SDT_LOG_INFO,
                         "%s is this hypernetwork's .safetensors twin from an earlier run, so it "
                         "is kept up to date there; ComfyUI lists it but cannot apply it (use the .pt): delete it, and "
                         "later runs write the twin into their run folder",
                         twin);
        else if (!pt && !same)
            sdt_host_log(job->host, SDT_LOG_INFO,
                         "%s exists and is not this hypernetwork's twin, so it is left alone; the "
                         "trained hypernetwork is written to %s only",
                         twin, path);
    } else {
        same = !pt; /* a .pt beside a .safetensors goes where no file is */
    }
    if (same) return strdup(twin);
    hp->twin_in_run_folder = pt;
    return NULL;
}

/* Once the run folder exists (sdt_train_job_load_data): the .pt's twin there, locked under its name. */
bool hn_part_place_twin(hn_part *hp, sdt_train_job *job, sdt_error *error)
{
    if (!hp->twin_in_run_folder) return true;
    const char *base = strrchr(hp->part->output_path, '/');
    base = base ? base + 1 : hp->part->output_path;
    char path[SDT_PATH_MAX + 256], lock_path[SDT_PATH_MAX + 300];
    if (snprintf(path, sizeof path, "%s/%.*s.safetensors", job->outputs.dirs.root, (int)(strlen(base) - strlen(".pt")),
                 base) >= (int)sizeof path)
        return sdt_fail(error, SDT_ERR_IO, "%s: the .safetensors twin's path is too long; choose a shorter log folder",
                        job->outputs.dirs.root);
    snprintf(lock_path, sizeof lock_path, "%s.lock", path);
    /* a .pt in the run folder itself: its beside name is that path, locked already */
    bool locked = hp->part->also_locks && strcmp(hp->part->also_locks, path) == 0;
    if (!locked && !sdt_run_lock_take(&hp->twin_lock, lock_path, path, error)) return false;
    hp->twin_path = strdup(path);
    return hp->twin_path ? true : sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory");
}

/* Phase 1, before the model: the file, its values, the name, where the result goes. */
hn_part *hn_part_open(sdt_train_job *job, const char *path, double strength, const char *preview_hypernetworks,
                      const char *preview_field, double preview_strength, sdt_error *error)
{
    hn_part *hp = calloc(1, sizeof *hp);
    if (!hp || !(hp->cpu = sdt_backend_cpu_create(1))) {
        free(hp);
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory");
        return NULL;
    }
    hp->strength = (float)strength;
    char sha[SDT_SHA256_HEX] = "";
    bool ok = sdt_hn_preview_chain_parse(&hp->preview, preview_hypernetworks, preview_field, hp->strength,
                                         preview_strength, error) &&
              (hp->hn = sdt_hn_load(path, hp->cpu, error)) != NULL && values_sha256(hp->hn, sha, error);
    if (ok) {
        int64_t n = sdt_hn_param_numel(hp->hn);
        float *host = malloc(n ? (size_t)n * sizeof(float) : 1);
        bool finite = host && sdt_hn_download(hp->hn, host, error);
        for (int64_t i = 0; finite && i < n; i++) finite = host[i] - host[i] == 0.0f;
        free(host);
        if (!finite)
            ok = sdt_fail(error, SDT_ERR_VALIDATION,
                          "%s: the hypernetwork holds NaN or infinite values; train from an earlier copy "
                          "or create it again",
                          path);
    }
    char folder[4096];
    snprintf(folder, sizeof folder, "%s", path);
    if (ok && access(dirname(folder), W_OK) != 0)
        ok = sdt_fail(error, SDT_ERR_IO,
                      "%s: the hypernetwork's folder is not writable, so the trained hypernetwork could not be "
                      "saved there; make the folder writable or copy the file into a writable folder",
                      path);
    if (!ok) {
        part_destroy(&(sdt_train_part){.self = hp});
        return NULL;
    }
    hp->part = sdt_train_job_add_part(job, &hn_part_ops, hp, "hypernetwork", "--hypernetwork (hypernetwork_path)",
                                      "hypernetwork.", path, path, error);
    if (!hp->part) {
        if (job->n_parts == 0 || job->parts[job->n_parts - 1].self != hp) part_destroy(&(sdt_train_part){.self = hp});
        return NULL;
    }
    hp->part->start_step = sdt_hn_get_info(hp->hn)->step;
    snprintf(hp->part->start_sha256, sizeof hp->part->start_sha256, "%s", sha);
    hp->part->also_locks = twin_name(hp->part->output_path); /* the pair is one lock: a run on either name */
    return hp;
}

/* After --resume is resolved (the state's record of the hypernetwork is known), before the data
 * (whose sweep of a killed save's temp files covers the twin). */
void hn_part_pick_twin(hn_part *hp, sdt_train_job *job)
{
    hp->twin_path = choose_twin(job, hp, hp->part->output_path, hp->part->start_sha256);
    hp->part->also_writes = hp->twin_path;
}

const char *hn_part_name(const hn_part *hp)
{
    return sdt_hn_get_config(hp->hn)->name;
}

int64_t hn_part_step(const hn_part *hp)
{
    return sdt_hn_get_info_const(hp->hn)->step;
}

bool hn_part_check_name(const hn_part *hp, sdt_error *error)
{
    return sdt_file_name_check("hypernetwork", hn_part_name(hp), SDT_HN_NAME_MAX, error);
}

/* Phase 2, after the model: the hypernetwork on the job's backend, a module for some attention
 * of this UNet (else nothing would train), the binding on the UNet's K/V hook. */
bool hn_part_bind_model(hn_part *hp, sdt_train_job *job, sdt_error *error)
{
    const sdt_hn_config *c = sdt_hn_get_config(hp->hn);
    sdt_unet *u = job->rt.model.unet;
    int matched = 0;
    for (int layer = 0; layer < sdt_unet_attention_count(u); layer++) {
        sdt_unet_hook_site site;
        if (sdt_unet_attention_site(u, layer, &site) && sdt_hn_has_width(hp->hn, site.width)) matched++;
    }
    if (!matched) {
        const sdt_unet_config *uc = sdt_unet_get_config(u);
        char widths[128] = "", model_widths[256], sizes[128] = "";
        for (int i = 0; i < c->width_count; i++)
            snprintf(widths + strlen(widths), sizeof widths - strlen(widths), "%s%d", i ? ", " : "", c->widths[i]);
        sdt_unet_config_describe_kv_widths(uc, model_widths, sizeof model_widths);
        int takes[SDT_UNET_MAX_KV_WIDTHS], n_takes = sdt_unet_config_kv_widths(uc, takes);
        for (int i = 0; i < n_takes; i++)
            snprintf(sizes + strlen(sizes), sizeof sizes - strlen(sizes), "%s%d", i ? "," : "", takes[i]);
        return sdt_fail(
            error, SDT_ERR_NO_GRADIENT,
            "%s: the hypernetwork's modules (%s) match no attention of this model, so "
            "nothing would train: this model's attention widths are %s; create a hypernetwork for this model "
            "with the sizes %s (SD 1.x takes 768, 320, 640, 1280; SD 2.x 1024, 320, 640, 1280; SDXL 2048, 640, 1280: --sizes sdxl)",
            hp->part->input_path, widths, model_widths, sizes);
    }
    if (job->pb.be != hp->cpu) { /* the values move to the job's backend: load them there */
        sdt_hn *moved = sdt_hn_load(hp->part->input_path, job->pb.be, error);
        if (!moved) return false;
        sdt_hn_free(hp->hn);
        hp->hn = moved;
    }
    if (!sdt_hn_enable_grads(hp->hn, error)) return false;
    hp->binding = sdt_hn_binding_create(job->pb.be, error);
    if (!hp->binding || !sdt_hn_binding_add(hp->binding, hp->hn, hp->strength, true, error) ||
        !sdt_hn_preview_chain_bind(&hp->preview, hp->binding, job->pb.be, error))
        return false;
    job->hook = sdt_hn_binding_hook(hp->binding);
    return true;
}

/* The largest K/V input the hook sees at a width: a micro-batch's batch x the tokens the UNet's
 * attentions of that width take (at their level of the largest latent, or the prompt's for the
 * context), or a preview's (two prompts with guidance, its own size). */
static int64_t hook_rows_for_width(void *user, int width)
{
    const sdt_train_job *job = user;
    const sdt_unet_config *u = &job->rt.cfg.unet;
    int64_t context = (int64_t)job->max_prompt_chunks * SDT_PROMPT_TOKENS, tokens = 0;
    for (int i = 0; i < job->data.lc.n; i++) {
        int64_t t = sdt_unet_config_kv_tokens(u, width, job->data.lc.items[i].h, job->data.lc.items[i].w, context);
        if (t > tokens) tokens = t;
    }
    int64_t rows = (int64_t)job->data.batch * tokens;
    if (job->previews.every > 0) {
        int f = vae_factor(&job->rt.cfg.vae);
        int64_t preview = 2 * sdt_unet_config_kv_tokens(u, width, job->previews.height / (uint32_t)f,
                                                        job->previews.width / (uint32_t)f, context);
        if (preview > rows) rows = preview;
    }
    return rows;
}

/* Phase 3, after the data: the hook's workspace, AdamW over every parameter, the group. */
bool hn_part_add_group(hn_part *hp, sdt_train_job *job, const sdt_schedule_texts *texts, double weight_decay,
                       sdt_error *error)
{
    /* the pass caches (hn_hook.h): the context's K/V outputs and gradient sums for a micro-batch or a
     * preview's two prompts, and in 16-bit precisions the weights' 16-bit copies */
    int context_width = job->rt.cfg.unet.context_dim;
    int64_t context_rows =
        (int64_t)(job->data.batch > 2 ? job->data.batch : 2) * job->max_prompt_chunks * SDT_PROMPT_TOKENS;
    bool weights16 = sdt_precision_dtype(job->precision) != SDT_F32;
    if (!sdt_hn_binding_reserve_by_width(hp->binding, hook_rows_for_width, job, error) ||
        !sdt_hn_binding_reserve_cache(hp->binding, context_width, context_rows, weights16, error))
        return false;
    /* values, grads and AdamW's two moments, and the hook's workspace: the memory plan's share */
    job->extra_bytes += sdt_hn_binding_workspace_bytes_by_width(hp->binding, hook_rows_for_width, job) +
                        sdt_hn_binding_cache_bytes(hp->binding, context_width, context_rows, weights16) +
                        4 * sizeof(float) * (size_t)sdt_hn_param_numel(hp->hn);
    for (int k = 0; k < hp->preview.count; k++) /* the preview-only hypernetworks' values */
        job->extra_bytes += sizeof(float) * (size_t)sdt_hn_param_numel(hp->preview.members[k]);
    sdt_adamw_hparams hp_adam = sdt_adamw_hparams_torch_default();
    hp_adam.lr = 0.0f; /* the schedule sets the rate before each step */
    hp_adam.weight_decay = (float)weight_decay;
    sdt_optimizer *opt = sdt_optimizer_create(job->pb.be, job->name, &hp_adam, error);
    if (!opt) return false;
    for (int i = 0; i < sdt_hn_param_count(hp->hn); i++) {
        sdt_hn_param *p = sdt_hn_param_at(hp->hn, i);
        if (sdt_optimizer_add_param(opt, p->name, &p->value, &p->grad, true, error) != SDT_CORE_OK) {
            sdt_optimizer_destroy(opt);
            return false;
        }
    }
    sdt_param_group g = {.name = "hypernetwork",
                         .opt = opt,
                         .lr_text = (char *)texts->lr,
                         .clip_text = (char *)texts->clip,
                         .lr_field = texts->lr_field,
                         .clip_field = texts->clip_field,
                         .clip_mode = texts->clip_mode};
    if (!sdt_train_job_add_group(job, hp->part, &g, error)) {
        sdt_optimizer_destroy(opt);
        return false;
    }
    return true;
}
