/* hn_applier.c - the hypernetwork applier (the "sdtrain.hypernetwork_applier/1" extension and the
 * deprecated hypernetwork factory's applier_* members); see hn_applier.h.
 *
 * The ABI's sdt_hn_config (the Train tab) and the module's (hn/hn_config.h) share a name: the
 * ABI header is read first with its name changed, as in hn_abi_ops.c. */
#define sdt_hn_config sdt_hn_abi_train_config
#include "api/hn_applier.h"
#undef sdt_hn_config

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "host/copy_out.h"
#include "api/handle.h"
#include "compose/generate.h"
#include "host/status.h"
#include "hn/hn_file.h"
#include "hn/hn_hook.h"
#include "testhooks/test_hooks.h"

#define HN_APPLIER_MAGIC 0x484e6170u /* "HNap" */
#define HN_APPLIER_MAX_WIDTH 16384u  /* the widest module a file may hold (docs/hypernetworks.md) */

struct sdt_hn_applier {
    sdt_handle base;
    sdt_backend *be;
    sdt_hn_binding *binding;
    sdt_hn *members[SDT_HN_MAX_CHAIN];
    char *paths[SDT_HN_MAX_CHAIN]; /* generate loads them again on its own device */
    float strengths[SDT_HN_MAX_CHAIN];
    int count;
};

static bool applier_valid(const sdt_hn_applier *a)
{
    return a && sdt_handle_is(&a->base, HN_APPLIER_MAGIC);
}

#define REQUIRE_APPLIER(a)                                                                                             \
    do {                                                                                                               \
        if (!applier_valid(a)) return SDT_STATUS_INVALID_ARGUMENT;                                                     \
    } while (0)

static void applier_free(sdt_hn_applier *a)
{
    if (a->binding) sdt_hn_binding_free(a->binding);
    for (int k = 0; k < a->count; k++) sdt_hn_free(a->members[k]), free(a->paths[k]);
    if (a->be) a->be->destroy(a->be);
    sdt_handle_fini(&a->base);
    free(a);
}

sdt_status sdt_hn_applier_create(sdt_hn_applier **out, char *err, uint32_t err_size)
{
    const char *why = NULL;
    sdt_status st = SDT_STATUS_OUT_OF_MEMORY;
    sdt_error error = {0};
    sdt_hn_applier *a = NULL;
    if (!out) {
        why = "applier_create(): out is NULL; pass the address of an sdt_hn_applier pointer.";
        st = SDT_STATUS_INVALID_ARGUMENT;
        goto fail;
    }
    *out = NULL;
    a = calloc(1, sizeof *a);
    if (!a) {
        why = "Out of memory creating the hypernetwork applier.";
        goto fail;
    }
    sdt_handle_init(&a->base, HN_APPLIER_MAGIC);
    a->be = sdt_backend_cpu_create(0); /* OpenMP's default thread count, per call: nothing process-wide */
    if (!a->be) {
        why = "Out of memory creating the hypernetwork applier's CPU backend.";
        goto fail;
    }
    a->be->blas_gemm_only = sdt_test_hook_cpu_blas_gemm();
    a->binding = sdt_hn_binding_create(a->be, &error);
    if (!a->binding) {
        why = error.message;
        st = sdt_status_of(&error);
        goto fail;
    }
    sdt_hn_binding_set_eval(a->binding);
    if (err && err_size) err[0] = '\0';
    *out = a;
    return SDT_STATUS_OK;
fail:
    if (err && err_size) sdt_copy_string_out(why, err, err_size, NULL);
    if (a) applier_free(a);
    return st;
}

void sdt_hn_applier_destroy(sdt_hn_applier *applier)
{
    if (applier_valid(applier)) applier_free(applier);
}

sdt_status sdt_hn_applier_get_last_error(const sdt_hn_applier *applier, char *buf, uint32_t buf_size, uint32_t *needed)
{
    REQUIRE_APPLIER(applier);
    return sdt_handle_copy_error(&applier->base, buf, buf_size, needed);
}

/* A1111's strength is any finite multiplier; the modules run it as a float. */
static bool strength_ok(double strength)
{
    return isfinite(strength) && fabs(strength) <= 3.4e38;
}

