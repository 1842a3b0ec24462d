/* cmd_generate.c - `sdt-host generate`: one txt2img image through the plugin's own sampler (DDIM,
 * Euler ancestral or DPM++ 2M Karras, as the training previews) on a checkpoint, with hypernetworks chained at chosen strengths (the
 * trainer factory's hypernetwork applier extension). The image goes to --out, never over an existing file
 * unless --overwrite. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_number.h"
#include "cli_common.h"
#include "commands.h"
#include "encoder_options.h"
#include "exit_codes.h"
#include "png_out.h"

/* Defaults, written once for the variables and their --help lines. */
#define GENERATE_STEPS 20
#define GENERATE_CFG 7
#define GENERATE_SEED 0
#define GENERATE_SIZE 512
#define GENERATE_CLIP_SKIP 1
#define GENERATE_T5_MAX 512 /* T5's longest sequence (sdt_generate_request.t5_max_length) */
#define DEFAULT_IS(x) " (default " G_STRINGIFY(x) ")"

/* The plugin's sentences name request fields; a terminal user sets options. */
static const char *const request_options[][2] = {
    {"request.width x height", "--width x --height"},
    {"request.steps", "--steps"},
    {"request.cfg_scale", "--cfg"},
    {"request.clip_skip", "--clip-skip"},
    {"request.sampler", "--sampler"},
    {"request.clip_l_path", "--clip-l"},
    {"request.clip_g_path", "--clip-g"},
    {"request.t5xxl_path", "--t5xxl"},
    {"request.vae_path", "--vae"},
    {"request.t5_max_length", "--t5-max-length"},
};

/* FILE or FILE:STRENGTH (the part after the last ':' when it is a number); FALSE when a
 * strength is there but is not a finite number. */
static gboolean split_hypernetwork(const char *arg, char **file, double *strength)
{
    const char *colon = strrchr(arg, ':');
    *strength = 1.0;
    if (!colon) {
        *file = g_strdup(arg);
        return TRUE;
    }
    char *end = NULL;
    double s = g_ascii_strtod(colon + 1, &end);
    if (end == colon + 1 || *end) { /* no number after ':': part of the file name */
        *file = g_strdup(arg);
        return TRUE;
    }
    *file = g_strndup(arg, (gsize)(colon - arg));
    *strength = s;
    return isfinite(s);
}

static int device_choice(const char *name, uint32_t *out)
{
    if (!name || strcmp(name, "auto") == 0)
        *out = SDT_DEVICE_CHOICE_AUTO;
    else if (strcmp(name, "cpu") == 0)
        *out = SDT_DEVICE_CHOICE_CPU;
    else if (strcmp(name, "cuda") == 0)
        *out = SDT_DEVICE_CHOICE_CUDA;
    else
        return cli_usage_errorf("generate", "--device %s is not auto, cpu or cuda.", name);
    return SDT_EXIT_OK;
}

/* Loads the chain into a new applier; an exit status (the plugin's sentence printed). */
static int build_chain(const sdt_hypernetwork_applier_ext *f, sdt_hn_applier **applier, char **hypernetworks)
{
    char err[1024] = "";
    if (f->create(applier, err, sizeof err) != SDT_STATUS_OK) return cli_error(err);
    for (int i = 0; hypernetworks && hypernetworks[i]; i++) {
        char *file = NULL;
        double strength;
        if (!split_hypernetwork(hypernetworks[i], &file, &strength)) {
            g_free(file);
            return cli_usage_errorf("generate",
                                    "--hypernetwork %s: the strength after ':' is not a finite number; "
                                    "write FILE or FILE:STRENGTH, e.g. style.pt:0.8.",
                                    hypernetworks[i]);
        }
        sdt_status st = f->add(*applier, file, strength);
        g_free(file);
        if (st != SDT_STATUS_OK) {
            f->get_last_error(*applier, err, sizeof err, NULL);
            return cli_errorf("--hypernetwork %s: %s", hypernetworks[i], err);
        }
    }
    return SDT_EXIT_OK;
}

static int generate_image(const sdt_hypernetwork_applier_ext *f, sdt_hn_applier *applier,
                          const sdt_generate_request *rq, const char *out)
{
    uint64_t bytes = (uint64_t)rq->width * rq->height * 3;
    uint8_t *rgb = g_try_malloc(bytes);
    if (!rgb) return cli_errorf("out of memory for a %u x %u image.", rq->width, rq->height);
    int status = SDT_EXIT_OK;
    if (f->generate(applier, rq, rgb, bytes) != SDT_STATUS_OK) {
        char err[1024] = "";
        f->get_last_error(applier, err, sizeof err, NULL);
        status = cli_error_renamed(g_strdup(err), request_options, G_N_ELEMENTS(request_options));
    } else {
        GError *gerr = NULL;
        if (!png_out_write_rgb(out, rgb, rq->width, rq->height, &gerr)) {
            status = cli_errorf("%s: the image could not be written (%s); check the folder exists and is writable.",
                                out, gerr->message);
            g_clear_error(&gerr);
        } else {
            printf("Generated: %s\n", out);
        }
    }
    g_free(rgb);
    return status;
}

