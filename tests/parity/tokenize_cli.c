/* tokenize_cli.c - drives models/tokenizer for tests/parity/tokenizer_vs_hf.py.
 *
 *   tokenize_cli DIR [--add TEXT]...            (DIR: model folder or tokenizer folder)
 *   tokenize_cli VOCAB.json MERGES.txt [--add TEXT]...
 *
 * Reads one JSON string per stdin line; writes one JSON object per line:
 *   {"tokens": [...ids without start/end...], "ids": [77 ids], "cut": n}
 * or {"error": "..."} for a line that is not a JSON string. Added tokens get
 * the next free ids in the order given (printed first as {"added": {text: id}}).
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

static cJSON *int_array(const int32_t *ids, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
    return a;
}

static void print_line(cJSON *obj)
{
    char *s = cJSON_PrintUnformatted(obj);
    puts(s);
    cJSON_free(s);
    cJSON_Delete(obj);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR | VOCAB.json MERGES.txt [--add TEXT]...\n", argv[0]);
        return 2;
    }
    sdt_error error = {0};
    int argi = 1;
    sdt_tokenizer *t;
    if (argc >= 3 && strncmp(argv[2], "--", 2) != 0) {
        t = sdt_tokenizer_load(argv[1], argv[2], &error);
        argi = 3;
    } else {
        t = sdt_tokenizer_load_dir(argv[1], &error);
        argi = 2;
    }
    if (!t) {
        fprintf(stderr, "%s\n", error.message);
        return 1;
    }
    cJSON *added = cJSON_CreateObject();
    for (; argi + 1 < argc && strcmp(argv[argi], "--add") == 0; argi += 2) {
        int32_t id;
        if (!sdt_tokenizer_add_token(t, argv[argi + 1], -1, &id, &error)) {
            fprintf(stderr, "%s\n", error.message);
            return 1;
        }
        cJSON_AddNumberToObject(added, argv[argi + 1], id);
    }
    cJSON *head = cJSON_CreateObject();
    cJSON_AddItemToObject(head, "added", added);
    print_line(head);

    size_t cap = 1 << 16, len = 0;
    char *line = malloc(cap);
    int c;
    while (1) {
        len = 0;
        while ((c = getchar()) != EOF && c != '\n') {
            if (len + 1 >= cap) line = realloc(line, cap *= 2);
            line[len++] = (char)c;
        }
        if (c == EOF && len == 0) break;
        line[len] = 0;
        cJSON *in = cJSON_Parse(line);
        cJSON *out = cJSON_CreateObject();
        if (!cJSON_IsString(in)) {
            cJSON_AddStringToObject(out, "error", "input line is not a JSON string");
        } else {
            int32_t *toks;
            size_t n;
            sdt_tokenizer_tokenize(t, in->valuestring, &toks, &n);
            int32_t ids[SDT_CLIP_CONTEXT];
            sdt_encode_report rep;
            sdt_encode_options opt = sdt_encode_defaults();
            sdt_tokenizer_encode(t, in->valuestring, &opt, ids, &rep, &error);
            cJSON_AddItemToObject(out, "tokens", int_array(toks, n));
            cJSON_AddItemToObject(out, "ids", int_array(ids, SDT_CLIP_CONTEXT));
            cJSON_AddNumberToObject(out, "cut", rep.n_cut);
            free(toks);
        }
        cJSON_Delete(in);
        print_line(out);
        fflush(stdout);
        if (c == EOF) break;
    }
    free(line);
    sdt_tokenizer_free(t);
    return 0;
}
