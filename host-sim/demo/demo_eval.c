/* sdt-demo-eval - renders a demo comparison grid and scores it: one row per
 * conditioning, one column per seed, each row's label drawn at its left and each
 * picture read by the demo's scores. The embedding grid (the default) has the rows
 *   words     "a yellow star on a <background> background, center" (the concept in words)
 *   initial   the embedding before training   (--initial FILE)
 *   learned   the embedding after training    (--learned FILE)
 * with "a <embedding> on a <background> background, center" for the embedding rows,
 * the background changing with the column, scored by the concept score
 * (concept_score.h). The hypernetwork grid (--hypernetwork FILE) has one row per
 * strength (--strengths, default 0,0.5,1; 0 is the base model), the same prompts and
 * seeds in every row: "a <colour> <shape> on a <background> background, center", colour,
 * shape (no rings: hollow by nature) and background changing with the column, or with --learned the embedding's
 * "a <embedding> on a <background> background, center" (the joint demo); scored by the
 * style score (style_score.h) and, with --learned, by how much the picture shows a
 * yellow star, filled or outlined. Pictures are drawn as sdtrain's previews are (DDIM,
 * classifier-free guidance, plugin/train/preview.h; the hypernetwork on the UNet's K/V
 * hook in eval mode, as the previews and the applier run it) on the CPU. A transformer
 * model (SD3.5, Flux.1: the Flux demo, issue 30) is drawn as its previews and generate draw
 * it (plugin/train/flow_preview.h: the flow-matching Euler sampler with the family's shift
 * and classifier-free guidance), its parts a checkpoint lacks given by --clip-l, --t5xxl and
 * --vae, T5's prompt length by --t5-max-length (the length the model was trained at); the
 * embedding's tables sit in both encoders' slots.
 *
 *   sdt-demo-eval --model FILE [--initial FILE] [--learned FILE] [--grid OUT.png]
 *                 [--seeds N] [--seed S] [--steps N] [--cfg X]
 *                 [--clip-l FILE] [--t5xxl FILE] [--vae FILE] [--t5-max-length N]
 *   sdt-demo-eval --model FILE --hypernetwork FILE [--strengths LIST] [--learned FILE] ...
 *
 * Prints one line per row and score: "KIND ROW MEAN HITS N" (HITS of N pictures above the
 * score's threshold), which sdt-host's demo and the tests read. KIND is "score" (the
 * concept score) with its two factors "yellow" (the colour share) and "shape" (the filled
 * star's probability), "style" or "star" (the yellow star in either fill); ROW is words,
 * initial, learned, or strength-<S>. The grid PNG shows each picture at twice its size.
 * A sdtrain demo tool: it links the plugin's internals, not its ABI.
 */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_numeric.h"
#include "concept_score.h"
#include "data/png_write.h"
#include "data/pixel_font.h"
#include "flow_tokenizers.h"
#include "hn/hn_file.h"
#include "hn/hn_hook.h"
#include "style_score.h"
#include "ti/embedding_file.h"
#include "ti/embedding_model_check.h"
#include "tokenizer.h"
#include "train/flow_preview.h"
#include "train/preview.h"
#include "world.h"

#define MAX_ROWS 8
#define CELL_SCALE 2
#define GAP 4
#define LABEL_SCALE 2
#define IMAGE_SIZE 64

typedef struct eval_args {
    const char *model, *initial, *learned, *grid, *hypernetwork;
    const char *clip_l, *t5xxl, *vae; /* a transformer model's parts, NULL: the checkpoint's */
    int t5_len;                       /* a transformer model's T5 prompt length, 0: its pipeline's */
    int seeds, steps;
    double cfg;
    guint64 seed;
    int n_strengths;
    float strengths[MAX_ROWS];
} eval_args;

typedef struct eval_ctx {
    sdt_backend *be;
    sd_runtime rt;
    work_arena wa;
    sdt_tokenizer *tok;
    sdt_spm *t5_tok; /* a transformer model's T5 tokenizer */
    bool rt_open;
    sdt_hn *hn;
    sdt_hn_binding *binding;
} eval_ctx;

/* One row of the grid: what conditions it and what its label and score lines say. */
typedef struct eval_row {
    char name[48];  /* in the score lines */
    char label[64]; /* drawn on the grid */
    const sdt_embedding *emb;
    const char *emb_path; /* its file, for the sentences */
    float strength;       /* the hypernetwork's, when there is one */
} eval_row;