/* A plugin older than 1.10 reads the request only up to its own size (docs/abi.md 3.2) and would render at the
 * family's length without a word: refused instead. */
static int check_t5_length_known(const host_plugin *p)
{
    sdt_version v = p->entry->abi_version;
    if (v.major > 1 || v.minor >= 10) return SDT_EXIT_OK;
    return cli_errorf("--t5-max-length needs a plugin of ABI 1.10 or newer, and %s speaks ABI %u.%u.%u, which would "
                      "ignore it; update the plugin or leave the option out.",
                      p->path, (unsigned)v.major, (unsigned)v.minor, (unsigned)v.patch);
}

static int check_values(const char *model, const char *prompt, const char *out, gboolean overwrite, int width,
                        int height, int steps, double cfg, gint64 seed)
{
    if (!model) return cli_usage_error("generate", "--model is required (an SD checkpoint).");
    if (!prompt) return cli_usage_error("generate", "--prompt is required.");
    if (!out) return cli_usage_error("generate", "--out is required (the PNG to write).");
    if (width < 8 || width > 8192 || height < 8 || height > 8192)
        return cli_usage_errorf("generate",
                                "--width %d x --height %d: each side must be 8..8192 (a multiple of the "
                                "model's 64 for SD).",
                                width, height);
    if (steps < 1 || steps > 1000) return cli_usage_errorf("generate", "--steps %d: use 1..1000.", steps);
    if (!isfinite(cfg) || cfg < 1 || cfg > 100)
        return cli_usage_errorf("generate", "--cfg %s: use 1..100 (1 = no guidance).",
                                c_number(&(c_number_text){{0}}, "%g", cfg));
    if (seed < 0) return cli_usage_errorf("generate", "--seed %lld: use 0 or more.", (long long)seed);
    if (!overwrite && g_file_test(out, G_FILE_TEST_EXISTS))
        return cli_errorf("%s already exists; choose another --out or pass --overwrite.", out);
    return SDT_EXIT_OK;
}

