/* test_dist_plan.c - how `sdt-host train` reads a data-parallel job (issue 33): torchrun's variables
 * (good values and each bad one refused with a sentence naming it), the --gpus list, the choice
 * between one device, the launcher, a rank and in-process, and the panel's own options (--gpus,
 * --device cuda:N) kept out of the job's fingerprint while every plugin option is in it. */
#include <string.h>

#include "dist_mode.h"
#include "dist_plan.h"
#include "panel_options.h"
#include "sdt_test.h"

/* An environment of NAME=VALUE strings (NULL-terminated), as g_get_environ() gives one. */
static char **env_of(const char *const *vars)
{
    return g_strdupv((char **)vars);
}

/* The variables of a good 4-rank job, rank 2 on its machine's second GPU, with one changed
 * (NAME=VALUE) or removed (NAME alone). */
static char **job_env(const char *change)
{
    char **env = env_of((const char *const[]){"WORLD_SIZE=4", "RANK=2", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2",
                                              "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500", "PATH=/usr/bin", NULL});
    if (!change) return env;
    const char *eq = strchr(change, '=');
    char *name = eq ? g_strndup(change, (gsize)(eq - change)) : g_strdup(change);
    env = eq ? g_environ_setenv(env, name, eq + 1, TRUE) : g_environ_unsetenv(env, name);
    g_free(name);
    return env;
}

static void check_good_job(void)
{
    char **env = job_env(NULL);
    host_dist_plan plan;
    gboolean is_rank = FALSE;
    char *error = NULL;
    CHECK(dist_plan_from_environment(env, &plan, &is_rank, &error), "a good job refused: %s", error);
    CHECK(is_rank, "WORLD_SIZE=4 is a rank");
    CHECK(plan.world_size == 4 && plan.rank == 2 && plan.local_rank == 1 && plan.local_world_size == 2,
          "the job read as world %d rank %d local %d/%d", plan.world_size, plan.rank, plan.local_rank,
          plan.local_world_size);
    CHECK(plan.master_addr && strcmp(plan.master_addr, "127.0.0.1") == 0 && plan.master_port == 29500,
          "rank 0's address read wrong");
    CHECK(plan.device_count == 1 && plan.devices[0] == 1, "the device is LOCAL_RANK");
    CHECK(plan.timeout_seconds == DIST_DEFAULT_TIMEOUT_SECONDS, "the default timeout");
    dist_plan_clear(&plan);
    g_strfreev(env);
    g_clear_pointer(&error, g_free);

    /* No job: WORLD_SIZE unset, empty or 1 is one device, whatever else is there. */
    const char *const single[] = {"WORLD_SIZE", "WORLD_SIZE=", "WORLD_SIZE=1"};
    for (size_t i = 0; i < G_N_ELEMENTS(single); i++) {
        env = job_env(single[i]);
        env = g_environ_unsetenv(env, "RANK");
        is_rank = TRUE;
        CHECK(dist_plan_from_environment(env, &plan, &is_rank, &error) && !is_rank && plan.world_size == 1,
              "%s is one device", single[i]);
        dist_plan_clear(&plan);
        g_strfreev(env);
    }
    /* torchrun's agent serving MASTER_PORT: the ranks meet on the next port. */
    env = job_env("TORCHELASTIC_USE_AGENT_STORE=True");
    CHECK(dist_plan_from_environment(env, &plan, &is_rank, &error) && plan.master_port == 29501,
          "with torchrun's agent store the ranks meet on MASTER_PORT + 1, not %u", (unsigned)plan.master_port);
    dist_plan_clear(&plan);
    env = g_environ_setenv(env, "MASTER_PORT", "65535", TRUE);
    CHECK(!dist_plan_from_environment(env, &plan, &is_rank, &error) && error &&
              strstr(error, "MASTER_PORT=65535 is torchrun's own"),
          "MASTER_PORT 65535 with torchrun's agent store: %s", error ? error : "(accepted)");
    g_clear_pointer(&error, g_free);
    dist_plan_clear(&plan);
    g_strfreev(env);
    /* LOCAL_WORLD_SIZE is optional; a host name resolves. */
    env = job_env("LOCAL_WORLD_SIZE");
    env = g_environ_setenv(env, "MASTER_ADDR", "localhost", TRUE);
    CHECK(dist_plan_from_environment(env, &plan, &is_rank, &error) && is_rank && plan.local_world_size == 0,
          "without LOCAL_WORLD_SIZE, with MASTER_ADDR=localhost: %s", error ? error : "");
    dist_plan_clear(&plan);
    g_strfreev(env);
}

