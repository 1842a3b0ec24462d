/* test_diagnosis.c - classifying a NaN from the health window: a grad-norm spike
 * is an optimisation blow-up, a flat grad norm points at the batch's files, and a
 * NaN in the first steps points at the weights or the first batch. */
#include <string.h>

#include "train/diagnosis.h"
#include "sdt_test.h"

static sdt_test_rng rng;

static void record_flat(sdt_diagnosis *d, int from, int count, double norm)
{
    for (int i = 0; i < count; i++) {
        sdt_health_sample s = {.step = from + i,
                               .loss = 0.1 + 0.01 * sdt_test_uniform(&rng),
                               .grad_norm = norm * (1.0 + 0.2 * (sdt_test_uniform(&rng) - 0.5)),
                               .lr = 0.005,
                               .scale = 65536,
                               .images_per_s = 3.5};
        sdt_diagnosis_record(d, &s);
    }
}

static void test_blowup(void)
{
    sdt_diagnosis d;
    sdt_diagnosis_init(&d);
    double norm = 0.01 + sdt_test_uniform(&rng);
    record_flat(&d, 1, 100, norm); /* more than the window: the ring wraps */
    const double rise[3] = {2.0, 6.0, 40.0};
    for (int i = 0; i < 3; i++) {
        sdt_health_sample s = {.step = 101 + i, .loss = 0.3, .grad_norm = norm * rise[i], .lr = 0.005, .scale = 1};
        sdt_diagnosis_record(&d, &s);
    }
    char msg[1024];
    const char *files[] = {"img_001.png"};
    sdt_diagnosis_kind k = sdt_diagnosis_classify(&d, 104, files, 1, msg, sizeof msg);
    CHECK(k == SDT_DIAGNOSIS_OPTIMIZATION_BLOWUP, "a 40x grad-norm rise is a blow-up, got %s: %s",
          sdt_diagnosis_kind_name(k), msg);
    CHECK(strstr(msg, "learning rate") && strstr(msg, "warm-up") && strstr(msg, "clip") && strstr(msg, "step 104"),
          "the sentence says what to do: %s", msg);
    CHECK(strstr(msg, "0.005") != NULL, "the sentence quotes the current lr: %s", msg);
}

static void test_data(void)
{
    sdt_diagnosis d;
    sdt_diagnosis_init(&d);
    record_flat(&d, 1, 20, 0.05 + sdt_test_uniform(&rng));
    sdt_health_sample bad = {.step = 21, .loss = NAN, .grad_norm = NAN};
    sdt_diagnosis_record(&d, &bad); /* non-finite samples are not kept */
    CHECK(d.count == 20, "a NaN sample must not enter the window");
    char msg[1024];
    const char *files[] = {"cat_07.png", "cat_12.jpg"};
    sdt_diagnosis_kind k = sdt_diagnosis_classify(&d, 21, files, 2, msg, sizeof msg);
    CHECK(k == SDT_DIAGNOSIS_DATA, "a flat grad norm points at the data, got %s: %s", sdt_diagnosis_kind_name(k), msg);
    CHECK(strstr(msg, "cat_07.png") && strstr(msg, "cat_12.jpg"), "the sentence names the batch's files: %s", msg);
    CHECK(strstr(msg, "the data") && !strstr(msg, "learning rate"), "the sentence blames the data, not the lr: %s",
          msg);
    /* many files: named up to a limit, then counted */
    const char *many[12];
    char names[12][16];
    for (int i = 0; i < 12; i++) {
        snprintf(names[i], sizeof names[i], "f%02d.png", i);
        many[i] = names[i];
    }
    sdt_diagnosis_classify(&d, 21, many, 12, msg, sizeof msg);
    CHECK(strstr(msg, "f00.png") && strstr(msg, "and 4 more"), "long batches are summarised: %s", msg);
}

static void test_too_early(void)
{
    sdt_diagnosis d;
    sdt_diagnosis_init(&d);
    record_flat(&d, 1, 2, 0.1);
    char msg[1024];
    const char *files[] = {"first.png"};
    sdt_diagnosis_kind k = sdt_diagnosis_classify(&d, 3, files, 1, msg, sizeof msg);
    CHECK(k == SDT_DIAGNOSIS_TOO_EARLY, "two steps of history are too few, got %s", sdt_diagnosis_kind_name(k));
    CHECK(strstr(msg, "weights") && strstr(msg, "first.png"), "names the weights and the batch: %s", msg);
    k = sdt_diagnosis_classify(&d, 3, NULL, 0, msg, sizeof msg);
    CHECK(strstr(msg, "not recorded") != NULL, "without file names it says so: %s", msg);
}

int main(void)
{
    rng = sdt_test_rng_from_env("diagnosis");
    test_blowup();
    test_data();
    test_too_early();
    return sdt_test_finish("diagnosis");
}
