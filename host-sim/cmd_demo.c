/* cmd_demo.c - `sdt-host [demo]`: the README's first command. Trains on the demo model
 * (models/demo_model/: a small SD 1.x trained on the demo world, which holds one concept and one
 * style back from its captions) and shows what was learned: a labelled comparison grid and a score
 * per row (demo_grid.h). Three demos, one code path:
 *   (default)        an embedding of the held-out concept (a yellow star) from pictures captioned
 *                    by place only; the grid's rows: the words, the initial and the learned embedding
 *   --hypernetwork   a hypernetwork of the held-out style (outlines) from outlined shapes captioned
 *                    as the base model's pictures are (the captions never say "outline"); the grid:
 *                    the same prompts and seeds at strength 0, 0.5 and 1
 *   --joint          both in one run, on outlined yellow stars captioned by place; the grid: the
 *                    learned embedding in the prompt at strength 0, 0.5 and 1
 * and, with --model-family flux (issue 30), the embedding demo on models/demo_flux/ (a small
 * Flux.1-architecture model trained on the same world): one table per encoder (clip_l, t5xxl),
 * --encoders choosing which train, the same dataset, rows and concept score.
 * Each trains through the plugin's ABI exactly as `sdt-host train` does and writes what a real run
 * writes; --resume continues a demo run in the same --out folder from its state.
 *
 * The demo assets live in a folder found as $SDTRAIN_DEMO_DIR, else <sdt-host's folder>/demo,
 * else <sdt-host's folder>/../share/sdtrain/demo, with model/sdtrain-demo.safetensors (and its
 * tokenizer/), model-flux/ (flux1-demo, clip_l, t5xxl and ae safetensors, tokenizer/ and
 * t5_tokenizer/) and the datasets inside; --model and --dataset replace either. */
#include <stdio.h>
#include <string.h>

#include "cli_common.h"
#include "command_table.h"
#include "commands.h"
#include "data_dirs.h"
#include "demo_grid.h"
#include "exit_codes.h"
#include "file_read.h"
#include "train_session.h"

#define DEMO_NAME "sdtrain-demo"
#define DEMO_HN_NAME "sdtrain-demo-style"
/* The demo model's K/V widths (models/demo_model/README.md): the cross-attention context (128,
 * the text encoder's width) and the self-attention at the UNet's attention levels (64). */
#define DEMO_HN_SIZES "128,64"
#define DEMO_HN_LAYERS "1,2,1"
#define DEMO_INIT_TEXT "object" /* the base captions' word for an unnamed object */
#define DEMO_MODEL_FILE "sdtrain-demo.safetensors"
/* The Flux demo model (models/demo_flux/README.md) as Flux.1 comes: BFL's transformer file with the
 * encoders and the VAE as files of their own beside it, where sdtrain's lookups find its tokenizers. */
#define DEMO_FLUX_MODEL_DIR "model-flux"
#define DEMO_FLUX_MODEL_FILE "flux1-demo.safetensors"
#define DEMO_FLUX_CLIP_L "clip_l.safetensors"
#define DEMO_FLUX_T5XXL "t5xxl.safetensors"
#define DEMO_FLUX_VAE "ae.safetensors"
#define DEMO_FLUX_T5_LENGTH 32 /* the T5 length it was trained at (train.py: captions take ~15 tokens) */
#define DEMO_EMBEDDING_LIMIT ((gsize)64 << 20) /* the demo's own embedding: a few KB */
#define DEMO_LOG_FOLDER "textual_inversion"    /* A1111 logs both methods there */

typedef enum demo_method { DEMO_EMBEDDING, DEMO_HYPERNETWORK, DEMO_JOINT, DEMO_FLUX_EMBEDDING } demo_method;

