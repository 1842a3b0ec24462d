/* demo_grid.c - see demo_grid.h. */
#include "demo_grid.h"

#include <glib.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "c_number.h"
#include "data_dirs.h"

#define MAX_SCORES 16

static char *find_eval_tool(void)
{
    char **dirs = host_data_dirs("demo-tools");
    char *found = NULL;
    for (int i = 0; dirs[i] && !found; i++) {
        char *candidate = g_build_filename(dirs[i], "sdt-demo-eval", NULL);
        if (g_file_test(candidate, G_FILE_TEST_IS_EXECUTABLE))
            found = candidate;
        else
            g_free(candidate);
    }
    g_strfreev(dirs);
    return found;
}

/* One "KIND ROW MEAN HITS N" line of sdt-demo-eval. */
typedef struct row_score {
    char kind[16], row[48];
    double mean;
    int hits, n;
} row_score;

typedef struct score_table {
    row_score rows[MAX_SCORES];
    int count;
} score_table;

static void parse_scores(const char *text, score_table *t)
{
    char **lines = g_strsplit(text, "\n", -1);
    for (int i = 0; lines[i] && t->count < MAX_SCORES; i++) {
        /* sdt-demo-eval writes its numbers in the C locale; read them so in every locale. */
        char **words = g_strsplit(lines[i], " ", -1);
        char *end = NULL;
        row_score r;
        memset(&r, 0, sizeof r);
        if (g_strv_length(words) == 5 && strlen(words[0]) < sizeof r.kind && strlen(words[1]) < sizeof r.row) {
            r.mean = g_ascii_strtod(words[2], &end);
            bool ok = end != words[2] && !*end;
            r.hits = (int)g_ascii_strtoll(words[3], &end, 10);
            ok = ok && end != words[3] && !*end;
            r.n = (int)g_ascii_strtoll(words[4], &end, 10);
            ok = ok && end != words[4] && !*end;
            if (ok) {
                snprintf(r.kind, sizeof r.kind, "%s", words[0]);
                snprintf(r.row, sizeof r.row, "%s", words[1]);
                t->rows[t->count++] = r;
            }
        }
        g_strfreev(words);
    }
    g_strfreev(lines);
}

static const row_score *find_score(const score_table *t, const char *kind, const char *row)
{
    for (int i = 0; i < t->count; i++)
        if (!strcmp(t->rows[i].kind, kind) && !strcmp(t->rows[i].row, row)) return &t->rows[i];
    return NULL;
}

/* A row's concept score factors, "; yellow Y (k of n), star shape S (k of n)", or nothing when
 * sdt-demo-eval gave none. */
static void print_factors(const score_table *t, const char *row)
{
    const row_score *yellow = find_score(t, "yellow", row), *shape = find_score(t, "shape", row);
    c_number_text y, s;
    if (yellow && shape)
        printf("; yellow %s (%d of %d), star shape %s (%d of %d)", c_number(&y, "%.2f", yellow->mean), yellow->hits,
               yellow->n, c_number(&s, "%.2f", shape->mean), shape->hits, shape->n);
    printf("\n");
}

/* The embedding grid's lines; false when a row's score is missing. */
static bool print_embedding_scores(const score_table *t, const demo_grid_request *rq)
{
    const row_score *words = find_score(t, "score", "words"), *initial = find_score(t, "score", "initial");
    const row_score *learned = find_score(t, "score", "learned");
    if (!words || !learned || (rq->initial && !initial)) return false;
    c_number_text score;
    printf("Concept score (a yellow star, 0..1; above 0.5 the picture shows it: the share of the object that is yellow "
           "times the probability its shape is the star), mean over %d seeds:\n",
           rq->seeds);
    if (initial) {
        printf("  before, the initial embedding:  %s (%d of %d pictures show it)",
               c_number(&score, "%.2f", initial->mean), initial->hits, initial->n);
        print_factors(t, "initial");
    }
    printf("  after, the learned embedding:   %s (%d of %d)", c_number(&score, "%.2f", learned->mean), learned->hits,
           learned->n);
    print_factors(t, "learned");
    printf("  the words \"yellow star\":        %s (%d of %d)", c_number(&score, "%.2f", words->mean), words->hits,
           words->n);
    print_factors(t, "words");
    printf("Grid: %s (rows: the words, %sthe learned embedding; one column per seed)\n", rq->grid_path,
           initial ? "the initial embedding, " : "");
    return true;
}

