/* embedding_torch.c - embeddings in PyTorch files (A1111 .pt, diffusers learned_embeds.bin), read through
 * models/formats/torch_file.h (no code runs). Which layout a file has is decided as A1111's
 * create_embedding_from_data does (textual_inversion.py): string_to_param first, then clip_g + clip_l, then a
 * dict whose first value is a tensor; each form must hold exactly one term. SD3.5 / Flux.1 dicts (a t5xxl or t5
 * table beside clip_l / clip_g, as ComfyUI's load_embed and OneTrainer read them) are taken before the SDXL
 * pair. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ti/embedding_file.h"
#include "torch_file.h"

/* A tensor value as a safetensors-style entry (contiguous bytes), so both readers share one converter. */
static bool entry_of(sdt_torch_file *f, const sdt_pv *v, const char *name, sdt_st_entry *out, sdt_error *error)
{
    memset(out, 0, sizeof *out);
    const void *data;
    if (!sdt_torch_tensor_bytes(f, v, name, &data, error)) return false;
    out->name = name;
    out->dtype = v->u.t.storage->dtype;
    out->ndim = v->u.t.ndim;
    for (int d = 0; d < out->ndim; d++) out->shape[d] = v->u.t.shape[d];
    out->nbytes = (uint64_t)sdt_pv_tensor_numel(v) * sdt_st_dtype_size(out->dtype);
    out->data = data;
    return true;
}

/* string_to_param's single tensor; old files hold a ParameterDict whose state keeps it in _parameters. */
static const sdt_pv *single_param(const char *path, const sdt_pv *stp, sdt_error *error)
{
    if (sdt_pv_is(stp, SDT_PV_OBJECT)) stp = sdt_pv_dict_get(stp->u.obj.state, "_parameters");
    if (!sdt_pv_is(stp, SDT_PV_DICT) || sdt_pv_len(stp) != 1) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: string_to_param holds %zu terms; an A1111 embedding file holds exactly one "
                 "(A1111 refuses it too: 'embedding file has multiple terms in it')",
                 path, sdt_pv_len(stp));
        return NULL;
    }
    return sdt_pv_dict_value(stp, 0);
}

static void take_fields(const sdt_pv *root, const char *path, sdt_embedding *e)
{
    char *stem = sdt_path_stem(path);
    sdt_embedding_set_string(&e->name, stem);
    free(stem);
    int64_t step = 0;
    e->step = sdt_pv_as_int(sdt_pv_dict_get(root, "step"), &step) && step > 0 ? step : 0;
    sdt_embedding_set_string(&e->checkpoint_hash, sdt_pv_as_str(sdt_pv_dict_get(root, "sd_checkpoint")));
    sdt_embedding_set_string(&e->checkpoint_name, sdt_pv_as_str(sdt_pv_dict_get(root, "sd_checkpoint_name")));
}

static bool decode(sdt_torch_file *f, const char *path, sdt_embedding *e, sdt_embedding_format *format,
                   sdt_error *error)
{
    const sdt_pv *root = sdt_torch_root(f);
    if (!sdt_pv_is(root, SDT_PV_DICT)) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: the file holds a %s, not a dict; it is no embedding (A1111 would not load it "
                 "either)",
                 path, sdt_pv_kind_name(root->kind));
        return false;
    }
    const sdt_pv *stp = sdt_pv_dict_get(root, "string_to_param");
    const sdt_pv *cl = sdt_pv_dict_get(root, "clip_l"), *cg = sdt_pv_dict_get(root, "clip_g");
    sdt_st_entry a, b;
    if (stp) {
        *format = SDT_EMBEDDING_FORMAT_A1111_PT;
        const sdt_pv *t = single_param(path, stp, error);
        return t && entry_of(f, t, "string_to_param.*", &a, error) && sdt_embedding_take_tensor(path, &a, e, error);
    }
    *format = SDT_EMBEDDING_FORMAT_TORCH_CONCEPT;
    const sdt_pv *t5 = sdt_pv_dict_get(root, "t5xxl"), *t5_short = sdt_pv_dict_get(root, "t5");
    if (t5 || t5_short) { /* SD3.5 / Flux.1 tables, as the safetensors reader takes them */
        if (t5 && t5_short)
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "%s: holds both a t5xxl and a t5 table; keep one (t5xxl is what ComfyUI reads)", path);
        const sdt_pv *values[SDT_EMBEDDING_ENCODERS] = {cl, cg, t5 ? t5 : t5_short};
        const char *names[SDT_EMBEDDING_ENCODERS] = {"clip_l", "clip_g", t5 ? "t5xxl" : "t5"};
        sdt_st_entry entries[SDT_EMBEDDING_ENCODERS];
        const sdt_st_entry *tables[SDT_EMBEDDING_ENCODERS] = {NULL, NULL, NULL};
        for (int k = 0; k < SDT_EMBEDDING_ENCODERS; k++) {
            if (!values[k]) continue;
            if (!sdt_pv_is(values[k], SDT_PV_TENSOR))
                return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: \"%s\" is a %s, not a tensor; the file is no embedding",
                                path, names[k], sdt_pv_kind_name(values[k]->kind));
            if (!entry_of(f, values[k], names[k], &entries[k], error)) return false;
            tables[k] = &entries[k];
        }
        return sdt_embedding_take_tables(path, tables, e, error);
    }
    if (cl && cg)
        return entry_of(f, cl, "clip_l", &a, error) && entry_of(f, cg, "clip_g", &b, error) &&
               sdt_embedding_take_sdxl(path, &a, &b, e, error);
    if (sdt_pv_len(root) == 1 && sdt_pv_is(sdt_pv_dict_value(root, 0), SDT_PV_TENSOR)) {
        const char *key = sdt_pv_as_str(sdt_pv_dict_key(root, 0));
        return entry_of(f, sdt_pv_dict_value(root, 0), key ? key : "(non-string key)", &a, error) &&
               sdt_embedding_take_tensor(path, &a, e, error);
    }
    if (sdt_pv_is(sdt_pv_dict_get(root, "state_dict"), SDT_PV_DICT))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: this is a model checkpoint (a state_dict of %zu entries), not "
                        "an embedding; give it as the model (--model)",
                        path, sdt_pv_len(sdt_pv_dict_get(root, "state_dict")));
    if (sdt_pv_dict_get(root, "layer_structure") || sdt_pv_dict_get(root, "activation_func"))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: this is an A1111 hypernetwork, not an embedding; give it as "
                        "a hypernetwork",
                        path);
    if (sdt_pv_is(sdt_pv_dict_value(root, 0), SDT_PV_TENSOR))
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: the file holds %zu tensors; a diffusers or kohya embedding holds exactly one "
                 "(this is probably a model, LoRA or hypernetwork)",
                 path, sdt_pv_len(root));
    else
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: neither an A1111 embedding (no string_to_param) nor a one-tensor concept "
                 "(learned_embeds.bin); this is not an embedding file",
                 path);
    return false;
}

bool sdt_embedding_load_torch(const char *path, sdt_embedding *e, sdt_embedding_format *format, sdt_error *error)
{
    sdt_embedding_format fmt_local;
    if (!format) format = &fmt_local;
    memset(e, 0, sizeof *e);
    sdt_torch_file *f = sdt_torch_open(path, error);
    if (!f) return false;
    bool ok = decode(f, path, e, format, error);
    if (ok) take_fields(sdt_torch_root(f), path, e);
    sdt_torch_close(f);
    if (!ok) sdt_embedding_free(e);
    return ok;
}
