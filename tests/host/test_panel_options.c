/* test_panel_options.c - the web panel's Train form and `sdt-host train` take the same options, from
 * one table (host-sim/panel_options.c). The panel offers option i to a method when
 * panel_option_describe says so (what /api/setup sends and panel.js shows or hides); the CLI takes it
 * when panel_build_config accepts it for that method. For every option and both methods the two must
 * agree; every --option of train's command line is a table option or the --no- form of one; every
 * name the page's layout (serve_option_groups.c: its groups and picked paths) names is a table
 * option. An option added to one list and not the other fails here. */
#include <stdio.h>
#include <string.h>

#include "panel_options.h"
#include "serve_option_groups.h"

static int failures;

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            printf("FAIL: " __VA_ARGS__);                                                                              \
            printf("\n");                                                                                              \
            failures++;                                                                                                \
        }                                                                                                              \
    } while (0)

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

/* A value the option's kind takes. */
static const char *sample(const panel_option_info *info)
{
    if (strcmp(info->kind, "whole") == 0) return "1";
    if (strcmp(info->kind, "number") == 0) return "0.5";
    if (strcmp(info->kind, "flag") == 0) return "true";
    if (strcmp(info->kind, "choice") == 0) return info->choices[0];
    if (info->choices) return info->choices[0]; /* a comma list of names (--encoders) */
    return "x";
}

/* Whether a run of method takes name=value from a panel file, as `sdt-host train --config` reads it. */
static gboolean cli_takes(const char *name, const char *value, panel_method method)
{
    panel_values *v = panel_values_new();
    panel_defaults defaults = {stub_options, stub_embedding, stub_hypernetwork};
    panel_config *config = g_new0(panel_config, 1);
    char *text = g_strdup_printf("[train]\n%s=%s\n", name, value), *error = NULL;
    gboolean usage = FALSE;
    gboolean taken = panel_load_data(v, "test.ini", text, strlen(text), &error) &&
                     panel_build_config(v, method, &defaults, config, &error, &usage);
    g_free(error);
    g_free(text);
    g_free(config);
    panel_values_free(v);
    return taken;
}

/* A panel file's text built into config for an embedding run; FALSE with the sentence in *error. */
static gboolean build(const char *text, panel_values *v, panel_config *config, char **error)
{
    panel_defaults defaults = {stub_options, stub_embedding, stub_hypernetwork};
    gboolean usage = FALSE;
    return panel_load_data(v, "test.ini", text, strlen(text), error) &&
           panel_build_config(v, PANEL_EMBEDDING, &defaults, config, error, &usage);
}

/* The SD3.5 / Flux.1 options (ABI 1.9) reach the structs the plugin gets: the encoder files and the flow
 * objective in sdt_train_options, --encoders as SDT_ENCODER_* bits and the per-table rates in the embedding
 * part; a name --encoders does not know is refused with a sentence naming the choices. */
