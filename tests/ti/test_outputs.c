/* test_outputs.c - output folder layout, loss CSV appends across resume, settings JSON. */
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "data_test_util.h"
#include "data/outputs.h"
#include "sdt_test.h"

static int count_lines(const char *path)
{
    gchar *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL)) return -1;
    int n = 0;
    for (char *p = text; *p; p++) n += *p == '\n';
    g_free(text);
    return n;
}

static sdt_loss_row row_for(int64_t step, sdt_test_rng *rng)
{
    sdt_loss_row r = {.step = step,
                      .epoch = (step - 1) / 10,
                      .epoch_step = (step - 1) % 10,
                      .loss = sdt_test_uniform(rng),
                      .learn_rate = 0.005,
                      .grad_norm = sdt_test_uniform(rng),
                      .loss_scale = 65536,
                      .precision = "fp16",
                      .skipped = 0,
                      .images_per_s = 3.5};
    return r;
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("outputs");
    char *log = g_dir_make_tmp("sdt-out-XXXXXX", NULL);
    sdt_error error = {0};
    sdt_output_dirs d;
    time_t when = (time_t)1700000000 + (time_t)(sdt_test_next(&rng) % 100000000);
    CHECK(sdt_outputs_prepare(log, "my-emb", when, NULL, &d, &error), "prepare: %s", error.message);
    struct tm tm;
    localtime_r(&when, &tm);
    char date[16], want_root[4096];
    strftime(date, sizeof(date), "%Y-%m-%d", &tm);
    snprintf(want_root, sizeof(want_root), "%s/%s/my-emb", log, date);
    CHECK(!strcmp(d.root, want_root), "root %s, want %s", d.root, want_root);
    CHECK(g_file_test(d.copies, G_FILE_TEST_IS_DIR) && g_file_test(d.images, G_FILE_TEST_IS_DIR) &&
              g_file_test(d.image_embeddings, G_FILE_TEST_IS_DIR),
          "sub-folders made");
    CHECK(g_str_has_suffix(d.copies, "/my-emb/embeddings") && g_str_has_suffix(d.images, "/images") &&
              g_str_has_suffix(d.image_embeddings, "/image_embeddings") &&
              g_str_has_suffix(d.loss_csv, "/textual_inversion_loss.csv"),
          "A1111 names");
    CHECK(!sdt_outputs_prepare(log, "../up", when, NULL, &d, &error) && strstr(error.message, "../up"), "bad name: %s",
          error.message);
    CHECK(!sdt_outputs_prepare("", "x", when, NULL, &d, &error) && strstr(error.message, "Log directory"),
          "no log dir");
    CHECK(sdt_outputs_prepare(log, "my-emb", when, NULL, &d, &error), "prepare twice is fine");

    char file[4096];
    CHECK(sdt_output_file(file, sizeof(file), d.copies, "my-emb", 500, ".safetensors") &&
              g_str_has_suffix(file, "/embeddings/my-emb-500.safetensors"),
          "snapshot name %s", file);

    /* CSV: header once, rows appended; a resume drops rows after the checkpoint and continues. */
    for (int64_t s = 1; s <= 8; s++) {
        sdt_loss_row r = row_for(s, &rng);
        if (s == 4) r.grad_norm = NAN; /* not measured: empty cell */
        CHECK(sdt_loss_csv_append(d.loss_csv, &r, &error), "append %lld: %s", (long long)s, error.message);
    }
    CHECK(count_lines(d.loss_csv) == 9, "header + 8 rows, got %d", count_lines(d.loss_csv));
    gchar *text = NULL;
    g_file_get_contents(d.loss_csv, &text, NULL, NULL);
    CHECK(text && g_str_has_prefix(text, SDT_LOSS_CSV_HEADER "\n1,0,0,"), "header then step 1: %.80s", text);
    CHECK(text && strstr(text, "\n4,0,3,") && strstr(text, ",0.005,,65536,fp16,0,3.5\n"), "empty grad_norm cell");
    g_free(text);
    /* Resume from the step-5 checkpoint: rows 6..8 belong to the lost run. */
    CHECK(sdt_loss_csv_truncate_after(d.loss_csv, 5, &error), "truncate: %s", error.message);
    CHECK(count_lines(d.loss_csv) == 6, "header + 5 rows after truncation, got %d", count_lines(d.loss_csv));
    for (int64_t s = 6; s <= 7; s++) {
        sdt_loss_row r = row_for(s, &rng);
        CHECK(sdt_loss_csv_append(d.loss_csv, &r, &error), "append after resume");
    }
    g_file_get_contents(d.loss_csv, &text, NULL, NULL);
    int headers = 0;
    for (char *p = text; (p = strstr(p, "step,epoch")); p++) headers++;
    CHECK(headers == 1 && count_lines(d.loss_csv) == 8 && strstr(text, "\n5,0,4,") && strstr(text, "\n7,0,6,"),
          "one header, rows 1..7 after resume");
    g_free(text);
    /* a torn last line (crash mid-write) is dropped by the resume truncation */
    FILE *fp = fopen(d.loss_csv, "ab");
    fputs("8,0,7,0.12", fp);
    fclose(fp);
    CHECK(sdt_loss_csv_truncate_after(d.loss_csv, 100, &error) && count_lines(d.loss_csv) == 8, "torn row dropped");
    CHECK(sdt_loss_csv_truncate_after("/nonexistent/sdt.csv", 1, &error), "missing CSV is fine");
    /* an A1111 CSV (5 columns) is not appended to with other columns */
    char *old = g_build_filename(log, "old.csv", NULL);
    g_file_set_contents(old, "step,epoch,epoch_step,loss,learn_rate\n1,0,0,0.1,0.005\n", -1, NULL);
    sdt_loss_row r = row_for(2, &rng);
    CHECK(!sdt_loss_csv_append(old, &r, &error) && strstr(error.message, "other columns"), "header mismatch: %s",
          error.message);
    g_free(old);

    /* settings JSON */
    cJSON *settings = cJSON_CreateObject();
    cJSON_AddStringToObject(settings, "embedding_name", "my-emb");
    cJSON_AddNumberToObject(settings, "batch_size", 2);
    char path[4096];
    CHECK(sdt_settings_save(d.root, settings, when, path, sizeof(path), &error), "settings: %s", error.message);
    char stamp[32], want_name[64];
    strftime(stamp, sizeof(stamp), "%Y-%m-%d-%H-%M-%S", &tm);
    snprintf(want_name, sizeof(want_name), "/settings-%s.json", stamp);
    CHECK(g_str_has_suffix(path, want_name), "settings name %s", path);
    g_file_get_contents(path, &text, NULL, NULL);
    cJSON *back = text ? cJSON_Parse(text) : NULL;
    CHECK(back && cJSON_GetObjectItem(back, "batch_size")->valueint == 2, "settings read back");
    cJSON_Delete(back);
    g_free(text);
    /* a second run in the same second (a resume right after its run) keeps the first's settings */
    char second[4096], third[4096], first_text[64];
    cJSON_ReplaceItemInObject(settings, "batch_size", cJSON_CreateNumber(3));
    CHECK(sdt_settings_save(d.root, settings, when, second, sizeof(second), &error), "settings again: %s",
          error.message);
    CHECK(sdt_settings_save(d.root, settings, when, third, sizeof(third), &error), "settings a third time: %s",
          error.message);
    snprintf(want_name, sizeof(want_name), "/settings-%s_2.json", stamp);
    CHECK(g_str_has_suffix(second, want_name), "the second settings file of one second is %s", second);
    snprintf(want_name, sizeof(want_name), "/settings-%s_3.json", stamp);
    CHECK(g_str_has_suffix(third, want_name), "the third settings file of one second is %s", third);
    g_file_get_contents(path, &text, NULL, NULL);
    back = text ? cJSON_Parse(text) : NULL;
    snprintf(first_text, sizeof first_text, "%d", back ? cJSON_GetObjectItem(back, "batch_size")->valueint : -1);
    CHECK(back && cJSON_GetObjectItem(back, "batch_size")->valueint == 2,
          "the first run's settings were replaced (batch_size %s)", first_text);
    cJSON_Delete(back);
    cJSON_Delete(settings);
    g_free(text);
    test_rmtree(log);
    g_free(log);
    return sdt_test_finish("outputs");
}
