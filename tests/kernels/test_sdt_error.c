/* test_sdt_error - the one error value: a failure keeps the code the failing layer chose,
 * context wraps in front without changing it, long sentences are cut inside the buffer, and
 * errno values map to the statuses the ABI documents. */
#include <errno.h>
#include <string.h>

#include "sdt_error.h"
#include "sdt_test.h"

static void test_fail_and_wrap(void)
{
    sdt_error e;
    sdt_error_clear(&e);
    CHECK(e.code == SDT_ERR_OK && e.message[0] == '\0', "a cleared error is OK and empty");
    CHECK(!sdt_fail(&e, SDT_ERR_NOT_FOUND, "%s: no such file", "a.txt"), "sdt_fail returns false");
    CHECK(e.code == SDT_ERR_NOT_FOUND && strcmp(e.message, "a.txt: no such file") == 0, "code and sentence kept: %s",
          e.message);
    CHECK(!sdt_error_wrap(&e, "step %d", 3), "wrap returns false");
    CHECK(e.code == SDT_ERR_NOT_FOUND && strcmp(e.message, "step 3: a.txt: no such file") == 0,
          "wrapping keeps the code and puts context first: %s", e.message);
    sdt_error_append(&e, "; %s", "saved");
    CHECK(strcmp(e.message, "step 3: a.txt: no such file; saved") == 0, "append adds at the end: %s", e.message);
    CHECK(!sdt_fail(NULL, SDT_ERR_IO, "nobody listens"), "a NULL error is allowed");
}

static void test_wrap_of_nothing_is_a_bug(void)
{
    sdt_error e;
    sdt_error_clear(&e);
    sdt_error_wrap(&e, "context");
    CHECK(e.code == SDT_ERR_INTERNAL, "wrapping an error nobody set reads as INTERNAL, never as success");
}

static void test_long_sentences_stay_in_bounds(void)
{
    sdt_error e;
    char long_text[3 * SDT_ERROR_MESSAGE_MAX];
    memset(long_text, 'x', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = '\0';
    sdt_fail(&e, SDT_ERR_IO, "%s", long_text);
    CHECK(strlen(e.message) == SDT_ERROR_MESSAGE_MAX - 1, "a long sentence is cut at the buffer");
    sdt_error_wrap(&e, "%s", long_text);
    CHECK(strlen(e.message) == SDT_ERROR_MESSAGE_MAX - 1 && e.message[0] == 'x', "a long context is cut too");
    sdt_error_append(&e, "more");
    CHECK(strlen(e.message) == SDT_ERROR_MESSAGE_MAX - 1, "appending to a full sentence stays in bounds");
}

static void test_errno_codes(void)
{
    CHECK(sdt_error_code_from_errno(ENOENT) == SDT_ERR_NOT_FOUND, "ENOENT is NOT_FOUND");
    CHECK(sdt_error_code_from_errno(ENOMEM) == SDT_ERR_OUT_OF_MEMORY, "ENOMEM is OUT_OF_MEMORY");
    CHECK(sdt_error_code_from_errno(EEXIST) == SDT_ERR_ALREADY_EXISTS, "EEXIST is ALREADY_EXISTS");
    CHECK(sdt_error_code_from_errno(EACCES) == SDT_ERR_IO, "EACCES is IO");
    CHECK(strcmp(sdt_error_code_name(SDT_ERR_NUMERICAL), "NUMERICAL") == 0, "names read as the ABI's");
}

int main(void)
{
    test_fail_and_wrap();
    test_wrap_of_nothing_is_a_bug();
    test_long_sentences_stay_in_bounds();
    test_errno_codes();
    return sdt_test_finish("kernels_test_sdt_error");
}
