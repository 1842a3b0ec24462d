/* test_pass_shape.c - the arena is sized again only for a batch shape it has not seen
 * (train_job_step.c's ensure_arena), and shapes compare field by field: sdt_pass_shape has
 * padding after `weighted`, which a compound literal leaves as whatever the stack held, so the
 * memcmp it replaced read uninitialised bytes (valgrind) and could call two equal shapes
 * different. Here the padding of two equal shapes differs on purpose; SD3's T5 length is a field too. */
#include <stddef.h>
#include <string.h>

#include "sdt_test.h"
#include "train/sd_pass.h"

static sdt_pass_shape shape_over(unsigned char fill)
{
    sdt_pass_shape s;
    memset(&s, fill, sizeof s); /* the padding keeps this */
    s.batch = 2, s.c = 4, s.h = 8, s.w = 8, s.chunks = 1, s.in_c = 4, s.weighted = true, s.t5_len = 0;
    return s;
}

int main(void)
{
    sdt_pass_shape a = shape_over(0x00), b = shape_over(0xa5);
    CHECK(sizeof a > offsetof(sdt_pass_shape, weighted) + sizeof a.weighted,
          "the struct has trailing padding (%zu bytes)", sizeof a);
    CHECK(sdt_pass_shape_equal(&a, &b), "equal fields, different padding: equal");
    int *fields[] = {&b.batch, &b.c, &b.h, &b.w, &b.chunks, &b.in_c, &b.t5_len};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        (*fields[i])++;
        CHECK(!sdt_pass_shape_equal(&a, &b), "field %zu differs: not equal", i);
        (*fields[i])--;
    }
    b.weighted = false;
    CHECK(!sdt_pass_shape_equal(&a, &b), "weighted differs: not equal");
    return sdt_test_finish("pass_shape");
}
