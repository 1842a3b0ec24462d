/* The preview grid's layout (data/preview_grid.h: size = label margins + rows x cols cells, each
 * cell's pixels where the layout says, labels only in the margins), the label wrap, the preview
 * prompts file (blank lines and # comments skipped; each bad file a sentence naming the file and
 * the line) and the preview seeds text. */
#include <glib.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/pixel_font.h"
#include "data/preview_grid.h"
#include "data/preview_prompts.h"
#include "sdt_test.h"

static void test_layout(void)
{
    enum { ROWS = 3, COLS = 4, CW = 64, CH = 48 };
    const char *prompts[ROWS] = {"a photo of star",
                                 "a yellow star on a blue background with a very long tail of words "
                                 "that does not fit in four lines of twenty-four characters at all",
                                 "x"};
    const char *seeds[COLS] = {"seed 1", "seed 2", "seed 3", "seed 18446744073709551615"};
    sdt_preview_grid_labels labels = {ROWS, COLS, prompts, seeds, "step 500  euler_a 20 steps  cfg 7"};
    uint8_t *cells[ROWS * COLS];
    for (int k = 0; k < ROWS * COLS; k++) {
        cells[k] = malloc(CW * CH * 3);
        for (int i = 0; i < CW * CH * 3; i++) cells[k][i] = (uint8_t)(k * 17 + 1 + i % 7); /* never 255 */
    }
    uint8_t *rgb = NULL;
    sdt_preview_grid_layout lay;
    sdt_error error;
    sdt_error_clear(&error);
    CHECK(sdt_preview_grid_compose(&labels, (const uint8_t *const *)cells, CW, CH, &rgb, &lay, &error), "compose: %s",
          error.message);
    /* The margins from the labels, at scale 1 for cells under 256 wide, 4 pixels of padding: the
     * widest wrapped prompt ("a yellow star on a blue" / "background with a very" / "long tail of
     * words that" / "does not fit in four...": 23 characters of 6 pixels, less the last gap) and
     * the title plus the tallest seed label (3 lines of 10 characters over a 64-pixel cell). */
    char wrapped[600];
    sdt_preview_grid_wrap(prompts[1], 24, 4, wrapped, sizeof wrapped);
    CHECK(!strcmp(wrapped,
                  "a yellow star on a blue\nbackground with a very\nlong tail of words that\ndoes not fit in four..."),
          "long prompt wrapped as '%s'", wrapped);
    CHECK(lay.scale == 1, "scale %d for 64-pixel cells", lay.scale);
    CHECK(lay.left == (23 * 6 - 1) + 2 * 4, "left margin %d, want %d", lay.left, (23 * 6 - 1) + 8);
    int seed_h = 3 * 10 - 3; /* 3 lines: 2 line advances of 10 + one glyph of 7 */
    CHECK(lay.top == 7 + seed_h + 4 * 4, "top margin %d, want %d", lay.top, 7 + seed_h + 16);
    CHECK(lay.width == lay.left + COLS * CW && lay.height == lay.top + ROWS * CH, "grid %d x %d, want %d x %d",
          lay.width, lay.height, lay.left + COLS * CW, lay.top + ROWS * CH);
    bool cells_ok = true, margin_white_or_ink = true, ink_in_margins = false;
    for (int y = 0; rgb && y < lay.height; y++)
        for (int x = 0; x < lay.width; x++) {
            const uint8_t *px = rgb + ((size_t)y * lay.width + x) * 3;
            if (x >= lay.left && y >= lay.top) {
                int c = (x - lay.left) / CW, r = (y - lay.top) / CH, cx = (x - lay.left) % CW, cy = (y - lay.top) % CH;
                if (memcmp(px, cells[r * COLS + c] + ((size_t)cy * CW + cx) * 3, 3) != 0) cells_ok = false;
            } else {
                bool white = px[0] == 255 && px[1] == 255 && px[2] == 255, ink = !px[0] && !px[1] && !px[2];
                margin_white_or_ink &= white || ink;
                ink_in_margins |= ink;
            }
        }
    CHECK(cells_ok, "a cell's pixels are not where the layout puts them");
    CHECK(margin_white_or_ink && ink_in_margins, "the margins are not black labels on white");
    free(rgb);
    /* 256-wide cells: labels at scale 2 */
    sdt_preview_grid_measure(&labels, 256, 256, &lay);
    CHECK(lay.scale == 2 && lay.width == lay.left + COLS * 256, "256-pixel cells: scale %d", lay.scale);
    /* Too many columns is a sentence, not a crash. */
    labels.cols = SDT_PREVIEW_GRID_MAX_COLS + 1;
    CHECK(!sdt_preview_grid_compose(&labels, (const uint8_t *const *)cells, CW, CH, &rgb, &lay, &error) &&
              strstr(error.message, "seeds"),
          "17 columns accepted");
    for (int k = 0; k < ROWS * COLS; k++) free(cells[k]);
}

