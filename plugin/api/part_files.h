/* part_files.h - the calls on a part's files that are not training: creating and inspecting an
 * embedding or a hypernetwork file. One implementation behind the trainer factory's extensions
 * ("sdtrain.embedding_files/1", "sdtrain.hypernetwork_files/1") and the deprecated method
 * factories' members of the same meaning. Each takes a checked trainer handle, clears its last
 * error, and leaves a sentence on it on failure; a created file is reported to file_saved. */
#ifndef SDT_API_PART_FILES_H
#define SDT_API_PART_FILES_H

#include "api/trainer_handle.h"
#include "sdtrain.h"

sdt_status sdt_part_files_create_embedding(sdt_trainer_handle *t, const sdt_embedding_spec *spec, char *path_buf,
                                           uint32_t path_buf_size, uint32_t *needed);
sdt_status sdt_part_files_inspect_embedding(sdt_trainer_handle *t, const char *path, sdt_embedding_info *info,
                                            char *json_buf, uint32_t json_buf_size, uint32_t *json_needed);
sdt_status sdt_part_files_create_hypernetwork(sdt_trainer_handle *t, const sdt_hypernetwork_spec *spec, char *path_buf,
                                              uint32_t path_buf_size, uint32_t *needed);
sdt_status sdt_part_files_inspect_hypernetwork(sdt_trainer_handle *t, const char *path, sdt_hypernetwork_info *info,
                                               char *json_buf, uint32_t json_buf_size, uint32_t *json_needed);

#endif