static int usage(const char *msg)
{
    if (msg) fprintf(stderr, "sdt-demo-eval: %s\n", msg);
    fprintf(stderr, "usage: sdt-demo-eval --model FILE [--initial FILE] [--learned FILE] [--grid OUT.png]\n"
                    "                     [--seeds N] [--seed S] [--steps N] [--cfg X]\n"
                    "                     [--clip-l FILE] [--t5xxl FILE] [--vae FILE] [--t5-max-length N]\n"
                    "       sdt-demo-eval --model FILE --hypernetwork FILE [--strengths LIST] [--learned FILE] ...\n"
                    "  --strengths LIST  the hypernetwork's strength per row, 0..2, comma-separated (default 0,0.5,1)\n"
                    "  --clip-l, --t5xxl, --vae FILE  SD3.5/Flux.1: the parts the checkpoint lacks\n"
                    "  --t5-max-length N  SD3.5/Flux.1: T5 tokens a prompt is padded or cut to, 1..512 (default: the\n"
                    "                     pipeline's: SD3.5 256, Flux dev 512, schnell 256)\n");
    return 2;
}

/* "0,0.5,1" into a->strengths; false when an item is not a number from 0 to 2 or there are too many. */
static bool parse_strengths(const char *text, eval_args *a)
{
    char **items = g_strsplit(text, ",", -1);
    int n = 0;
    bool ok = items[0] != NULL;
    for (int i = 0; ok && items[i]; i++) {
        char *end = NULL, *item = g_strstrip(items[i]);
        double v = g_ascii_strtod(item, &end);
        ok = n < MAX_ROWS && end != item && !*end && v >= 0.0 && v <= 2.0;
        if (ok) a->strengths[n++] = (float)v;
    }
    g_strfreev(items);
    a->n_strengths = n;
    return ok;
}

static int parse_args(int argc, char **argv, eval_args *a)
{
    *a = (eval_args){NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 6, 20, 4.0, 0, 3, {0.0f, 0.5f, 1.0f}};
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        guint64 n;
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) return usage(NULL), -1;
        if (!v) return usage("an option is missing its value");
        i++;
        if (!strcmp(k, "--model"))
            a->model = v;
        else if (!strcmp(k, "--initial"))
            a->initial = v;
        else if (!strcmp(k, "--learned"))
            a->learned = v;
        else if (!strcmp(k, "--grid"))
            a->grid = v;
        else if (!strcmp(k, "--hypernetwork"))
            a->hypernetwork = v;
        else if (!strcmp(k, "--clip-l"))
            a->clip_l = v;
        else if (!strcmp(k, "--t5xxl"))
            a->t5xxl = v;
        else if (!strcmp(k, "--vae"))
            a->vae = v;
        else if (!strcmp(k, "--t5-max-length")) {
            if (!g_ascii_string_to_unsigned(v, 10, 1, 512, &n, NULL)) return usage("--t5-max-length must be 1 to 512");
            a->t5_len = (int)n;
        } else if (!strcmp(k, "--strengths")) {
            if (!parse_strengths(v, a))
                return usage("--strengths must be 1 to 8 numbers from 0 to 2, comma-separated (e.g. 0,0.5,1)");
        } else if (!strcmp(k, "--seed")) {
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
    if (a->hypernetwork && a->initial)
        return usage("--initial belongs to the embedding grid; the hypernetwork grid's strength 0 row is the start");
    return a->model ? 0 : usage("--model is required");
}

static bool open_model(eval_ctx *c, const eval_args *a, sdt_error *error)
{
    c->be = sdt_backend_cpu_create(0);
    if (!c->be) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "the CPU backend could not be created");
    const char *const parts[SD_PART_COUNT] = {NULL, a->clip_l, NULL, a->t5xxl, a->vae};
    if (!sd_runtime_read_parts(&c->rt, a->model, parts, c->be, false, error) ||
        !sd_runtime_place(&c->rt, SDT_F32, SD_PREDICTION_AUTO, error))
        return false;
    c->rt_open = true;
    if (sd_config_is_transformer(&c->rt.cfg)) { /* the tokenizers as training and generate find them */
        if (a->hypernetwork)
            return sdt_fail(error, SDT_ERR_VALIDATION,
                            "%s is a transformer model, and no host applies A1111 hypernetworks to SD3.5/Flux "
                            "transformers: draw its grid without --hypernetwork",
                            a->model);
        return demo_open_flow_tokenizers(a->model, a->t5xxl, c->rt.cfg.clip.vocab, c->rt.cfg.t5.vocab, &c->tok,
                                         &c->t5_tok, error);
    }
    if (a->t5_len)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "--t5-max-length: %s is a UNet model, which has no T5; leave the option out", a->model);
    /* tokenizer/ inside a diffusers folder, or beside a single file */
    char *dir = g_file_test(a->model, G_FILE_TEST_IS_DIR) ? g_strdup(a->model) : g_path_get_dirname(a->model);
    c->tok = sdt_tokenizer_load_dir(dir, error);
    g_free(dir);
    return c->tok != NULL;
}