int cmd_generate(int argc, char **argv)
{
    char *model = NULL, *prompt = NULL, *negative = NULL, *out = NULL, *device = NULL, *tokenizer = NULL;
    char *plugin = NULL, *embedding = NULL, *sampler = NULL, **hypernetworks = NULL;
    encoder_files encoders = {0};
    int width = GENERATE_SIZE, height = GENERATE_SIZE, steps = GENERATE_STEPS, clip_skip = GENERATE_CLIP_SKIP;
    int t5_length = 0; /* the family's */
    double cfg = GENERATE_CFG;
    gint64 seed = GENERATE_SEED;
    gboolean overwrite = FALSE;
    GOptionEntry entries[] = {
        {"model", 0, 0, G_OPTION_ARG_FILENAME, &model,
         "SD checkpoint (.safetensors, .ckpt or diffusers folder; required)", "PATH"},
        {"prompt", 0, 0, G_OPTION_ARG_STRING, &prompt, "Prompt (required)", "TEXT"},
        {"negative", 0, 0, G_OPTION_ARG_STRING, &negative, "Negative prompt (default none)", "TEXT"},
        {"hypernetwork", 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &hypernetworks,
         "Hypernetwork at a strength (default 1); repeat to chain them in order (default none)", "FILE[:STRENGTH]"},
        {"embedding", 0, 0, G_OPTION_ARG_FILENAME, &embedding,
         "An embedding: its name in the prompt stands for its vectors (default none)", "FILE"},
        {"sampler", 0, 0, G_OPTION_ARG_STRING, &sampler,
         "ddim (eta 0; default), euler_a (Euler ancestral) or dpmpp_2m_karras (DPM++ 2M, Karras sigmas)", "NAME"},
        {"steps", 0, 0, G_OPTION_ARG_INT, &steps, "Sampler steps" DEFAULT_IS(GENERATE_STEPS), "N"},
        {"cfg", 0, 0, G_OPTION_ARG_DOUBLE, &cfg, "Classifier-free guidance scale" DEFAULT_IS(GENERATE_CFG), "X"},
        {"seed", 0, 0, G_OPTION_ARG_INT64, &seed, "Noise seed" DEFAULT_IS(GENERATE_SEED), "N"},
        {"width", 0, 0, G_OPTION_ARG_INT, &width, "Width in pixels" DEFAULT_IS(GENERATE_SIZE), "N"},
        {"height", 0, 0, G_OPTION_ARG_INT, &height, "Height in pixels" DEFAULT_IS(GENERATE_SIZE), "N"},
        {"clip-skip", 0, 0, G_OPTION_ARG_INT, &clip_skip,
         "CLIP skip, ignored for SD 2.x" DEFAULT_IS(GENERATE_CLIP_SKIP), "N"},
        {"device", 0, 0, G_OPTION_ARG_STRING, &device, "auto (default), cpu or cuda", "NAME"},
        {"tokenizer", 0, 0, G_OPTION_ARG_FILENAME, &tokenizer,
         "CLIP tokenizer folder (default: found beside the model, else built in)", "DIR"},
        {NULL, 0, 0, 0, NULL, NULL, NULL}};
    GOptionEntry entries_after[] = {
        {"t5-max-length", 0, 0, G_OPTION_ARG_INT, &t5_length,
         "SD3.5/Flux.1: T5 tokens a prompt is padded or cut to, 1..512, e.g. the --t5-max-length the embedding "
         "trained at; 0 = the family's (SD3.5 256, Flux dev 512, schnell 256; default)",
         "N"},
        {"out", 0, 0, G_OPTION_ARG_FILENAME, &out, "The PNG to write (required)", "FILE"},
        {"overwrite", 0, 0, G_OPTION_ARG_NONE, &overwrite, "Replace --out if it exists (default off)", NULL},
        CLI_PLUGIN_OPTION(plugin),
        {NULL, 0, 0, 0, NULL, NULL, NULL}};
    GOptionContext *ctx = g_option_context_new("- txt2img through the plugin, with hypernetworks at chosen strengths");
    g_option_context_add_main_entries(ctx, entries, NULL);
    encoder_options_add(ctx, &encoders, TRUE);
    g_option_context_add_main_entries(ctx, entries_after, NULL);
    uint32_t device_id = 0;
    int status = cli_parse(ctx, "generate", &argc, &argv) ? SDT_EXIT_OK : SDT_EXIT_USAGE;
    if (status == SDT_EXIT_OK && argc > 1)
        status = cli_usage_error("generate", "unexpected argument; every input is an --option.");
    if (status == SDT_EXIT_OK) status = check_values(model, prompt, out, overwrite, width, height, steps, cfg, seed);
    if (status == SDT_EXIT_OK && (clip_skip < 1 || clip_skip > 12))
        status = cli_usage_errorf("generate", "--clip-skip %d: use 1..12.", clip_skip);
    if (status == SDT_EXIT_OK && (t5_length < 0 || t5_length > GENERATE_T5_MAX))
        status = cli_usage_errorf("generate",
                                  "--t5-max-length %d: use 1..%d (the length the embedding trained at), or 0 for the "
                                  "family's (SD3.5 256, Flux dev 512, schnell 256).",
                                  t5_length, GENERATE_T5_MAX);
    if (status == SDT_EXIT_OK) status = device_choice(device, &device_id);
    cli_trainer t;
    if (status == SDT_EXIT_OK && (status = cli_factory_open(&t, plugin)) == SDT_EXIT_OK) {
        sdt_hn_applier *applier = NULL;
        const sdt_hypernetwork_applier_ext *chain = NULL;
        if (t5_length > 0) status = check_t5_length_known(&t.plugin);
        if (status == SDT_EXIT_OK) chain = cli_trainer_extension(&t, SDT_EXT_HYPERNETWORK_APPLIER, &status);
        if (chain && (status = build_chain(chain, &applier, hypernetworks)) == SDT_EXIT_OK) {
            sdt_generate_request rq = {.struct_size = sizeof rq,
                                       .device = device_id,
                                       .model_path = model,
                                       .tokenizer_path = tokenizer,
                                       .prompt = prompt,
                                       .negative_prompt = negative,
                                       .width = (uint32_t)width,
                                       .height = (uint32_t)height,
                                       .steps = (uint32_t)steps,
                                       .clip_skip = (uint32_t)clip_skip,
                                       .cfg_scale = cfg,
                                       .seed = (uint64_t)seed,
                                       .embedding_path = embedding,
                                       .sampler = sampler,
                                       .clip_l_path = encoders.clip_l,
                                       .clip_g_path = encoders.clip_g,
                                       .t5xxl_path = encoders.t5xxl,
                                       .vae_path = encoders.vae,
                                       .t5_max_length = (uint32_t)t5_length};
            status = generate_image(chain, applier, &rq, out);
        }
        if (applier) chain->destroy(applier);
        cli_trainer_close(&t);
    }
    g_option_context_free(ctx);
    g_free(model);
    g_free(prompt);
    g_free(negative);
    g_free(out);
    g_free(device);
    g_free(tokenizer);
    g_free(plugin);
    g_free(embedding);
    g_free(sampler);
    g_strfreev(hypernetworks);
    encoder_files_free(&encoders);
    return status;
}
