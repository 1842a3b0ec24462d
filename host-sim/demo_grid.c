/* demo_grid.c - see demo_grid.h. */
#include "demo_grid.h"

#include <glib.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "c_number.h"
#include "data_dirs.h"

static char *find_eval_tool(void)
{
    char **dirs = host_data_dirs("demo-tools");
    char *found = NULL;
    for (int i = 0; dirs[i] && !found; i++) {
        char *candidate = g_build_filename(dirs[i], "sdt-demo-eval", NULL);
        if (g_file_test(candidate, G_FILE_TEST_IS_EXECUTABLE)) found = candidate;
        else g_free(candidate);
    }
    g_strfreev(dirs);
    return found;
}

typedef struct row_score {
    double mean;
    int hits, n;
    bool seen;
} row_score;

/* "score ROW MEAN HITS N" lines into words/initial/learned. */
static void parse_scores(const char *text, row_score rows[3])
{
    static const char *const names[3] = {"words", "initial", "learned"};
    char **lines = g_strsplit(text, "\n", -1);
    for (int i = 0; lines[i]; i++) {
        /* sdt-demo-eval writes its numbers in the C locale; read them so in every locale. */
        char **words = g_strsplit(lines[i], " ", -1);
        char *end = NULL;
        row_score r = {0, 0, 0, true};
        if (g_strv_length(words) == 5 && !strcmp(words[0], "score")) {
            r.mean = g_ascii_strtod(words[2], &end);
            bool ok = end != words[2] && !*end;
            r.hits = (int)g_ascii_strtoll(words[3], &end, 10);
            ok = ok && end != words[3] && !*end;
            r.n = (int)g_ascii_strtoll(words[4], &end, 10);
            ok = ok && end != words[4] && !*end;
            for (int k = 0; ok && k < 3; k++)
                if (!strcmp(words[1], names[k])) rows[k] = r;
        }
        g_strfreev(words);
    }
    g_strfreev(lines);
}

bool demo_grid_run(const char *model, const char *initial, const char *learned, const char *grid_path, int seeds,
                   uint64_t seed)
{
    char *tool = find_eval_tool();
    if (!tool) {
        printf("The comparison grid was not drawn: sdt-demo-eval is not installed beside sdt-host (demo-tools/).\n");
        return false;
    }
    char seeds_text[16], seed_text[32];
    snprintf(seeds_text, sizeof seeds_text, "%d", seeds);
    snprintf(seed_text, sizeof seed_text, "%llu", (unsigned long long)seed);
    char *argv[] = {tool, "--model", (char *)model, "--initial", (char *)initial, "--learned", (char *)learned,
                    "--grid", (char *)grid_path, "--seeds", seeds_text, "--seed", seed_text, NULL};
    printf("Drawing the comparison grid (%d seeds: the words, the initial and the learned embedding)...\n", seeds);
    fflush(stdout);
    char *out = NULL, *err = NULL;
    int wait_status = 0;
    GError *e = NULL;
    bool ok = g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &wait_status, &e) &&
              WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
    row_score rows[3] = {{0}};
    if (ok) parse_scores(out, rows);
    ok = ok && rows[0].seen && rows[1].seen && rows[2].seen;
    if (ok) {
        printf("Concept score (a yellow star, 0..1; above 0.5 the picture shows it), mean over %d seeds:\n", seeds);
        c_number_text score;
        printf("  before, the initial embedding:  %s (%d of %d pictures show it)\n", c_number(&score, "%.2f", rows[1].mean),
               rows[1].hits, rows[1].n);
        printf("  after, the learned embedding:   %s (%d of %d)\n", c_number(&score, "%.2f", rows[2].mean), rows[2].hits,
               rows[2].n);
        printf("  the words \"yellow star\":        %s (%d of %d)\n", c_number(&score, "%.2f", rows[0].mean),
               rows[0].hits, rows[0].n);
        printf("Grid: %s (rows: the words, the initial embedding, the learned embedding; one column per seed)\n",
               grid_path);
    } else {
        printf("The comparison grid was not drawn: %s\n",
               e ? e->message : err && err[0] ? g_strstrip(err) : "sdt-demo-eval gave no scores");
    }
    if (e) g_error_free(e);
    g_free(out);
    g_free(err);
    g_free(tool);
    return ok;
}
