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
    printf("%zu options, %zu command-line options, %zu laid out; %d failure(s)\n", n, cli_options, placed, failures);
    return failures ? 1 : 0;
}