/* What differs between the three demos. */
typedef struct demo_kind {
    const char *option;         /* on the command line */
    const char *dataset_folder; /* in the demo assets */
    /* The base model's caption grammar ("a small red circle on a navy background, top left"):
     * an embedding stands where colour and shape go and the captions hold "navy background, top
     * left"; a hypernetwork alone trains on the full captions. */
    const char *template_text;
    int64_t steps;
    uint32_t batch_size;              /* a style is learned from many pictures: batches steady it */
    const char *learn_rate;           /* the embedding's (DEMO_EMBEDDING) or the hypernetwork's */
    const char *embedding_learn_rate; /* DEMO_JOINT's embedding */
    /* Classifier-free guidance of the previews and the grid. The hypernetwork's grid is drawn
     * without guidance: guidance multiplies what the words say, and the base model learned "a red
     * circle" from pictures that were 88% filled, so at 4 the words pull a picture back to filled
     * (docs/demo.md has the numbers). */
    double cfg;
    /* Sampler steps of the previews and the grid: DDIM's 20 for the SD demo model; the Flux demo
     * model's own samples' 30 flow-matching Euler steps (models/demo_flux/train.py). */
    int sample_steps;
    bool embedding, hypernetwork; /* what it trains */
} demo_kind;

static const demo_kind demo_kinds[] = {
    [DEMO_EMBEDDING] = {"", "dataset", "a [name] on a [filewords]\n", 200, 1, "0.02", NULL, 4.0, 20, true, false},
    [DEMO_HYPERNETWORK] = {"--hypernetwork", "dataset-style", "[filewords]\n", 240, 2, "0.002", NULL, 1.0, 20, false,
                           true},
    [DEMO_JOINT] = {"--joint", "dataset-joint", "a [name] on a [filewords]\n", 240, 2, "0.002", "0.02", 1.0, 20, true,
                    true},
    [DEMO_FLUX_EMBEDDING] = {"--model-family flux", "dataset", "a [name] on a [filewords]\n", 200, 1, "0.1", NULL, 4.0,
                             30, true, false},
};

/* --encoders of the Flux demo: the embedding's tables that train (SDT_ENCODER_* bits). */
static const struct {
    const char *name;
    uint32_t bits;
    const char *says; /* in the closing lines */
} demo_encoders[] = {
    {"both", SDT_ENCODER_CLIP_L | SDT_ENCODER_T5XXL, "clip_l and t5xxl tables"},
    {"clip_l", SDT_ENCODER_CLIP_L, "clip_l table (t5xxl kept at its start)"},
    {"t5xxl", SDT_ENCODER_T5XXL, "t5xxl table (clip_l kept at its start)"},
};

static char *demo_dir(void)
{
    const char *env = g_getenv("SDTRAIN_DEMO_DIR");
    return env && env[0] ? g_strdup(env) : host_data_dir("demo");
}

/* The demo job's settings: small and quick on 2 CPU cores. */
typedef struct demo_options {
    demo_method method;
    const char *out, *model, *dataset, *plugin, *learn_rate, *resume;
    int encoders;               /* DEMO_FLUX_EMBEDDING: the index in demo_encoders */
    char *clip_l, *t5xxl, *vae; /* DEMO_FLUX_EMBEDDING: the parts beside the transformer, else NULL */
    int64_t max_steps, save_every;
    uint64_t seed;
    int grid_seeds;  /* 0: no grid */
    bool validation; /* a fifth of the pictures held out, their loss measured 20 times; metrics.jsonl and loss.png */
} demo_options;

/* The files of one demo run under --out. */
typedef struct demo_paths {
    char *emb_dir, *hn_dir, *template_file, *log_dir, *embedding, *initial, *hypernetwork, *grid;
} demo_paths;

static void demo_paths_make(demo_paths *p, const char *out)
{
    p->emb_dir = g_build_filename(out, "embeddings", NULL);
    p->hn_dir = g_build_filename(out, "hypernetworks", NULL);
    p->template_file = g_build_filename(out, "demo_template.txt", NULL);
    p->log_dir = g_build_filename(out, DEMO_LOG_FOLDER, NULL);
    p->embedding = g_build_filename(p->emb_dir, DEMO_NAME ".safetensors", NULL);
    p->initial = g_build_filename(p->emb_dir, DEMO_NAME "-initial.safetensors", NULL);
    p->hypernetwork = g_build_filename(p->hn_dir, DEMO_HN_NAME ".pt", NULL);
    p->grid = g_build_filename(out, "demo_grid.png", NULL);
}