/* The hypernetwork on the UNet's K/V hook in eval mode (no dropout), as previews run it. */
static bool open_hypernetwork(eval_ctx *c, const char *path, sdt_error *error)
{
    if (!(c->hn = sdt_hn_load(path, c->be, error)) || !(c->binding = sdt_hn_binding_create(c->be, error)) ||
        !sdt_hn_binding_add(c->binding, c->hn, 1.0f, false, error))
        return false;
    sdt_hn_binding_set_eval(c->binding);
    return true;
}

static void close_model(eval_ctx *c)
{
    if (c->binding) sdt_hn_binding_free(c->binding);
    if (c->hn) sdt_hn_free(c->hn);
    if (c->tok) sdt_tokenizer_free(c->tok);
    if (c->t5_tok) sdt_spm_free(c->t5_tok);
    work_arena_release(&c->wa);
    if (c->rt_open) sd_runtime_close(&c->rt);
    if (c->be) c->be->destroy(c->be);
}

/* One picture of a transformer model: the embedding's tables in the CLIP and T5 slots (as generate does). */
static bool render_flow(eval_ctx *c, const eval_args *a, const eval_row *row, const sdt_tensor *rows,
                        const char *prompt, uint64_t seed, uint8_t **rgb, sdt_error *error)
{
    sdt_slot_rules rules = {.placeholder_id = -1, .slot_token = 0, .pad_id = sdt_tokenizer_eos(c->tok)};
    sdt_t5_slot_rules t5_rules = {.placeholder_id = -1, .slot_token = 0};
    const sdt_embedding *emb = row->emb;
    if (emb) {
        if (!ti_embedding_check_model(emb, &c->rt, row->emb_path, error) ||
            !sdt_tokenizer_add_token(c->tok, emb->name, -1, &rules.placeholder_id, error) ||
            !sdt_spm_add_token(c->t5_tok, emb->name, &t5_rules.placeholder_id, error))
            return false;
        rules.n_vectors = emb->n_vectors;
        t5_rules.n_vectors = emb->n_vectors;
    }
    sdt_flow_preview_request rq = {.prompt = prompt,
                                   .negative = "",
                                   .width = IMAGE_SIZE,
                                   .height = IMAGE_SIZE,
                                   .steps = a->steps,
                                   .cfg_scale = (float)a->cfg,
                                   .seed = seed,
                                   .t5_len = a->t5_len > 0 ? a->t5_len : 256, /* StableDiffusion3Pipeline's */
                                   .shift = sdt_flow_timesteps_sd3()};
    const sd_config *cfg = &c->rt.cfg;
    if (sd_config_is_flux(cfg)) { /* FluxPipeline's defaults, as generate takes them */
        rq.t5_len = a->t5_len > 0 ? a->t5_len : cfg->flux.guidance ? 512 : 256;
        rq.shift = sdt_flow_timesteps_flux();
        rq.guidance = cfg->flux.guidance ? 3.5f : 0.0f;
    }
    return sdt_flow_preview_render(&c->rt, &c->wa, c->tok, &rules, c->t5_tok, &t5_rules, emb ? rows : NULL, &rq, rgb,
                                   error);
}

