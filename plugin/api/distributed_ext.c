/* distributed_ext.c - the extension "sdtrain.distributed/1" (1.8, docs/abi.md 3.16): whether NCCL
 * can run, and a new communicator id for a host that launches one process per GPU. Both go
 * through the CUDA module (plugin_nccl_open), which opens libnccl.so.2 on first use. */
#include "api/distributed_ext.h"

#include <string.h>

#include "host/backend_select.h"
#include "host/copy_out.h"

/* The sentence into the host's buffer (err may be NULL); returns status. */
static sdt_status answer(sdt_status status, const char *why, char *err, uint32_t err_size)
{
    if (err && err_size) sdt_copy_string_out(status == SDT_STATUS_OK ? "" : why, err, err_size, NULL);
    return status;
}

static sdt_status distributed_available(char *err, uint32_t err_size)
{
    char why[1600] = "";
    void *module = NULL;
    const sdt_comm_nccl_api *api = plugin_nccl_open(&module, why, sizeof why);
    if (!api) return answer(SDT_STATUS_UNSUPPORTED, why, err, err_size);
    sdt_error e;
    sdt_error_clear(&e);
    bool ok = api->available(&e);
    plugin_nccl_close(module);
    return answer(ok ? SDT_STATUS_OK : (sdt_status)e.code, e.message, err, err_size);
}

static sdt_status distributed_new_comm_id(uint8_t id[128], char *err, uint32_t err_size)
{
    if (!id)
        return answer(SDT_STATUS_INVALID_ARGUMENT, "new_comm_id: id is NULL; pass a 128-byte buffer.", err, err_size);
    memset(id, 0, SDT_COMM_ID_BYTES);
    char why[1600] = "";
    void *module = NULL;
    const sdt_comm_nccl_api *api = plugin_nccl_open(&module, why, sizeof why);
    if (!api) return answer(SDT_STATUS_UNSUPPORTED, why, err, err_size);
    sdt_error e;
    sdt_error_clear(&e);
    bool ok = api->new_id(id, &e);
    plugin_nccl_close(module);
    if (!ok) memset(id, 0, SDT_COMM_ID_BYTES);
    return answer(ok ? SDT_STATUS_OK : (sdt_status)e.code, e.message, err, err_size);
}

_Static_assert(SDT_COMM_ID_BYTES == sizeof(((sdt_train_options *)0)->comm_id), "the ABI's id is NCCL's");

const sdt_distributed_ext sdt_distributed_ext_table = {
    .struct_size = sizeof(sdt_distributed_ext),
    .available = distributed_available,
    .new_comm_id = distributed_new_comm_id,
};