/* The hypernetwork grid's lines (strength 0, 0.5, 1); false when a row's score is missing. */
static bool print_hypernetwork_scores(const score_table *t, const demo_grid_request *rq)
{
    static const char *const rows[3] = {"strength-0", "strength-0.5", "strength-1"};
    static const char *const names[3] = {"strength 0 (the base model)", "strength 0.5", "strength 1"};
    bool joint = rq->learned != NULL;
    for (int r = 0; r < 3; r++)
        if (!find_score(t, "style", rows[r]) || (joint && !find_score(t, "star", rows[r]))) return false;
    c_number_text score, star;
    printf("Style score (outlined shapes, 0..1; above 0.5 the picture is an outline)%s, mean over %d seeds:\n",
           joint ? " and concept score (a yellow star, filled or outlined)" : "", rq->seeds);
    for (int r = 0; r < 3; r++) {
        const row_score *s = find_score(t, "style", rows[r]), *c = find_score(t, "star", rows[r]);
        printf("  %-28s style %s (%d of %d pictures are outlines)", names[r], c_number(&score, "%.2f", s->mean),
               s->hits, s->n);
        if (joint) printf(", yellow star %s (%d of %d)", c_number(&star, "%.2f", c->mean), c->hits, c->n);
        printf("\n");
    }
    printf("Grid: %s (rows: the hypernetwork at strength 0, 0.5 and 1%s; one column per seed, the same prompts and "
           "seeds in every row; guidance scale %s)\n",
           rq->grid_path, joint ? ", the learned embedding in every prompt" : "", c_number(&score, "%g", rq->cfg));
    return true;
}

bool demo_grid_run(const demo_grid_request *rq)
{
    char *tool = find_eval_tool();
    if (!tool) {
        printf("The comparison grid was not drawn: sdt-demo-eval is not installed beside sdt-host (demo-tools/).\n");
        return false;
    }
    char seeds_text[16], seed_text[32], steps_text[16], t5_text[16];
    c_number_text cfg_text;
    snprintf(seeds_text, sizeof seeds_text, "%d", rq->seeds);
    snprintf(seed_text, sizeof seed_text, "%llu", (unsigned long long)rq->seed);
    snprintf(steps_text, sizeof steps_text, "%d", rq->steps);
    snprintf(t5_text, sizeof t5_text, "%d", rq->t5_len);
    GPtrArray *argv = g_ptr_array_new();
    const char *fixed[] = {tool,
                           "--model",
                           rq->model,
                           "--grid",
                           rq->grid_path,
                           "--seeds",
                           seeds_text,
                           "--seed",
                           seed_text,
                           "--cfg",
                           c_number(&cfg_text, "%g", rq->cfg)};
    for (size_t i = 0; i < G_N_ELEMENTS(fixed); i++) g_ptr_array_add(argv, (gpointer)fixed[i]);
    const char *optional[][2] = {{"--initial", rq->initial},
                                 {"--learned", rq->learned},
                                 {"--hypernetwork", rq->hypernetwork},
                                 {"--strengths", rq->hypernetwork ? "0,0.5,1" : NULL},
                                 {"--steps", rq->steps > 0 ? steps_text : NULL},
                                 {"--clip-l", rq->clip_l},
                                 {"--t5xxl", rq->t5xxl},
                                 {"--vae", rq->vae},
                                 {"--t5-max-length", rq->t5_len > 0 ? t5_text : NULL}};
    for (size_t i = 0; i < G_N_ELEMENTS(optional); i++)
        if (optional[i][1])
            g_ptr_array_add(argv, (gpointer)optional[i][0]), g_ptr_array_add(argv, (gpointer)optional[i][1]);
    g_ptr_array_add(argv, NULL);
    if (rq->hypernetwork)
        printf("Drawing the comparison grid (%d seeds: the hypernetwork at strength 0, 0.5 and 1%s)...\n", rq->seeds,
               rq->learned ? ", with the learned embedding" : "");
    else
        printf("Drawing the comparison grid (%d seeds: the words, the initial and the learned embedding)...\n",
               rq->seeds);
    fflush(stdout);
    char *out = NULL, *err = NULL;
    int wait_status = 0;
    GError *e = NULL;
    bool ok =
        g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &wait_status, &e) &&
        WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
    score_table table;
    memset(&table, 0, sizeof table);
    if (ok) parse_scores(out, &table);
    ok = ok && (rq->hypernetwork ? print_hypernetwork_scores(&table, rq) : print_embedding_scores(&table, rq));
    if (!ok)
        printf("The comparison grid was not drawn: %s\n", e               ? e->message
                                                          : err && err[0] ? g_strstrip(err)
                                                                          : "sdt-demo-eval gave no scores");
    if (e) g_error_free(e);
    g_ptr_array_free(argv, TRUE);
    g_free(out);
    g_free(err);
    g_free(tool);
    return ok;
}
