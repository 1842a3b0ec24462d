/* sdt-make-tokenizer - trains a CLIP-style byte-level BPE tokenizer and writes
 * vocab.json + merges.txt, the files models/tokenizer/tokenizer.c reads.
 *
 *   sdt-make-tokenizer --out DIR [--vocab-size N | --for-config tiny|sd15|sd2] [--corpus FILE]
 *
 * The vocabulary size must equal the text encoder's token table: --for-config
 * takes it from the model preset (tiny: the demo model), --vocab-size sets it
 * by hand; the default is the tiny preset's. Without --corpus the built-in
 * English caption corpus (demo_corpus.c) is used. Same input, same files.
 */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe_trainer.h"
#include "demo_corpus.h"
#include "sd_model.h"

static int usage(const char *msg)
{
    if (msg) fprintf(stderr, "sdt-make-tokenizer: %s\n", msg);
    fprintf(stderr,
            "usage: sdt-make-tokenizer --out DIR [--vocab-size N | --for-config tiny|sd15|sd2] "
            "[--corpus FILE]\n"
            "  --vocab-size N   entries in vocab.json, at least %d (default: the tiny model's, %d)\n"
            "  --for-config C   the vocabulary size of that model preset's text encoder\n"
            "  --corpus FILE    UTF-8 text to learn from (default: the built-in caption corpus)\n",
            BPE_MIN_VOCAB, (int)sd_config_preset(SD_FAMILY_TINY).clip.vocab);
    return 2;
}

static bool parse_vocab_size(const char *s, int32_t *out)
{
    guint64 v;
    if (!g_ascii_string_to_unsigned(s, 10, BPE_MIN_VOCAB, 1 << 22, &v, NULL))
        return false; /* the tokenizer's id bound */
    *out = (int32_t)v;
    return true;
}

static int train(const char *out, int32_t vocab_size, const char *corpus_path)
{
    sdt_error error = {0};
    bpe_trainer *t = bpe_trainer_new();
    if (corpus_path) {
        char *text = NULL;
        GError *e = NULL;
        if (!g_file_get_contents(corpus_path, &text, NULL, &e)) {
            fprintf(stderr, "sdt-make-tokenizer: cannot read the corpus %s (%s); check the --corpus path.\n",
                    corpus_path, e->message);
            g_error_free(e);
            bpe_trainer_free(t);
            return 1;
        }
        bpe_trainer_add_text(t, text);
        g_free(text);
    } else {
        bpe_trainer_add_text(t, sdt_demo_corpus);
    }
    bool ok = bpe_trainer_learn(t, vocab_size, &error) && bpe_trainer_save(t, out, &error);
    if (ok)
        printf("wrote %s/vocab.json and merges.txt (%d tokens from %zu distinct words)\n", out, (int)vocab_size,
               bpe_trainer_distinct_words(t));
    else
        fprintf(stderr, "sdt-make-tokenizer: %s.\n", error.message);
    bpe_trainer_free(t);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *out = NULL, *corpus = NULL;
    int32_t vocab_size = sd_config_preset(SD_FAMILY_TINY).clip.vocab;
    bool size_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(NULL), 0;
        if (!v) {
            fprintf(stderr, "sdt-make-tokenizer: unknown or incomplete argument '%s'\n", a);
            return usage(NULL);
        }
        i++;
        if (!strcmp(a, "--out"))
            out = v;
        else if (!strcmp(a, "--corpus"))
            corpus = v;
        else if (!strcmp(a, "--vocab-size") || !strcmp(a, "--for-config")) {
            sd_family family;
            if (size_given) return usage("give --vocab-size or --for-config once");
            size_given = true;
            if (!strcmp(a, "--for-config")) {
                if (!sd_family_parse(v, &family)) return usage("--for-config must be tiny, sd15 or sd2");
                vocab_size = sd_config_preset(family).clip.vocab;
            } else if (!parse_vocab_size(v, &vocab_size)) {
                return usage("--vocab-size must be a whole number from 514 to 4194304");
            }
        } else {
            fprintf(stderr, "sdt-make-tokenizer: unknown argument '%s'\n", a);
            return usage(NULL);
        }
    }
    if (!out) return usage("--out is required");
    return train(out, vocab_size, corpus);
}