static void demo_paths_free(demo_paths *p)
{
    g_free(p->emb_dir);
    g_free(p->hn_dir);
    g_free(p->template_file);
    g_free(p->log_dir);
    g_free(p->embedding);
    g_free(p->initial);
    g_free(p->hypernetwork);
    g_free(p->grid);
}

/* The options both methods share (sdt_train_options serves the embedding's config too). */
static void demo_train_options(sdt_train_options *t, const demo_options *o, const demo_paths *p)
{
    t->model_path = o->model;
    t->dataset_dir = o->dataset;
    t->template_file = p->template_file;
    t->log_dir = p->log_dir;
    t->max_steps = o->max_steps;
    t->seed = o->seed;
    t->batch_size = demo_kinds[o->method].batch_size;
    t->width = 64;
    t->height = 64;
    t->save_every = o->save_every;
    t->preview_every = o->save_every;
    t->write_csv_every = 1;
    t->preview_steps = demo_kinds[o->method].sample_steps;
    t->preview_cfg_scale = demo_kinds[o->method].cfg;
    t->preview_seed = (int64_t)(o->seed & INT64_MAX);
    t->device = SDT_DEVICE_CHOICE_CPU;
    t->resume_state_path = o->resume;
    if (o->method == DEMO_FLUX_EMBEDDING) {
        t->clip_l_path = o->clip_l;
        t->t5xxl_path = o->t5xxl;
        t->vae_path = o->vae;
        t->t5_max_length = DEMO_FLUX_T5_LENGTH;
    }
    if (o->validation) { /* the plugin's closing log line names where the validation loss bottomed out */
        t->validation_split = 0.2;
        t->validate_every = o->max_steps / 20 > 0 ? o->max_steps / 20 : 1;
        t->write_metrics = true;
    }
}

/* The embedding demos' grids (not the joint one's) have a "before" row: the initial embedding. */
static bool keeps_initial(demo_method m)
{
    return m == DEMO_EMBEDDING || m == DEMO_FLUX_EMBEDDING;
}

/* A copy of the untrained embedding, for the grid's "before" row (training overwrites the file). */
static bool keep_initial(const char *embedding, const char *copy)
{
    char *data = NULL, *why = NULL;
    gsize len = 0;
    bool ok = host_read_file(embedding, DEMO_EMBEDDING_LIMIT, &data, &len, &why) &&
              g_file_set_contents(copy, data, (gssize)len, NULL);
    g_free(data);
    g_free(why);
    return ok;
}

/* The embedding (DEMO_EMBEDDING, DEMO_JOINT), initialised from "object", and for the embedding
 * demo its initial copy. An exit status. */
static int create_embedding(const demo_options *o, const demo_paths *p, const cli_trainer *t)
{
    int status = SDT_EXIT_OK;
    const sdt_embedding_files_ext *files = cli_trainer_extension(t, SDT_EXT_EMBEDDING_FILES, &status);
    if (!files) return status;
    sdt_embedding_spec spec = {.struct_size = sizeof spec,
                               .vectors_per_token = 2,
                               .name = DEMO_NAME,
                               .init_text = DEMO_INIT_TEXT,
                               .model_path = o->model,
                               .output_dir = p->emb_dir,
                               .overwrite = true,
                               .clip_l_path = o->clip_l,
                               .t5xxl_path = o->t5xxl};
    char embedding[4096] = "";
    if (files->create_embedding(t->trainer, &spec, embedding, sizeof embedding, NULL) != SDT_STATUS_OK)
        status = cli_trainer_fail(t);
    else if (keeps_initial(o->method) && !keep_initial(embedding, p->initial))
        status = cli_errorf("Could not copy %s to %s; choose a writable --out folder.", embedding, p->initial);
    return status;
}

/* The hypernetwork (DEMO_HYPERNETWORK, DEMO_JOINT), sized for the demo model. An exit status. */
static int create_hypernetwork(const demo_paths *p, const cli_trainer *t)
{
    int status = SDT_EXIT_OK;
    const sdt_hypernetwork_files_ext *files = cli_trainer_extension(t, SDT_EXT_HYPERNETWORK_FILES, &status);
    if (!files) return status;
    sdt_hypernetwork_spec spec = {.struct_size = sizeof spec,
                                  .name = DEMO_HN_NAME,
                                  .output_dir = p->hn_dir,
                                  .widths = DEMO_HN_SIZES,
                                  .layer_structure = DEMO_HN_LAYERS,
                                  .overwrite = true};
    char path[4096] = "";
    if (files->create_hypernetwork(t->trainer, &spec, path, sizeof path, NULL) != SDT_STATUS_OK)
        status = cli_trainer_fail(t);
    return status;
}