sdt_status sdt_hn_applier_add(sdt_hn_applier *applier, const char *path, double strength)
{
    REQUIRE_APPLIER(applier);
    sdt_handle *h = &applier->base;
    sdt_handle_clear_error(h);
    if (!path || !path[0])
        return sdt_handle_fail(h, SDT_STATUS_INVALID_ARGUMENT,
                               "applier_add(): path is empty; pass a hypernetwork "
                               "file (.pt or .safetensors).");
    if (!strength_ok(strength))
        return sdt_handle_fail(h, SDT_STATUS_INVALID_ARGUMENT,
                               "applier_add(): the strength for %s is not a finite "
                               "number; pass a multiplier such as 1.0 (0 = no effect).",
                               path);
    if (applier->count >= SDT_HN_MAX_CHAIN)
        return sdt_handle_fail(h, SDT_STATUS_INVALID_ARGUMENT,
                               "applier_add(): the chain already holds %d "
                               "hypernetworks, the most it takes; %s was not added.",
                               SDT_HN_MAX_CHAIN, path);
    sdt_error error = {0};
    char *kept = strdup(path);
    if (!kept) return sdt_handle_fail(h, SDT_STATUS_OUT_OF_MEMORY, "applier_add(): out of memory for %s.", path);
    sdt_hn *hn = sdt_hn_load(path, applier->be, &error);
    if (!hn || !sdt_hn_binding_add(applier->binding, hn, (float)strength, false, &error)) {
        sdt_hn_free(hn);
        free(kept);
        return sdt_handle_fail_error(h, &error);
    }
    applier->paths[applier->count] = kept;
    applier->strengths[applier->count] = (float)strength;
    applier->members[applier->count++] = hn;
    return SDT_STATUS_OK;
}

sdt_status sdt_hn_applier_set_strength(sdt_hn_applier *applier, uint32_t index, double strength)
{
    REQUIRE_APPLIER(applier);
    sdt_handle *h = &applier->base;
    sdt_handle_clear_error(h);
    if (index >= (uint32_t)applier->count)
        return sdt_handle_fail(h, SDT_STATUS_INVALID_ARGUMENT,
                               "applier_set_strength(): index %u is past the chain "
                               "of %d hypernetworks; indices count from 0 in the order applier_add() added them.",
                               (unsigned)index, applier->count);
    if (!strength_ok(strength))
        return sdt_handle_fail(h, SDT_STATUS_INVALID_ARGUMENT,
                               "applier_set_strength(): the strength for member %u "
                               "is not a finite number; pass a multiplier such as 1.0.",
                               (unsigned)index);
    sdt_error error = {0};
    if (!sdt_hn_binding_set_strength(applier->binding, (int)index, (float)strength, &error))
        return sdt_handle_fail_error(h, &error);
    applier->strengths[index] = (float)strength;
    return SDT_STATUS_OK;
}

static bool applier_has_width(const sdt_hn_applier *a, int width)
{
    for (int k = 0; k < a->count; k++)
        if (sdt_hn_has_width(a->members[k], width)) return true;
    return false;
}

sdt_status sdt_hn_applier_apply_kv(sdt_hn_applier *applier, uint32_t width, uint32_t kind, const float *in, float *out,
                                   uint64_t rows)
{
    REQUIRE_APPLIER(applier);
    sdt_handle *h = &applier->base;
    sdt_handle_clear_error(h);
    if (kind != SDT_KV_K && kind != SDT_KV_V)
        return sdt_handle_fail(h, SDT_STATUS_INVALID_ARGUMENT,
                               "applier_apply_kv(): kind %u is neither SDT_KV_K (0) "
                               "nor SDT_KV_V (1).",
                               (unsigned)kind);
    if (width == 0 || width > HN_APPLIER_MAX_WIDTH)
        return sdt_handle_fail(h, SDT_STATUS_INVALID_ARGUMENT,
                               "applier_apply_kv(): width %u is outside 1..%u; pass "
                               "the last dimension of the K/V input (768 for SD 1.x's text context).",
                               (unsigned)width, HN_APPLIER_MAX_WIDTH);
    if (rows == 0) return SDT_STATUS_OK;
    if (!in || !out)
        return sdt_handle_fail(h, SDT_STATUS_INVALID_ARGUMENT,
                               "applier_apply_kv(): %s is NULL with %llu rows; pass "
                               "rows x width floats (out may be in).",
                               in ? "out" : "in", (unsigned long long)rows);
    if (rows > (uint64_t)INT64_MAX / width / sizeof(float))
        return sdt_handle_fail(h, SDT_STATUS_INVALID_ARGUMENT,
                               "applier_apply_kv(): %llu rows of width %u do not fit "
                               "in memory; pass the rows in smaller pieces.",
                               (unsigned long long)rows, (unsigned)width);
    if (!applier_has_width(applier, (int)width)) {
        if (out != in) memmove(out, in, (size_t)rows * width * sizeof(float)); /* A1111: no module, no change */
        return SDT_STATUS_OK;
    }
    sdt_tensor tin = sdt_tensor_4d((void *)in, SDT_F32, 2, (int64_t)rows, (int64_t)width, 0, 0);
    sdt_tensor tout = sdt_tensor_4d(out, SDT_F32, 2, (int64_t)rows, (int64_t)width, 0, 0);
    sdt_unet_hook_site site = {
        .layer = 0, .kind = kind == SDT_KV_K ? SDT_UNET_K : SDT_UNET_V, .width = (int)width, .cross = false};
    const sdt_unet_kv_hook *hook = sdt_hn_binding_hook(applier->binding);
    sdt_error error = {0};
    if (!hook->forward(hook->user, &site, &tin, &tout, false, &error)) return sdt_handle_fail_error(h, &error);
    return SDT_STATUS_OK;
}

