/* test_templates.c - the prompt templates copied beside sdt-host: all six files,
 * one prompt per line, each line using exactly the placeholders its file
 * promises (so a TI template always puts [name] in the prompt and a
 * filewords template always uses the caption), and the trainer's template
 * reader accepts the [name] ones for textual inversion and refuses the others. */
#include <string.h>

#include "data/template.h"

#include "io_test_util.h"
#include "sdt_test.h"

typedef struct template_rule {
    const char *file;
    bool name, filewords; /* every line has it (true) or none has it (false) */
} template_rule;

static void check_template(const char *dir, const template_rule *r)
{
    char *path = g_build_filename(dir, r->file, NULL);
    char *text = NULL;
    CHECK(g_file_get_contents(path, &text, NULL, NULL), "%s is missing (copied by host-sim/CMakeLists.txt)", path);
    if (text) {
        char **lines = g_strsplit(text, "\n", -1);
        int prompts = 0;
        for (int i = 0; lines[i]; i++) {
            if (!lines[i][0] && !lines[i + 1]) break; /* the file's final newline */
            prompts++;
            CHECK(g_strstrip(lines[i])[0], "%s line %d is blank (an empty prompt)", r->file, i + 1);
            CHECK(io_contains(lines[i], "[name]") == r->name, "%s line %d '%s': [name] should be %s", r->file, i + 1,
                  lines[i], r->name ? "present" : "absent");
            CHECK(io_contains(lines[i], "[filewords]") == r->filewords, "%s line %d '%s': [filewords] should be %s",
                  r->file, i + 1, lines[i], r->filewords ? "present" : "absent");
        }
        CHECK(prompts >= 1, "%s has no prompt", r->file);
        g_strfreev(lines);
        sdt_template parsed;
        sdt_error error = {0};
        CHECK(sdt_template_load(path, &parsed, &error), "the template reader refuses %s: %s", path, error.message);
        if (parsed.lines) {
            CHECK(parsed.n_lines == prompts, "%s: the reader sees %d prompts, the file has %d", r->file, parsed.n_lines,
                  prompts);
            CHECK(sdt_template_check_for_embedding(&parsed, r->file, &error) == r->name,
                  "%s: the textual-inversion pre-flight check %s it", r->file, r->name ? "refuses" : "accepts");
            sdt_template_free(&parsed);
        }
    }
    g_free(text);
    g_free(path);
}

int main(void)
{
    const template_rule rules[] = {
        {"style.txt", true, false},        {"style_filewords.txt", true, true},
        {"subject.txt", true, false},      {"subject_filewords.txt", true, true},
        {"hypernetwork.txt", false, true}, {"none.txt", false, false},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(rules); i++) check_template(SDT_TEMPLATES_DIR, &rules[i]);
    return sdt_test_finish("demo_templates");
}
