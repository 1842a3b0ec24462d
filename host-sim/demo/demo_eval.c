/* sdt-demo-eval - renders the demo's comparison grid and scores it: one row per
 * conditioning, one column per seed, each picture read by the concept score
 * (concept_score.h). The rows are
 *   words     "a yellow star on a <background> background, center" (the concept in words)
 *   initial   the embedding before training   (--initial FILE)
 *   learned   the embedding after training    (--learned FILE)
 * with "a <embedding> on a <background> background, center" for the embedding rows,
 * the background changing with the column. Pictures are drawn as sdtrain's previews
 * are (DDIM, classifier-free guidance, plugin/train/preview.h) on the CPU.
 *
 *   sdt-demo-eval --model FILE [--initial FILE] [--learned FILE] [--grid OUT.png]
 *                 [--seeds N] [--seed S] [--steps N] [--cfg X]
 *
 * Prints one line per row: "score ROW MEAN HITS N" (HITS of N pictures above the
 * concept threshold), which sdt-host's demo and the tests read. The grid PNG shows
 * each picture at twice its size. A sdtrain demo tool: it links the plugin's
 * internals, not its ABI.
 */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "concept_score.h"
#include "data/png_write.h"
#include "ti/embedding_file.h"
#include "tokenizer.h"
#include "train/preview.h"
#include "world.h"

#define MAX_ROWS 3
#define CELL_SCALE 2
#define GAP 4

typedef struct eval_args {
    const char *model, *initial, *learned, *grid;
    int seeds, steps;
    double cfg;
    guint64 seed;
} eval_args;

typedef struct eval_ctx {
    sdt_backend *be;
    sd_runtime rt;
    work_arena wa;
    sdt_tokenizer *tok;
    bool rt_open;
} eval_ctx;

static int usage(const char *msg)
{
    if (msg) fprintf(stderr, "sdt-demo-eval: %s\n", msg);
    fprintf(stderr, "usage: sdt-demo-eval --model FILE [--initial FILE] [--learned FILE] [--grid OUT.png]\n"
                    "                     [--seeds N] [--seed S] [--steps N] [--cfg X]\n");
    return 2;
}

static int parse_args(int argc, char **argv, eval_args *a)
{
    *a = (eval_args){NULL, NULL, NULL, NULL, 6, 20, 4.0, 0};
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        guint64 n;
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) return usage(NULL), -1;
        if (!v) return usage("an option is missing its value");
        i++;
        if (!strcmp(k, "--model")) a->model = v;
        else if (!strcmp(k, "--initial")) a->initial = v;
        else if (!strcmp(k, "--learned")) a->learned = v;
        else if (!strcmp(k, "--grid")) a->grid = v;
        else if (!strcmp(k, "--seed")) {
            if (!g_ascii_string_to_unsigned(v, 10, 0, G_MAXUINT64, &a->seed, NULL))
                return usage("--seed must be a whole number of at least 0");
        } else if (!strcmp(k, "--seeds")) {
            if (!g_ascii_string_to_unsigned(v, 10, 1, 64, &n, NULL)) return usage("--seeds must be 1 to 64");
            a->seeds = (int)n;
        } else if (!strcmp(k, "--steps")) {
            if (!g_ascii_string_to_unsigned(v, 10, 1, 1000, &n, NULL)) return usage("--steps must be 1 to 1000");
            a->steps = (int)n;
        } else if (!strcmp(k, "--cfg")) {
            char *end = NULL;
            a->cfg = g_ascii_strtod(v, &end);
            if (!end || *end || !(a->cfg >= 1.0 && a->cfg <= 30.0)) return usage("--cfg must be a number from 1 to 30");
        } else {
            fprintf(stderr, "sdt-demo-eval: unknown option '%s'\n", k);
            return usage(NULL);
        }
    }
    return a->model ? 0 : usage("--model is required");
}

static bool open_model(eval_ctx *c, const char *model, sdt_error *error)
{
    c->be = sdt_backend_cpu_create(0);
    if (!c->be) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "the CPU backend could not be created");
    if (!sd_runtime_open(&c->rt, model, c->be, SDT_F32, SD_PREDICTION_AUTO, error)) return false;
    c->rt_open = true;
    /* tokenizer/ inside a diffusers folder, or beside a single file */
    char *dir = g_file_test(model, G_FILE_TEST_IS_DIR) ? g_strdup(model) : g_path_get_dirname(model);
    c->tok = sdt_tokenizer_load_dir(dir, error);
    g_free(dir);
    return c->tok != NULL;
}

static void close_model(eval_ctx *c)
{
    if (c->tok) sdt_tokenizer_free(c->tok);
    work_arena_release(&c->wa);
    if (c->rt_open) sd_runtime_close(&c->rt);
    if (c->be) c->be->destroy(c->be);
}

