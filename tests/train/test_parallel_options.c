/* test_parallel_options - the data-parallel options (ABI 1.8, docs/abi.md 3.16): one device by
 * default and for an older struct, each bad combination refused with a sentence naming the field,
 * the device list copied at prepare, and the trainer factory's "sdtrain.distributed/1" answering
 * with a status and a sentence where the CUDA module or NCCL is missing. */
#include <stddef.h>
#include <string.h>

#include "sdt_test.h"
#include "api/factories.h"
#include "train/options_copy.h"
#include "train/train_options.h"

static bool refused(const sdt_train_options *o, const char *words, const char *what)
{
    sdt_error e;
    sdt_error_clear(&e);
    bool ok = sdt_train_options_check(o, "options->", &e);
    CHECK(!ok && e.code == SDT_ERR_VALIDATION && strstr(e.message, words), "%s is refused naming '%s': %s", what, words,
          e.message);
    return !ok;
}

static void test_checks(void)
{
    sdt_train_options d;
    sdt_train_options_set_defaults(&d, "textual_inversion");
    CHECK(d.world_size == 0 && d.rank == 0 && !d.devices && d.device_count == 0 && d.comm_timeout_seconds == 0 &&
              d.comm_id[0] == 0 && d.comm_id[127] == 0,
          "the defaults are one device");
    sdt_error e;
    CHECK(sdt_train_options_check(&d, "options->", &e), "the defaults pass: %s", e.message);
    sdt_train_options one = d;
    one.world_size = 1;
    CHECK(sdt_train_options_check(&one, "options->", &e), "world_size 1 is one device: %s", e.message);

    sdt_train_options o = d;
    o.world_size = -2;
    refused(&o, "options->world_size is -2", "a negative world size");
    o = d;
    o.comm_timeout_seconds = -1;
    refused(&o, "options->comm_timeout_seconds is -1", "a negative timeout");
    o = d;
    int32_t list[2] = {0, 1};
    o.devices = list;
    refused(&o, "options->device_count is 0", "a device list without its count");
    o = d;
    o.device_count = 2;
    refused(&o, "options->devices is NULL", "a count without a list");
    o = d;
    o.devices = list;
    o.device_count = 65;
    refused(&o, "at most 64 devices", "too many devices");
    o = d;
    int32_t bad[2] = {0, -3};
    o.devices = bad;
    o.device_count = 2;
    refused(&o, "options->devices[1] is -3", "a negative ordinal");
    o = d;
    o.world_size = 2;
    o.rank = 2;
    refused(&o, "rank 2 with 1 device(s) does not fit in options->world_size 2", "a rank past the job");
    o = d;
    o.world_size = 4;
    o.rank = 3;
    o.devices = list;
    o.device_count = 2;
    refused(&o, "rank 3 with 2 device(s) does not fit", "devices past the job");
    /* one rank per process: a valid job of several ranks */
    o = d;
    o.world_size = 2;
    o.rank = 1;
    CHECK(sdt_train_options_check(&o, "options->", &e), "rank 1 of 2, one process per device: %s", e.message);
    /* in-process devices: the whole job, or a part of a job of several processes */
    o = d;
    o.world_size = 2;
    o.devices = list;
    o.device_count = 2;
    CHECK(sdt_train_options_check(&o, "options->", &e), "two devices of a job of 2 in one process: %s", e.message);
    o.world_size = 0;
    CHECK(sdt_train_options_check(&o, "options->", &e), "two devices as the whole job: %s", e.message);
    o.world_size = 4;
    o.rank = 2;
    CHECK(sdt_train_options_check(&o, "options->", &e), "ranks 2 and 3 of 4 in this process: %s", e.message);
    o = d;
    int32_t twice[3] = {1, 0, 1};
    o.devices = twice;
    o.device_count = 3;
    refused(&o, "options->devices[0] and options->devices[2] both name CUDA device 1", "a device listed twice");
}

static void test_read_and_copy(void)
{
    sdt_train_options d, own;
    sdt_train_options_set_defaults(&d, "textual_inversion");
    sdt_error e;
    /* a 1.6 host: struct_size ends before world_size; whatever lies past it is not read */
    unsigned char raw[sizeof(sdt_train_options)];
    memcpy(raw, &d, sizeof d);
    memset(raw + offsetof(sdt_train_options, world_size), 0xff, sizeof raw - offsetof(sdt_train_options, world_size));
    sdt_train_options old;
    memcpy(&old, raw, sizeof old);
    old.struct_size = (uint32_t)offsetof(sdt_train_options, world_size);
    CHECK(sdt_train_options_read(&own, &old, "textual_inversion", "options", &e), "a 1.6 struct: %s", e.message);
    CHECK(own.world_size == 0 && !own.devices && own.device_count == 0, "a 1.6 struct gets one device");

    /* the list is the host's memory: the job keeps its own copy */
    int32_t list[3] = {2, 0, 1};
    sdt_train_options host = d, copy;
    host.devices = list;
    host.device_count = 3;
    CHECK(sdt_train_options_copy(&copy, &host), "copied");
    CHECK(copy.devices && copy.devices != list && copy.devices[0] == 2 && copy.devices[2] == 1,
          "the device list is copied");
    list[0] = 7;
    CHECK(copy.devices[0] == 2, "the host's later change does not reach the copy");
    sdt_train_options_release(&copy);
    CHECK(!copy.devices, "released");
    host.device_count = 1000; /* refused by the checks; the copy keeps a list, not the host's pointer */
    CHECK(sdt_train_options_copy(&copy, &host) && copy.devices && copy.devices != list, "a bad count copies nothing");
    CHECK(!sdt_train_options_check(&copy, "options->", &e) && strstr(e.message, "device_count is 1000"),
          "and the check names the count: %s", e.message);
    sdt_train_options_release(&copy);
}

static void test_extension(void)
{
    const sdt_distributed_ext *x =
        (const sdt_distributed_ext *)sdt_trainer_factory_table.get_extension(SDT_EXT_DISTRIBUTED);
    CHECK(x && x->struct_size == sizeof *x && x->available && x->new_comm_id, "the trainer factory has %s",
          SDT_EXT_DISTRIBUTED);
    if (!x) return;
    char err[512] = "untouched";
    sdt_status s = x->available(err, sizeof err);
    /* this test program has no CUDA module beside it: unavailable, with the reason */
    CHECK(s == SDT_STATUS_OK ? err[0] == '\0' : s == SDT_STATUS_UNSUPPORTED && strstr(err, "CUDA module"),
          "available: %d, %s", (int)s, err);
    uint8_t id[128];
    memset(id, 0xab, sizeof id);
    s = x->new_comm_id(id, err, sizeof err);
    bool zero = true;
    for (int i = 0; i < 128; i++) zero &= id[i] == 0;
    CHECK(s == SDT_STATUS_OK ? !zero : zero && err[0] != '\0', "new_comm_id: %d, an id only on success (%s)", (int)s,
          err);
    CHECK(x->new_comm_id(NULL, err, sizeof err) == SDT_STATUS_INVALID_ARGUMENT && strstr(err, "id is NULL"),
          "a NULL id: %s", err);
    x->available(NULL, 0); /* err may be NULL */
}

int main(void)
{
    test_checks();
    test_read_and_copy();
    test_extension();
    return sdt_test_finish("parallel_options");
}
