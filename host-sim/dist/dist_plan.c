/* dist_plan.c - see dist_plan.h. */
#include <netdb.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "dist_plan.h"

void dist_plan_clear(host_dist_plan *plan)
{
    g_free(plan->master_addr);
    g_free(plan->devices);
    memset(plan, 0, sizeof *plan);
}

/* The variable name as a whole number in [low, high]; FALSE with a sentence saying what it holds
 * and what it should. A variable that is not set is refused too (required_why says why it must be). */
static gboolean env_integer(char **envp, const char *name, gint64 low, gint64 high, const char *meaning, gint64 *out,
                            char **error)
{
    const char *text = g_environ_getenv(envp, name);
    if (!text || !text[0]) {
        *error = g_strdup_printf("%s is not set, but WORLD_SIZE says this process is one rank of a data-parallel job; "
                                 "set %s to %s (torchrun sets it), or unset WORLD_SIZE to train on one device.",
                                 name, name, meaning);
        return FALSE;
    }
    GError *gerr = NULL;
    if (!g_ascii_string_to_signed(text, 10, low, high, out, &gerr)) {
        char *shown = g_strescape(text, NULL);
        *error = g_strdup_printf("%s='%s' is not a whole number from %" G_GINT64_FORMAT " to %" G_GINT64_FORMAT
                                 "; set it to %s.",
                                 name, shown, low, high, meaning);
        g_free(shown);
        g_clear_error(&gerr);
        return FALSE;
    }
    return TRUE;
}

/* Whether addr resolves here (getaddrinfo); FALSE with the resolver's reason in *why. */
static gboolean address_resolves(const char *addr, char **why)
{
    struct addrinfo hints, *found = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(addr, NULL, &hints, &found);
    if (rc != 0) {
        *why = g_strdup(gai_strerror(rc));
        return FALSE;
    }
    freeaddrinfo(found);
    return TRUE;
}

gboolean dist_plan_from_environment(char **envp, host_dist_plan *plan, gboolean *is_rank, char **error)
{
    memset(plan, 0, sizeof *plan);
    plan->world_size = 1;
    *is_rank = FALSE;
    const char *world_text = g_environ_getenv(envp, "WORLD_SIZE");
    if (!world_text || !world_text[0] || strcmp(world_text, "1") == 0) return TRUE;
    gint64 world = 0, rank = 0, local_rank = 0, local_world = 0, port = 0;
    if (!env_integer(envp, "WORLD_SIZE", 1, DIST_MAX_WORLD_SIZE,
                     "the number of processes in the job (torchrun: --nnodes x --nproc-per-node)", &world, error))
        return FALSE;
    if (world == 1) return TRUE; /* "01": one device */
    char *rank_meaning = g_strdup_printf("this process's rank, 0 to %" G_GINT64_FORMAT " (WORLD_SIZE=%" G_GINT64_FORMAT
                                         " ranks are numbered from 0)",
                                         world - 1, world);
    gboolean ok = env_integer(envp, "RANK", 0, world - 1, rank_meaning, &rank, error);
    g_free(rank_meaning);
    if (!ok) return FALSE;
    const char *local_world_text = g_environ_getenv(envp, "LOCAL_WORLD_SIZE");
    if (local_world_text && local_world_text[0] &&
        !env_integer(envp, "LOCAL_WORLD_SIZE", 1, world, "the number of ranks on this machine, at most WORLD_SIZE",
                     &local_world, error))
        return FALSE;
    gint64 local_high = local_world ? local_world - 1 : world - 1;
    char *local_meaning = g_strdup_printf("this rank's index on its machine, 0 to %" G_GINT64_FORMAT
                                          " (it picks the GPU; --device cuda:N overrides)",
                                          local_high);
    ok = env_integer(envp, "LOCAL_RANK", 0, local_high, local_meaning, &local_rank, error);
    g_free(local_meaning);
    if (!ok) return FALSE;
    const char *addr = g_environ_getenv(envp, "MASTER_ADDR");
    if (!addr || !addr[0]) {
        *error = g_strdup(
            "MASTER_ADDR is not set, but WORLD_SIZE says this process is one rank of a data-parallel job; set it to "
            "the address or host name of rank 0's machine, reachable from every machine (127.0.0.1 on one machine).");
        return FALSE;
    }
    char *why = NULL;
    if (!address_resolves(addr, &why)) {
        char *shown = g_strescape(addr, NULL);
        *error = g_strdup_printf("MASTER_ADDR='%s' does not resolve here (%s); set it to the address or host name of "
                                 "rank 0's machine, reachable from every machine (127.0.0.1 on one machine).",
                                 shown, why);
        g_free(shown);
        g_free(why);
        return FALSE;
    }
    if (!env_integer(envp, "MASTER_PORT", 1, 65535,
                     "a free TCP port on rank 0's machine, the same for every rank (e.g. 29500)", &port, error))
        return FALSE;
    /* Recent torchrun serves MASTER_PORT itself (its agent's TCPStore, which PyTorch's own ranks join
     * as clients) and says so in TORCHELASTIC_USE_AGENT_STORE; the ranks meet on the next port then. */
    const char *agent_store = g_environ_getenv(envp, "TORCHELASTIC_USE_AGENT_STORE");
    if (agent_store && strcmp(agent_store, "True") == 0) {
        if (port == 65535) {
            *error = g_strdup("MASTER_PORT=65535 is torchrun's own (TORCHELASTIC_USE_AGENT_STORE=True) and the ranks "
                              "meet on the port after it, which does not exist; give torchrun --master-port (or "
                              "--rdzv-endpoint) a lower port.");
            return FALSE;
        }
        port++;
    }
    plan->world_size = (int32_t)world;
    plan->rank = (int32_t)rank;
    plan->local_rank = (int32_t)local_rank;
    plan->local_world_size = (int32_t)local_world;
    plan->master_addr = g_strdup(addr);
    plan->master_port = (uint16_t)port;
    plan->devices = g_new(int32_t, 1);
    plan->devices[0] = (int32_t)local_rank;
    plan->device_count = 1;
    plan->timeout_seconds = DIST_DEFAULT_TIMEOUT_SECONDS;
    *is_rank = TRUE;
    return TRUE;
}

