/* part_files.c - creating and inspecting a part's files (see part_files.h). */
#include "api/part_files.h"

#include <stdlib.h>
#include <string.h>

#include "api/ti_config.h"
#include "checkpoint_describe.h"
#include "hn/hn_abi_ops.h"
#include "host/copy_out.h"
#include "host/host_log.h"
#include "ti/ti_embedding_ops.h"

/* The end of a create call: the file is written; it is reported, and its path copied out when asked. */
static sdt_status created(sdt_trainer_handle *t, sdt_file_kind kind, const char *what, const char *path, char *path_buf,
                          uint32_t path_buf_size, uint32_t *needed)
{
    sdt_host_file_saved(&t->host, kind, path, 0);
    if (!path_buf && path_buf_size == 0 && !needed) return SDT_STATUS_OK;
    sdt_status st = sdt_copy_string_out(path, path_buf, path_buf_size, needed);
    if (st != SDT_STATUS_OK)
        return sdt_handle_fail(&t->base, st, "The %s was written, but its path needs %zu bytes and path_buf has %u.",
                               what, strlen(path) + 1, (unsigned)path_buf_size);
    return SDT_STATUS_OK;
}

/* An inspect call on an embedding or a hypernetwork file: the last error cleared, the path and the info's
 * struct_size checked, the file read, and its info and JSON copied out as asked. */
static sdt_status inspect(sdt_trainer_handle *t, sdt_file_kind kind, const char *path, void *info, char *json_buf,
                          uint32_t json_buf_size, uint32_t *json_needed)
{
    const bool embedding = kind == SDT_FILE_EMBEDDING;
    sdt_handle_clear_error(&t->base);
    if (!path || !path[0])
        return sdt_handle_fail(&t->base, SDT_STATUS_INVALID_ARGUMENT, "inspect(): path is empty; pass %s file.",
                               embedding ? "an embedding" : "a hypernetwork");
    uint32_t info_size = 0;
    if (info) memcpy(&info_size, info, sizeof info_size); /* every output struct starts with its struct_size */
    if (info && info_size < sizeof(uint32_t))
        return sdt_handle_fail(&t->base, SDT_STATUS_INVALID_ARGUMENT,
                               "inspect(): info->struct_size is not set; set it to sizeof(%s).",
                               embedding ? "sdt_embedding_info" : "sdt_hypernetwork_info");
    bool want_json = json_buf || json_needed;
    union {
        sdt_embedding_info embedding;
        sdt_hypernetwork_info hypernetwork;
    } found;
    memset(&found, 0, sizeof found);
    if (embedding)
        found.embedding.struct_size = sizeof found.embedding;
    else
        found.hypernetwork.struct_size = sizeof found.hypernetwork;
    size_t found_size = embedding ? sizeof found.embedding : sizeof found.hypernetwork;
    char *json = NULL;
    sdt_error error = {0};
    bool read = embedding ? ti_inspect_file(path, &found.embedding, want_json ? &json : NULL, &error)
                          : sdt_hn_abi_inspect(path, &found.hypernetwork, want_json ? &json : NULL, &error);
    if (!read) {
        free(json);
        json = NULL;
        /* an embedding call's JSON alone (no info to fill) may describe a model checkpoint instead */
        bool is_checkpoint = false;
        sdt_error model_error = {0};
        if (embedding && !info && want_json) json = sd_checkpoint_describe_json(path, &is_checkpoint, &model_error);
        if (!json) return sdt_handle_fail_error(&t->base, is_checkpoint ? &model_error : &error);
    }
    return sdt_handle_inspect_out(&t->base, info, &found, found_size, json, json_buf, json_buf_size, json_needed);
}

sdt_status sdt_part_files_create_embedding(sdt_trainer_handle *t, const sdt_embedding_spec *spec, char *path_buf,
                                           uint32_t path_buf_size, uint32_t *needed)
{
    sdt_status st = sdt_trainer_begin_call(t, "create_embedding");
    if (st != SDT_STATUS_OK) return st;
    sdt_embedding_spec own;
    ti_spec_set_defaults(&own);
    if (!spec || !sdt_struct_read_in(&own, sizeof own, spec))
        return sdt_handle_fail(
            &t->base, SDT_STATUS_INVALID_ARGUMENT,
            "create_embedding(): spec is NULL or spec->struct_size is not set; set it to sizeof(sdt_embedding_spec).");
    sdt_error error = {0};
    char path[4096] = "";
    if (!ti_spec_check(&own, &error) || !ti_create_embedding(&own, &t->host, path, sizeof path, &error))
        return sdt_handle_fail_error(&t->base, &error);
    return created(t, SDT_FILE_EMBEDDING, "embedding", path, path_buf, path_buf_size, needed);
}

sdt_status sdt_part_files_inspect_embedding(sdt_trainer_handle *t, const char *path, sdt_embedding_info *info,
                                            char *json_buf, uint32_t json_buf_size, uint32_t *json_needed)
{
    return inspect(t, SDT_FILE_EMBEDDING, path, info, json_buf, json_buf_size, json_needed);
}

sdt_status sdt_part_files_create_hypernetwork(sdt_trainer_handle *t, const sdt_hypernetwork_spec *spec, char *path_buf,
                                              uint32_t path_buf_size, uint32_t *needed)
{
    sdt_status st = sdt_trainer_begin_call(t, "create_hypernetwork");
    if (st != SDT_STATUS_OK) return st;
    sdt_hypernetwork_spec own;
    memset(&own, 0, sizeof own);
    own.struct_size = sizeof own;
    if (!spec || !sdt_struct_read_in(&own, sizeof own, spec))
        return sdt_handle_fail(
            &t->base, SDT_STATUS_INVALID_ARGUMENT,
            "create_hypernetwork(): spec is NULL or spec->struct_size is not set; set it to sizeof(sdt_hypernetwork_spec).");
    sdt_error error = {0};
    char path[4096] = "";
    if (!sdt_hn_abi_create(&own, path, sizeof path, &error)) return sdt_handle_fail_error(&t->base, &error);
    return created(t, SDT_FILE_HYPERNETWORK, "hypernetwork", path, path_buf, path_buf_size, needed);
}

sdt_status sdt_part_files_inspect_hypernetwork(sdt_trainer_handle *t, const char *path, sdt_hypernetwork_info *info,
                                               char *json_buf, uint32_t json_buf_size, uint32_t *json_needed)
{
    return inspect(t, SDT_FILE_HYPERNETWORK, path, info, json_buf, json_buf_size, json_needed);
}