/* One picture: prompt (with the embedding's name when emb is given) at seed. */
static bool render(eval_ctx *c, const sdt_embedding *emb, const char *prompt, uint64_t seed, int steps, double cfg,
                   uint8_t **rgb, sdt_error *error)
{
    sdt_slot_rules rules = {-1, 1, 0, sdt_tokenizer_eos(c->tok)};
    sdt_tensor rows = {0};
    int64_t shape[2] = {1, c->rt.cfg.clip.width};
    if (emb) {
        if (emb->dim != c->rt.cfg.clip.width)
            return sdt_fail(error, SDT_ERR_VALIDATION,
                            "the embedding '%s' has %d values per vector but the model's text encoder is %d wide; "
                            "use an embedding made for this model", emb->name, emb->dim, c->rt.cfg.clip.width);
        if (!sdt_tokenizer_add_token(c->tok, emb->name, -1, &rules.placeholder_id, error)) return false;
        rules.n_vectors = emb->n_vectors;
        shape[0] = emb->n_vectors;
    }
    rows = sdt_tensor_make(NULL, SDT_F32, c->be->device, 2, shape);
    size_t bytes = sdt_tensor_nbytes(&rows);
    rows.data = c->be->alloc(c->be, bytes);
    float *zeros = emb ? NULL : calloc((size_t)shape[1], sizeof(float));
    bool ok = rows.data && (emb || zeros) && c->be->upload(c->be, rows.data, emb ? emb->vectors : zeros, bytes) == 0;
    free(zeros);
    if (!ok) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of memory for the embedding rows");
    const int size = 64;
    sdt_preview_request rq = {prompt, "", size, size, steps, (float)cfg, seed, 1, NULL};
    ok = ok && sdt_preview_render(&c->rt, &c->wa, c->tok, &rules, &rows, &rq, rgb, error);
    if (rows.data) c->be->free(c->be, rows.data);
    return ok;
}

static void put_cell(uint8_t *grid, int grid_w, int row, int col, const uint8_t *rgb, int size)
{
    int cell = size * CELL_SCALE;
    for (int y = 0; y < cell; y++)
        for (int x = 0; x < cell; x++) {
            const uint8_t *src = rgb + ((size_t)(y / CELL_SCALE) * size + x / CELL_SCALE) * 3;
            uint8_t *dst = grid + ((size_t)(GAP + row * (cell + GAP) + y) * grid_w + GAP + col * (cell + GAP) + x) * 3;
            memcpy(dst, src, 3);
        }
}

int main(int argc, char **argv)
{
    eval_args a;
    int st = parse_args(argc, argv, &a);
    if (st) return st < 0 ? 0 : st;
    sdt_error error = {0};
    eval_ctx c;
    memset(&c, 0, sizeof c);
    sdt_embedding embs[2];
    memset(embs, 0, sizeof embs);
    const char *labels[MAX_ROWS] = {"words", "initial", "learned"};
    const char *files[MAX_ROWS] = {NULL, a.initial, a.learned};
    bool ok = open_model(&c, a.model, &error);
    for (int r = 1; ok && r < MAX_ROWS; r++)
        if (files[r]) ok = sdt_embedding_load(files[r], &embs[r - 1], NULL, &error);
    const int size = 64, cell = size * CELL_SCALE;
    int n_rows = 1 + (a.initial != NULL) + (a.learned != NULL);
    int grid_w = GAP + a.seeds * (cell + GAP), grid_h = GAP + n_rows * (cell + GAP);
    uint8_t *grid = g_malloc0((size_t)grid_w * grid_h * 3);
    memset(grid, 255, (size_t)grid_w * grid_h * 3);
    for (int r = 0, shown = 0; ok && r < MAX_ROWS; r++) {
        if (r > 0 && !files[r]) continue;
        const sdt_embedding *emb = r > 0 ? &embs[r - 1] : NULL;
        double sum = 0;
        int hits = 0;
        for (int s = 0; ok && s < a.seeds; s++) {
            const char *bg = world_background_name(s % WORLD_BACKGROUND_COUNT);
            char *prompt = emb ? g_strdup_printf("a %s on a %s background, center", emb->name, bg)
                               : g_strdup_printf("a %s %s on a %s background, center",
                                                 world_colour_name(WORLD_CONCEPT_COLOUR),
                                                 world_shape_name(WORLD_CONCEPT_SHAPE), bg);
            uint8_t *rgb = NULL;
            ok = render(&c, emb, prompt, a.seed + (uint64_t)s, a.steps, a.cfg, &rgb, &error);
            if (ok) {
                concept_reading cr = concept_score(rgb, size);
                sum += cr.score;
                hits += cr.score > CONCEPT_SCORE_THRESHOLD;
                put_cell(grid, grid_w, shown, s, rgb, size);
            }
            free(rgb);
            g_free(prompt);
        }
        if (ok) printf("score %s %.3f %d %d\n", labels[r], sum / a.seeds, hits, a.seeds);
        shown++;
    }
    if (ok && a.grid) ok = sdt_png_write_rgb(a.grid, grid, grid_w, grid_h, NULL, NULL, &error);
    g_free(grid);
    for (int i = 0; i < 2; i++) sdt_embedding_free(&embs[i]);
    close_model(&c);
    if (!ok) {
        fprintf(stderr, "sdt-demo-eval: %s\n", error.message);
        return 1;
    }
    return 0;
}