static void test_wrap(void)
{
    char out[600];
    sdt_preview_grid_wrap("a photo of star", 24, 4, out, sizeof out);
    CHECK(strcmp(out, "a photo of star") == 0, "short prompt wrapped to '%s'", out);
    sdt_preview_grid_wrap("seed 18446744073709551615", 10, 3, out, sizeof out);
    CHECK(strcmp(out, "seed\n1844674407\n3709551615") == 0, "seed label wrapped to '%s'", out);
    sdt_preview_grid_wrap("one two three four five six seven eight", 9, 2, out, sizeof out);
    CHECK(strcmp(out, "one two\nthree...") == 0, "cut label '%s'", out);
    for (const char *p = out; *p; p++) CHECK(*p != '\t', "tab kept");
}

static char *write_file(const char *dir, const char *name, const char *text, size_t len)
{
    char *path = g_build_filename(dir, name, NULL);
    g_file_set_contents(path, text, (gssize)len, NULL);
    return path;
}

static void expect_prompts_error(const char *dir, const char *name, const char *text, size_t len, const char *want1,
                                 const char *want2)
{
    char *path = write_file(dir, name, text, len);
    sdt_preview_prompts p;
    sdt_error error;
    sdt_error_clear(&error);
    CHECK(!sdt_preview_prompts_load(path, &p, &error), "%s: accepted", name);
    CHECK(strstr(error.message, path) && strstr(error.message, want1) && (!want2 || strstr(error.message, want2)),
          "%s: sentence '%s' lacks the file, '%s' or '%s'", name, error.message, want1, want2 ? want2 : "");
    g_remove(path);
    g_free(path);
}

static void test_prompts_file(void)
{
    char *dir = g_dir_make_tmp("sdt-preview-XXXXXX", NULL);
    const char good[] = "# prompts\r\n\r\na photo of star  \n   \n# not this\n  a red circle, outline\nlast line";
    char *path = write_file(dir, "good.txt", good, sizeof good - 1);
    sdt_preview_prompts p;
    sdt_error error;
    sdt_error_clear(&error);
    CHECK(sdt_preview_prompts_load(path, &p, &error), "good prompts: %s", error.message);
    CHECK(p.count == 3 && !strcmp(p.prompts[0], "a photo of star") && !strcmp(p.prompts[1], "a red circle, outline") &&
              !strcmp(p.prompts[2], "last line"),
          "prompts read as %d", p.count);
    sdt_preview_prompts_free(&p);
    g_remove(path);
    g_free(path);
    expect_prompts_error(dir, "empty.txt", "# only\n\n", 8, "no prompt", NULL);
    expect_prompts_error(dir, "latin1.txt", "ok\n# fine\ncaf\xe9\n", 15, "line 3", "UTF-8");
    expect_prompts_error(dir, "nul.txt", "a\0b\n", 4, "NUL", NULL);
    GString *many = g_string_new(NULL);
    for (int i = 0; i <= SDT_PREVIEW_GRID_MAX_ROWS; i++) g_string_append_printf(many, "prompt %d\n", i);
    expect_prompts_error(dir, "many.txt", many->str, many->len, "line 33", "at most 32");
    g_string_free(many, TRUE);
    char *missing = g_build_filename(dir, "missing.txt", NULL);
    CHECK(!sdt_preview_prompts_load(missing, &p, &error) && strstr(error.message, missing), "a missing file: '%s'",
          error.message);
    g_free(missing);
    g_rmdir(dir);
    g_free(dir);
}

static void test_seeds(void)
{
    sdt_preview_seeds s;
    sdt_error error;
    sdt_error_clear(&error);
    CHECK(sdt_preview_seeds_parse(NULL, "preview_seeds", &s, &error) && s.count == 1 && !s.listed, "NULL: one seed");
    CHECK(sdt_preview_seeds_parse("4", "preview_seeds", &s, &error) && s.count == 4 && !s.listed, "\"4\": four seeds");
    CHECK(sdt_preview_seeds_parse("7, 3,11", "preview_seeds", &s, &error) && s.count == 3 && s.listed &&
              s.seeds[0] == 7 && s.seeds[1] == 3 && s.seeds[2] == 11,
          "a list of three");
    const char *bad[] = {
        "0", "17", "-1", "1,,2", "1 2", "x", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sdt_error_clear(&error);
        CHECK(!sdt_preview_seeds_parse(bad[i], "preview_seeds", &s, &error) && strstr(error.message, "preview_seeds"),
              "\"%s\" accepted or the sentence lacks the field: '%s'", bad[i], error.message);
    }
}

int main(void)
{
    test_layout();
    test_wrap();
    test_prompts_file();
    test_seeds();
    return sdt_test_finish("data_preview_grid");
}
