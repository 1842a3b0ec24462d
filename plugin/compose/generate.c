/* generate.c - txt2img with a hypernetwork chain and an embedding; see generate.h.
 *
 * The backend chooser reads the ABI header, whose Train-tab sdt_hn_config shares its name with
 * the module's shape (hn/hn_config.h): it is read first with the ABI's renamed (as hn_abi_ops.c). */
#define sdt_hn_config sdt_hn_abi_train_config
#include "host/backend_select.h"
#undef sdt_hn_config
#include "compose/generate.h"
#include "ti/ti_part.h"

#include <stdlib.h>
#include <string.h>

#include "hn/hn_file.h"
#include "hn/hn_hook.h"
#include "ti/embedding_file.h"
#include "sd_text_rules.h"
#include "train/flow_preview.h"
#include "train/preview.h"
#include "train/sd_runtime.h"
#include "train/tokenizer_open.h"
#include "train/work_arena.h"

typedef struct generate_run {
    plugin_backend pb;
    sd_runtime rt;
    bool rt_open;
    sdt_tokenizer *tok;
    sdt_spm *t5_tok; /* SD3: T5's tokenizer */
    sdt_hn_binding *binding;
    sdt_embedding emb;
    bool have_emb;
    sdt_tensor rows; /* the embedding's vectors on the backend */
    sdt_hn *members[SDT_HN_MAX_CHAIN];
    int count;
    work_arena wa;
} generate_run;

static void generate_close(generate_run *g)
{
    work_arena_release(&g->wa);
    if (g->rows.data) g->pb.be->free(g->pb.be, g->rows.data);
    if (g->have_emb) sdt_embedding_free(&g->emb);
    if (g->binding) sdt_hn_binding_free(g->binding);
    for (int k = 0; k < g->count; k++) sdt_hn_free(g->members[k]);
    if (g->tok) sdt_tokenizer_free(g->tok);
    if (g->t5_tok) sdt_spm_free(g->t5_tok);
    if (g->rt_open) sd_runtime_close(&g->rt);
    if (g->pb.be) plugin_backend_close(&g->pb);
}

static bool generate_chain(generate_run *g, const sdt_compose_generate_settings *s, sdt_error *error)
{
    if (s->chain_count > SDT_HN_MAX_CHAIN)
        return sdt_fail(error, SDT_ERR_VALIDATION, "%d hypernetworks given; the chain takes at most %d", s->chain_count,
                        SDT_HN_MAX_CHAIN);
    if (!(g->binding = sdt_hn_binding_create(g->pb.be, error))) return false;
    for (int k = 0; k < s->chain_count; k++) {
        sdt_hn *hn = sdt_hn_load(s->chain_paths[k], g->pb.be, error);
        if (!hn) return false;
        g->members[g->count++] = hn;
        if (!sdt_hn_binding_add(g->binding, hn, s->chain_strengths[k], false, error)) return false;
    }
    sdt_hn_binding_set_eval(g->binding);
    return true;
}

/* The embedding's name as a token of its own, its vectors on the backend (as ti/ti_part.c does for training). */
static bool generate_embedding(generate_run *g, const sdt_compose_generate_settings *s, sdt_slot_rules *rules,
                               sdt_error *error)
{
    if (!s->embedding_path || !s->embedding_path[0]) return true;
    if (!sdt_embedding_load(s->embedding_path, &g->emb, NULL, error)) return false;
    g->have_emb = true;
    if (!ti_embedding_check_model(&g->emb, &g->rt, s->embedding_path, error)) return false;
    int32_t id;
    if (!sdt_tokenizer_add_token(g->tok, g->emb.name, -1, &id, error)) return false;
    rules->placeholder_id = id;
    rules->n_vectors = g->emb.n_vectors;
    sdt_backend *be = g->pb.be;
    int64_t shape[2] = {g->emb.n_vectors, g->emb.dim};
    g->rows = sdt_tensor_make(NULL, SDT_F32, be->device, 2, shape);
    size_t bytes = sdt_tensor_nbytes(&g->rows);
    if (!(g->rows.data = be->alloc(be, bytes)) || be->upload(be, g->rows.data, g->emb.vectors, bytes))
        return sdt_fail(error, be->error.code, "cannot place the embedding on the %s backend: %s", be->name,
                        be->error.message);
    return true;
}

/* SD3/SD3.5 and Flux.1: the prompts through the family's encoders, the flow-matching Euler walk (train/flow_preview.h:
 * SD3's shift and T5 sequence 256; Flux's resolution shift, T5 sequence 512 (dev) or 256 (schnell) and dev's
 * distilled guidance 3.5, as their pipelines default them; the request's T5 length over the family's). */
