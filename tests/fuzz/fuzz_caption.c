/* fuzz_caption.c - libFuzzer target for captions: an image's .txt (any bytes), the caption
 * from a file name under a word regex and join string, then tag drop-out and shuffle and the
 * prompt built from a template. Input: "<regex>\n<join>\n<flags byte><.txt contents>". */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/caption.h"
#include "fuzz_file.h"
#include "data/template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The next '\n'-terminated field of the input, as a string (g_free); NULL when there is none. */
static char *take_line(const uint8_t **data, size_t *size)
{
    const uint8_t *nl = memchr(*data, '\n', *size);
    if (!nl) return NULL;
    char *line = g_strndup((const char *)*data, (gsize)(nl - *data));
    *size -= (size_t)(nl - *data) + 1;
    *data = nl + 1;
    return line;
}

static void check_prompt(const char *caption, uint8_t flags)
{
    static const char text[] = "a photo of [name], [filewords]\n[filewords] by [name]\n";
    sdt_template t;
    sdt_error error = {0};
    if (!sdt_template_parse(text, sizeof text - 1, "fuzz.txt", &t, &error)) abort();
    sdt_prompt_rules rules = {.shuffle_tags = flags & 1, .tag_dropout = (flags >> 1 & 7) / 7.0};
    sdt_data_rng rng = sdt_data_rng_seeded(flags);
    char *tags = sdt_caption_tags_apply(caption, &rules, &rng);
    if (!tags) abort();
    free(tags);
    int line = -1;
    char *prompt = sdt_caption_prompt(&t, caption, "tok", &rules, &rng, &line);
    if (!prompt || line < 0 || line >= t.n_lines || !strstr(prompt, "tok")) abort();
    free(prompt);
    sdt_template_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *regex = take_line(&data, &size);
    char *join = regex ? take_line(&data, &size) : NULL;
    if (!join || size < 1) {
        g_free(regex);
        g_free(join);
        return 0;
    }
    uint8_t flags = data[0];
    sdt_caption_rules rules = {.word_regex = regex, .join_string = join};
    sdt_error error = {0};
    if (!sdt_caption_rules_check(&rules, &error)) {
        if (!error.message[0]) abort();
        g_free(regex);
        g_free(join);
        return 0;
    }
    /* The .txt next to an image, and the name alone (no .txt beside the second image). */
    char *txt = fuzz_write("12-red_ring, on grass.txt", data + 1, size - 1);
    char *image = fuzz_path("12-red_ring, on grass.png");
    char *named = fuzz_path("0007 a-b c_d (2).jpg");
    char *captions[2];
    captions[0] = sdt_caption_for_image(image, &rules, &error);
    if (!captions[0] && !error.message[0]) abort();
    captions[1] = sdt_caption_from_filename(named, &rules, &error);
    if (!captions[1]) abort(); /* the rules passed their check */
    for (int i = 0; i < 2; i++)
        if (captions[i]) {
            check_prompt(captions[i], flags);
            free(captions[i]);
        }
    g_free(txt);
    g_free(image);
    g_free(named);
    g_free(regex);
    g_free(join);
    return 0;
}
