/* cmd_demo.c - `sdt-host [demo]`: the README's first command. Creates an embedding and trains
 * it on the demo model (models/demo_model/: a small SD 1.x trained on the demo world) and the
 * dataset of the world's held-out concept (a yellow star), says where the outputs are, then
 * draws the comparison grid and prints the concept score before and after (demo_grid.h).
 *
 * The demo assets live in a folder found as $SDTRAIN_DEMO_DIR, else <sdt-host's folder>/demo,
 * else <sdt-host's folder>/../share/sdtrain/demo, with model/sdtrain-demo.safetensors (and its
 * tokenizer/) and dataset/ inside; --model and --dataset replace either. */
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
/* The base model's caption grammar ("a small red circle on a navy background, top left"),
 * with the embedding where colour and shape go; the captions hold "navy background, top left". */
#define DEMO_TEMPLATE "a [name] on a [filewords]\n"
#define DEMO_INIT_TEXT "object" /* the base captions' word for an unnamed object */
#define DEMO_MODEL_FILE "sdtrain-demo.safetensors"
#define DEMO_STEPS 200
#define DEMO_EMBEDDING_LIMIT ((gsize)64 << 20) /* the demo's own embedding: a few KB */
#define DEMO_LEARN_RATE "0.02"

static char *demo_dir(void)
{
    const char *env = g_getenv("SDTRAIN_DEMO_DIR");
    return env && env[0] ? g_strdup(env) : host_data_dir("demo");
}

/* The demo job's settings: small and quick on 2 CPU cores. */
typedef struct demo_options {
    const char *out, *model, *dataset, *plugin, *learn_rate;
    int64_t max_steps;
    uint64_t seed;
    int grid_seeds; /* 0: no grid */
} demo_options;

