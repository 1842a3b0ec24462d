/* ti_embedding_ops.c - creating an embedding (its rows taken from the text encoder's token
 * embedding, as A1111 does; SD3.5 / Flux.1 tables in ti_create_tables.c) and inspecting any embedding
 * file the plugin reads. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clip_text.h"
#include "sd_model.h"
#include "ti/embedding_file.h"
#include "safetensors.h"
#include "sd_config_detect.h"
#include "train/sd_runtime.h"
#include "train/tokenizer_open.h"
#include "train/train_state_describe.h"
#include "ti/ti_create_tables.h"
#include "ti/ti_embedding_ops.h"
#include "weights.h"

/* Vector i = token row floor(i * n / N) of the init text's first N tokens; empty text = zeros. An
 * SDXL embedding takes each token's rows from both encoders, side by side (clip_l, then clip_g). */
static bool init_vectors(sdt_embedding *e, const sdt_embedding_spec *spec, const clip_text_model *const *clips,
                         int n_clips, const sdt_host_callbacks *host, sdt_error *error)
{
    if (!spec->init_text || !*spec->init_text) return true;
    sdt_tokenizer *tok = sdt_open_tokenizer(spec->tokenizer_path, spec->model_path, clips[0]->cfg.vocab, host, error);
    if (!tok) return false;
    int32_t *ids = NULL;
    size_t n = 0;
    sdt_tokenizer_tokenize(tok, spec->init_text, &ids, &n);
    sdt_tokenizer_free(tok);
    if (n > (size_t)e->n_vectors) n = (size_t)e->n_vectors; /* A1111 tokenises with max_length = vectors */
    bool ok = true;
    sdt_backend *cpu = n > 0 ? sdt_backend_cpu_create(1) : NULL;
    ok = n == 0 || cpu;
    for (int c = 0, column = 0; ok && n > 0 && c < n_clips; column += clips[c]->cfg.width, c++) {
        int width = clips[c]->cfg.width;
        float *rows = malloc(n * (size_t)width * sizeof(float));
        int64_t shape[2] = {(int64_t)n, width};
        sdt_tensor out = sdt_tensor_make(rows, SDT_F32, SDT_DEVICE_CPU, 2, shape);
        ok = rows && clip_text_token_rows(clips[c], cpu, ids, (int)n, &out, error);
        for (int i = 0; ok && i < e->n_vectors; i++)
            memcpy(e->vectors + (size_t)i * e->dim + column, rows + (size_t)(i * (int)n / e->n_vectors) * width,
                   (size_t)width * sizeof(float));
        free(rows);
    }
    if (!ok && error->code == SDT_ERR_OK)
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory for the embedding");
    if (cpu) cpu->destroy(cpu);
    free(ids);
    return ok;
}

/* The text encoders an embedding for this model needs rows for: one, or SDXL's two. */
static bool text_encoders(const sdt_weights *w, clip_text_model *clip, clip_text_model *clip2, int *n, sdt_error *error)
{
    if (!sd_weights_are_sdxl(w)) {
        clip_config cfg;
        *n = 1;
        return clip_config_detect(w, &cfg, error) && clip_text_load(clip, &cfg, w, error);
    }
    sd_config sc;
    *n = 2;
    return sd_config_detect_weights(w, &sc, error) && clip_text_load(clip, &sc.clip, w, error) &&
           clip_text_load(clip2, &sc.clip2, w, error);
}

