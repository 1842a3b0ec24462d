/* test_caption.c - captions from file names and .txt files; tag drop-out and shuffle. */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "data/caption.h"
#include "sdt_test.h"

static void check_name(const char *path, const char *regex, const char *join, const char *want)
{
    sdt_caption_rules rules = {regex, join};
    sdt_error error = {0};
    char *got = sdt_caption_from_filename(path, &rules, &error);
    CHECK(got && !strcmp(got, want), "%s with /%s/ and \"%s\": want \"%s\", got \"%s\" %s", path, regex ? regex : "",
          join ? join : "", want, got ? got : "(null)", error.message);
    free(got);
}

static void test_filenames(void)
{
    check_name("/d/00012-3-a cat sitting.png", NULL, NULL, "a cat sitting");
    check_name("/d/00012-3- spaced.jpg", "", NULL, "spaced");
    check_name("/d/no_prefix.v2.png", NULL, NULL, "no_prefix.v2");
    check_name("/d/12-red_car_blue-sky.png", "[a-z]+", NULL, "red car blue sky");
    check_name("/d/12-red_car_blue-sky.png", "[a-z]+", ", ", "red, car, blue, sky");
    check_name("/d/1-x_cat_y_dog.png", "_([a-z]+)", "+", "cat+y+dog"); /* one group: findall gives the group */
    check_name("/d/1-nothing.png", "[0-9]+", NULL, "");

    sdt_caption_rules bad = {"([a-", NULL}, groups = {"(a)(b)", NULL};
    sdt_error error = {0};
    CHECK(!sdt_caption_rules_check(&bad, &error) && strstr(error.message, "([a-"), "bad regex named: %s",
          error.message);
    CHECK(!sdt_caption_rules_check(&groups, &error) && strstr(error.message, "2 capture groups"), "groups: %s",
          error.message);
    CHECK(sdt_caption_from_filename("/d/x.png", &bad, &error) == NULL, "bad regex gives NULL");
    /* the fuzzer's crash: invalid UTF-8 in the pattern is refused before PCRE2 sees it */
    sdt_caption_rules not_utf8 = {"\\w+\xff\xff\n_\x03", NULL};
    CHECK(!sdt_caption_rules_check(&not_utf8, &error) && strstr(error.message, "not valid UTF-8"), "invalid UTF-8: %s",
          error.message);
}

