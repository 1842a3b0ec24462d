/* caption.c - captions from .txt files or file names, tag drop-out and shuffle; see caption.h. */
#include "data/caption.h"

#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/path_util.h"
#include "file_read.h"

static GRegex *compile_word_regex(const char *pattern, sdt_error *error)
{
    /* PCRE2 reads past the end of invalid UTF-8 in a pattern (a fuzzer found it), so it never sees one. */
    if (!g_utf8_validate(pattern, -1, NULL)) {
        sdt_fail(error, SDT_ERR_VALIDATION,
                 "filename word regex is not valid UTF-8 text; type the pattern again as plain text "
                 "or leave it empty");
        return NULL;
    }
    GError *gerr = NULL;
    GRegex *re = g_regex_new(pattern, G_REGEX_OPTIMIZE, 0, &gerr);
    if (!re) {
        sdt_fail(error, SDT_ERR_VALIDATION,
                 "filename word regex \"%s\" does not compile (%s); fix the pattern or leave it empty", pattern,
                 gerr ? gerr->message : "unknown error");
        g_clear_error(&gerr);
        return NULL;
    }
    if (g_regex_get_capture_count(re) > 1) {
        sdt_fail(error, SDT_ERR_VALIDATION,
                 "filename word regex \"%s\" has %d capture groups; use at most one, or non-capturing groups (?:...)",
                 pattern, g_regex_get_capture_count(re));
        g_regex_unref(re);
        return NULL;
    }
    return re;
}

bool sdt_caption_rules_check(const sdt_caption_rules *rules, sdt_error *error)
{
    if (!rules || !rules->word_regex || !rules->word_regex[0]) return true;
    GRegex *re = compile_word_regex(rules->word_regex, error);
    if (!re) return false;
    g_regex_unref(re);
    return true;
}

char *sdt_caption_from_filename(const char *image_path, const sdt_caption_rules *rules, sdt_error *error)
{
    char *stem = sdt_path_stem(image_path);
    if (!stem) return NULL;
    /* Drop the "00012-3-" style counter prefix that batch tools add. */
    const char *p = stem;
    while (*p == '-' || g_ascii_isdigit(*p)) p++;
    if (p != stem)
        while (g_ascii_isspace(*p)) p++;
    char *text = strdup(p);
    free(stem);
    if (!text || !rules || !rules->word_regex || !rules->word_regex[0]) return text;

    GRegex *re = compile_word_regex(rules->word_regex, error);
    if (!re) {
        free(text);
        return NULL;
    }
    const char *join = rules->join_string ? rules->join_string : " ";
    int group = g_regex_get_capture_count(re) == 1 ? 1 : 0;
    GString *out = g_string_new(NULL);
    GMatchInfo *mi = NULL;
    bool first = true;
    g_regex_match(re, text, 0, &mi);
    while (g_match_info_matches(mi)) {
        gchar *word = g_match_info_fetch(mi, group);
        if (!first) g_string_append(out, join);
        g_string_append(out, word ? word : "");
        g_free(word);
        first = false;
        if (!g_match_info_next(mi, NULL)) break;
    }
    g_match_info_free(mi);
    g_regex_unref(re);
    free(text);
    char *result = strdup(out->str);
    g_string_free(out, TRUE);
    return result;
}

char *sdt_caption_for_image(const char *image_path, const sdt_caption_rules *rules, sdt_error *error)
{
    /* "<path without extension>.txt", as A1111 builds it from os.path.splitext(path). */
    char *dir = g_path_get_dirname(image_path);
    char *stem = sdt_path_stem(image_path);
    char *txt_name = g_strconcat(stem ? stem : "", ".txt", NULL);
    char *txt_path = g_build_filename(dir, txt_name, NULL);
    g_free(dir);
    g_free(txt_name);
    free(stem);

    char *result = NULL;
    /* lstat: a dangling symlink or a FIFO named like the caption is the user's caption file too,
     * and is refused by the reader with a sentence rather than skipped or waited on. */
    struct stat sb;
    if (lstat(txt_path, &sb) == 0) {
        char *text = NULL;
        size_t len = 0;
        if (!sdt_file_read_all(txt_path, "caption file", SDT_FILE_LIMIT_TEXT, &text, &len, error)) {
            sdt_error_append(error, "; fix or remove the caption file");
        } else if (memchr(text, 0, len) || !g_utf8_validate(text, (gssize)len, NULL)) {
            sdt_fail(error, SDT_ERR_VALIDATION, "%s: the caption file is not UTF-8 text; save it as UTF-8", txt_path);
        } else {
            /* Trailing newline and spaces are not part of the caption. */
            g_strchomp(text);
            result = strdup(text);
        }
        free(text);
    } else {
        result = sdt_caption_from_filename(image_path, rules, error);
    }
    g_free(txt_path);
    return result;
}

char *sdt_caption_tags_apply(const char *caption, const sdt_prompt_rules *rules, sdt_data_rng *rng)
{
    bool dropout = rules && rules->tag_dropout > 0;
    bool shuffle = rules && rules->shuffle_tags;
    if (!dropout && !shuffle) return strdup(caption ? caption : "");

    gchar **tags = g_strsplit(caption ? caption : "", ",", -1);
    guint n = g_strv_length(tags), kept = 0, fixed = 0;
    guint keep = rules->keep_tokens > 0 ? (guint)rules->keep_tokens : 0;
    for (guint i = 0; i < n; i++) {
        g_strstrip(tags[i]);
        if (tags[i][0] && fixed < keep) { /* kohya's keep_tokens: never dropped, no draw */
            tags[kept++] = tags[i];
            fixed++;
            continue;
        }
        /* One draw per tag, like A1111's [t for t in tags if random() > p]. */
        bool keep_tag = !dropout || sdt_data_rng_uniform(rng) > rules->tag_dropout;
        if (keep_tag && tags[i][0])
            tags[kept++] = tags[i];
        else
            g_free(tags[i]);
    }
    tags[kept] = NULL;
    if (shuffle) /* Fisher-Yates over the tags after the kept ones, as random.shuffle does */
        for (guint i = kept - fixed; i > 1; i--) {
            guint j = (guint)sdt_data_rng_below(rng, i);
            gchar *tmp = tags[fixed + i - 1];
            tags[fixed + i - 1] = tags[fixed + j];
            tags[fixed + j] = tmp;
        }
    gchar *joined = g_strjoinv(", ", tags);
    char *result = strdup(joined);
    g_free(joined);
    g_strfreev(tags);
    return result;
}

char *sdt_caption_prompt(const sdt_template *t, const char *caption, const char *name, const sdt_prompt_rules *rules,
                         sdt_data_rng *rng, int *line_index)
{
    int line = sdt_template_pick(t, rng);
    if (line_index) *line_index = line;
    if (line < 0) return NULL;
    char *words = sdt_caption_tags_apply(caption, rules, rng);
    if (!words) return NULL;
    char *prompt = sdt_template_fill(t->lines[line], name, words);
    free(words);
    return prompt;
}
