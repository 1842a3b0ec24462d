/* sdt_weights_materialize: copies for a backend and dtype, rounding like storage does,
 * sharing the mapping where nothing changes, and closing cleanly; releasing the tensors under
 * a prefix (the VAE while training) and materializing them again into the same tensors. */
#include <string.h>

#include "io_test_util.h"
#include "safetensors.h"
#include "sdt_test.h"
#include "weights.h"

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("weights_materialize");
    char *dir = io_make_tmpdir();
    char path[4096];
    sdt_error error = {0};
    snprintf(path, sizeof path, "%s/tiny.safetensors", dir);
    float a[6];
    int32_t ids[3] = {1, 2, 3};
    sdt_test_fill_normal(&rng, a, 6, 1e3);
    a[5] = 70000.0f; /* beyond f16: becomes inf in an f16 copy, as on a GPU */
    uint16_t h[4];
    for (int i = 0; i < 4; i++) h[i] = sdt_f32_to_f16((float)i * 0.3f);
    sdt_tensor ta = sdt_tensor_make(a, SDT_F32, SDT_DEVICE_CPU, 2, (int64_t[]){2, 3});
    sdt_tensor th = sdt_tensor_make(h, SDT_F16, SDT_DEVICE_CPU, 1, (int64_t[]){4});
    sdt_tensor ti = sdt_tensor_make(ids, SDT_I32, SDT_DEVICE_CPU, 1, (int64_t[]){3});
    sdt_st_write_item items[3] = {sdt_st_item_from_tensor("model.diffusion_model.a.weight", &ta),
                                  sdt_st_item_from_tensor("model.diffusion_model.h.weight", &th),
                                  sdt_st_item_from_tensor("model.diffusion_model.ids", &ti)};
    CHECK(sdt_st_write(path, items, 3, NULL, 0, &error), "write: %s", error.message);
    sdt_weights *w = sdt_weights_open(path, &error);
    CHECK(w != NULL, "open: %s", error.message);
    if (!w) return sdt_test_finish("weights_materialize");
    sdt_backend *be = sdt_backend_cpu_create(1);

    sdt_weights *w16 = sdt_weights_materialize(w, be, SDT_F16, &error);
    CHECK(w16 != NULL, "materialize f16: %s", error.message);
    const sdt_tensor *src_a = sdt_weights_get(w, "model.diffusion_model.a.weight");
    const sdt_tensor *a16 = sdt_weights_get(w16, "model.diffusion_model.a.weight");
    const sdt_tensor *h16 = sdt_weights_get(w16, "model.diffusion_model.h.weight");
    const sdt_tensor *i16 = sdt_weights_get(w16, "model.diffusion_model.ids");
    CHECK(a16 && a16->dtype == SDT_F16 && a16->ndim == 2 && a16->shape[1] == 3,
          "f16 copy of a has the wrong dtype or shape");
    CHECK(h16 && h16->data == sdt_weights_get(w, "model.diffusion_model.h.weight")->data,
          "an f16 tensor already in f16 on the CPU should share the mapping");
    CHECK(i16 && i16->dtype == SDT_I32, "integer tensors keep their dtype");
    for (int i = 0; a16 && i < 6; i++) {
        float got = sdt_f16_to_f32(((const uint16_t *)a16->data)[i]);
        float want = sdt_round_to_dtype(a[i], SDT_F16);
        CHECK(got == want || (isinf(got) && isinf(want)), "a[%d]: f16 copy %g, want %g", i, got, want);
    }
    CHECK(a16 && isinf(sdt_f16_to_f32(((const uint16_t *)a16->data)[5])), "70000 must overflow to inf in f16");

    /* release what the copy owns under a prefix, then bring it back: same tensors, same values */
    uint16_t a16_before[6];
    if (a16) memcpy(a16_before, a16->data, sizeof a16_before);
    size_t freed = sdt_weights_release_prefix(w16, "model.diffusion_model.");
    CHECK(freed == 6 * sizeof(uint16_t), "release freed %zu bytes; the converted a (12 bytes) is the only owned tensor",
          freed);
    CHECK(a16 && a16->data == NULL, "a released tensor has no data");
    CHECK(h16 && h16->data == NULL, "a tensor served from the mapping is let go of too (not freed, not counted)");
    CHECK(sdt_weights_release_prefix(w16, "first_stage_model.") == 0, "nothing lives under another prefix");
    CHECK(sdt_weights_rematerialize_prefix(w16, w, "model.diffusion_model.", SDT_F16, &error), "rematerialize: %s",
          error.message);
    CHECK(a16 && a16->data && memcmp(a16->data, a16_before, sizeof a16_before) == 0,
          "the rematerialized tensor differs from the first copy");
    CHECK(h16 && h16->data == sdt_weights_get(w, "model.diffusion_model.h.weight")->data,
          "the f16 tensor is served from the mapping again");
    /* the same prefix in another dtype (an f32 VAE beside f16 weights) */
    sdt_weights_release_prefix(w16, "model.diffusion_model.a.");
    CHECK(sdt_weights_rematerialize_prefix(w16, w, "model.diffusion_model.a.", SDT_F32, &error),
          "rematerialize f32: %s", error.message);
    CHECK(a16 && a16->dtype == SDT_F32 && a16->data && ((const float *)a16->data)[0] == a[0],
          "rematerialized in f32, a holds the file's f32 values");
    CHECK(h16 && h16->dtype == SDT_F16, "a tensor outside the prefix keeps its dtype");
    sdt_weights_release_prefix(w16, "model.diffusion_model.a.");
    CHECK(sdt_weights_rematerialize_prefix(w16, w, "model.diffusion_model.a.", SDT_F16, &error), "back to f16: %s",
          error.message);

    sdt_weights *w32 = sdt_weights_materialize(w16, be, SDT_F32, &error);
    CHECK(w32 != NULL, "upcast: %s", error.message);
    const sdt_tensor *h32 = w32 ? sdt_weights_get(w32, "model.diffusion_model.h.weight") : NULL;
    for (int i = 0; h32 && i < 4; i++)
        CHECK(((const float *)h32->data)[i] == sdt_f16_to_f32(h[i]), "upcast h[%d] differs", i);
    CHECK(sdt_weights_count(w32) == sdt_weights_count(w), "copies keep every key");
    CHECK(src_a->dtype == SDT_F32 && ((const float *)src_a->data)[0] == a[0], "the source is untouched");
    sdt_weights_close(w32);
    sdt_weights_close(w16);
    sdt_weights_close(w);
    be->destroy(be);
    io_rm_tree(dir);
    free(dir);
    return sdt_test_finish("weights_materialize");
}