static void test_txt_caption(void)
{
    char *dir = g_dir_make_tmp("sdt-caption-XXXXXX", NULL);
    char *img = g_build_filename(dir, "0001-photo.png", NULL);
    char *txt = g_build_filename(dir, "0001-photo.txt", NULL);
    sdt_error error = {0};
    CHECK(g_file_set_contents(txt, "a [name] on a beach, sunset\n", -1, NULL), "write txt");
    char *c = sdt_caption_for_image(img, NULL, &error);
    CHECK(c && !strcmp(c, "a [name] on a beach, sunset"), "caption from .txt, trailing newline trimmed: \"%s\"",
          c ? c : error.message);
    free(c);
    CHECK(g_file_set_contents(txt, "bad \xff\xfe", -1, NULL), "write bad txt");
    c = sdt_caption_for_image(img, NULL, &error);
    CHECK(!c && strstr(error.message, "0001-photo.txt") && strstr(error.message, "UTF-8"),
          "non-UTF-8 caption named: %s", error.message);
    free(c);
    g_unlink(txt);
    c = sdt_caption_for_image(img, NULL, &error);
    CHECK(c && !strcmp(c, "photo"), "no .txt: from the file name: \"%s\"", c ? c : error.message);
    free(c);
    g_rmdir(dir);
    g_free(img);
    g_free(txt);
    g_free(dir);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *multiset(const char *caption)
{
    gchar **tags = g_strsplit(caption, ",", -1);
    guint n = g_strv_length(tags), k = 0;
    for (guint i = 0; i < n; i++) {
        g_strstrip(tags[i]);
        if (tags[i][0])
            tags[k++] = tags[i];
        else
            g_free(tags[i]);
    }
    tags[k] = NULL;
    qsort(tags, k, sizeof(char *), cmp_str);
    gchar *joined = g_strjoinv("|", tags);
    g_strfreev(tags);
    return joined;
}

static void test_tags(sdt_test_rng *rng)
{
    const char *caption = "red, car ,blue sky, , night, rain, street, neon";
    uint64_t seed = sdt_test_next(rng);
    sdt_prompt_rules none = {false, 0, 0}, shuffle = {true, 0, 0}, drop = {false, 0.5, 0}, all = {false, 1.0, 0};

    sdt_data_rng r = sdt_data_rng_seeded(seed);
    char *same = sdt_caption_tags_apply(caption, &none, &r);
    CHECK(same && !strcmp(same, caption) && r.state == seed, "no shuffle/dropout: unchanged, no RNG draws");
    free(same);

    /* Reproducible from the seed; a shuffle keeps every tag. */
    sdt_data_rng a = sdt_data_rng_seeded(seed), b = sdt_data_rng_seeded(seed);
    char *want_set = multiset(caption);
    int moved = 0;
    for (int i = 0; i < 50; i++) {
        char *x = sdt_caption_tags_apply(caption, &shuffle, &a), *y = sdt_caption_tags_apply(caption, &shuffle, &b);
        CHECK(x && y && !strcmp(x, y), "same seed, same shuffle");
        char *set = multiset(x);
        CHECK(!strcmp(set, want_set), "shuffle keeps the tags: %s vs %s", set, want_set);
        if (strncmp(x, "red, car, blue sky", 18)) moved++;
        g_free(set);
        free(x);
        free(y);
    }
    CHECK(moved > 40, "shuffles change the order (%d/50)", moved);

    /* Drop-out keeps about half; every kept tag is from the caption; p = 1 drops all. */
    sdt_data_rng d = sdt_data_rng_seeded(seed);
    int kept = 0, total = 0;
    for (int i = 0; i < 400; i++) {
        char *x = sdt_caption_tags_apply(caption, &drop, &d);
        gchar **tags = g_strsplit(x, ", ", -1);
        for (gchar **t = tags; *t; t++)
            if (**t) {
                kept++;
                CHECK(strstr(caption, *t) != NULL, "kept tag \"%s\" is from the caption", *t);
            }
        total += 8; /* 9 comma fields, one of them empty */
        g_strfreev(tags);
        free(x);
    }
    CHECK(kept > total * 0.4 && kept < total * 0.6, "dropout 0.5 keeps %d of %d", kept, total);
    char *empty = sdt_caption_tags_apply(caption, &all, &d);
    CHECK(empty && !strcmp(empty, ""), "dropout 1 drops all");
    free(empty);
    g_free(want_set);
}

/* keep_tokens (kohya's): the first N non-empty tags stay first, in order, never dropped; the rest
 * are dropped and shuffled as without it, uniformly. */
static void test_keep_tokens(sdt_test_rng *rng)
{
    const char *caption = "red, , car ,blue sky, night, rain, street, neon, fog";
    const char *rest[] = {"blue sky", "night", "rain", "street", "neon", "fog"};
    enum { REST = 6, TRIALS = 3000 };
    sdt_prompt_rules shuffle = {true, 0, 2}, drop_all = {false, 1.0, 2}, beyond = {true, 0.0, 50};
    sdt_data_rng r = sdt_data_rng_seeded(sdt_test_next(rng));
    int third[REST] = {0};
    for (int i = 0; i < TRIALS; i++) {
        char *x = sdt_caption_tags_apply(caption, &shuffle, &r);
        CHECK(x && !strncmp(x, "red, car, ", 10), "keep 2: '%s' does not start with the two kept tags", x);
        gchar **tags = g_strsplit(x + 10, ", ", -1);
        CHECK(g_strv_length(tags) == REST, "keep 2: '%s' lost a tag", x);
        for (int k = 0; k < REST; k++)
            if (tags[0] && !strcmp(tags[0], rest[k])) third[k]++;
        g_strfreev(tags);
        free(x);
    }
    /* Each of the 6 others is third with probability 1/6: 500 expected, sd ~20.4; 5 sd either way. */
    for (int k = 0; k < REST; k++)
        CHECK(abs(third[k] - TRIALS / REST) < 102, "keep 2: '%s' came third %d times of %d (want ~%d)", rest[k],
              third[k], TRIALS, TRIALS / REST);
    char *kept = sdt_caption_tags_apply(caption, &drop_all, &r);
    CHECK(kept && !strcmp(kept, "red, car"), "keep 2 with tag dropout 1: '%s', want the kept tags only", kept);
    free(kept);
    uint64_t before = r.state;
    char *all = sdt_caption_tags_apply(caption, &beyond, &r);
    CHECK(all && !strcmp(all, "red, car, blue sky, night, rain, street, neon, fog") && r.state == before,
          "keep 50 of 8 tags: '%s' in order, with no draw", all);
    free(all);
}

static void test_prompt(sdt_test_rng *rng)
{
    sdt_template t;
    sdt_error error = {0};
    const char text[] = "a photo of [name], [filewords]\nart by [name]";
    CHECK(sdt_template_parse(text, strlen(text), "t", &t, &error), "template");
    uint64_t seed = sdt_test_next(rng);
    sdt_data_rng a = sdt_data_rng_seeded(seed), b = sdt_data_rng_seeded(seed);
    sdt_prompt_rules rules = {true, 0.2, 0};
    for (int i = 0; i < 20; i++) {
        int la, lb;
        char *x = sdt_caption_prompt(&t, "cat, hat, [name] style", "tok", &rules, &a, &la);
        char *y = sdt_caption_prompt(&t, "cat, hat, [name] style", "tok", &rules, &b, &lb);
        CHECK(x && y && !strcmp(x, y) && la == lb, "prompt reproducible");
        CHECK(x && !strstr(x, "[name]") && !strstr(x, "[filewords]") && strstr(x, "tok"), "filled: %s", x);
        free(x);
        free(y);
    }
    sdt_template_free(&t);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("caption");
    test_filenames();
    test_txt_caption();
    test_tags(&rng);
    test_keep_tokens(&rng);
    test_prompt(&rng);
    return sdt_test_finish("caption");
}