bool ti_create_embedding(const sdt_embedding_spec *spec, const sdt_host_callbacks *host, char *path_out,
                         size_t path_out_size, sdt_error *error)
{
    if (!sdt_embedding_name_check(spec->name, error)) return false;
    struct stat st;
    if (stat(spec->output_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        sdt_fail(error, SDT_ERR_NOT_FOUND, "%s: the output folder does not exist; create it or choose another",
                 spec->output_dir);
        return false;
    }
    char path[4096];
    snprintf(path, sizeof path, "%.3800s/%.200s.safetensors", spec->output_dir, spec->name);
    if (!spec->overwrite && access(path, F_OK) == 0) {
        sdt_fail(error, SDT_ERR_ALREADY_EXISTS,
                 "%s already exists; choose another name or allow overwriting (spec.overwrite)", path);
        return false;
    }
    sdt_weights *w = sdt_weights_open(spec->model_path, error);
    if (!w) return false;
    clip_text_model clip, clip2;
    const clip_text_model *clips[2] = {&clip, &clip2};
    int n_clips = 0;
    sdt_embedding e;
    memset(&e, 0, sizeof e);
    sdt_tf_info tf;
    bool ok;
    if (sdt_tf_detect(w, &tf)) { /* SD3.5 / Flux.1: a table per text encoder */
        ok = ti_create_tables(spec, host, w, &tf, &e, error);
    } else {
        const char *field = spec->clip_l_path && *spec->clip_l_path   ? "clip_l_path"
                            : spec->clip_g_path && *spec->clip_g_path ? "clip_g_path"
                            : spec->t5xxl_path && *spec->t5xxl_path   ? "t5xxl_path"
                                                                      : NULL;
        ok =
            !field || sdt_fail(error, SDT_ERR_VALIDATION,
                               "spec.%s is set, but %s is no SD3.5 or Flux.1 checkpoint (its text encoder is its own); "
                               "leave the encoder files empty for SD 1.x, 2.x and SDXL",
                               field, spec->model_path);
        ok = ok && text_encoders(w, &clip, &clip2, &n_clips, error) &&
             sdt_embedding_init(&e, spec->name, (int)spec->vectors_per_token,
                                clip.cfg.width + (n_clips > 1 ? clip2.cfg.width : 0), error);
        if (ok && n_clips > 1) e.clip_l_dim = clip.cfg.width;
        ok = ok && init_vectors(&e, spec, clips, n_clips, host, error);
    }
    if (ok) {
        sdt_embedding_set_string(&e.init_text, spec->init_text && *spec->init_text ? spec->init_text : NULL);
        ok = sdt_embedding_save_safetensors(&e, path, spec->overwrite, error);
        if (ok) snprintf(path_out, path_out_size, "%s", path);
    }
    sdt_embedding_free(&e);
    sdt_weights_close(w);
    return ok;
}

static uint32_t file_format(const char *path, sdt_embedding_format f, const sdt_embedding *e)
{
    if (f == SDT_EMBEDDING_FORMAT_PNG_CARD)
        return e->from_card_pixels ? SDT_EMBEDDING_FILE_PNG_PIXELS : SDT_EMBEDDING_FILE_PNG_CHUNK;
    if (f == SDT_EMBEDDING_FORMAT_A1111_PT || f == SDT_EMBEDDING_FORMAT_TORCH_CONCEPT)
        return SDT_EMBEDDING_FILE_A1111_PT; /* the ABI's one value for torch.save embeddings (.pt, .bin) */
    if (f != SDT_EMBEDDING_FORMAT_SAFETENSORS) return SDT_EMBEDDING_FILE_UNKNOWN;
    if (e->clip_l_dim) return SDT_EMBEDDING_FILE_SAFETENSORS_SDXL;
    sdt_error error = {0};
    sdt_safetensors *st = sdt_st_open(path, &error);
    bool state = st && sdt_st_metadata_get(st, "sdtrain_state") != NULL;
    sdt_st_close(st);
    return state ? SDT_EMBEDDING_FILE_TRAINING_STATE : SDT_EMBEDDING_FILE_SAFETENSORS;
}

/* A state of an embedding trained alone: the embedding reader takes its tensors. */
static bool lone_embedding_state(const char *path)
{
    sdt_state_facts f;
    sdt_error ignored = {0};
    return sdt_state_describe(path, &f, NULL, NULL, &ignored) && f.n_parts == 1 &&
           sdt_state_facts_part(&f, "embedding");
}

/* A state without a lone embedding's tensors (a hypernetwork's or a joint run's): its facts,
 * the embedding's shape when one trains in it. */
static bool inspect_other_state(const char *path, sdt_embedding_info *info, char **json_out, sdt_error *error)
{
    sdt_state_facts f;
    if (!sdt_state_describe(path, &f, NULL, json_out, error)) return false;
    const sdt_state_part_facts *emb = sdt_state_facts_part(&f, "embedding");
    info->format = SDT_EMBEDDING_FILE_TRAINING_STATE;
    info->vectors = emb ? (uint32_t)emb->rows : 0;
    info->embedding_dim = emb ? (uint32_t)emb->cols : 0;
    info->vector_norm_mean = emb ? emb->vector_norm_mean : 0;
    info->step = f.step;
    info->all_finite = f.all_finite;
    snprintf(info->name, sizeof info->name, "%s", f.name);
    snprintf(info->checkpoint_name, sizeof info->checkpoint_name, "%s", f.checkpoint_name);
    snprintf(info->checkpoint_hash, sizeof info->checkpoint_hash, "%s", f.checkpoint_hash);
    return true;
}

bool ti_inspect_file(const char *path, sdt_embedding_info *info, char **json_out, sdt_error *error)
{
    sdt_embedding e;
    memset(&e, 0, sizeof e);
    sdt_embedding_format f;
    if (sdt_state_file_is_state(path) && !lone_embedding_state(path))
        return inspect_other_state(path, info, json_out, error);
    if (!sdt_embedding_load(path, &e, &f, error)) return false;
    info->format = file_format(path, f, &e);
    info->vectors = (uint32_t)e.n_vectors;
    info->embedding_dim = (uint32_t)e.dim;
    info->step = e.step;
    double norms = 0;
    for (int i = 0; i < e.n_vectors; i++) norms += sdt_embedding_row_norm(&e, i);
    info->vector_norm_mean = e.n_vectors ? norms / e.n_vectors : 0;
    info->all_finite = sdt_embedding_is_finite(&e);
    snprintf(info->name, sizeof info->name, "%s", e.name ? e.name : "");
    snprintf(info->init_text, sizeof info->init_text, "%s", e.init_text ? e.init_text : "");
    snprintf(info->checkpoint_name, sizeof info->checkpoint_name, "%s", e.checkpoint_name ? e.checkpoint_name : "");
    snprintf(info->checkpoint_hash, sizeof info->checkpoint_hash, "%s", e.checkpoint_hash ? e.checkpoint_hash : "");
    if (json_out) {
        *json_out = sdt_embedding_describe_json(&e, f, path);
        if (*json_out && info->format == SDT_EMBEDDING_FILE_TRAINING_STATE) {
            /* the embedding's own description, with the state's facts added */
            char *embedding_json = *json_out;
            sdt_state_facts facts;
            bool described = sdt_state_describe(path, &facts, embedding_json, json_out, error);
            free(embedding_json);
            if (!described) {
                sdt_embedding_free(&e);
                return false;
            }
        }
    }
    sdt_embedding_free(&e);
    return true;
}