/* One run of the demo's parts: the embedding, the hypernetwork, or both (DEMO_JOINT). */
static int train_demo(const demo_options *o, const demo_paths *p, const cli_trainer *t)
{
    sdt_train_options options = {.struct_size = sizeof options};
    sdt_embedding_part embedding = {.struct_size = sizeof embedding};
    sdt_hypernetwork_part hypernetwork = {.struct_size = sizeof hypernetwork};
    if (t->factory->train_options_defaults(&options) != SDT_STATUS_OK ||
        t->factory->embedding_part_defaults(&embedding) != SDT_STATUS_OK ||
        t->factory->hypernetwork_part_defaults(&hypernetwork) != SDT_STATUS_OK)
        return cli_trainer_fail(t);
    const demo_kind *kind = &demo_kinds[o->method];
    demo_train_options(&options, o, p);
    embedding.embedding_path = p->embedding;
    embedding.learn_rate = kind->embedding_learn_rate ? kind->embedding_learn_rate : o->learn_rate;
    if (o->method == DEMO_FLUX_EMBEDDING) embedding.encoders = demo_encoders[o->encoders].bits;
    hypernetwork.hypernetwork_path = p->hypernetwork;
    hypernetwork.learn_rate = o->learn_rate;
    sdt_trainer_config config = {.struct_size = sizeof config,
                                 .options = &options,
                                 .embedding = kind->embedding ? &embedding : NULL,
                                 .hypernetwork = kind->hypernetwork ? &hypernetwork : NULL};
    train_target target = {.factory = t->factory, .trainer = t->trainer, .config = &config};
    return train_session_run(&target, NULL, NULL);
}

/* A resumed run needs the files the first run trained: 0, or the exit status after the sentence. */
static int check_resumable(const demo_options *o, const demo_paths *p)
{
    const char *missing =
        demo_kinds[o->method].embedding && !g_file_test(p->embedding, G_FILE_TEST_EXISTS)         ? p->embedding
        : demo_kinds[o->method].hypernetwork && !g_file_test(p->hypernetwork, G_FILE_TEST_EXISTS) ? p->hypernetwork
                                                                                                  : NULL;
    if (!missing) return SDT_EXIT_OK;
    return cli_errorf("--resume continues a demo run in its --out folder, but %s is missing; pass the --out folder of "
                      "the run that wrote the state.",
                      missing);
}

/* The folders and the template; for a fresh run, new files to train. An exit status. */
static int prepare_files(const demo_options *o, const demo_paths *p, const cli_trainer *t)
{
    bool embedding = demo_kinds[o->method].embedding, hypernetwork = demo_kinds[o->method].hypernetwork;
    if (o->resume) return check_resumable(o, p);
    GError *gerr = NULL;
    if ((embedding && g_mkdir_with_parents(p->emb_dir, 0777) != 0) ||
        (hypernetwork && g_mkdir_with_parents(p->hn_dir, 0777) != 0) ||
        !g_file_set_contents(p->template_file, demo_kinds[o->method].template_text, -1, &gerr)) {
        g_clear_error(&gerr);
        return cli_errorf("Could not write the demo files in %s; choose a writable --out folder.", o->out);
    }
    int status = SDT_EXIT_OK;
    if (embedding) status = create_embedding(o, p, t);
    if (status == SDT_EXIT_OK && hypernetwork) status = create_hypernetwork(p, t);
    return status;
}