static void demo_config(sdt_ti_config *c, const char *embedding, const char *template_file, const char *log_dir,
                        const demo_options *o)
{
    int64_t max_steps = o->max_steps;
    uint64_t seed = o->seed;
    c->embedding_path = embedding;
    c->model_path = o->model;
    c->dataset_dir = o->dataset;
    if (o->learn_rate) c->learn_rate = o->learn_rate;
    c->template_file = template_file;
    c->log_dir = log_dir;
    c->max_steps = max_steps;
    c->seed = seed;
    c->width = 64;
    c->height = 64;
    c->save_every = max_steps / 4 > 0 ? max_steps / 4 : 1;
    c->preview_every = c->save_every;
    c->write_csv_every = 1;
    c->preview_steps = 20;
    c->preview_cfg_scale = 4.0;
    c->preview_seed = (int64_t)(seed & INT64_MAX);
    c->device = SDT_DEVICE_CHOICE_CPU;
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

static int run_demo(const demo_options *o)
{
    const char *out = o->out, *model = o->model, *dataset = o->dataset;
    if (!g_file_test(model, G_FILE_TEST_EXISTS) || !g_file_test(dataset, G_FILE_TEST_IS_DIR)) {
        return cli_errorf("The demo model (%s) or dataset (%s) is missing; set SDTRAIN_DEMO_DIR or pass --model and "
                          "--dataset.", model, dataset);
    }
    char *emb_dir = g_build_filename(out, "embeddings", NULL);
    char *template_file = g_build_filename(out, "demo_template.txt", NULL);
    char *log_dir = g_build_filename(out, "textual_inversion", NULL);
    int status = SDT_EXIT_OK;
    GError *gerr = NULL;
    if (g_mkdir_with_parents(emb_dir, 0777) != 0 || !g_file_set_contents(template_file, DEMO_TEMPLATE, -1, &gerr)) {
        status = cli_errorf("Could not write the demo files in %s; choose a writable --out folder.", out);
        g_clear_error(&gerr);
    }
    cli_trainer t;
    char *initial = g_build_filename(out, "embeddings", DEMO_NAME "-initial.safetensors", NULL);
    char *grid = g_build_filename(out, "demo_grid.png", NULL);
    if (status == SDT_EXIT_OK && (status = cli_trainer_open(&t, o->plugin)) == SDT_EXIT_OK) {
        sdt_embedding_spec spec;
        memset(&spec, 0, sizeof spec);
        spec.struct_size = sizeof spec;
        spec.vectors_per_token = 2;
        spec.name = DEMO_NAME;
        spec.init_text = DEMO_INIT_TEXT;
        spec.model_path = model;
        spec.output_dir = emb_dir;
        spec.overwrite = true;
        char embedding[4096] = "";
        sdt_ti_config config;
        memset(&config, 0, sizeof config);
        config.struct_size = sizeof config;
        if (t.factory->create_embedding(t.trainer, &spec, embedding, sizeof embedding, NULL) != SDT_STATUS_OK ||
            t.factory->config_defaults(&config) != SDT_STATUS_OK) {
            status = cli_trainer_fail(&t);
        } else if (!keep_initial(embedding, initial)) {
            status = cli_errorf("Could not copy %s to %s; choose a writable --out folder.", embedding, initial);
        } else {
            demo_config(&config, embedding, template_file, log_dir, o);
            train_target target = { .ti = t.factory, .ti_trainer = t.trainer, .ti_config = &config };
            status = train_session_run(&target, NULL);
            if (status != SDT_EXIT_ERROR)
                printf("Demo outputs: the embedding %s, logs, previews and copies under %s\n", embedding, log_dir);
        }
        cli_trainer_close(&t);
        if (status == SDT_EXIT_OK && o->grid_seeds > 0)
            demo_grid_run(model, initial, embedding, grid, o->grid_seeds, o->seed);
    }
    g_free(initial);
    g_free(grid);
    g_free(emb_dir);
    g_free(template_file);
    g_free(log_dir);
    return status;
}

int cmd_demo(int argc, char **argv)
{
    char *out = NULL, *model = NULL, *dataset = NULL, *plugin = NULL, *steps_text = NULL, *seed_text = NULL;
    char *grid_text = NULL, *learn_rate = NULL;
    GOptionEntry entries[] = {
        { "out", 0, 0, G_OPTION_ARG_FILENAME, &out, "Output folder (default: sdtrain-demo)", "DIR" },
        { "max-steps", 0, 0, G_OPTION_ARG_STRING, &steps_text, "Training steps (default " G_STRINGIFY(DEMO_STEPS) ")", "N" },
        { "learn-rate", 0, 0, G_OPTION_ARG_STRING, &learn_rate, "Learning-rate schedule (default " DEMO_LEARN_RATE ")", "RATE" },
        { "grid-seeds", 0, 0, G_OPTION_ARG_STRING, &grid_text, "Columns of the before/after grid, 0 = no grid (default 6)", "N" },
        { "seed", 0, 0, G_OPTION_ARG_STRING, &seed_text, "Seed (default 0)", "S" },
        { "model", 0, 0, G_OPTION_ARG_FILENAME, &model, "Model instead of the demo model (default: the demo folder's model/" DEMO_MODEL_FILE ")", "PATH" },
        { "dataset", 0, 0, G_OPTION_ARG_FILENAME, &dataset, "Dataset instead of the demo dataset (default: the demo folder's dataset/)", "DIR" },
        CLI_PLUGIN_OPTION(plugin),
        { NULL, 0, 0, 0, NULL, NULL, NULL }
    };
    GOptionContext *ctx = g_option_context_new("- train the demo embedding (the default command)");
    g_option_context_add_main_entries(ctx, entries, NULL);
    guint64 steps = DEMO_STEPS, seed = 0, grid_seeds = 6;
    int status = SDT_EXIT_OK;
    if (!cli_parse(ctx, "demo", &argc, &argv)) status = SDT_EXIT_USAGE;
    else if (argc > 1) {
        char *hint = host_commands_hint(argv[1]);
        status = cli_usage_errorf("demo", "unknown command or stray argument %s, and a command comes first, before its "
                                  "options.", hint);
        g_free(hint);
    }
    else if (steps_text && !g_ascii_string_to_unsigned(steps_text, 10, 1, G_MAXINT64, &steps, NULL))
        status = cli_usage_error("demo", "--max-steps must be a whole number of at least 1.");
    else if (seed_text && !g_ascii_string_to_unsigned(seed_text, 10, 0, G_MAXUINT64, &seed, NULL))
        status = cli_usage_error("demo", "--seed must be a whole number of at least 0.");
    else if (grid_text && !g_ascii_string_to_unsigned(grid_text, 10, 0, 64, &grid_seeds, NULL))
        status = cli_usage_error("demo", "--grid-seeds must be a whole number from 0 to 64.");
    if (status == SDT_EXIT_OK) {
        char *dir = demo_dir();
        char *model_path = model ? g_strdup(model) : g_build_filename(dir, "model", DEMO_MODEL_FILE, NULL);
        char *dataset_path = dataset ? g_strdup(dataset) : g_build_filename(dir, "dataset", NULL);
        demo_options o = {out ? out : "sdtrain-demo", model_path, dataset_path, plugin,
                          learn_rate ? learn_rate : DEMO_LEARN_RATE, (int64_t)steps, seed, (int)grid_seeds};
        status = run_demo(&o);
        g_free(dir);
        g_free(model_path);
        g_free(dataset_path);
    }
    g_option_context_free(ctx);
    g_free(out); g_free(model); g_free(dataset); g_free(plugin); g_free(steps_text); g_free(seed_text);
    g_free(grid_text); g_free(learn_rate);
    return status;
}