gboolean dist_parse_gpu_list(const char *text, const char *origin, int32_t **gpus, int32_t *count, char **error)
{
    *gpus = NULL;
    *count = 0;
    char **items = g_strsplit(text ? text : "", ",", -1);
    guint n = g_strv_length(items);
    int32_t *list = g_new0(int32_t, n ? n : 1);
    gboolean ok = n > 0;
    if (!ok) *error = g_strdup_printf("%s is empty; list the GPUs to train on, e.g. 0,1,2,3.", origin);
    for (guint i = 0; ok && i < n; i++) {
        char *item = g_strstrip(items[i]);
        guint64 ordinal = 0;
        if (!g_ascii_string_to_unsigned(item, 10, 0, DIST_MAX_GPU_ORDINAL, &ordinal, NULL)) {
            char *shown = g_strescape(item, NULL);
            *error = g_strdup_printf("%s: '%s' is not a GPU number (0 to %d); list the GPUs as numbers separated by "
                                     "commas, e.g. 0,1,2,3 (nvidia-smi shows them).",
                                     origin, shown, DIST_MAX_GPU_ORDINAL);
            g_free(shown);
            ok = FALSE;
            break;
        }
        for (guint k = 0; k < i; k++)
            if (list[k] == (int32_t)ordinal) {
                *error = g_strdup_printf("%s names GPU %u twice; each GPU runs one rank, so list it once.", origin,
                                         (unsigned)ordinal);
                ok = FALSE;
            }
        list[i] = (int32_t)ordinal;
    }
    g_strfreev(items);
    if (!ok) {
        g_free(list);
        return FALSE;
    }
    *gpus = list;
    *count = (int32_t)n;
    return TRUE;
}

const sdt_distributed_ext *dist_extension(const sdt_trainer_factory *factory, char **error)
{
    const sdt_distributed_ext *ext =
        factory && factory->get_extension ? factory->get_extension(SDT_EXT_DISTRIBUTED) : NULL;
    if (!ext || ext->struct_size < sizeof *ext || !ext->available || !ext->new_comm_id) {
        *error = g_strdup("This libsdtrain.so cannot train on chosen GPUs (it offers no '" SDT_EXT_DISTRIBUTED
                          "'); use a plugin of ABI 1.8 or newer built with CUDA and NCCL, or train on one device "
                          "(leave out --gpus and --device cuda:N, and unset WORLD_SIZE).");
        return NULL;
    }
    char why[1024] = "";
    if (ext->available(why, sizeof why) != SDT_STATUS_OK) {
        *error = g_strdup_printf("This libsdtrain.so cannot train on chosen GPUs here: %s%s",
                                 why[0] ? why : "it gave no reason", why[0] && why[strlen(why) - 1] == '.' ? "" : ".");
        return NULL;
    }
    return ext;
}

gboolean dist_plan_apply(const host_dist_plan *plan, sdt_train_options *options, char **error)
{
    if (plan->world_size <= 1 && plan->device_count <= 1 && !plan->devices) return TRUE;
    if (options->struct_size < offsetof(sdt_train_options, comm_id) + sizeof options->comm_id) {
        *error = g_strdup("The training options are too small for data-parallel training (a plugin before ABI 1.8).");
        return FALSE;
    }
    options->world_size = plan->world_size;
    options->rank = plan->rank;
    options->devices = plan->devices;
    options->device_count = plan->device_count;
    options->comm_timeout_seconds = plan->timeout_seconds;
    memcpy(options->comm_id, plan->comm_id, sizeof options->comm_id);
    return TRUE;
}