static bool generate_flow(generate_run *g, const sdt_compose_generate_settings *s, uint8_t *rgb, sdt_error *error)
{
    const sd_config *c = &g->rt.cfg;
    if (s->chain_count > 0)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%s (%s) is a transformer model, and no host applies A1111 hypernetworks to SD3.5/Flux "
                        "transformers: generate without the hypernetworks",
                        s->model_path, sd_family_title(c->family));
    if (s->clip_skip > 1)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "request.clip_skip %d: SD3.5 and Flux.1 read CLIP as their pipelines do; leave it at 1",
                        s->clip_skip);
    int f = sd_runtime_image_divisor(&g->rt);
    if (s->width % f || s->height % f)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "width %d x height %d: %s needs sides that are multiples of %d; round them to a multiple of %d",
                        s->width, s->height, s->model_path, f, f);
    g->tok = sdt_open_tokenizer(s->tokenizer_path, s->model_path, c->clip.vocab, NULL, error);
    if (!g->tok) return false;
    g->t5_tok = sdt_open_t5_tokenizer(s->t5xxl_path, s->model_path, c->t5.vocab, NULL, error);
    if (!g->t5_tok) return false;
    sdt_slot_rules rules = {.placeholder_id = -1, .slot_token = 0, .pad_id = sdt_tokenizer_eos(g->tok)};
    sdt_t5_slot_rules t5_rules = {.placeholder_id = -1, .slot_token = 0};
    if (!generate_embedding(g, s, &rules, error)) return false;
    if (g->have_emb) {
        if (!sdt_spm_add_token(g->t5_tok, g->emb.name, &t5_rules.placeholder_id, error)) return false;
        t5_rules.n_vectors = g->emb.n_vectors;
    }
    sdt_flow_preview_request rq = {.prompt = s->prompt,
                                   .negative = s->negative ? s->negative : "",
                                   .width = s->width,
                                   .height = s->height,
                                   .steps = s->steps,
                                   .cfg_scale = s->cfg_scale,
                                   .seed = s->seed,
                                   .t5_len = 256, /* StableDiffusion3Pipeline's max_sequence_length */
                                   .shift = sdt_flow_timesteps_sd3()};
    if (sd_config_is_flux(c)) { /* FluxPipeline's defaults */
        rq.t5_len = c->flux.guidance ? 512 : 256;
        rq.shift = sdt_flow_timesteps_flux();
        rq.guidance = c->flux.guidance ? 3.5f : 0.0f;
    }
    if (s->t5_len > 0) rq.t5_len = s->t5_len; /* the length the embedding trained at (t5_max_length) */
    uint8_t *image = NULL;
    if (!sdt_flow_preview_render(&g->rt, &g->wa, g->tok, &rules, g->t5_tok, &t5_rules, g->rows.data ? &g->rows : NULL,
                                 &rq, &image, error))
        return false;
    memcpy(rgb, image, (size_t)s->width * (size_t)s->height * 3);
    free(image);
    return true;
}

static bool generate_in(generate_run *g, const sdt_compose_generate_settings *s, uint8_t *rgb, sdt_error *error)
{
    if (!s->model_path || !s->model_path[0])
        return sdt_fail(error, SDT_ERR_VALIDATION, "no model given: set the model path to an SD checkpoint");
    if (!s->prompt) return sdt_fail(error, SDT_ERR_VALIDATION, "no prompt given: set the prompt (\"\" is allowed)");
    if (!plugin_backend_open(&g->pb, s->device, 0, s->cpu_threads, NULL, error)) return false;
    const char *const parts[SD_PART_COUNT] = {NULL, s->clip_l_path, s->clip_g_path, s->t5xxl_path, s->vae_path};
    if (!sd_runtime_read_parts(&g->rt, s->model_path, parts, g->pb.be, false, error)) return false;
    g->rt_open = true;                                           /* read: closing it is safe, placed or not */
    if (s->t5_len != 0 && !sd_config_is_transformer(&g->rt.cfg)) /* refused before the weights are placed */
        return sdt_fail(
            error, SDT_ERR_VALIDATION,
            "request.t5_max_length %d: %s (%s) is a UNet model, which has no T5 encoder; leave it unset or 0 "
            "(the T5 length is for SD3.5 and Flux.1)",
            s->t5_len, s->model_path, sd_family_title(g->rt.cfg.family));
    if (!sd_runtime_place(&g->rt, SDT_F32, SD_PREDICTION_AUTO, error)) return false;
    if (sd_config_is_transformer(&g->rt.cfg)) return generate_flow(g, s, rgb, error);
    int f = vae_factor(&g->rt.cfg.vae) << (g->rt.cfg.unet.num_levels - 1);
    if (s->width % f || s->height % f)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "width %d x height %d: %s needs sides that are multiples of %d; "
                        "round them to a multiple of %d",
                        s->width, s->height, s->model_path, f, f);
    g->tok = sdt_open_tokenizer(s->tokenizer_path, s->model_path, g->rt.cfg.clip.vocab, NULL, error);
    if (!g->tok || !generate_chain(g, s, error)) return false;
    sd_text_rules text = sd_text_rules_of(&g->rt.cfg);
    sdt_slot_rules rules = {.placeholder_id = -1,
                            .n_vectors = 0,
                            .slot_token = 0,
                            .pad_id = sd_text_pad_id(&text, sdt_tokenizer_eos(g->tok))};
    if (!generate_embedding(g, s, &rules, error)) return false;
    sdt_preview_request rq = {s->prompt,
                              s->negative ? s->negative : "",
                              s->width,
                              s->height,
                              s->steps,
                              s->cfg_scale,
                              s->seed,
                              sd_text_clip_skip(&text, s->clip_skip),
                              s->chain_count > 0 ? sdt_hn_binding_hook(g->binding) : NULL,
                              s->sampler};
    uint8_t *image = NULL;
    if (!sdt_preview_render(&g->rt, &g->wa, g->tok, &rules, g->rows.data ? &g->rows : NULL, &rq, &image, error))
        return false;
    memcpy(rgb, image, (size_t)s->width * (size_t)s->height * 3);
    free(image);
    return true;
}

bool sdt_compose_generate(const sdt_compose_generate_settings *s, uint8_t *rgb, sdt_error *error)
{
    generate_run g;
    memset(&g, 0, sizeof g);
    bool ok = generate_in(&g, s, rgb, error);
    generate_close(&g);
    return ok;
}