/* Each bad variable gets a sentence naming it (want) and saying what to set. */
static void check_bad_jobs(void)
{
    static const struct {
        const char *change;
        const char *want;
    } cases[] = {
        {"WORLD_SIZE=four", "WORLD_SIZE='four' is not a whole number from 1 to 65536"},
        {"WORLD_SIZE=0", "WORLD_SIZE='0' is not a whole number"},
        {"WORLD_SIZE=70000", "WORLD_SIZE='70000'"},
        {"RANK", "RANK is not set, but WORLD_SIZE says"},
        {"RANK=4", "RANK='4' is not a whole number from 0 to 3"},
        {"RANK=-1", "RANK='-1'"},
        {"RANK=2x", "RANK='2x'"},
        {"LOCAL_RANK", "LOCAL_RANK is not set"},
        {"LOCAL_RANK=2", "LOCAL_RANK='2' is not a whole number from 0 to 1"},
        {"LOCAL_WORLD_SIZE=5", "LOCAL_WORLD_SIZE='5' is not a whole number from 1 to 4"},
        {"MASTER_ADDR", "MASTER_ADDR is not set"},
        {"MASTER_ADDR=", "MASTER_ADDR is not set"},
        {"MASTER_ADDR=no-such-host.invalid", "MASTER_ADDR='no-such-host.invalid' does not resolve"},
        {"MASTER_PORT", "MASTER_PORT is not set"},
        {"MASTER_PORT=0", "MASTER_PORT='0' is not a whole number from 1 to 65535"},
        {"MASTER_PORT=65536", "MASTER_PORT='65536'"},
        {"MASTER_PORT=http", "MASTER_PORT='http'"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        char **env = job_env(cases[i].change);
        host_dist_plan plan;
        gboolean is_rank = FALSE;
        char *error = NULL;
        gboolean ok = dist_plan_from_environment(env, &plan, &is_rank, &error);
        CHECK(!ok, "%s accepted", cases[i].change);
        CHECK(error && strstr(error, cases[i].want), "%s: the sentence '%s' lacks '%s'", cases[i].change,
              error ? error : "(none)", cases[i].want);
        dist_plan_clear(&plan);
        g_strfreev(env);
        g_free(error);
    }
}

static void check_gpu_lists(void)
{
    int32_t *gpus = NULL, n = 0;
    char *error = NULL;
    CHECK(dist_parse_gpu_list("0,1,2,3", "--gpus", &gpus, &n, &error) && n == 4 && gpus[3] == 3, "0,1,2,3");
    g_free(gpus);
    CHECK(dist_parse_gpu_list(" 4, 6 ", "--gpus", &gpus, &n, &error) && n == 2 && gpus[0] == 4 && gpus[1] == 6,
          "spaces around the numbers");
    g_free(gpus);
    static const struct {
        const char *text;
        const char *want;
    } bad[] = {{"", "--gpus is empty"},
               {"0,,1", "'' is not a GPU number"},
               {"0,1,0", "names GPU 0 twice"},
               {"gpu0", "'gpu0' is not a GPU number (0 to 1023)"},
               {"1024", "'1024' is not a GPU number"},
               {"-1", "'-1' is not a GPU number"}};
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        CHECK(!dist_parse_gpu_list(bad[i].text, "--gpus", &gpus, &n, &error) && gpus == NULL, "'%s' accepted",
              bad[i].text);
        CHECK(error && strstr(error, bad[i].want), "'%s': '%s' lacks '%s'", bad[i].text, error ? error : "",
              bad[i].want);
        g_clear_pointer(&error, g_free);
    }
}

