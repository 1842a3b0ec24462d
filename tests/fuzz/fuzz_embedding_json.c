/* fuzz_embedding_json.c - libFuzzer target: any bytes as a file given to `inspect --json`
 * (sdt_embedding_inspect_file). The description is valid JSON whatever the file's names and
 * metadata hold, and agrees with what sdt_embedding_load reads; a refusal explains itself. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ti/embedding_file.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *path = fuzz_write("input", data, size);
    sdt_error error = {0};
    char *json = sdt_embedding_inspect_file(path, &error);
    sdt_embedding e;
    bool loads = sdt_embedding_load(path, &e, NULL, &error);
    if (!json) {
        if (!error.message[0] || loads) abort();
        g_free(path);
        return 0;
    }
    if (!loads) abort();
    cJSON *root = cJSON_Parse(json);
    if (!root) abort(); /* hosts parse this: it must be JSON for any input */
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    if (!cJSON_IsString(name) || strcmp(name->valuestring, e.name) != 0) abort();
    const cJSON *vectors = cJSON_GetObjectItemCaseSensitive(root, "vectors");
    if (!cJSON_IsNumber(vectors) || vectors->valueint != e.n_vectors) abort();
    cJSON_Delete(root);
    free(json);
    sdt_embedding_free(&e);
    g_free(path);
    return 0;
}