static void check_transformer_options(void)
{
    panel_values *v = panel_values_new();
    panel_config *c = g_new0(panel_config, 1);
    char *error = NULL;
    gboolean ok = build("[train]\nclip-l=m/clip_l.safetensors\nclip-g=m/clip_g.safetensors\n"
                        "t5xxl=m/t5xxl_fp16.safetensors\nvae=m/ae.safetensors\ntimestep-sampling=mode\n"
                        "flow-weighting=cosmap\nlogit-mean=0.25\nlogit-std=1.5\nmode-scale=1.1\nflow-shift=3\n"
                        "guidance=4.5\nt5-max-length=128\nencoders=clip_l, T5XXL\nlr-clip-l=0.01\n"
                        "lr-clip-g=0.02:100, 0.002\nlr-t5xxl=0.0005\n",
                        v, c, &error);
    CHECK(ok, "the SD3.5/Flux options: %s", error ? error : "");
    if (ok) {
        const sdt_train_options *o = &c->options;
        CHECK(!g_strcmp0(o->clip_l_path, "m/clip_l.safetensors") &&
                  !g_strcmp0(o->clip_g_path, "m/clip_g.safetensors") &&
                  !g_strcmp0(o->t5xxl_path, "m/t5xxl_fp16.safetensors") && !g_strcmp0(o->vae_path, "m/ae.safetensors"),
              "the encoder files did not reach sdt_train_options");
        CHECK(!g_strcmp0(o->timestep_sampling, "mode") && !g_strcmp0(o->flow_weighting, "cosmap") &&
                  o->logit_mean == 0.25 && o->logit_std == 1.5 && o->mode_scale == 1.1 && o->flow_shift == 3 &&
                  o->guidance == 4.5 && o->t5_max_length == 128,
              "the flow options did not reach sdt_train_options");
        CHECK(c->embedding.encoders == (SDT_ENCODER_CLIP_L | SDT_ENCODER_T5XXL), "--encoders gave bits %#x",
              c->embedding.encoders);
        CHECK(!g_strcmp0(c->embedding.learn_rate_clip_l, "0.01") &&
                  !g_strcmp0(c->embedding.learn_rate_clip_g, "0.02:100, 0.002") &&
                  !g_strcmp0(c->embedding.learn_rate_t5xxl, "0.0005"),
              "the per-table rates did not reach the embedding part");
    }
    g_clear_pointer(&error, g_free);
    panel_values_free(v);
    v = panel_values_new();
    memset(c, 0, sizeof *c);
    CHECK(build("[train]\nencoders=all\n", v, c, &error) && c->embedding.encoders == 0, "encoders=all: %s",
          error ? error : "not 0");
    g_clear_pointer(&error, g_free);
    panel_values_free(v);
    v = panel_values_new();
    memset(c, 0, sizeof *c);
    CHECK(!build("[train]\nencoders=clip_l,t5\n", v, c, &error) && error && strstr(error, "'t5'") &&
              strstr(error, "clip_l,clip_g,t5xxl"),
          "an unknown encoder name: %s", error ? error : "accepted");
    g_clear_pointer(&error, g_free);
    panel_values_free(v);
    g_free(c);
}

static gboolean is_option(const char *name)
{
    panel_option_info info;
    for (size_t i = 0; i < panel_option_count(); i++) {
        panel_option_describe(i, &info);
        if (strcmp(info.name, name) == 0) return TRUE;
    }
    return FALSE;
}

int main(void)
{
    size_t n = panel_option_count();
    CHECK(n >= 80, "the table has only %zu options", n);
    for (size_t i = 0; i < n; i++) {
        panel_option_info info;
        panel_option_describe(i, &info);
        gboolean embedding = cli_takes(info.name, sample(&info), PANEL_EMBEDDING);
        gboolean hypernetwork = cli_takes(info.name, sample(&info), PANEL_HYPERNETWORK);
        CHECK(embedding == info.embedding, "%s: the CLI's embedding run %s it, the panel %s it to embeddings",
              info.name, embedding ? "takes" : "refuses", info.embedding ? "offers" : "does not offer");
        CHECK(hypernetwork == info.hypernetwork,
              "%s: the CLI's hypernetwork run %s it, the panel %s it to hypernetworks", info.name,
              hypernetwork ? "takes" : "refuses", info.hypernetwork ? "offers" : "does not offer");
        CHECK(embedding || hypernetwork, "%s: neither method takes it", info.name);
    }
    /* Every option of the command line is one of the panel's (or a --no- form it sets as name=false). */
    panel_values *v = panel_values_new();
    size_t cli_options = 0;
    for (const GOptionEntry *e = panel_option_entries(v); e->long_name; e++, cli_options++) {
        const char *name = e->long_name;
        if (strcmp(name, "config") == 0) continue; /* the panel file itself: the panel posts one */
        if (strncmp(name, "no-", 3) == 0 && !is_option(name)) name += 3;
        CHECK(is_option(name), "train --%s is not an option of the panel", e->long_name);
    }
    CHECK(cli_options > n, "train has %zu options, the table %zu", cli_options, n);
    panel_values_free(v);
    /* The layout names only table options (a stale name would lay out nothing). */
    size_t placed = 0;
    for (const char *name; (name = serve_option_group_member(placed)); placed++)
        CHECK(is_option(name), "the panel's layout names '%s', which is not an option", name);
    CHECK(placed >= 40, "the layout names only %zu options", placed);
    check_transformer_options();
    printf("%zu options, %zu command-line options, %zu laid out; %d failure(s)\n", n, cli_options, placed, failures);
    return failures ? 1 : 0;
}
