/* e2e_torch.c - PyTorch twins of the project's files, written by the project's torch writer, for the
 * end-to-end tests of .ckpt checkpoints and .pt embeddings (no Python needed):
 *
 *   e2e_torch checkpoint MODEL OUT       OUT = torch.save({"global_step": 1, "state_dict": OrderedDict(
 *                                        <every canonical LDM key of MODEL>: tensor)}), as an LDM .ckpt is
 *   e2e_torch a1111-embedding IN OUT     OUT = A1111's .pt dict of the safetensors embedding IN (emb_params)
 *   e2e_torch tensor-dict IN OUT         OUT = torch.save({name: tensor}) of every tensor of the safetensors IN
 *                                        (an SD3.5/Flux.1 embedding's tables as a .pt dict)
 * Exit 1 with a message on stderr on failure, 2 on usage. */
#include <glib.h>
#include <stdio.h>
#include <string.h>

#include "safetensors.h"
#include "torch_save.h"
#include "weights.h"

static int checkpoint_command(const char *model, const char *out)
{
    sdt_error error = {0};
    sdt_weights *w = sdt_weights_open(model, &error);
    if (!w) {
        fprintf(stderr, "e2e_torch: %s\n", error.message);
        return 1;
    }
    sdt_pv_arena *a = sdt_pv_arena_new();
    sdt_pv *root = sdt_pv_new_dict(a, false), *sd = sdt_pv_new_dict(a, true);
    for (size_t i = 0; i < sdt_weights_count(w); i++) {
        const char *key = sdt_weights_key(w, i);
        const sdt_tensor *t = sdt_weights_get(w, key);
        sdt_pv_dict_set(a, sd, key, sdt_pv_new_tensor(a, sdt_st_dtype_of(t->dtype), t->ndim, t->shape, t->data));
    }
    sdt_pv_dict_set(a, root, "global_step", sdt_pv_new_int(a, 1));
    sdt_pv_dict_set(a, root, "state_dict", sd);
    bool ok = sdt_torch_save(out, root, NULL, &error);
    if (!ok) fprintf(stderr, "e2e_torch: %s\n", error.message);
    sdt_pv_arena_free(a);
    sdt_weights_close(w);
    return ok ? 0 : 1;
}

static int tensor_dict_command(const char *in, const char *out)
{
    sdt_error error = {0};
    sdt_weights *w = sdt_weights_open(in, &error);
    if (!w) {
        fprintf(stderr, "e2e_torch: %s\n", error.message);
        return 1;
    }
    sdt_pv_arena *a = sdt_pv_arena_new();
    sdt_pv *root = sdt_pv_new_dict(a, false);
    for (size_t i = 0; i < sdt_weights_count(w); i++) {
        const char *key = sdt_weights_key(w, i);
        const sdt_tensor *t = sdt_weights_get(w, key);
        sdt_pv_dict_set(a, root, key, sdt_pv_new_tensor(a, sdt_st_dtype_of(t->dtype), t->ndim, t->shape, t->data));
    }
    bool ok = sdt_torch_save(out, root, NULL, &error);
    if (!ok) fprintf(stderr, "e2e_torch: %s\n", error.message);
    sdt_pv_arena_free(a);
    sdt_weights_close(w);
    return ok ? 0 : 1;
}

static int embedding_command(const char *in, const char *out)
{
    sdt_error error = {0};
    sdt_safetensors *st = sdt_st_open(in, &error);
    const sdt_st_entry *e = st ? sdt_st_find(st, "emb_params") : NULL;
    if (!e) {
        fprintf(stderr, "e2e_torch: %s\n", st ? "no emb_params tensor" : error.message);
        sdt_st_close(st);
        return 1;
    }
    sdt_pv_arena *a = sdt_pv_arena_new();
    sdt_pv *root = sdt_pv_new_dict(a, false), *stt = sdt_pv_new_dict(a, false), *stp = sdt_pv_new_dict(a, false);
    sdt_pv *vec = sdt_pv_new_tensor(a, e->dtype, e->ndim, e->shape, e->data);
    vec->u.t.parameter = vec->u.t.requires_grad = true;
    sdt_pv_dict_set(a, stt, "*", sdt_pv_new_int(a, 265));
    sdt_pv_dict_set(a, stp, "*", vec);
    sdt_pv_dict_set(a, root, "string_to_token", stt);
    sdt_pv_dict_set(a, root, "string_to_param", stp);
    const char *name = sdt_st_metadata_get(st, "name"), *step = sdt_st_metadata_get(st, "step");
    sdt_pv_dict_set(a, root, "name", sdt_pv_new_str(a, name ? name : "embedding"));
    sdt_pv_dict_set(a, root, "step", sdt_pv_new_int(a, step ? g_ascii_strtoll(step, NULL, 10) : 0));
    sdt_pv_dict_set(a, root, "sd_checkpoint", sdt_pv_new(a, SDT_PV_NONE));
    sdt_pv_dict_set(a, root, "sd_checkpoint_name", sdt_pv_new(a, SDT_PV_NONE));
    bool ok = sdt_torch_save(out, root, NULL, &error);
    if (!ok) fprintf(stderr, "e2e_torch: %s\n", error.message);
    sdt_pv_arena_free(a);
    sdt_st_close(st);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "checkpoint") == 0) return checkpoint_command(argv[2], argv[3]);
    if (argc == 4 && strcmp(argv[1], "a1111-embedding") == 0) return embedding_command(argv[2], argv[3]);
    if (argc == 4 && strcmp(argv[1], "tensor-dict") == 0) return tensor_dict_command(argv[2], argv[3]);
    fprintf(stderr, "usage: e2e_torch checkpoint MODEL OUT | e2e_torch a1111-embedding IN.safetensors OUT | e2e_torch "
                    "tensor-dict IN.safetensors OUT\n");
    return 2;
}