/* The request with the defaults its zero fields stand for; false + a sentence naming the field. */
static bool generate_settings(const sdt_hn_applier *a, const sdt_generate_request *req,
                              sdt_compose_generate_settings *g, sdt_error *error)
{
    sdt_generate_request r;
    memset(&r, 0, sizeof r);
    if (!req || !sdt_struct_read_in(&r, sizeof r, req))
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "applier_generate(): the request is NULL or its struct_size "
                        "is not set; zero an sdt_generate_request and set struct_size = sizeof it.");
    if (r.reserved0 != 0 || r.reserved1 != 0)
        return sdt_fail(error, SDT_ERR_VALIDATION, "request.%s must be 0; zero the request before filling it.",
                        r.reserved0 != 0 ? "reserved0" : "reserved1");
    if (r.t5_max_length > 512)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "request.t5_max_length %u: T5 reads 1..512 tokens (0 = the family's: SD3.5 256, Flux dev 512, "
                        "schnell 256); give the length the embedding trained at.",
                        (unsigned)r.t5_max_length);
    if (r.device > SDT_DEVICE_CHOICE_CUDA)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "request.device %u is not an sdt_device_choice (0 auto, 1 cpu, "
                        "2 cuda).",
                        (unsigned)r.device);
    if (r.width > 8192 || r.height > 8192)
        return sdt_fail(error, SDT_ERR_VALIDATION, "request.width x height %u x %u: each side must be at most 8192.",
                        (unsigned)r.width, (unsigned)r.height);
    if (r.steps > 1000)
        return sdt_fail(error, SDT_ERR_VALIDATION, "request.steps %u: the samplers take 1..1000 steps (0 = 20).",
                        (unsigned)r.steps);
    sdt_sampler_kind sampler;
    if (!sdt_sampler_parse(r.sampler, "request.sampler", &sampler, error)) return false;
    if (r.clip_skip > 12)
        return sdt_fail(error, SDT_ERR_VALIDATION, "request.clip_skip %u: use 1..12 (1 = the last layer, as A1111).",
                        (unsigned)r.clip_skip);
    if (!isfinite(r.cfg_scale) || r.cfg_scale < 0 || r.cfg_scale > 100)
        return sdt_fail(error, SDT_ERR_VALIDATION, "request.cfg_scale %g: use 0..100 (0 = 7, 1 = no guidance).",
                        r.cfg_scale);
    *g = (sdt_compose_generate_settings){r.model_path,
                                         r.tokenizer_path,
                                         r.prompt,
                                         r.negative_prompt ? r.negative_prompt : "",
                                         r.embedding_path,
                                         r.width ? (int)r.width : 512,
                                         r.height ? (int)r.height : 512,
                                         r.steps ? (int)r.steps : 20,
                                         r.clip_skip ? (int)r.clip_skip : 1,
                                         r.cfg_scale > 0 ? (float)r.cfg_scale : 7.0f,
                                         r.seed,
                                         r.device,
                                         (int)r.cpu_threads,
                                         a->count,
                                         (const char *const *)a->paths,
                                         a->strengths,
                                         sampler,
                                         r.clip_l_path,
                                         r.clip_g_path,
                                         r.t5xxl_path,
                                         r.vae_path,
                                         (int)r.t5_max_length};
    return true;
}

sdt_status sdt_hn_applier_generate(sdt_hn_applier *applier, const sdt_generate_request *request, uint8_t *rgb,
                                   uint64_t rgb_size)
{
    REQUIRE_APPLIER(applier);
    sdt_handle *h = &applier->base;
    sdt_handle_clear_error(h);
    sdt_error error = {0};
    sdt_compose_generate_settings g;
    if (!generate_settings(applier, request, &g, &error)) return sdt_handle_fail_error(h, &error);
    uint64_t need = (uint64_t)g.width * (uint64_t)g.height * 3;
    if (!rgb || rgb_size < need)
        return sdt_handle_fail(h, SDT_STATUS_BUFFER_TOO_SMALL,
                               "applier_generate(): the image needs %llu bytes "
                               "(%d x %d x 3) and rgb holds %llu; pass a larger buffer.",
                               (unsigned long long)need, g.width, g.height, (unsigned long long)(rgb ? rgb_size : 0));
    if (!sdt_compose_generate(&g, rgb, &error)) return sdt_handle_fail_error(h, &error);
    return SDT_STATUS_OK;
}