/* dist_choose's answer for host options and an environment: the mode, or the sentence (want). */
static void check_choice(const panel_host_options *host, uint32_t device, char **env, int want_mode,
                         const char *want_error, gboolean want_usage)
{
    host_dist_plan plan;
    memset(&plan, 0, sizeof plan);
    dist_mode mode = DIST_ONE_DEVICE;
    char *error = NULL;
    gboolean usage = FALSE;
    gboolean ok = dist_choose(host, device, env, &plan, &mode, &error, &usage);
    if (want_error) {
        CHECK(!ok && error && strstr(error, want_error) && usage == want_usage, "'%s' expected, got '%s'", want_error,
              error ? error : "(accepted)");
    } else {
        CHECK(ok && (int)mode == want_mode, "mode %d expected, got %d (%s)", want_mode, (int)mode, error ? error : "");
    }
    dist_plan_clear(&plan);
    g_free(error);
}

static void check_modes(void)
{
    char **none = env_of((const char *const[]){"PATH=/usr/bin", NULL});
    char **rank = job_env(NULL);
    panel_host_options host = {0};
    check_choice(&host, SDT_DEVICE_CHOICE_AUTO, none, DIST_ONE_DEVICE, NULL, FALSE);
    check_choice(&host, SDT_DEVICE_CHOICE_AUTO, rank, DIST_RANK, NULL, FALSE);
    check_choice(&host, SDT_DEVICE_CHOICE_CPU, rank, 0, "runs on GPUs (NCCL), but --device cpu", TRUE);
    host.gpus = "0,1";
    check_choice(&host, SDT_DEVICE_CHOICE_AUTO, none, DIST_LAUNCHER, NULL, FALSE);
    check_choice(&host, SDT_DEVICE_CHOICE_AUTO, rank, 0, "leave out --gpus under torchrun", TRUE);
    check_choice(&host, SDT_DEVICE_CHOICE_CPU, none, 0, "--gpus trains on GPUs, but --device cpu", TRUE);
    host.in_process = true;
    check_choice(&host, SDT_DEVICE_CHOICE_AUTO, none, DIST_IN_PROCESS, NULL, FALSE);
    host.gpus = "7";
    host.in_process = false;
    check_choice(&host, SDT_DEVICE_CHOICE_AUTO, none, DIST_IN_PROCESS, NULL, FALSE); /* one GPU: nothing to launch */
    host.gpus = "0,x";
    check_choice(&host, SDT_DEVICE_CHOICE_AUTO, none, 0, "'x' is not a GPU number", TRUE);
    host.gpus = NULL;
    host.in_process = true;
    check_choice(&host, SDT_DEVICE_CHOICE_AUTO, none, 0, "--in-process runs the GPUs that --gpus lists", TRUE);
    host.in_process = false;
    host.cuda_device_given = true;
    host.cuda_device = 3;
    check_choice(&host, SDT_DEVICE_CHOICE_CUDA, none, DIST_IN_PROCESS, NULL, FALSE);
    host.gpus = "0,1";
    check_choice(&host, SDT_DEVICE_CHOICE_CUDA, none, 0, "leave out --device cuda:N with --gpus", TRUE);

    /* A rank's device: LOCAL_RANK, or --device cuda:N. */
    host.gpus = NULL;
    host_dist_plan plan;
    dist_mode mode;
    char *error = NULL;
    gboolean usage;
    CHECK(dist_choose(&host, SDT_DEVICE_CHOICE_CUDA, rank, &plan, &mode, &error, &usage) && plan.devices[0] == 3,
          "--device cuda:3 picks a rank's GPU");
    dist_plan_clear(&plan);
    host.comm_timeout = 7;
    host.cuda_device_given = false;
    CHECK(dist_choose(&host, SDT_DEVICE_CHOICE_AUTO, rank, &plan, &mode, &error, &usage) && plan.devices[0] == 1 &&
              plan.timeout_seconds == 7,
          "LOCAL_RANK is a rank's GPU; --comm-timeout its timeout");
    dist_plan_clear(&plan);
    g_strfreev(none);
    g_strfreev(rank);
}

