/* test_job_options - the job keeps the shared options by value (issue 31 section 2): after
 * sdt_train_job_new the host may change or free every string it passed and the job still holds
 * what it was given, normalised (an empty path or preview prompt is "not given", a missing negative
 * prompt is ""), its modules read the job's copy, and nothing is written into the host's struct. */
#include <stdlib.h>
#include <string.h>

#include "sdt_test.h"
#include "train/options_copy.h"
#include "train/train_job.h"
#include "train/train_options.h"

int main(void)
{
    sdt_train_options host;
    sdt_train_options_set_defaults(&host, "textual_inversion");
    char *model = strdup("models/sd.safetensors"), *dataset = strdup("data"), *regex = strdup("[a-z]+");
    char *join = strdup("_"), *validation = strdup("val"), *empty_prompt = strdup("");
    CHECK(model && dataset && regex && join && validation && empty_prompt, "out of memory");
    host.model_path = model;
    host.dataset_dir = dataset;
    host.filename_word_regex = regex;
    host.filename_join_string = join;
    host.validation_dir = validation;
    host.preview_prompt = empty_prompt;
    host.preview_negative_prompt = NULL;
    sdt_train_options before = host;

    sdt_error e;
    sdt_error_clear(&e);
    sdt_train_job *job = sdt_train_job_new(&host, "embedding", NULL, NULL, NULL, &e);
    CHECK(job != NULL, "a job from the options: %s", e.message);
    CHECK(memcmp(&host, &before, sizeof host) == 0, "the host's struct is as it was");

    /* the host lets go of its strings: the job's copy does not point into them */
    memset(model, 'x', strlen(model));
    memset(regex, 'x', strlen(regex));
    free(model);
    free(dataset);
    free(regex);
    free(join);
    free(validation);
    free(empty_prompt);
    if (job) {
        CHECK(job->opt.model_path && strcmp(job->opt.model_path, "models/sd.safetensors") == 0,
              "model_path is the job's own");
        CHECK(job->data.dir && strcmp(job->data.dir, "data") == 0, "the data module reads the job's dataset_dir");
        CHECK(job->data.caption_rules.word_regex && strcmp(job->data.caption_rules.word_regex, "[a-z]+") == 0 &&
                  strcmp(job->data.caption_rules.join_string, "_") == 0,
              "the caption rules read the job's copy, not the host's strings");
        CHECK(job->val.on && job->val.dir && strcmp(job->val.dir, "val") == 0, "validation reads the job's copy");
        CHECK(job->opt.preview_prompt == NULL && job->previews.prompt == NULL,
              "an empty preview prompt is no preview prompt (the last training prompt is shown)");
        CHECK(job->previews.negative && job->previews.negative[0] == '\0', "no negative prompt is the empty one");
        CHECK(job->opt.template_file == NULL, "no template file stays none");
        sdt_train_job_destroy(job);
    }

    /* the copy alone: every string duplicated, released without leaks (ASan/valgrind builds) */
    sdt_train_options d, own;
    sdt_train_options_set_defaults(&d, "hypernetworks");
    CHECK(sdt_train_options_copy(&own, &d), "a copy of the defaults");
    CHECK(own.log_dir && own.log_dir != d.log_dir && strcmp(own.log_dir, d.log_dir) == 0, "log_dir duplicated");
    sdt_train_options_release(&own);
    CHECK(own.log_dir == NULL && own.preview_negative_prompt == NULL, "a released copy holds no strings");
    return sdt_test_finish("train_test_job_options");
}