/* One picture: prompt (with the embedding's name when emb is given) at seed, through hook (or none). */
static bool render(eval_ctx *c, const eval_args *a, const eval_row *row, const char *prompt, uint64_t seed,
                   const sdt_unet_kv_hook *hook, uint8_t **rgb, sdt_error *error)
{
    const sdt_embedding *emb = row->emb;
    bool flow = sd_config_is_transformer(&c->rt.cfg);
    sdt_slot_rules rules = {-1, 1, 0, sdt_tokenizer_eos(c->tok)};
    sdt_tensor rows = {0};
    int64_t shape[2] = {1, c->rt.cfg.clip.width};
    if (emb && flow) { /* table-major rows, every table's width (ti_embedding_check_model checks them) */
        shape[0] = emb->n_vectors;
        shape[1] = emb->dim;
    } else if (emb) {
        if (emb->dim != c->rt.cfg.clip.width)
            return sdt_fail(error, SDT_ERR_VALIDATION,
                            "the embedding '%s' has %d values per vector but the model's text encoder is %d wide; "
                            "use an embedding made for this model",
                            emb->name, emb->dim, c->rt.cfg.clip.width);
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
    sdt_preview_request rq = {prompt,        "",   IMAGE_SIZE, IMAGE_SIZE, a->steps,
                              (float)a->cfg, seed, 1,          hook,       SDT_SAMPLER_DDIM};
    if (flow)
        ok = ok && render_flow(c, a, row, &rows, prompt, seed, rgb, error);
    else
        ok = ok && sdt_preview_render(&c->rt, &c->wa, c->tok, &rules, &rows, &rq, rgb, error);
    if (rows.data) c->be->free(c->be, rows.data);
    return ok;
}

/* Column s's prompt: the embedding's, the concept in words (the embedding grid's words row),
 * or (the hypernetwork grid) a named shape, colour and shape changing with the column. */
static char *column_prompt(const eval_row *row, bool hypernetwork_grid, int s)
{
    const char *bg = world_background_name(s % WORLD_BACKGROUND_COUNT);
    if (row->emb) return g_strdup_printf("a %s on a %s background, center", row->emb->name, bg);
    if (!hypernetwork_grid)
        return g_strdup_printf("a %s %s on a %s background, center", world_colour_name(WORLD_CONCEPT_COLOUR),
                               world_shape_name(WORLD_CONCEPT_SHAPE), bg);
    /* Every shape but the ring, which is hollow by nature (style_score.h) */
    static const world_shape shapes[] = {WORLD_CIRCLE, WORLD_SQUARE, WORLD_TRIANGLE, WORLD_STAR, WORLD_CROSS};
    static const world_colour colours[WORLD_COLOUR_COUNT] = {WORLD_RED,   WORLD_BLUE,   WORLD_GREEN,
                                                             WORLD_WHITE, WORLD_PURPLE, WORLD_YELLOW};
    world_shape shape = shapes[s % (int)G_N_ELEMENTS(shapes)];
    world_colour colour = colours[s % WORLD_COLOUR_COUNT];
    if (shape == WORLD_CONCEPT_SHAPE && colour == WORLD_CONCEPT_COLOUR) /* the words never name it */
        colour = colours[(s + 1) % WORLD_COLOUR_COUNT];
    return g_strdup_printf("a %s %s on a %s background, center", world_colour_name(colour), world_shape_name(shape),
                           bg);
}

/* The grid's rows: words / initial / learned, or one per hypernetwork strength. */
static int make_rows(const eval_args *a, const sdt_embedding embs[2], eval_row rows[MAX_ROWS])
{
    int n = 0;
    memset(rows, 0, sizeof(eval_row) * MAX_ROWS);
    if (!a->hypernetwork) {
        snprintf(rows[n].name, sizeof rows[n].name, "words");
        snprintf(rows[n++].label, sizeof rows[0].label, "WORDS:\nYELLOW\nSTAR");
        if (a->initial) {
            snprintf(rows[n].name, sizeof rows[n].name, "initial");
            snprintf(rows[n].label, sizeof rows[n].label, "INITIAL\nEMBEDDING");
            rows[n].emb_path = a->initial;
            rows[n++].emb = &embs[0];
        }
        if (a->learned) {
            snprintf(rows[n].name, sizeof rows[n].name, "learned");
            snprintf(rows[n].label, sizeof rows[n].label, "LEARNED\nEMBEDDING");
            rows[n].emb_path = a->learned;
            rows[n++].emb = &embs[1];
        }
        return n;
    }
    for (int i = 0; i < a->n_strengths; i++, n++) {
        char number[24];
        sdt_c_snprintf(number, sizeof number, "%g", (double)a->strengths[i]);
        snprintf(rows[n].name, sizeof rows[n].name, "strength-%s", number);
        snprintf(rows[n].label, sizeof rows[n].label, "%sSTRENGTH\n%s", a->learned ? "EMBEDDING\n" : "", number);
        rows[n].emb = a->learned ? &embs[1] : NULL;
        rows[n].emb_path = a->learned;
        rows[n].strength = a->strengths[i];
    }
    return n;
}

static void put_cell(uint8_t *grid, int grid_w, int left, int row, int col, const uint8_t *rgb, int size)
{
    int cell = size * CELL_SCALE;
    for (int y = 0; y < cell; y++)
        for (int x = 0; x < cell; x++) {
            const uint8_t *src = rgb + ((size_t)(y / CELL_SCALE) * size + x / CELL_SCALE) * 3;
            uint8_t *dst =
                grid + ((size_t)(GAP + row * (cell + GAP) + y) * grid_w + left + GAP + col * (cell + GAP) + x) * 3;
            memcpy(dst, src, 3);
        }
}

/* A row's running sums for one score. */
typedef struct row_sum {
    double sum;
    int hits;
} row_sum;

static void add_score(row_sum *r, float score, float threshold)
{
    r->sum += score;
    r->hits += score > threshold;
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
    bool ok = open_model(&c, &a, &error);
    if (ok && a.initial) ok = sdt_embedding_load(a.initial, &embs[0], NULL, &error);
    if (ok && a.learned) ok = sdt_embedding_load(a.learned, &embs[1], NULL, &error);
    if (ok && a.hypernetwork) ok = open_hypernetwork(&c, a.hypernetwork, &error);
    eval_row rows[MAX_ROWS];
    int n_rows = make_rows(&a, embs, rows), label_w = 0;
    for (int r = 0; r < n_rows; r++) {
        int w = sdt_pixel_font_width(rows[r].label, LABEL_SCALE);
        label_w = w > label_w ? w : label_w;
    }
    const int cell = IMAGE_SIZE * CELL_SCALE, left = label_w + 2 * GAP;
    int grid_w = left + GAP + a.seeds * (cell + GAP), grid_h = GAP + n_rows * (cell + GAP);
    uint8_t *grid = g_malloc((size_t)grid_w * grid_h * 3);
    memset(grid, 255, (size_t)grid_w * grid_h * 3);
    static const uint8_t ink[3] = {0, 0, 0};
    for (int r = 0; ok && r < n_rows; r++) {
        const eval_row *row = &rows[r];
        const sdt_unet_kv_hook *hook = NULL;
        if (c.binding) {
            ok = sdt_hn_binding_set_strength(c.binding, 0, row->strength, &error);
            hook = sdt_hn_binding_hook(c.binding);
        }
        row_sum concept = {0, 0}, style = {0, 0}, star = {0, 0}, yellow = {0, 0}, shape = {0, 0};
        for (int s = 0; ok && s < a.seeds; s++) {
            char *prompt = column_prompt(row, a.hypernetwork != NULL, s);
            uint8_t *rgb = NULL;
            ok = render(&c, &a, row, prompt, a.seed + (uint64_t)s, hook, &rgb, &error);
            if (ok) {
                concept_reading cr = concept_score(rgb, IMAGE_SIZE);
                add_score(&concept, cr.score, CONCEPT_SCORE_THRESHOLD);
                add_score(&yellow, cr.colour_share, CONCEPT_SCORE_THRESHOLD);
                add_score(&shape, cr.star_probability, CONCEPT_SCORE_THRESHOLD);
                add_score(&star, cr.colour_share * cr.star_any_probability, CONCEPT_SCORE_THRESHOLD);
                add_score(&style, style_score(rgb, IMAGE_SIZE).score, STYLE_SCORE_THRESHOLD);
                put_cell(grid, grid_w, left, r, s, rgb, IMAGE_SIZE);
            }
            free(rgb);
            g_free(prompt);
        }
        if (!ok) break;
        int label_h = sdt_pixel_font_height(row->label, LABEL_SCALE);
        sdt_pixel_font_draw(grid, grid_w, grid_h, GAP, GAP + r * (cell + GAP) + (cell - label_h) / 2, row->label,
                            LABEL_SCALE, ink);
        if (!a.hypernetwork) {
            printf("score %s %.3f %d %d\n", row->name, concept.sum / a.seeds, concept.hits, a.seeds);
            printf("yellow %s %.3f %d %d\n", row->name, yellow.sum / a.seeds, yellow.hits, a.seeds);
            printf("shape %s %.3f %d %d\n", row->name, shape.sum / a.seeds, shape.hits, a.seeds);
        } else {
            printf("style %s %.3f %d %d\n", row->name, style.sum / a.seeds, style.hits, a.seeds);
            if (row->emb) printf("star %s %.3f %d %d\n", row->name, star.sum / a.seeds, star.hits, a.seeds);
        }
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