static sdt_status stub_options(sdt_train_options *o)
{
    o->batch_size = 1;
    o->max_steps = 100;
    return SDT_STATUS_OK;
}
static sdt_status stub_embedding(sdt_embedding_part *p)
{
    p->learn_rate = "0.005";
    return SDT_STATUS_OK;
}
static sdt_status stub_hypernetwork(sdt_hypernetwork_part *p)
{
    p->learn_rate = "0.00001";
    return SDT_STATUS_OK;
}

/* A panel file's config; its fingerprint in *fingerprint. FALSE with the sentence in *error. */
static gboolean config_of(const char *text, panel_config *config, uint64_t *fingerprint, char **error)
{
    panel_values *v = panel_values_new();
    panel_defaults d = {stub_options, stub_embedding, stub_hypernetwork};
    gboolean usage = FALSE;
    gboolean ok = panel_load_data(v, "test.ini", text, strlen(text), error) &&
                  panel_build_config(v, panel_method_chosen(v), &d, config, error, &usage);
    if (ok) *fingerprint = panel_config_fingerprint(config);
    if (ok && config->host.gpus) config->host.gpus = "(set)"; /* v's strings go with it */
    panel_values_free(v);
    return ok;
}

static void check_panel_options(void)
{
    panel_config *a = g_new0(panel_config, 1), *b = g_new0(panel_config, 1);
    uint64_t fa = 0, fb = 0;
    char *error = NULL;
    const char *base = "[train]\nembedding=e.safetensors\nmax-steps=5\n";
    CHECK(config_of("[train]\nembedding=e.safetensors\nmax-steps=5\ndevice=cuda\n", a, &fa, &error),
          "the base panel: %s", error);
    char *more = g_strconcat(base, "gpus=0,1\nin-process=true\ncomm-timeout=30\ndevice=cuda:3\n", NULL);
    CHECK(config_of(more, b, &fb, &error), "the panel with sdt-host's own options: %s", error ? error : "");
    CHECK(b->host.gpus && b->host.in_process && b->host.comm_timeout == 30, "gpus, in-process and comm-timeout read");
    CHECK(b->host.cuda_device_given && b->host.cuda_device == 3 && b->options.device == SDT_DEVICE_CHOICE_CUDA,
          "device=cuda:3 is the device cuda and GPU 3");
    CHECK(fa == fb, "sdt-host's own options changed the job's fingerprint");
    g_free(more);
    CHECK(config_of("[train]\nembedding=e.safetensors\nmax-steps=6\n", b, &fb, &error) && fa != fb,
          "another max-steps kept the fingerprint");
    uint64_t f1 = 0, f2 = 0;
    CHECK(config_of("[train]\nembedding=e.safetensors\ntag-dropout=0.1\n", b, &f1, &error) &&
              config_of("[train]\nembedding=e.safetensors\ntag-dropout=0.10000001\n", b, &f2, &error) && f1 != f2,
          "a number differing in its 8th digit kept the fingerprint");
    CHECK(config_of("[train]\nembedding=e.safetensors\nmax-steps=5\ndevice=cuda\n", b, &fb, &error) &&
              !b->host.cuda_device_given && b->options.device == SDT_DEVICE_CHOICE_CUDA,
          "device=cuda names no GPU");
    CHECK(!config_of("[train]\ndevice=cuda:x\n", b, &fb, &error) && error && strstr(error, "'cuda:x' is not cuda:N"),
          "device=cuda:x refused: %s", error ? error : "(accepted)");
    g_free(error);
    g_free(a);
    g_free(b);
}

int main(void)
{
    check_good_job();
    check_bad_jobs();
    check_gpu_lists();
    check_modes();
    check_panel_options();
    return sdt_test_finish("host_dist_plan");
}
