/* fuzz_lr_schedule.c - libFuzzer target: any bytes as an LR schedule string.
 * Accepted schedules must be well formed; queries and backoff must not crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/lr_schedule.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    int64_t cur = data[0] % 64, max = cur + 1 + data[1] * 8;
    char *text = malloc(size - 1);
    if (!text) return 0;
    memcpy(text, data + 2, size - 2);
    text[size - 2] = 0;
    sdt_lr_schedule s;
    sdt_error error = {0};
    if (sdt_lr_schedule_parse(text, NULL, cur, max, &s, &error)) {
        int64_t prev = cur;
        for (int i = 0; i < s.n_segments; i++) {
            if (s.segments[i].end_step <= prev || s.segments[i].end_step > max || !(s.segments[i].rate >= 0)) abort();
            prev = s.segments[i].end_step;
        }
        (void)sdt_lr_at(&s, cur + data[1]);
        (void)sdt_lr_apply_multiplier(&s, cur + data[0], 0.5, &error);
        char buf[4096];
        (void)sdt_lr_schedule_format(&s, buf, sizeof(buf));
        sdt_lr_schedule_free(&s);
    } else if (!error.message[0]) {
        abort(); /* a refusal always explains itself */
    }
    free(text);
    return 0;
}
