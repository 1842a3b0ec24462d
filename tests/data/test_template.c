/* test_template.c - template files: line rules, [name] check, fill order, line choice. */
#include <string.h>

#include "sdt_test.h"
#include "data/template.h"

static void test_lines(void)
{
    const char text[] = "\xEF\xBB\xBF  a photo of [name]  \r\n\r\nart by [name], [filewords]\rpicture\n";
    sdt_template t;
    sdt_error error = {0};
    CHECK(sdt_template_parse(text, sizeof(text) - 1, "t.txt", &t, &error), "parse: %s", error.message);
    CHECK(t.n_lines == 4,
          "4 lines (BOM dropped, CRLF, blank line kept, lone CR, no line after the final newline), got %d", t.n_lines);
    if (t.n_lines == 4) {
        CHECK(!strcmp(t.lines[0], "a photo of [name]"), "line 0 stripped: \"%s\"", t.lines[0]);
        CHECK(!strcmp(t.lines[1], ""), "blank line is an empty prompt");
        CHECK(!strcmp(t.lines[2], "art by [name], [filewords]"), "line 2");
        CHECK(!strcmp(t.lines[3], "picture"), "line 3");
    }
    CHECK(t.has_name && t.has_filewords, "placeholders detected");
    CHECK(sdt_template_check_for_embedding(&t, "t.txt", &error), "usable for TI");
    sdt_template_free(&t);
}

static void test_checks(void)
{
    sdt_template t;
    sdt_error error = {0};
    const char none[] = "picture\n"; /* A1111's none.txt */
    CHECK(sdt_template_parse(none, strlen(none), "none.txt", &t, &error), "parse none.txt");
    CHECK(!sdt_template_check_for_embedding(&t, "none.txt", &error), "a template without [name] is refused");
    CHECK(strstr(error.message, "none.txt") && strstr(error.message, "[name]"),
          "the error names the file and [name]: %s", error.message);
    sdt_template_free(&t);

    CHECK(sdt_template_parse("", 0, "empty.txt", &t, &error) && t.n_lines == 0, "empty parses to no lines");
    CHECK(!sdt_template_check_for_embedding(&t, "empty.txt", &error) && strstr(error.message, "empty"),
          "empty refused");
    sdt_template_free(&t);

    const char bad[] = "a \xff\xfe [name]";
    CHECK(!sdt_template_parse(bad, sizeof(bad) - 1, "bad.txt", &t, &error) && strstr(error.message, "UTF-8"),
          "invalid UTF-8 refused: %s", error.message);
    CHECK(!sdt_template_load("/nonexistent/sdt/template.txt", &t, &error) && strstr(error.message, "template.txt"),
          "missing file named: %s", error.message);
}

static void test_fill(void)
{
    char *s = sdt_template_fill("a [filewords] by [name] and [name]", "tok", "cat, [name] style");
    CHECK(s && !strcmp(s, "a cat, tok style by tok and tok"),
          "[filewords] first, then [name] everywhere (A1111 9a1aff64): \"%s\"", s ? s : "(null)");
    free(s);
    s = sdt_template_fill("no placeholders", "tok", "x");
    CHECK(s && !strcmp(s, "no placeholders"), "unchanged");
    free(s);
}

static void test_pick(sdt_test_rng *rng)
{
    const char text[] = "l0 [name]\nl1\nl2\nl3\nl4\n";
    sdt_template t;
    sdt_error error = {0};
    CHECK(sdt_template_parse(text, strlen(text), "p", &t, &error) && t.n_lines == 5, "parse");
    uint64_t seed = sdt_test_next(rng);
    sdt_data_rng a = sdt_data_rng_seeded(seed), b = sdt_data_rng_seeded(seed);
    int counts[5] = {0};
    bool same = true;
    for (int i = 0; i < 5000; i++) {
        int x = sdt_template_pick(&t, &a), y = sdt_template_pick(&t, &b);
        same = same && x == y;
        if (x >= 0 && x < 5) counts[x]++;
    }
    CHECK(same, "same seed, same lines");
    for (int i = 0; i < 5; i++)
        CHECK(counts[i] > 800 && counts[i] < 1200, "line %d chosen %d/5000 times", i, counts[i]);
    sdt_template_free(&t);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("template");
    test_lines();
    test_checks();
    test_fill();
    test_pick(&rng);
    return sdt_test_finish("template");
}