/* The Flux demo's parts beside its transformer: 0, or the exit status after the sentence. */
static int check_flux_parts(const demo_options *o)
{
    const char *parts[] = {o->clip_l, o->t5xxl, o->vae};
    for (size_t i = 0; i < G_N_ELEMENTS(parts); i++)
        if (!g_file_test(parts[i], G_FILE_TEST_EXISTS))
            return cli_errorf("The Flux demo model's %s is missing beside %s; --model names the Flux demo's "
                              "transformer file, whose folder holds " DEMO_FLUX_CLIP_L ", " DEMO_FLUX_T5XXL
                              " and " DEMO_FLUX_VAE " (build/host-sim/demo/" DEMO_FLUX_MODEL_DIR "/).",
                              parts[i], o->model);
    return SDT_EXIT_OK;
}

static int run_demo(const demo_options *o)
{
    if (!g_file_test(o->model, G_FILE_TEST_EXISTS) || !g_file_test(o->dataset, G_FILE_TEST_IS_DIR)) {
        return cli_errorf("The demo model (%s) or dataset (%s) is missing; set SDTRAIN_DEMO_DIR or pass --model and "
                          "--dataset.",
                          o->model, o->dataset);
    }
    if (o->method == DEMO_FLUX_EMBEDDING) {
        int parts = check_flux_parts(o);
        if (parts != SDT_EXIT_OK) return parts;
    }
    demo_paths p;
    demo_paths_make(&p, o->out);
    cli_trainer t;
    int status = cli_trainer_open(&t, o->plugin);
    if (status == SDT_EXIT_OK && (status = prepare_files(o, &p, &t)) == SDT_EXIT_OK) {
        status = train_demo(o, &p, &t);
        if (status != SDT_EXIT_ERROR) {
            if (o->method == DEMO_FLUX_EMBEDDING)
                printf("Trained the Flux embedding's %s.\n", demo_encoders[o->encoders].says);
            if (demo_kinds[o->method].embedding) printf("Demo outputs: the embedding %s", p.embedding);
            if (o->method == DEMO_JOINT) printf(",\n  the hypernetwork %s", p.hypernetwork);
            if (o->method == DEMO_HYPERNETWORK) printf("Demo outputs: the hypernetwork %s", p.hypernetwork);
            printf(", logs, previews and copies under %s\n", p.log_dir);
            if (o->validation)
                printf("The loss plot (training and validation loss by step): loss.png in the run's folder under %s\n",
                       p.log_dir);
        }
    }
    if (status == SDT_EXIT_OK && o->grid_seeds > 0) {
        bool have_initial = keeps_initial(o->method) && g_file_test(p.initial, G_FILE_TEST_EXISTS);
        demo_grid_request rq = {.model = o->model,
                                .grid_path = p.grid,
                                .seeds = o->grid_seeds,
                                .seed = o->seed,
                                .cfg = demo_kinds[o->method].cfg,
                                .steps = demo_kinds[o->method].sample_steps,
                                .clip_l = o->clip_l,
                                .t5xxl = o->t5xxl,
                                .vae = o->vae,
                                .t5_len = o->method == DEMO_FLUX_EMBEDDING ? DEMO_FLUX_T5_LENGTH : 0,
                                .initial = have_initial ? p.initial : NULL,
                                .learned = demo_kinds[o->method].embedding ? p.embedding : NULL,
                                .hypernetwork = demo_kinds[o->method].hypernetwork ? p.hypernetwork : NULL};
        demo_grid_run(&rq);
    }
    if (t.factory) cli_trainer_close(&t);
    demo_paths_free(&p);
    return status;
}

