/* test_deterministic_option - sdt_train_options.deterministic (ABI 1.6): false by default, a 1.5
 * host's smaller struct reads as false whatever lies past it, a 1.6 struct's true reaches an
 * embedding run's shared options and the training job, and its reserved bytes must be 0. */
#include <stddef.h>
#include <string.h>

#include "sdt_test.h"
#include "api/ti_config.h"
#include "train/train_job.h"
#include "train/train_options.h"

static bool read_options(const sdt_train_options *host, sdt_train_options *own, sdt_error *e)
{
    sdt_error_clear(e);
    return sdt_train_options_read(own, host, "textual_inversion", "config.train_options", e);
}

int main(void)
{
    sdt_train_options d;
    sdt_train_options_set_defaults(&d, "textual_inversion");
    CHECK(!d.deterministic, "the default is false (cuDNN's fast attention backward, as PyTorch trains)");
    CHECK(offsetof(sdt_train_options, deterministic) + 8 == offsetof(sdt_train_options, world_size),
          "deterministic starts 1.6's 8-byte block");

    /* a 1.5 host: struct_size ends before the field; the bytes past it (here all 0xff) are not read */
    unsigned char raw[sizeof(sdt_train_options)];
    memcpy(raw, &d, sizeof d);
    memset(raw + offsetof(sdt_train_options, deterministic), 0xff,
           sizeof raw - offsetof(sdt_train_options, deterministic));
    sdt_train_options old;
    memcpy(&old, raw, sizeof old);
    old.struct_size = (uint32_t)offsetof(sdt_train_options, deterministic);
    sdt_train_options own;
    sdt_error e;
    CHECK(read_options(&old, &own, &e), "a 1.5 struct is read: %s", e.message);
    CHECK(!own.deterministic && own.reserved6[0] == 0, "a 1.5 struct gets deterministic false");

    /* a 1.6 host that asks for it */
    sdt_train_options on = d;
    on.deterministic = true;
    CHECK(read_options(&on, &own, &e) && own.deterministic, "a 1.6 struct's true is read: %s", e.message);
    CHECK(sdt_train_options_check(&own, "config.train_options->", &e), "true passes the checks: %s", e.message);

    sdt_train_options bad = on;
    bad.reserved6[6] = 1;
    CHECK(!read_options(&bad, &own, &e) && e.code == SDT_ERR_VALIDATION && strstr(e.message, "reserved") != NULL,
          "reserved6 not 0 is refused naming the reserved fields: %s", e.message);

    /* an embedding run takes it from config.train_options; without one it is false */
    sdt_ti_config c;
    ti_config_set_defaults(&c);
    sdt_train_options shared;
    CHECK(ti_config_read_options(&c, &shared, &e) && !shared.deterministic,
          "an embedding config without train_options trains with false");
    c.train_options = &on;
    CHECK(ti_config_read_options(&c, &shared, &e), "the TI config takes the options: %s", e.message);
    CHECK(shared.deterministic, "an embedding config's train_options gives deterministic true");
    c.train_options = &old;
    CHECK(ti_config_read_options(&c, &shared, &e) && !shared.deterministic,
          "an embedding config's 1.5 train_options gives false");

    /* the job keeps it for the backend it opens at load */
    sdt_train_job *job = sdt_train_job_new(&on, "textual_inversion", NULL, NULL, NULL, &e);
    CHECK(job && job->opt.deterministic, "the job holds the option: %s", e.message);
    if (job) sdt_train_job_destroy(job);
    job = sdt_train_job_new(&d, "textual_inversion", NULL, NULL, NULL, &e);
    CHECK(job && !job->opt.deterministic, "the job holds the default false: %s", e.message);
    if (job) sdt_train_job_destroy(job);
    return sdt_test_finish("train_test_deterministic_option");
}