int cmd_demo(int argc, char **argv)
{
    char *out = NULL, *model = NULL, *dataset = NULL, *plugin = NULL, *steps_text = NULL, *seed_text = NULL;
    char *grid_text = NULL, *learn_rate = NULL, *resume = NULL, *save_text = NULL;
    char *family = NULL, *encoders = NULL;
    gboolean hypernetwork = FALSE, joint = FALSE, validation = FALSE;
    GOptionEntry entries[] = {
        {"model-family", 0, 0, G_OPTION_ARG_STRING, &family,
         "sd: the SD 1.x demo model (default); flux: the Flux.1-architecture demo model (an embedding with a clip_l "
         "and a t5xxl table)",
         "sd|flux"},
        {"encoders", 0, 0, G_OPTION_ARG_STRING, &encoders,
         "With --model-family flux: the tables that train, clip_l, t5xxl or both (default both)", "clip_l|t5xxl|both"},
        {"hypernetwork", 0, 0, G_OPTION_ARG_NONE, &hypernetwork,
         "Train a hypernetwork of the held-out style (outlines) instead (default off: the embedding demo)", NULL},
        {"joint", 0, 0, G_OPTION_ARG_NONE, &joint,
         "Train the embedding and the hypernetwork in one run, on outlined yellow stars (default off)", NULL},
        {"validation", 0, 0, G_OPTION_ARG_NONE, &validation,
         "Hold out a fifth of the pictures and measure their loss 20 times; the log names the step where it bottomed out, loss.png plots it (default off)",
         NULL},
        {"out", 0, 0, G_OPTION_ARG_FILENAME, &out,
         "Output folder (default: sdtrain-demo; with --model-family flux sdtrain-demo-flux)", "DIR"},
        {"max-steps", 0, 0, G_OPTION_ARG_STRING, &steps_text,
         "Training steps (default 200; with --hypernetwork or --joint 240)", "N"},
        {"learn-rate", 0, 0, G_OPTION_ARG_STRING, &learn_rate,
         "Learning-rate schedule of the embedding, or of the hypernetwork with --hypernetwork or --joint (default 0.02; "
         "0.002; with --model-family flux 0.1)",
         "RATE"},
        {"save-every", 0, 0, G_OPTION_ARG_STRING, &save_text,
         "Copies, previews and the state every N steps (default: a quarter of --max-steps)", "N"},
        {"resume", 0, 0, G_OPTION_ARG_FILENAME, &resume,
         "Continue a demo run in the same --out folder from its state file (or its log folder; default none)", "STATE"},
        {"grid-seeds", 0, 0, G_OPTION_ARG_STRING, &grid_text, "Columns of the comparison grid, 0 = no grid (default 6)",
         "N"},
        {"seed", 0, 0, G_OPTION_ARG_STRING, &seed_text, "Seed (default 0)", "S"},
        {"model", 0, 0, G_OPTION_ARG_FILENAME, &model,
         "Model instead of the demo model (default: the demo folder's model/" DEMO_MODEL_FILE
         "; with --model-family flux " DEMO_FLUX_MODEL_DIR "/" DEMO_FLUX_MODEL_FILE ", its " DEMO_FLUX_CLIP_L
         ", " DEMO_FLUX_T5XXL " and " DEMO_FLUX_VAE " beside it)",
         "PATH"},
        {"dataset", 0, 0, G_OPTION_ARG_FILENAME, &dataset,
         "Dataset instead of the demo's (default: the demo folder's dataset/; dataset-style/ with --hypernetwork, dataset-joint/ with --joint)",
         "DIR"},
        CLI_PLUGIN_OPTION(plugin),
        {NULL, 0, 0, 0, NULL, NULL, NULL}};
    GOptionContext *ctx =
        g_option_context_new("- train the demo embedding (the default command), hypernetwork or both");
    g_option_context_add_main_entries(ctx, entries, NULL);
    guint64 steps = 0, seed = 0, grid_seeds = 6, save_every = 0;
    int status = cli_parse(ctx, "demo", &argc, &argv) ? SDT_EXIT_OK : SDT_EXIT_USAGE;
    bool flux = family && !strcmp(family, "flux");
    int encoder_choice = 0; /* 0: none named; else its index in demo_encoders + 1 */
    for (int i = 0; encoders && i < (int)G_N_ELEMENTS(demo_encoders); i++)
        if (!strcmp(encoders, demo_encoders[i].name)) encoder_choice = i + 1;
    if (status != SDT_EXIT_OK) {
        /* cli_parse said why */
    } else if (argc > 1) {
        char *hint = host_commands_hint(argv[1]);
        status = cli_usage_errorf("demo",
                                  "unknown command or stray argument %s, and a command comes first, before its "
                                  "options.",
                                  hint);
        g_free(hint);
    } else if (family && !flux && strcmp(family, "sd"))
        status = cli_usage_errorf("demo",
                                  "--model-family %s: the demo has the sd model (the default) and the flux model; "
                                  "choose sd or flux.",
                                  family);
    else if (flux && (hypernetwork || joint))
        status = cli_usage_error("demo", "--hypernetwork and --joint train an A1111 hypernetwork, and no host applies "
                                         "those to Flux transformers; the Flux demo trains an embedding: leave them "
                                         "out, or use --model-family sd.");
    else if (encoders && !flux)
        status = cli_usage_error("demo", "--encoders chooses the tables of the Flux demo's embedding (clip_l, t5xxl); "
                                         "add --model-family flux (the SD demo's embedding has one table).");
    else if (encoders && !encoder_choice)
        status = cli_usage_errorf("demo", "--encoders %s: choose clip_l, t5xxl or both.", encoders);
    else if (hypernetwork && joint)
        status = cli_usage_error("demo", "--hypernetwork and --joint are two demos; choose one (--joint trains the "
                                         "hypernetwork too).");
    else if (steps_text && !g_ascii_string_to_unsigned(steps_text, 10, 1, G_MAXINT64, &steps, NULL))
        status = cli_usage_error("demo", "--max-steps must be a whole number of at least 1.");
    else if (save_text && !g_ascii_string_to_unsigned(save_text, 10, 1, G_MAXINT64, &save_every, NULL))
        status = cli_usage_error("demo", "--save-every must be a whole number of at least 1.");
    else if (seed_text && !g_ascii_string_to_unsigned(seed_text, 10, 0, G_MAXUINT64, &seed, NULL))
        status = cli_usage_error("demo", "--seed must be a whole number of at least 0.");
    else if (grid_text && !g_ascii_string_to_unsigned(grid_text, 10, 0, 64, &grid_seeds, NULL))
        status = cli_usage_error("demo", "--grid-seeds must be a whole number from 0 to 64.");
    if (status == SDT_EXIT_OK) {
        demo_method method = flux           ? DEMO_FLUX_EMBEDDING
                             : joint        ? DEMO_JOINT
                             : hypernetwork ? DEMO_HYPERNETWORK
                                            : DEMO_EMBEDDING;
        const demo_kind *kind = &demo_kinds[method];
        if (!steps) steps = (guint64)kind->steps;
        if (!save_every) save_every = steps / 4 > 0 ? steps / 4 : 1;
        char *dir = demo_dir();
        char *model_path = model  ? g_strdup(model)
                           : flux ? g_build_filename(dir, DEMO_FLUX_MODEL_DIR, DEMO_FLUX_MODEL_FILE, NULL)
                                  : g_build_filename(dir, "model", DEMO_MODEL_FILE, NULL);
        char *dataset_path = dataset ? g_strdup(dataset) : g_build_filename(dir, kind->dataset_folder, NULL);
        char *model_dir = g_path_get_dirname(model_path);
        demo_options o = {.method = method,
                          .out = out    ? out
                                 : flux ? "sdtrain-demo-flux"
                                        : "sdtrain-demo",
                          .model = model_path,
                          .dataset = dataset_path,
                          .plugin = plugin,
                          .learn_rate = learn_rate ? learn_rate : kind->learn_rate,
                          .resume = resume,
                          .encoders = encoder_choice > 0 ? encoder_choice - 1 : 0,
                          .clip_l = flux ? g_build_filename(model_dir, DEMO_FLUX_CLIP_L, NULL) : NULL,
                          .t5xxl = flux ? g_build_filename(model_dir, DEMO_FLUX_T5XXL, NULL) : NULL,
                          .vae = flux ? g_build_filename(model_dir, DEMO_FLUX_VAE, NULL) : NULL,
                          .max_steps = (int64_t)steps,
                          .save_every = (int64_t)save_every,
                          .seed = seed,
                          .grid_seeds = (int)grid_seeds,
                          .validation = validation};
        status = run_demo(&o);
        g_free(o.clip_l);
        g_free(o.t5xxl);
        g_free(o.vae);
        g_free(model_dir);
        g_free(dir);
        g_free(model_path);
        g_free(dataset_path);
    }
    g_option_context_free(ctx);
    g_free(out);
    g_free(model);
    g_free(dataset);
    g_free(plugin);
    g_free(steps_text);
    g_free(seed_text);
    g_free(grid_text);
    g_free(learn_rate);
    g_free(resume);
    g_free(save_text);
    g_free(family);
    g_free(encoders);
    return status;
}
